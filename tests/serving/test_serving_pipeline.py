"""``vfl serve`` with the credit pipeline: a telco (feature party), a bank (label party), a hub (coordinator).

The pipeline is fitted with the estimators and each party serves its own shard
(bins, coding, weights, points) and its own raw rows.  Checked through HTTP: each
answer's scorecard points, log-odds and probability equal the pipeline's
(``predict_score``, ``decision_function``); a missing value takes its column's
missing bin; the reasons name the bank's own columns with the points their bins
gave and the telco as one party total, and they add up to the score; ``/metrics``
carries the population stability of the served rows per bank column, near 0
for rows like training's and large for a shifted slice.  Served with private
queries, as by default.
"""

import json
import re

import httpx
import numpy as np
import pytest

from credit_data import credit_frames
from vfl import VerticalDataset, VerticalLogisticRegression
from vfl.deploy.config import write_config
from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE
from vfl.serving.scorers.credit import PipelineShare
from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports
from vfl_serve_helpers import Services

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]    # processes, TLS links and servers

ROLES = {"telco": "feature", "bank": "label", "hub": "coordinator"}
TRAINING = {"model": "logistic", "iterations": 12, "alpha": 0.01, "key_bits": 1024, "insecure": True,
            "init": "zeros"}
PIPELINE = {"max_bins": 6, "iv_threshold": 0.02, "max_correlation": 0.9, "base_score": 600, "base_odds": 50,
            "pdo": 20}
N = 400


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serving-pipeline")
    telco, bank = credit_frames(n=N, seed=4)
    ids = [f"c{i:05d}" for i in range(N)]
    telco, bank = telco.assign(id=ids), bank.assign(id=ids)
    data = VerticalDataset({"telco": telco, "bank": bank}, label="default", id_column="id")
    model = VerticalLogisticRegression(max_iter=12, alpha=0.01, key_bits=1024, insecure=True, init="zeros",
                                       allow_score_span=["telco"])
    pipe = VerticalPipeline([
        ("woe", VerticalWOE(VerticalBinning(6), key_bits=1024, insecure=True)),
        ("selection", VerticalSelection(iv_threshold=0.02, max_correlation=0.9)),
        ("scorecard", VerticalScorecard(model, base_score=600, base_odds=50, pdo=20)),
    ]).fit(data)
    shards = json.loads(json.dumps(pipe.shards()))
    for name, shard in shards.items():
        (folder / "models" / "1").mkdir(parents=True, exist_ok=True)
        (folder / "models" / "1" / f"model_{name}.json").write_text(json.dumps(shard))
    tls = write_federation_certs(folder / "certs", tuple(ROLES))
    http, *ports = _free_ports(1 + len(ROLES))
    parties = {n: {"role": role, "address": f"127.0.0.1:{port}", "certificate": tls[n].certificate,
                   "key": tls[n].key} for (n, role), port in zip(ROLES.items(), ports)}
    parties["telco"]["allow_score_span"] = True
    config = write_config(folder / "federation.toml", tls["bank"].ca, parties, TRAINING,
                          {"connect_timeout": 60, "timeout": 60}, align="same-ids", pipeline=PIPELINE,
                          serving={"bank": {"http": f"127.0.0.1:{http}"}})
    telco.iloc[2:].to_csv(folder / "telco_store.csv", index=False)          # the telco lacks c00000, c00001
    bank.drop(columns=["default"]).to_csv(folder / "bank_store.csv", index=False)
    services = Services(config, folder / "serve", f"http://127.0.0.1:{http}")
    services.start("hub")
    services.start("telco", "--load-csv", folder / "telco_store.csv")
    services.start("bank", "--load-csv", folder / "bank_store.csv")
    services.wait_healthy()
    card = pipe.named_steps["scorecard"]
    expected = {"score": dict(zip(ids, pipe.predict_score(data))), "z": dict(zip(ids, pipe.decision_function(data))),
                "telco": dict(zip(ids, card.points(pipe._through(data))["telco"]))}
    yield {"services": services, "ids": ids, "expected": expected, "shards": shards, "bank": bank,
           "telco": telco, "pipe": pipe}
    services.stop_all()


def test_answers_are_the_pipelines_scorecard_points_and_an_unheld_id_is_named(served):
    s, ids, expected = served["services"], served["ids"], served["expected"]
    assert s.health()["queries"] == "private"
    missing = [k for k in ids[8:] if np.isnan(served["telco"].set_index("id").loc[k, "calls"])][:3]
    asked = ids[:8] + missing
    assert missing
    body = s.score(asked).json()
    results = {r["id"]: r for r in body["results"]}
    for key in ids[:2]:
        assert results[key]["error"]["code"] == "unknown_id" and results[key]["error"]["party"] == "telco"
    for key in ids[2:8] + missing:                 # a missing value takes its column's missing bin
        r = results[key]
        assert r["score"] == pytest.approx(expected["score"][key], abs=1e-5)
        assert r["log_odds"] == pytest.approx(expected["z"][key], abs=1e-6)
        assert r["probability"] == pytest.approx(1 / (1 + np.exp(-expected["z"][key])), abs=1e-9)
        assert r["prediction"] == ("yes" if r["probability"] >= 0.5 else "no")


def test_reasons_name_own_columns_and_the_feature_party_as_one_total_and_add_up(served):
    s, ids, expected = served["services"], served["ids"], served["expected"]
    bank = PipelineShare(served["shards"]["bank"], "1")
    rows = served["bank"].set_index("id")
    results = s.score(ids[2:60]).json()["results"]
    seen_party = 0
    for r in results:
        codes = bank.codes(rows.loc[[r["id"]], bank.columns].to_numpy(float))
        own = dict(zip([bank.columns[j] for j in bank.coder.selected], bank.own_points(codes)[0]))
        reasons = r["reasons"]
        assert 0 < len(reasons) <= 4 or r["score"] >= bank.base_points + sum(p.max() for p in bank.points)
        assert [x["short"] for x in reasons] == sorted((x["short"] for x in reasons), reverse=True)
        for x in reasons:
            assert set(x) in ({"column", "points", "short"}, {"party", "points", "short"})
            if "column" in x:
                assert x["points"] == pytest.approx(own[x["column"]], abs=0.01)
                assert x["column"] in served["bank"].columns          # the bank's own columns only, by name
            else:
                assert x["party"] == "telco" and x["short"] > 0
                assert x["points"] == pytest.approx(expected["telco"][r["id"]], abs=0.01)
                seen_party += 1
        # the score splits into the base points, the bank's columns' points and the telco's total
        assert bank.base_points + sum(own.values()) + expected["telco"][r["id"]] == \
            pytest.approx(r["score"], abs=1e-4)
        assert not any(c in json.dumps(reasons) for c in ("calls", "tenure", "noise"))   # no telco column named
    assert seen_party > 0


def psi(url) -> dict:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return {m.group(1): float(m.group(2)) for m in re.finditer(r'vfl_serve_psi\{column="([^"]+)"\} (\S+)', text)}


def test_metrics_carry_the_drift_of_served_rows_per_own_column(served):
    s, ids = served["services"], served["ids"]
    for start in range(2, N, 100):                 # every row served: the served bins are training's
        assert s.score(ids[start:start + 100]).status_code == 200
    calm = psi(s.url)
    assert set(calm) >= {"income", "utilization", "age"} and max(calm.values()) < 0.05
    rich = served["bank"].sort_values("income")["id"].tolist()[-100:]      # a shifted slice: the richest,
    for _ in range(4):                                                      # four times the rows served so far
        for start in range(0, len(rich), 50):
            s.score([k for k in rich[start:start + 50] if k not in ids[:2]])
    assert psi(s.url)["income"] > calm["income"] + 0.1
