"""The side-by-side PSI table names each vfl run by its protocol and engine and lists SecretFlow's once per size."""

import pytest

from benchmarks.psi_secretflow import rows


def _reports(intersection=8, engine=None):
    report = {"seconds": 1.0, "cpu_seconds": 0.5, "bytes_sent": 2 ** 20, "intersection": intersection}
    hub = dict(report, curve_engine={"engine": engine}) if engine else report
    return {"B": hub, "A": report}


def test_every_vfl_run_is_named_and_secretflow_comes_once_per_size():
    ours = [{"n": 10, "protocol": "dh", "reports": _reports(engine="ipp-crypto-mb8")},
            {"n": 10, "protocol": "dh", "reports": _reports(engine="libsodium")},
            {"n": 10, "protocol": "kkrt", "reports": _reports()}]
    theirs = [{"n": 10, "protocol": p, "reports": _reports()} for p in ("ECDH", "RR22", "KKRT")]
    names = [r[1] for r in rows(theirs, ours)]
    assert names == [name for name in ("vfl DH, X25519 (ipp-crypto-mb8)", "vfl DH, X25519 (libsodium)",
                                       "vfl KKRT (OT extension)", "SecretFlow ECDH", "SecretFlow RR22",
                                       "SecretFlow KKRT") for _ in range(2)]


def test_a_system_finding_another_intersection_stops_the_table():
    with pytest.raises(AssertionError, match="SecretFlow ECDH found 7 shared ids"):
        rows([{"n": 10, "protocol": "ECDH", "reports": _reports(7)}],
             [{"n": 10, "protocol": "dh", "reports": _reports()}])
