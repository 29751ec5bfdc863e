"""SecretFlow's PSI engine as vfl's alignment backend (``[data] psi_backend = "secretflow-rr22"``).

The configuration tests run everywhere; the engine's tests skip cleanly where ``spu`` is not installed
(``pip install vfl[secretflow]``).
"""

import socket

import numpy as np
import pandas as pd
import pytest

from vfl.deploy.config import load_config
from vfl.errors import ConfigurationError, DataError, ProtocolError
from vfl.protocols import psi_secretflow
from vfl.protocols.psi import align_rows as vfl_align_rows
from vfl.transport import Endpoint, InProcessNetwork, run_roles
from vfl_net_helpers import Party, _free_ports, federation_certs, kill_all, write_federation_file  # noqa: F401
from vfl_net_helpers import finish_all as finish_parties


def _config(tmp_path, certs, ports, **data):
    return write_federation_file(tmp_path / "federation.toml", certs, ports, data=data)


def test_asking_for_the_engine_without_spu_is_a_configuration_error(tmp_path, federation_certs, monkeypatch):
    monkeypatch.setattr(psi_secretflow, "spu_installed", lambda: False)
    path = _config(tmp_path, federation_certs[0], _free_ports(3), psi_backend="secretflow-rr22")
    with pytest.raises(ConfigurationError) as err:
        load_config(path)
    message = str(err.value)
    assert "[data]: psi_backend = 'secretflow-rr22'" in message and "'spu' is not installed" in message
    assert "pip install vfl[secretflow]" in message


def test_the_cli_says_so_at_once(tmp_path, federation_certs, monkeypatch, capsys):
    """``vfl align`` stops at the configuration, with the install command, before any connection."""
    from vfl.cli import main

    monkeypatch.setattr(psi_secretflow, "spu_installed", lambda: False)
    path = _config(tmp_path, federation_certs[0], _free_ports(3), psi_backend="secretflow-rr22")
    data = tmp_path / "a.csv"
    data.write_text("id,a0\n1,0.5\n2,0.25\n")
    code = main(["align", "--config", str(path), "--role", "A", "--data", str(data), "--out", str(tmp_path / "o.csv"),
                 "--workdir", str(tmp_path / "A")])
    err = capsys.readouterr().err
    assert code == 2 and "pip install vfl[secretflow]" in err and "Traceback" not in err


def test_the_default_stays_vfls_own_psi(tmp_path, federation_certs):
    config = load_config(_config(tmp_path, federation_certs[0], _free_ports(3)))
    assert config.psi_backend == "vfl" and "psi_backend" not in config.shared("train")


@pytest.mark.parametrize("data, expected", [
    ({"psi_backend": "secretflow"}, "psi_backend must be one of ['vfl', 'secretflow-rr22'], got 'secretflow'"),
    ({"psi_backend": "secretflow-rr22", "align": "same-ids"}, "align = 'same-ids' does not run one"),
    ({"psi_port_offset": 7}, "psi_port_offset sets SecretFlow's engine's ports"),
    ({"psi_backend": "secretflow-rr22", "psi_port_offset": 1.5}, "psi_port_offset must be a non-zero whole number"),
    ({"psi_backend": "secretflow-rr22", "psi_port_offset": 65000}, "not a valid port"),
])
def test_the_engines_settings_are_checked(tmp_path, federation_certs, monkeypatch, data, expected):
    monkeypatch.setattr(psi_secretflow, "spu_installed", lambda: True)
    with pytest.raises(ConfigurationError, match=None) as err:
        load_config(_config(tmp_path, federation_certs[0], [41001, 41002, 41003], **data))
    assert expected in str(err.value)


def test_an_engine_port_on_a_partys_port_is_refused(tmp_path, federation_certs, monkeypatch):
    monkeypatch.setattr(psi_secretflow, "spu_installed", lambda: True)
    # A on 41001, B (the label party) on 41002: with offset -1, B's engine would listen on A's port
    path = _config(tmp_path, federation_certs[0], [41001, 41002, 41003], psi_backend="secretflow-rr22",
                   psi_port_offset=-1)
    with pytest.raises(ConfigurationError, match="party B's PSI engine port 127.0.0.1:41001 .* is party A's own port"):
        load_config(path)


def test_the_backend_is_part_of_the_fingerprint(tmp_path, federation_certs, monkeypatch):
    monkeypatch.setattr(psi_secretflow, "spu_installed", lambda: True)
    ours = load_config(_config(tmp_path, federation_certs[0], [41001, 41002, 41003], psi_backend="secretflow-rr22"))
    assert ours.psi_backend == "secretflow-rr22" and ours.psi_port_offset == 1000
    assert ours.engine_addresses() == {"B": ("127.0.0.1", 42002), "A": ("127.0.0.1", 42001)}
    default = load_config(_config(tmp_path, federation_certs[0], [41001, 41002, 41003]))
    assert ours.fingerprint("train") != default.fingerprint("train")


# -- the engine itself (skipped without spu) ------------------------------------------------------------

def _engine_ports(roles, spokes):
    """Free loopback ports: each role's engine port, the hub's followed by one more per extra spoke."""
    while True:
        ports = _free_ports(len(roles) + len(spokes))
        base = {r: ("127.0.0.1", p) for r, p in zip(roles, ports)}
        hub = next(r for r in roles if r not in spokes)
        wanted = [base[hub][1] + j for j in range(len(spokes))] + [base[s][1] for s in spokes]
        if len(set(wanted)) == len(wanted):
            return base


def _run(ids, hub, spokes, certs, min_rows=1, timeout=60.0, tls_of=None, transcript=None):
    pytest.importorskip("spu")
    roles = [hub, *spokes]
    ports = _engine_ports(roles, spokes)
    network = InProcessNetwork(roles)
    endpoints = {r: Endpoint(network.transport(r), [p for p in roles if p != r], transcript) for r in roles}
    sizes = {r: {} for r in roles}

    def program(role):
        links = psi_secretflow.EngineLinks(ports, (tls_of or {}).get(role, certs[role]), 10.0, timeout)
        return psi_secretflow.align_rows(endpoints[role], ids[role], hub, spokes, min_rows, links, sizes[role])

    return run_roles(network, {r: (lambda r=r: program(r)) for r in roles}), sizes


def _vfl_sets(ids, hub, spokes):
    roles = [hub, *spokes]
    network = InProcessNetwork(roles)
    endpoints = {r: Endpoint(network.transport(r), [p for p in roles if p != r]) for r in roles}
    return run_roles(network, {r: (lambda r=r: vfl_align_rows(endpoints[r], ids[r], hub, spokes)) for r in roles})


def _is_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ids(values):
    return [b"id-%d" % v for v in values]


@pytest.mark.slow
def test_two_parties_find_vfls_intersection_in_one_common_order(federation_certs):
    rng = np.random.default_rng(3)
    ids = {"B": _ids(rng.permutation(300)), "A": _ids(rng.permutation(np.arange(150, 420)))}
    ids["A"].append("é".encode())                     # any bytes: the engine sees them as hex
    ids["B"].append("é".encode())
    rows, sizes = _run(ids, "B", ["A"], federation_certs[0])
    picked = {r: [ids[r][i] for i in rows[r]] for r in rows}
    assert picked["A"] == picked["B"] == sorted(picked["B"])        # the same ids, in the order of their bytes
    ours = _vfl_sets(ids, "B", ["A"])
    assert set(picked["B"]) == {ids["B"][i] for i in ours["B"]} and len(picked["B"]) == 151
    assert sizes["A"] == sizes["B"] == {"A": 271, "B": 301}


@pytest.mark.slow
def test_two_spokes_keep_only_the_rows_every_spoke_matched(federation_certs):
    """Pairwise engine runs; the hub tells each spoke, by position, which of its matched rows survive."""
    rng = np.random.default_rng(4)
    ids = {"B": _ids(rng.permutation(200)), "A": _ids(rng.permutation(np.arange(50, 260))),
           "C": _ids(rng.permutation(np.arange(100, 300)))}
    rows, _ = _run(ids, "B", ["A", "C"], federation_certs[0])
    picked = {r: [ids[r][i] for i in rows[r]] for r in rows}
    assert picked["A"] == picked["B"] == picked["C"] and set(picked["B"]) == set(_ids(range(100, 200)))
    ours = _vfl_sets(ids, "B", ["A", "C"])
    assert all(sorted(rows[r]) == sorted(ours[r]) for r in ids)      # vfl's own PSI: the same rows


@pytest.mark.slow
def test_over_vfls_session_no_id_crosses_and_a_spoke_is_told_positions_only(federation_certs, monkeypatch):
    """What docs/psi.md says of this backend: ids reach only the engine; with K = 2 each spoke's engine
    hands it its whole pairwise intersection with the hub (more than the final one), vfl's session
    carries counts, a link id, a done and positions."""
    from vfl.transport import Transcript

    seen = {}
    rows_of = psi_secretflow._Pair.rows

    def recording(pair):
        rows = rows_of(pair)
        seen[(pair.me, pair.peer)] = len(rows)
        return rows

    monkeypatch.setattr(psi_secretflow._Pair, "rows", recording)
    ids = {"B": _ids(range(200)), "A": _ids(range(50, 260)), "C": _ids(range(100, 300))}
    transcript = Transcript(keep_payloads=True)
    rows, _ = _run(ids, "B", ["A", "C"], federation_certs[0], transcript=transcript)
    assert len(rows["A"]) == len(rows["C"]) == 100
    assert seen[("A", "B")] == 150 and seen[("C", "B")] == 100      # A's engine told it 150 shared ids with B
    names = {m.name for _, _, m in transcript.messages()}
    assert names == {"sfpsi_hello", "sfpsi_setup", "sfpsi_done", "sfpsi_result"}
    every_id = {v for values in ids.values() for v in values}
    for frame in transcript.payloads:
        assert not any(v in frame or v.hex().encode() in frame for v in every_id)


@pytest.mark.slow
def test_too_small_an_intersection_is_refused_at_every_party(federation_certs):
    ids = {"B": _ids(range(100)), "A": _ids(range(90, 200))}
    with pytest.raises(DataError, match="has 10 rows, fewer than the 20 needed"):
        _run(ids, "B", ["A"], federation_certs[0], min_rows=20)
    with pytest.raises(DataError, match="hold too few rows for an intersection of at least 500"):
        _run(ids, "B", ["A"], federation_certs[0], min_rows=500)    # refused before the engine starts


@pytest.mark.slow
def test_an_empty_intersection_is_refused(federation_certs):
    with pytest.raises(DataError, match="the private set intersection is empty"):
        _run({"B": _ids(range(50)), "A": _ids(range(60, 90))}, "B", ["A"], federation_certs[0])


@pytest.mark.slow
def test_an_engine_with_a_foreign_certificate_is_refused(federation_certs):
    """brpc's TLS verifies the peer's chain against the federation's CA: a foreign certificate never connects."""
    ids = {"B": _ids(range(50)), "A": _ids(range(25, 75))}
    refused = "the TLS handshake between [AB].s and [AB].s PSI engines failed .*(unknown ca|certificate verify failed)"
    with pytest.raises(ProtocolError, match=refused):
        _run(ids, "B", ["A"], federation_certs[0], timeout=10.0, tls_of={"A": federation_certs[1]["A"]})


def test_a_spoke_refuses_positions_outside_its_pairwise_list(federation_certs):
    pytest.importorskip("spu")
    network = InProcessNetwork(["B", "A"])
    hub, spoke = (Endpoint(network.transport(r), [p]) for r, p in (("B", "A"), ("A", "B")))
    ports = _engine_ports(["B", "A"], ["A"])

    def lying_hub():
        hub.recv("A", "sfpsi_hello")
        link_id = "0" * 32
        hub.send("A", "sfpsi_setup", "public", sizes='{"B": 10, "A": 10}', refusal="", link_id=link_id)
        pair = psi_secretflow._Pair("B", "A", _ids(range(10)), 0,
                                    psi_secretflow.EngineLinks(ports, federation_certs[0]["B"]).pair("B", "A", 0),
                                    psi_secretflow.EngineLinks(ports, federation_certs[0]["B"]), link_id)
        try:
            matched = pair.rows()
            hub.recv("A", "sfpsi_done")
        finally:
            pair.stop()
        hub.send("A", "sfpsi_result", "masked", refusal="", size=len(matched),
                 positions=np.arange(len(matched), dtype=np.int64) + 3)
        return matched

    def honest_spoke():
        links = psi_secretflow.EngineLinks(ports, federation_certs[0]["A"])
        return psi_secretflow.run_spoke(spoke, _ids(range(5, 15)), "B", 0, 1, links)

    with pytest.raises(ProtocolError, match="A: B sent a malformed 'sfpsi_result'"):
        run_roles(network, {"B": lying_hub, "A": honest_spoke})


@pytest.mark.slow
def test_vfl_align_with_the_engine_writes_one_common_order(tmp_path, federation_certs):
    pytest.importorskip("spu")
    from test_federation_psi import overlapping_csvs

    data, shared_ids, _, _ = overlapping_csvs(tmp_path, seed=8)
    ports = _free_ports(3)
    offset = next(o for o in (p - ports[0] for p in _free_ports(20))
                  if o and _is_free(ports[1] + o) and ports[1] + o not in ports)
    config = write_federation_file(tmp_path / "federation.toml", federation_certs[0], ports,
                                   data={"psi_backend": "secretflow-rr22", "psi_port_offset": offset})
    out = {role: tmp_path / f"aligned_{role}.csv" for role in ("A", "B")}
    procs = {role: Party(["align", "--config", config, "--role", role, "--data", data[(role, "train")],
                          "--out", out[role], "--workdir", tmp_path / role], tmp_path / "output") for role in ("A", "B")}
    try:
        results = finish_parties(procs, 120)
    finally:
        kill_all(procs)
    for role, (code, stdout, err) in results.items():
        assert code == 0, f"{role}: {err}"
        assert "aligned by private set intersection (SecretFlow RR22): A 100 rows, B 100 rows; 70 shared" in stdout
    a, b = pd.read_csv(out["A"], dtype={"id": str}), pd.read_csv(out["B"], dtype={"id": str})
    assert list(a["id"]) == list(b["id"]) == sorted(shared_ids)


# -- the side-by-side bench ----------------------------------------------------------------------------

def test_the_bench_says_how_to_install_secretflow():
    from benchmarks.psi_secretflow import SecretFlowMissing, check_secretflow_python

    with pytest.raises(SecretFlowMissing, match="no --secretflow-python, no VFL_SECRETFLOW_PYTHON.*spu==0.9.5"):
        check_secretflow_python(None)
    with pytest.raises(SecretFlowMissing, match="cannot import spu"):
        check_secretflow_python("/bin/false")


def test_the_bench_overlap_is_a_parameter():
    from benchmarks.psi import party_ids

    assert len(set(party_ids("A", 1000, 0.8)) & set(party_ids("B", 1000, 0.8))) == 800
    assert party_ids("B", 1000) == party_ids("B", 1000, 0.5)


@pytest.mark.slow
def test_secretflows_side_finds_the_same_intersection_and_counts_its_bytes():
    pytest.importorskip("spu")
    import sys

    from benchmarks.psi_secretflow import run_size

    reports = run_size(1000, 0.8, "RR22", sys.executable, timeout=120)
    assert [reports[r]["intersection"] for r in ("A", "B")] == [800, 800]
    assert all(reports[r]["bytes_sent"] > 8 * 800 and reports[r]["cpu_seconds"] > 0 for r in ("A", "B"))
