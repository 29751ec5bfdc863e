"""A federation's trees exported: ``vfl party`` trains (one process per party), each feature party signs its
consent with ``vfl export consent``, the label party writes the XGBoost model with ``vfl export``, and XGBoost
gives the margins ``vfl predict`` gives, on the test CSVs."""

import numpy as np
import pandas as pd
import pytest

from vfl.cli import main
from vfl.deploy.config import write_config
from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports, start_parties

xgb = pytest.importorskip("xgboost")
pytestmark = pytest.mark.slow    # processes, TLS links

ROLES = {"shop": "feature", "telco": "feature", "bank": "label"}
TRAINING = {"model": "gradient_boosting", "loss": "log_loss", "iterations": 5, "max_depth": 3, "max_bins": 16,
            "min_samples_leaf": 5, "early_stopping": False, "key_bits": 1024, "insecure": True}


def _write_data(folder, seed=4):
    """Each party's train and test CSVs (same ids, own row order), gaps in every party's first column."""
    rng = np.random.default_rng(seed)
    paths = {}
    for split, n in (("train", 200), ("test", 60)):
        x = rng.normal(size=(n, 6))
        y = (x[:, 0] > 0.2) + x[:, 2] * (x[:, 4] > 0) + 0.5 * x[:, 5] + rng.normal(scale=0.3, size=n) > 0.6
        ids = [f"r{split}{i:04d}" for i in range(n)]
        for p, name in enumerate(ROLES):
            block = x[:, 2 * p:2 * p + 2].copy()
            block[rng.random(n) < 0.1, 0] = np.nan
            frame = pd.DataFrame(block, columns=[f"{name}_{j}" for j in range(2)])
            frame.insert(0, "id", ids)
            if name == "bank":
                frame["label"] = np.where(y, "default", "repaid")
            paths[(name, split)] = folder / f"{name}_{split}.csv"
            frame.iloc[rng.permutation(n)].to_csv(paths[(name, split)], index=False)
    return paths


def _run(command, config, data, work):
    parties = start_parties(command, config, data, work, roles=tuple(ROLES), coordinator=None)
    try:
        for name, party in parties.items():
            code, _, err = party.finish(180)
            assert code == 0, f"{name}: {err}"
    finally:
        for party in parties.values():
            party.kill()


def test_a_federations_trees_exported_give_vfl_predicts_margins(tmp_path):
    tls = write_federation_certs(tmp_path / "certs", tuple(ROLES))
    data = _write_data(tmp_path)
    parties = {n: {"role": role, "address": f"127.0.0.1:{port}", "certificate": tls[n].certificate, "key": tls[n].key}
               for (n, role), port in zip(ROLES.items(), _free_ports(len(ROLES)))}
    config = write_config(tmp_path / "federation.toml", tls["bank"].ca, parties, TRAINING,
                          {"connect_timeout": 60, "timeout": 60}, align="same-ids")
    work = tmp_path / "work"
    _run("party", config, data, work)
    _run("predict", config, data, work)
    consents = []
    for name in ("shop", "telco"):
        consents.append(tmp_path / f"{name}.consent.json")
        assert main(["export", "consent", "--config", str(config), "--role", name, "--model", str(work / name),
                     "--format", "xgboost-json", "--to", "bank", "--out", str(consents[-1])]) == 0
    out = tmp_path / "model.json"
    assert main(["export", "--config", str(config), "--role", "bank", "--model", str(work / "bank"), "--format",
                 "xgboost-json", "--consents", *map(str, consents), "--out", str(out)]) == 0
    tables = [pd.read_csv(data[(name, "test")], dtype={"id": str}).sort_values("id") for name in ROLES]
    x = np.column_stack([t.drop(columns=[c for c in ("id", "label") if c in t]).to_numpy(float) for t in tables])
    booster = xgb.Booster()
    booster.load_model(str(out))
    margin = booster.predict(xgb.DMatrix(x, feature_names=booster.feature_names), output_margin=True)
    scores = pd.read_csv(work / "bank" / "scores.csv", dtype={"id": str}).sort_values("id")
    assert len(scores) == 60 and np.abs(margin - scores["score"].to_numpy()).max() < 1e-5
