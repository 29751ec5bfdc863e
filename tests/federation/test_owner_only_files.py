"""Everything vfl party and vfl predict write that holds a party's data is readable by its owner only, whatever
the umask (the writers themselves: tests/deploy/test_jsonfile.py)."""

import pytest

from vfl_net_helpers import assert_succeeded, federation, federation_certs, run_parties  # noqa: F401 - fixtures
from vfl_net_helpers import loose_files as _loose


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_vfl_party_and_vfl_predict_write_owner_only_files(federation, umask_022):  # noqa: F811
    config, data, work = federation["make"](), federation["data"], federation["dir"] / "run"
    assert_succeeded(run_parties("party", config, data, work, timeout=120))
    assert_succeeded(run_parties("predict", config, data, work, timeout=120))
    parties = [work / role for role in ("A", "B", "C")]       # (the test's own captures of stdout/err aside)
    written = {p.name for folder in parties for p in folder.rglob("*") if p.is_file()}
    assert {"transcript_train.csv", "transcript_predict.csv", "training_C.json", "scores.csv",
            "model_A.json", "release_ledger.json"} <= written, written
    assert [f for folder in parties for f in _loose(folder)] == []
