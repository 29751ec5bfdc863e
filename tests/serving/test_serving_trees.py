"""``vfl serve`` with gradient-boosted trees: a feature party (telco) and the label party (bank), no coordinator.

The trees are trained by ``vfl party``; the scores ``vfl serve`` answers equal
those of ``vfl predict`` (batch private prediction) on the same rows; missing
values (empty cells in the store, ``null`` inline) are taken as missing; served
with ``reasons = 2``, every answer names its parties; an id unknown to the feature
party is a per-id answer naming it; the feature party
killed gives errors naming it, and scoring recovers once it is back.
"""

import numpy as np
import pandas as pd
import pytest

from vfl.deploy.config import write_config
from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports, start_parties
from vfl_serve_helpers import Services

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]    # processes, TLS links and servers
ROLES = {"telco": "feature", "bank": "label"}
TRAINING = {"model": "gradient_boosting", "loss": "log_loss", "iterations": 5, "learning_rate": 0.4, "max_depth": 3,
            "max_bins": 16, "min_samples_leaf": 5, "label_party_trees": 1, "key_bits": 1024, "insecure": True}


def write_data(folder, seed=0):
    rng = np.random.default_rng(seed)
    paths = {}
    for split, n in (("train", 200), ("test", 30)):
        x = rng.normal(size=(n, 4))
        y = (x[:, 0] + x[:, 1] * (x[:, 2] > 0) + 0.5 * x[:, 3] + rng.normal(scale=0.3, size=n)) > 0.3
        ids = [f"t{split}{i:03d}" for i in range(n)]
        for p, name in enumerate(ROLES):
            block = x[:, 2 * p:2 * p + 2].copy()
            block[rng.random(n) < 0.15, 0] = np.nan
            frame = pd.DataFrame(block, columns=[f"{name}_{j}" for j in range(2)])
            frame.insert(0, "id", ids)
            if name == "bank" and split == "train":
                frame["label"] = np.where(y, "default", "repaid")
            path = folder / f"{name}_{split}.csv"
            frame.to_csv(path, index=False)
            paths[(name, split)] = path
    return paths


def run(command, config, data, work):
    parties = start_parties(command, config, data, work, roles=tuple(ROLES), coordinator=None)
    try:
        results = {name: p.finish(300) for name, p in parties.items()}
    finally:
        for p in parties.values():
            p.kill()
    assert all(code == 0 for code, _, _ in results.values()), results


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serving-trees")
    tls = write_federation_certs(folder / "certs", list(ROLES))
    http, ports = _free_ports(1)[0], _free_ports(2)
    parties = {name: {"role": role, "address": f"127.0.0.1:{port}", "certificate": tls[name].certificate,
                      "key": tls[name].key} for (name, role), port in zip(ROLES.items(), ports)}
    config = write_config(folder / "federation.toml", tls["bank"].ca, parties, TRAINING,
                          {"connect_timeout": 60, "timeout": 60}, align="same-ids",
                          serving={"bank": {"http": f"127.0.0.1:{http}",
                                                     "allow_inline_features": True, "reasons": 2}})
    data = write_data(folder)
    run("party", config, data, folder / "train")
    run("predict", config, data, folder / "train")
    for name in ROLES:
        (folder / "models" / "1").mkdir(parents=True, exist_ok=True)
        (folder / "models" / "1" / f"model_{name}.json").write_bytes(
            (folder / "train" / name / f"model_{name}.json").read_bytes())
    batch = pd.read_csv(folder / "train" / "bank" / "scores.csv", dtype={"id": str})
    telco = pd.read_csv(data[("telco", "test")], dtype={"id": str})
    telco.iloc[2:].to_csv(folder / "telco_store.csv", index=False)        # telco lacks the first two ids
    services = Services(config, folder / "serve", f"http://127.0.0.1:{http}")
    services.start("telco", "--load-csv", folder / "telco_store.csv")
    services.start("bank", "--load-csv", data[("bank", "test")])
    services.wait_healthy()
    yield {"services": services, "batch": batch, "bank": pd.read_csv(data[("bank", "test")], dtype={"id": str})}
    services.stop_all()


def test_tree_scores_equal_batch_prediction(served):
    s, batch = served["services"], served["batch"]
    response = s.score(list(batch["id"]))
    assert response.status_code == 200, response.text
    results = {r["id"]: r for r in response.json()["results"]}
    unknown = {"ttest000", "ttest001"}
    for key in unknown:
        assert results[key]["error"]["code"] == "unknown_id" and results[key]["error"]["party"] == "telco"
    scored = batch[~batch["id"].isin(unknown)]
    assert len(scored) == 28
    got = [results[key]["probability"] for key in scored["id"]]
    assert got == pytest.approx(scored["probability"].to_numpy(), abs=1e-12)
    assert [results[key]["prediction"] for key in scored["id"]] == list(scored["prediction"])
    # reasons = 2 (docs/serving.md, "Reason codes"): party-level, from the same masks; the estimators' equality is
    # tests/serving/test_serving_reasons.py's
    codes = [results[key]["reasons"] for key in scored["id"]]
    assert all(len(row) <= 2 and set(row) <= {"information from bank", "information from telco"} for row in codes)
    assert any(codes)


def test_missing_values_inline_and_per_id(served):
    s, bank, batch = served["services"], served["bank"], served["batch"]
    key = "ttest005"
    row = bank.set_index("id").loc[key]
    features = {c: (None if np.isnan(row[c]) else float(row[c])) for c in ("bank_0", "bank_1")}
    response = s.score([key], features=[features])
    expected = batch.set_index("id").loc[key, "probability"]
    assert response.json()["results"][0]["probability"] == pytest.approx(expected, abs=1e-12)
    response = s.score([key], features=[{"bank_0": None, "bank_1": None}])     # all missing: still a score
    assert "probability" in response.json()["results"][0]


def test_feature_party_killed_then_back(served):
    s = served["services"]
    s.kill("telco")
    response = s.score(["ttest010"])
    assert response.status_code == 503 and response.json()["error"]["party"] == "telco"
    s.start("telco")
    s.wait_healthy()
    assert "probability" in s.score(["ttest010"]).json()["results"][0]
