"""Three organisations, each with its own CA and its own key, made by the commands of docs/network.md
("Certificates between organisations"); `vfl party` trains over them, and refuses a revoked certificate."""

import pytest

from vfl.cli import main as vfl_main
from vfl.deploy.config import write_config
from vfl.transport.tls import fingerprint, load_certificate
from vfl_net_helpers import (FAST_TRAINING, _free_ports, finish_all, kill_all, run_parties, scaled,
                             start_parties, write_party_data)

pytestmark = pytest.mark.slow    # processes, TLS links

ORGS = ("A", "B", "C")


def make_certificates(root):
    """What each organisation runs on its own machine, and what its CA signs: only public files leave it."""
    for org in ORGS:
        assert vfl_main(["certs", "ca", "--out", str(root / org / "ca"), "--name", f"{org} CA"]) == 0
        assert vfl_main(["certs", "request", "--party", org, "--out", str(root / org / "certs")]) == 0
        assert vfl_main(["certs", "sign", "--ca-dir", str(root / org / "ca"), "--party", org,
                         "--request", str(root / org / "certs" / f"{org}.csr"),
                         "--out", str(root / org / "certs" / f"{org}.pem")]) == 0


def federation_file(path, root, ports, extra=None, connect_timeout=30):
    parties = {org: {"address": f"127.0.0.1:{port}", "certificate": f"{org}/certs/{org}.pem",
                     "key": f"{org}/certs/{org}.key", "ca": f"{org}/ca/ca.pem"} for org, port in zip(ORGS, ports)}
    for org, options in (extra or {}).items():
        parties[org].update(options)
    return write_config(path, None, parties, FAST_TRAINING, {"connect_timeout": scaled(connect_timeout),
                                                                      "timeout": scaled(20)})


def test_organisations_with_their_own_cas_train_and_a_revoked_certificate_is_refused(tmp_path, capsys):
    make_certificates(tmp_path)
    capsys.readouterr()
    data = write_party_data(tmp_path)
    c_pin = {"C": {"fingerprint": fingerprint(load_certificate(tmp_path / "C" / "certs" / "C.pem"))}}
    config = federation_file(tmp_path / "federation.toml", tmp_path, _free_ports(3), c_pin)
    results = run_parties("party", config, data, tmp_path / "work", timeout=scaled(120))
    for org, (code, out, err) in results.items():
        assert code == 0, (org, err)
    assert "model shard written" in results["A"][1]

    # A's CA revokes A's certificate; B and C load A's CA's list, A's own file does not name it.
    assert vfl_main(["certs", "revoke", "--ca-dir", str(tmp_path / "A" / "ca"),
                     "--certificate", str(tmp_path / "A" / "certs" / "A.pem")]) == 0
    ports = _free_ports(3)
    theirs = federation_file(tmp_path / "theirs.toml", tmp_path, ports, {**c_pin, "A": {"crl": "A/ca/crl.pem"}},
                             connect_timeout=10)
    mine = federation_file(tmp_path / "mine.toml", tmp_path, ports, c_pin, connect_timeout=10)
    parties = start_parties("party", theirs, data, tmp_path / "work2", roles=("B", "C"))
    parties.update(start_parties("party", mine, data, tmp_path / "work2", roles=("A",)))
    try:
        results = finish_all(parties, timeout=scaled(90))
    finally:
        kill_all(parties)
    code, _, err = results["A"]
    assert code == 1 and "refused the connection: party A's certificate (serial" in err, err
    assert "is revoked: " in err and "crl.pem lists it" in err
    # A dials B first and stops at B's refusal: B says why; C only that A never came
    code, _, err = results["B"]
    assert code == 1 and "A never connected to B" in err and "party A's certificate (serial" in err, err
    assert "is revoked" in err
    code, _, err = results["C"]
    assert code == 1 and "A never connected to C" in err, err
