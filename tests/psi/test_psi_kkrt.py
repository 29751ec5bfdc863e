"""KKRT's OPRF-based PSI: the same rows as the Diffie–Hellman PSI, the same refusals, and what each side receives."""

import numpy as np
import pandas as pd
import pytest

import vfl.psi
from vfl import DataError, ProtocolError
from vfl.crypto import cuckoo, kkrt
from vfl.deploy.config import load_config, write_config
from vfl.errors import ConfigurationError
from vfl.protocols import psi_kkrt
from vfl.transport import Endpoint, InProcessNetwork, Transcript, run_roles

from psi.test_psi import frames_for, random_sets


def run_protocol(ids: dict, hub: str, min_rows=1, endpoint=Endpoint):
    roles = list(ids)
    network = InProcessNetwork(roles)
    eps = {r: (endpoint if r != hub else Endpoint)(network.transport(r), [p for p in roles if p != r])
           for r in roles}
    spokes = [r for r in roles if r != hub]
    return run_roles(network, {r: (lambda r=r: psi_kkrt.align_rows(eps[r], ids[r], hub, spokes, min_rows))
                               for r in roles})


@pytest.mark.parametrize("parties,sizes,common,as_text", [
    (2, (300, 200), 120, False),
    (2, (150, 700), 150, True),        # every id of the hub is the spoke's too
    (2, (1000, 40), 1, False),         # one row in common, very unequal sizes
    (2, (64, 64), 64, True),           # the same ids
    (4, (300, 200, 250, 220), 90, True),
])
def test_kkrt_finds_the_rows_the_dh_protocol_finds(parties, sizes, common, as_text):
    names = ["B", "A", "C", "D"][:parties]
    id_lists = random_sets(sizes, common, 10 ** 9, seed=sum(sizes) + 7, as_text=as_text)
    frames = frames_for(id_lists, names)
    dh = vfl.psi.intersect(frames, id_column="id", label="y")
    ours = vfl.psi.intersect(frames, id_column="id", label="y", protocol="kkrt")
    order = list(ours["B"]["id"])
    assert sorted(order) == sorted(dh["B"]["id"]) and len(order) == common
    for name in names:
        assert list(ours[name]["id"]) == order                           # one common order
        pd.testing.assert_frame_equal(ours[name].sort_values("id").reset_index(drop=True),
                                      dh[name].sort_values("id").reset_index(drop=True))
        assert ours[name].attrs["psi"]["protocol"] == "kkrt" and "curve_engine" not in ours[name].attrs["psi"]


def test_no_overlap_is_refused_as_the_dh_protocol_refuses_it():
    frames = frames_for([list(range(50)), list(range(100, 140))], ["B", "A"])
    for protocol in ("dh", "kkrt"):
        with pytest.raises(DataError, match=r"intersection is empty.*B: 50, A: 40"):
            vfl.psi.intersect(frames, "id", label="y", protocol=protocol)


@pytest.mark.parametrize("frame_a,reason", [
    (pd.DataFrame({"id": [1, 2, 3, " 2", 5], "f": range(5)}), r"party A: id '2' appears twice \(rows 1 and 3\)"),
    (pd.DataFrame({"id": pd.Series([], dtype=object), "f": []}), "party A: no ids to intersect"),
])
def test_duplicate_and_empty_sets_are_refused_as_the_dh_protocol_refuses_them(frame_a, reason):
    frame_b = pd.DataFrame({"id": [1, 2, 3, 4], "y": range(4)})
    for protocol in ("dh", "kkrt"):
        with pytest.raises(DataError, match=reason):
            vfl.psi.intersect({"A": frame_a, "B": frame_b}, "id", label="y", protocol=protocol)


def test_the_protocol_refuses_duplicates_and_empty_lists_too():
    with pytest.raises(DataError, match=r"party B: id '1' appears twice \(rows 0 and 2\)"):
        run_protocol({"B": [b"1", b"2", b"1"], "A": [b"1", b"2"]}, "B")
    with pytest.raises(DataError, match="party A: no ids to intersect"):
        run_protocol({"B": [b"1", b"2"], "A": []}, "B")


def test_an_unknown_protocol_is_refused():
    frames = frames_for([[1, 2], [2, 3]], ["B", "A"])
    with pytest.raises(DataError, match="protocol must be one of"):
        vfl.psi.intersect(frames, "id", label="y", protocol="ecdh")


def test_too_few_rows_are_refused_before_any_column_is_sent():
    frames = frames_for([list(range(50)), list(range(10))], ["B", "A"])
    transcript = Transcript()
    with pytest.raises(DataError, match="too few rows.*at least 20 rows.*A: 10"):
        vfl.psi.intersect(frames, "id", label="y", min_rows=20, transcript=transcript, protocol="kkrt")
    assert {r[3] for r in transcript.records} == {"kkrt_hello", "kkrt_setup"}


def test_columns_stream_in_chunks_and_results_match(monkeypatch):
    monkeypatch.setattr(psi_kkrt, "CHUNK_BINS", 64)
    monkeypatch.setattr(psi_kkrt, "CHUNK_VALUES", 50)
    ids = {"B": [b"%d" % i for i in range(300)], "A": [b"%d" % i for i in range(150, 400)],
           "C": [b"%d" % i for i in range(0, 600, 2)]}
    rows = run_protocol(ids, "B")
    common = [ids["B"][i] for i in rows["B"]]
    assert set(common) == {b"%d" % i for i in range(150, 300, 2)}
    for party in ("A", "C"):
        assert [ids[party][i] for i in rows[party]] == common


# -- what each side receives -----------------------------------------------------------------------
def test_what_each_side_receives(monkeypatch):
    """The spoke (OPRF sender) receives the setup, the OT-extension columns and the result: never an id, a
    digest of one, or the hub's OPRF outputs.  The hub receives the hello, 512 base-OT points and the spoke's
    three lists of outputs, and no id of the spoke's."""
    hub_outputs = []
    real = psi_kkrt._send_columns

    def capture(*args, **kwargs):
        mine = real(*args, **kwargs)
        hub_outputs.extend(bytes(v) for v in mine)
        return mine

    monkeypatch.setattr(psi_kkrt, "_send_columns", capture)
    id_lists = random_sets((400, 300), 100, 10 ** 9, seed=3, as_text=True)
    frames = frames_for(id_lists, ["B", "A"])
    transcript = Transcript(keep_payloads=True)
    vfl.psi.intersect(frames, "id", label="y", transcript=transcript, protocol="kkrt")

    messages = transcript.messages()
    m, size = cuckoo.table_size(400), kkrt.output_bytes(400, 300)
    to_spoke = [msg for _, to, msg in messages if to == "A"]
    to_hub = [msg for _, to, msg in messages if to == "B"]
    assert {msg.name for msg in to_spoke} == {"kkrt_setup", "kkrt_columns", "kkrt_result"}
    assert {msg.name for msg in to_hub} == {"kkrt_hello", "kkrt_base_points", "kkrt_values"}
    assert sum(len(msg["data"]) for msg in to_spoke if msg.name == "kkrt_columns") == m * kkrt.CODE_BITS // 8
    (points,) = [msg["points"] for msg in to_hub if msg.name == "kkrt_base_points"]
    assert len(points) == kkrt.CODE_BITS * 32
    assert sum(len(msg["data"]) for msg in to_hub if msg.name == "kkrt_values") == 3 * 300 * size
    (result,) = [msg for msg in to_spoke if msg.name == "kkrt_result"]
    assert result["size"] == 100 and len(result["positions"]) == 100

    ids = {p: [vfl.psi.canonical_id(v).encode() for v in ids] for p, ids in zip("BA", id_lists)}
    setup = next(msg for msg in to_spoke if msg.name == "kkrt_setup")["salt_shares"]
    salt = psi_kkrt._salt([setup[i:i + 32] for i in range(0, len(setup), 32)])
    keys = {p: [bytes(k) for k in kkrt.digest_ids(v, salt, m)[0]] for p, v in ids.items()}
    assert len(hub_outputs) == 400 and len(set(hub_outputs)) == 400
    payloads = {to: b"".join(frame for (_, _, t, *_), frame in zip(transcript.records, transcript.payloads) if t == to)
                for to in "AB"}
    for secret in ids["B"] + keys["B"] + hub_outputs:
        assert secret not in payloads["A"]
    for secret in ids["A"] + keys["A"]:
        assert secret not in payloads["B"]
    assert not any(v in payloads["A"] for v in ids["A"])      # not even the spoke's own ids come back


def test_a_bad_base_ot_point_stops_the_hub_naming_the_spoke():
    class Forging(Endpoint):
        def send(self, to, name, kind, **fields):
            if name == "kkrt_base_points":
                fields["points"] = fields["points"][:64] + (2).to_bytes(32, "little") + fields["points"][96:]
            return super().send(to, name, kind, **fields)

    ids = {"B": [b"%d" % i for i in range(40)], "A": [b"%d" % i for i in range(20, 60)]}
    with pytest.raises(ProtocolError, match="B: A sent a bad 'kkrt_base_points': OT point 2 is not a point"):
        run_protocol(ids, "B", endpoint=Forging)


def test_an_unsorted_list_of_outputs_stops_the_hub():
    class Shuffling(Endpoint):
        def send(self, to, name, kind, **fields):
            if name == "kkrt_values":
                size = kkrt.output_bytes(40, 40)
                data = fields["data"]
                fields["data"] = data[size:2 * size] + data[:size] + data[2 * size:]
            return super().send(to, name, kind, **fields)

    ids = {"B": [b"%d" % i for i in range(40)], "A": [b"%d" % i for i in range(20, 60)]}
    with pytest.raises(ProtocolError, match="B: A sent a list of outputs out of order or with repeats"):
        run_protocol(ids, "B", endpoint=Shuffling)


# -- configuration -------------------------------------------------------------------------------------
def _config(tmp_path, **data):
    parties = {name: {"address": f"127.0.0.1:{7000 + i}", "certificate": tmp_path / f"{name}.pem",
                      "key": tmp_path / f"{name}.key"} for i, name in enumerate("ABC")}
    for name in "ABC":
        (tmp_path / f"{name}.pem").write_text("")
        (tmp_path / f"{name}.key").write_text("")
    (tmp_path / "ca.pem").write_text("")
    return write_config(tmp_path / "federation.toml", tmp_path / "ca.pem", parties, {"iterations": 2}, **data)


def test_psi_protocol_in_federation_toml(tmp_path):
    assert load_config(_config(tmp_path)).psi_protocol == "dh"
    config = load_config(_config(tmp_path, psi_protocol="kkrt"))
    assert config.psi_protocol == "kkrt" and config.shared("train")["psi_protocol"] == "kkrt"
    assert "psi_protocol" not in load_config(_config(tmp_path, psi_protocol="dh")).shared("train")
    with pytest.raises(ConfigurationError, match=r"\[data\]: psi_protocol must be one of \['dh', 'kkrt', 'unbalanced'\]"):
        load_config(_config(tmp_path, psi_protocol="rr22"))
    with pytest.raises(ConfigurationError, match="align = 'same-ids' does not run one"):
        load_config(_config(tmp_path, psi_protocol="kkrt", align="same-ids"))


def test_one_id_each():
    rows = run_protocol({"B": [b"7"], "A": [b"7"]}, "B")
    assert rows["B"].tolist() == [0] and rows["A"].tolist() == [0]


def test_with_two_spokes_each_spoke_is_told_the_final_intersection_only():
    """Hub B, spokes A and C: A shares 60 ids with B, 30 of them C's too; A is told those 30 positions only."""
    id_lists = [list(range(100)), list(range(60)), list(range(30, 90))]
    frames = frames_for([[str(v) for v in ids] for ids in id_lists], ["B", "A", "C"])
    transcript = Transcript(keep_payloads=True)
    aligned = vfl.psi.intersect(frames, "id", label="y", transcript=transcript, protocol="kkrt")
    assert sorted(aligned["A"]["id"].astype(int)) == list(range(30, 60))
    to_a = [m for _, to, m in transcript.messages() if to == "A"]
    assert {m.name for m in to_a} == {"kkrt_setup", "kkrt_columns", "kkrt_result"}
    (result,) = [m for m in to_a if m.name == "kkrt_result"]
    assert result["size"] == 30 and len(result["positions"]) == 30


@pytest.mark.slow
def test_the_benchmark_runs_kkrt_as_two_processes_over_tls():
    from benchmarks.__main__ import parse_args
    from benchmarks.psi import run_size

    assert parse_args(["--psi-sizes", "1000", "--psi-protocol", "kkrt"]).psi_protocol == "kkrt"
    reports = run_size(1000, progress=False, protocol="kkrt")
    assert {r["intersection"] for r in reports.values()} == {500}
    assert {r["protocol"] for r in reports.values()} == {"kkrt"}
    assert reports["B"]["bytes_sent"] >= cuckoo.table_size(1000) * kkrt.CODE_BYTES     # the columns
    assert reports["A"]["bytes_sent"] >= 3 * 1000 * kkrt.output_bytes(1000, 1000)      # three lists
