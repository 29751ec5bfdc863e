"""The score-span ledger of ``vfl party`` and ``vfl predict``: a feature party counts every model it was scored with.

A (3 columns) trains one binary model with B: 1 score against rank 3, allowed.  B then asks A to score
with three different models of A's columns in turn (A's shard edited between runs, as a label party
that holds three labels would train three models): each run alone is allowed by a per-model rule, but
together they give B A's rows.  A records each model in ``score_span_ledger.json`` in its work
directory when it scores, refuses the run that would complete the span, and refuses, before training,
a new model that would.
"""

import json

import pytest

from vfl_net_helpers import assert_succeeded, federation, federation_certs, run_parties  # noqa: F401 - fixtures

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]    # processes and TLS links


def test_a_feature_party_refuses_the_prediction_and_the_training_that_complete_its_span(federation):
    config, data, work = federation["make"](), federation["data"], federation["dir"] / "run"
    assert_succeeded(run_parties("party", config, data, work, timeout=120))
    ledger_path = work / "A" / "score_span_ledger.json"
    assert json.loads(ledger_path.read_text())["ranks"] == [{"columns": ["a0", "a1", "a2"], "rank": 3}]
    shard_path = work / "A" / "model_A.json"
    shard = json.loads(shard_path.read_text())
    w = shard["coef"]
    for coef in (w, [w[1], -w[0], w[2]]):                   # two directions: a projection, allowed
        shard_path.write_text(json.dumps(dict(shard, coef=coef)))
        assert_succeeded(run_parties("predict", config, data, work, timeout=120))
    assert len(json.loads(ledger_path.read_text())["models"]) == 2
    assert_succeeded(run_parties("predict", config, data, work, timeout=120))   # the same model again: counted once
    shard_path.write_text(json.dumps(dict(shard, coef=[0.0, 0.0, 1.0])))     # a third direction: every row
    results = run_parties("predict", config, data, work, timeout=120)
    code, _, err = results["A"]
    assert code != 0 and "party A: the model gives the label party B one score per predicted row and A's " \
        "earlier models with B 2 more (its score-span ledger), not fewer than the rank 3" in err, err
    assert "allow_score_span = true in its own [parties.A] table" in err
    assert all(code != 0 for code, _, _ in results.values())
    assert len(json.loads(ledger_path.read_text())["models"]) == 2
    results = run_parties("party", config, data, work, timeout=120)            # a new model: 2 + 1 dimensions
    code, _, err = results["A"]
    assert code != 0 and "A's earlier models with B 2 more" in err, err
    assert all(code != 0 for code, _, _ in results.values())
