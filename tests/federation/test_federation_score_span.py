"""The release ledger of ``vfl party`` and ``vfl predict``: a feature party counts every model it was scored with.

A (3 continuous columns) trains one binary model with B: one partial score per row, which its release
check passes.  B then asks A to score with three different models of A's columns in turn (A's shard edited
between runs, as a label party that holds three labels would train three models): each alone passes, but
together their scores are a linear image of A's rows of full rank.  A keeps every release's function in
``release_ledger.json`` in its work directory, replays them on the rows at hand, and refuses the run that
would give its rows away, every party ending with an error.
"""

import json

import pytest

from vfl_net_helpers import assert_succeeded, federation, federation_certs, run_parties  # noqa: F401 - fixtures

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]    # processes and TLS links


def released(path):
    return [e for e in json.loads(path.read_text())["releases"] if e.get("released", True)]


def test_a_feature_party_refuses_the_prediction_that_completes_what_its_scores_give_away(federation):
    config, data, work = federation["make"](), federation["data"], federation["dir"] / "run"
    assert_succeeded(run_parties("party", config, data, work, timeout=120))
    ledger_path = work / "A" / "release_ledger.json"
    trained = json.loads(ledger_path.read_text())["releases"]
    assert [e["released"] for e in trained] == [False] and trained[0]["checked"]["rows"] > 0   # checked, not sent
    shard_path = work / "A" / "model_A.json"
    shard = json.loads(shard_path.read_text())
    w = shard["coef"]
    for coef in (w, [w[1], -w[0], w[2]]):                   # two directions: a projection, allowed
        shard_path.write_text(json.dumps(dict(shard, coef=coef)))
        assert_succeeded(run_parties("predict", config, data, work, timeout=120))
    assert len(released(ledger_path)) == 2
    assert_succeeded(run_parties("predict", config, data, work, timeout=120))   # the same model again: counted once
    assert len(released(ledger_path)) == 2
    shard_path.write_text(json.dumps(dict(shard, coef=[0.0, 0.0, 1.0])))     # a third direction: every row
    results = run_parties("predict", config, data, work, timeout=120)
    code, _, err = results["A"]
    assert code != 0 and "party A: releasing its partial scores at prediction would let the label party B rebuild " \
        "column" in err and "known-row linear regression" in err, err
    assert "allow_reconstruction = true in its own [parties.A] table" in err
    assert all(code != 0 for code, _, _ in results.values())
    assert len(released(ledger_path)) == 2
