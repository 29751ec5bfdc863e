"""``vfl export --format split`` of a federation's model, for the families whose parts are ONNX graphs: ``vfl party``
trains (one process per party), each party exports its own part from its own work folder and its own shard, the
feature party signs its consent, the label party writes its part and the combiner; the parts, run in onnxruntime
on the raw test rows and combined, give the probabilities ``vfl predict`` wrote."""

import json

import numpy as np
import pandas as pd
import pytest

from credit_data import credit_frames
from export_helpers import onnx_run
from vfl.cli import main
from vfl.deploy.config import write_config
from vfl.export import exporter
from vfl_net_helpers import (_free_ports, assert_succeeded, federation_certs, run_parties,  # noqa: F401 - fixture
                             scaled, write_party_data)

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]    # party processes over TLS
pytest.importorskip("onnxruntime")

ROLES = {"A": "feature", "B": "label", "C": "coordinator"}
KEYS = {"key_bits": 1024, "insecure": True}
TRAINING = {
    "linear": {"model": "logistic", "learning_rate": 0.3, "iterations": 6, "batch_size": 20, "alpha": 0.01,
               "standardize": True, "tol": 0, "random_state": 7, **KEYS},
    "mlp": {"model": "mlp", "task": "binary", "hidden_layer_sizes": [3], "bottom_sizes": [3], "activation": "tanh",
            "batch_size": 40, "iterations": 2, "tol": 0.0, "learning_rate_init": 0.05, "random_state": 3,
            "early_stopping": False},
    "credit": {"model": "logistic", "iterations": 10, "alpha": 0.01, "frac_bits": 32, **KEYS},
}
PIPELINE = {"max_bins": 4, "iv_threshold": 0.0, "max_correlation": 0.95, "base_score": 600, "base_odds": 50,
            "pdo": 20}


def _credit_data(folder, n=340, n_train=300):
    """A holds the telco's columns, B the bank's and the label; the first ``n_train`` customers train, the rest
    are scored; each party's CSV in its own row order."""
    telco, bank = credit_frames(n=n, seed=21)
    tables = {"A": telco, "B": bank.rename(columns={"default": "label"})}
    paths = {}
    for name, table in tables.items():
        table = table.assign(id=[f"c{i:04d}" for i in range(n)]).sample(frac=1.0, random_state=ord(name))
        for split, rows in (("train", table[table.index < n_train]), ("test", table[table.index >= n_train])):
            paths[(name, split)] = folder / f"{name}_{split}.csv"
            rows.to_csv(paths[(name, split)], index=False)
    return paths


def _vfl_export(config, role, *args):
    return main(["export", "--config", str(config), "--role", role, *map(str, args)])


@pytest.mark.parametrize("family", ["linear", "credit", "mlp"])
def test_each_party_exports_its_split_part_from_its_own_work_folder_and_they_combine_to_vfl_predict(
        family, federation_certs, tmp_path, monkeypatch):
    ours, _ = federation_certs
    data = _credit_data(tmp_path) if family == "credit" else write_party_data(tmp_path, n_rows=120)
    parties = {n: {"role": role, "address": f"127.0.0.1:{port}", "certificate": ours[n].certificate,
                   "key": ours[n].key} for (n, role), port in zip(ROLES.items(), _free_ports(3))}
    parties["A"]["allow_reconstruction"] = True       # this test is about the export, not A's release check
    config = write_config(tmp_path / "federation.toml", ours["A"].ca, parties, TRAINING[family],
                          {"connect_timeout": scaled(30), "timeout": scaled(30)},
                          pipeline=PIPELINE if family == "credit" else None)
    work = tmp_path / "work"
    assert_succeeded(run_parties("party", config, data, work, timeout=scaled(240)))
    assert_succeeded(run_parties("predict", config, data, work, timeout=scaled(240)))

    monkeypatch.chdir(work / "A")                     # A, in its own work folder: its part, nobody's consent
    assert _vfl_export(config, "A", "--model", ".", "--format", "split", "--out", tmp_path / "A-part") == 0
    assert sorted(p.name for p in (tmp_path / "A-part").iterdir()) == ["A.onnx"]
    assert main(["export", "consent", "--config", str(config), "--role", "A", "--model", ".", "--format", "split",
                 "--to", "B", "--out", str(tmp_path / "A.consent.json")]) == 0
    assert "shard" not in json.loads((tmp_path / "A.consent.json").read_text())
    refused = tmp_path / "refused"                    # the label party without A's consent: nothing written
    assert _vfl_export(config, "B", "--model", work / "B", "--format", "split", "--out", refused) == 2
    assert not refused.exists()
    assert _vfl_export(config, "B", "--model", work / "B", "--format", "split", "--consents",
                       tmp_path / "A.consent.json", "--out", tmp_path / "B-part") == 0

    if family == "linear":                            # vfl party's linear shards list the model's parties
        assert all(json.loads((work / p / f"model_{p}.json").read_text())["data_parties"] == ["A", "B"]
                   for p in ("A", "B"))
    combiner = json.loads((tmp_path / "B-part" / "combiner.json").read_text())
    assert list(combiner["parts"]) == ["A", "B"] and set(combiner["consented"]) == {"A"}
    folders = {"A": tmp_path / "A-part", "B": tmp_path / "B-part"}
    rows = pd.read_csv(data[("A", "test")], dtype={"id": str}).merge(
        pd.read_csv(data[("B", "test")], dtype={"id": str}), on="id").set_index("id")
    outputs = {p: onnx_run(folders[p] / entry["file"], rows)[entry["output"]] for p, entry in combiner["parts"].items()}
    got = np.asarray(exporter(family).combine(combiner, outputs)["probability"], dtype=np.float64)
    scores = pd.read_csv(work / "B" / "scores.csv", dtype={"id": str}).set_index("id").loc[rows.index]
    np.testing.assert_allclose(got[:, -1], scores["probability"].to_numpy(), rtol=0, atol=1e-6)
    for party in ("A", "B"):                          # each export is in the party's run records
        records = [json.loads(p.read_text()) for p in (work / party / "runs").glob("*/run.json")]
        exports = [r for r in records if r["task"] == "export" and r["status"] == "finished"]
        assert len(exports) == 1 and exports[0]["family"] == family
