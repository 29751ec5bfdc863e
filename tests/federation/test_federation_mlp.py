"""Split neural networks as one process per party over mutual TLS: ``vfl party`` and ``vfl predict``.

A feature party A, the label party B and the coordinator C (it deals the Beaver
triples) on generated CSVs whose ids only partly overlap (aligned by PSI).  The
label party reports its metrics; ``vfl predict`` gives it the outputs that
predicting in-process from the three shards gives; a run whose feature party is
killed after an epoch, resumed with ``--resume``, ends with the network of the
run that was not interrupted from the same checkpoints; bad ``[training]`` keys
stop every command with one clear line.
"""

import json
import re
import shutil
import signal

import numpy as np
import pandas as pd
import pytest

from vfl.deploy.config import load_config, write_config
from vfl.deploy.shards import mlp as shards
from vfl.errors import ConfigurationError
from vfl.protocols import Roster
from vfl.runs import mlp as run
from vfl.runs.data import RoleData
from vfl.runs.threads import run_in_threads
from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports, start_parties

pytestmark = pytest.mark.slow    # processes and TLS links

ROLES = {"A": "feature", "B": "label", "C": "coordinator"}
DATA_PARTIES = ("A", "B")
TRAINING = {"model": "mlp", "task": "binary", "hidden_layer_sizes": [4, 3], "bottom_sizes": [4],
            "activation": "tanh", "batch_size": 40, "iterations": 6, "tol": 0.0, "learning_rate_init": 0.05,
            "random_state": 3, "early_stopping": True, "validation_fraction": 0.2, "n_iter_no_change": 20}


def _labels(signal, task):
    if task == "binary":
        return np.where(signal > 0, "yes", "no")
    if task == "multiclass":
        return np.array(["low", "mid", "high"])[np.digitize(signal, [-1.0, 1.0])]
    return signal


def write_data(folder, n_rows=220, seed=0, task="binary"):
    """A's (3 columns) and B's (2 columns and the label) train and test CSVs; A lacks 10 of B's training ids."""
    rng = np.random.default_rng(seed)
    paths = {}
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_rows), ("test", 30)):
        x = rng.normal(size=(n, 5))
        signal = x @ np.array([1.0, -1.0, 0.5, 2.0, -0.5]) + np.tanh(x[:, 0] * x[:, 3]) + rng.normal(scale=0.4, size=n)
        ids = [f"r{split}{i:04d}" for i in range(n)]
        a = pd.DataFrame(x[:, :3], columns=["a0", "a1", "a2"]).assign(id=ids)
        b = pd.DataFrame(x[:, 3:], columns=["b0", "b1"]).assign(id=ids, label=_labels(signal, task))
        if split == "train":
            a = a.iloc[10:]
        for name, frame in (("A", a), ("B", b)):
            path = folder / f"{name}_{split}.csv"
            frame.iloc[rng.permutation(len(frame))].to_csv(path, index=False)
            paths[(name, split)] = path
    return paths


def run_all(command, config, data, work, extra=(), timeout=180):
    parties = start_parties(command, config, data, work, roles=tuple(ROLES), extra=extra, coordinator="C")
    try:
        return {name: p.finish(timeout) for name, p in parties.items()}
    finally:
        for p in parties.values():
            p.kill()


def assert_ok(results):
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"
    return results


def shard(work, name):
    return json.loads((work / name / f"model_{name}.json").read_text())


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlp")
    tls = write_federation_certs(folder / "certs", tuple(ROLES))
    data = write_data(folder)

    def config(name, training=None):
        parties = {n: {"role": role, "address": f"127.0.0.1:{port}", "certificate": tls[n].certificate,
                       "key": tls[n].key} for (n, role), port in zip(ROLES.items(), _free_ports(len(ROLES)))}
        for entry in parties.values():      # a bottom of 4 on 2-3 columns: the parts give the rows away; the
            if entry["role"] == "feature":  # subject here is vfl party, so the feature parties opt in
                entry["allow_reconstruction"] = True
        return write_config(folder / name, tls["B"].ca, parties, dict(TRAINING, **(training or {})),
                            {"connect_timeout": 60, "timeout": 60})

    whole = config("federation.toml")
    return {"config": config, "whole": whole, "data": data, "folder": folder,
            "results": run_all("party", whole, data, folder / "run")}


def test_three_processes_train_a_network_and_the_label_party_reports_it(trained):
    results = assert_ok(trained["results"])
    out = results["B"][1]
    assert "party B: trained 6 epochs, final loss" in out
    assert "party B: positive class 'yes'" in out
    assert "party B: training metrics on 168 rows: AUC" in out and "party B: validation metrics on 42 rows" in out
    auc = float(out.split("training metrics on 168 rows: AUC ")[1].split(",")[0])
    assert auc > 0.8, out
    assert "party C: dealt the masks and Beaver triples of 6 epochs" in results["C"][1]
    work = trained["folder"] / "run"
    a, b = shard(work, "A"), shard(work, "B")
    assert a["columns"] == ["a0", "a1", "a2"] and [np.shape(layer[0]) for layer in a["bottom"]] == [(3, 4)]
    assert np.shape(a["block"]) == (4, 4) and "top" not in a and "intercept" not in a
    assert b["task"] == "binary" and b["classes"] == ["no", "yes"] and b["data_parties"] == ["A", "B"]
    assert [np.shape(layer[0]) for layer in b["top"]] == [(4, 3), (3, 1)] and len(b["loss_curve"]) == 6
    assert not (work / "C" / "model_C.json").exists() and not list((work / "A" / "checkpoints").glob("*.json"))


@pytest.mark.parametrize("task", ["multiclass", "regression"])
def test_other_tasks_train_and_predict_as_the_shards_do_in_process(trained, task):
    folder = trained["folder"] / task
    data = write_data(folder, task=task)
    config = trained["config"](f"federation-{task}.toml", {"task": task, "iterations": 4, "early_stopping": False})
    results = assert_ok(run_all("party", config, data, folder / "work"))
    assert ("training metrics on 210 rows: AUC (one-vs-rest, macro)" if task == "multiclass" else
            "training metrics on 210 rows: R^2") in results["B"][1]
    results = assert_ok(run_all("predict", config, data, folder / "work"))
    assert "party B: prediction metrics on 30 rows" in results["B"][1]
    scores = pd.read_csv(folder / "work" / "B" / "scores.csv", dtype={"id": str}).sort_values("id")
    expected = _in_process_outputs(config, folder / "work", data, columns=slice(None))
    if task == "regression":
        assert list(scores.columns) == ["id", "score"]
        np.testing.assert_allclose(scores["score"].to_numpy(), expected[:, 0], rtol=0, atol=1e-12)
        return
    classes = ["high", "low", "mid"]
    assert shard(folder / "work", "B")["classes"] == classes
    probability = scores[[f"probability_{c}" for c in classes]].to_numpy()
    np.testing.assert_allclose(probability, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(probability.sum(axis=1), 1.0, atol=1e-12)
    assert (scores["prediction"] == np.array(classes)[probability.argmax(axis=1)]).all()


def _in_process_outputs(config_path, work, data, split="test", columns=0):
    """The outputs of predicting in-process (vfl.runs.mlp's prediction programs) from the three parties' shards."""
    config = load_config(config_path)
    parties, roles = {}, {}
    for name in DATA_PARTIES:
        checked = shards.read_shard(work / name / f"model_{name}.json", name, ROLES[name])
        parties[name] = shards.shard_party(checked, name)
        frame = pd.read_csv(data[(name, split)], dtype={"id": str}).sort_values("id")
        roles[name] = RoleData(checked["columns"], frame[checked["columns"]].to_numpy(float))
    roster = Roster(("A",), "B", "C")
    return run_in_threads(roster, run.prediction_programs(roles, parties, config.training, roster))["B"][:, columns]


def test_vfl_predict_gives_the_outputs_of_the_shards_in_process(trained):
    work, data = trained["folder"] / "run", trained["data"]
    results = assert_ok(run_all("predict", trained["whole"], data, work))
    assert "party A: sent its masked part of the interactive layer for 30 rows to B" in results["A"][1]
    assert "party B: prediction metrics on 30 rows: AUC" in results["B"][1]
    scores = pd.read_csv(work / "B" / "scores.csv", dtype={"id": str}).sort_values("id")
    assert list(scores.columns) == ["id", "score", "probability", "prediction"]
    expected = _in_process_outputs(trained["whole"], work, data)
    np.testing.assert_allclose(scores["probability"].to_numpy(), expected, rtol=0, atol=1e-12)
    assert scores["probability"].std() > 0.05
    assert set(scores["prediction"]) <= {"yes", "no"}


def test_a_run_killed_after_an_epoch_and_resumed_ends_with_the_uninterrupted_network(trained):
    folder, data = trained["folder"], trained["data"]
    config = trained["config"]("federation_resume.toml")

    def killed(work, after, extra=()):
        parties = start_parties("party", config, data, work, roles=tuple(ROLES), extra=["--narrate", *extra],
                                coordinator="C")
        try:
            parties["B"].wait_for_line(f"epoch {after}/6 done", timeout=120)
            parties["A"].signal(signal.SIGKILL)
            for name in ("B", "C"):
                code, out, err = parties[name].finish(90)
                assert code == 1 and "A" in err, f"{name}: {err}"
        finally:
            for p in parties.values():
                p.kill()

    first = folder / "resume-once"
    killed(first, 2)
    assert list((first / "B" / "checkpoints").glob("epoch-*.json"))
    twice = folder / "resume-twice"
    shutil.copytree(first, twice)
    results = assert_ok(run_all("party", config, data, first, extra=["--resume", "--narrate"]))
    assert "resume: has checkpoints after epochs" in results["B"][1]
    killed(twice, 4, ["--resume"])                  # resumed after epoch 2, killed again after epoch 4
    assert_ok(run_all("party", config, data, twice, extra=["--resume"]))
    for name in DATA_PARTIES:
        a, b = shard(first, name), shard(twice, name)
        for key in ("bottom", "block", "intercept", "top", "loss_curve"):
            np.testing.assert_allclose(_flat(a.get(key)), _flat(b.get(key)), rtol=0, atol=1e-9, err_msg=name)
    assert shard(first, "B")["validation_scores"] == shard(twice, "B")["validation_scores"]


def _flat(value) -> np.ndarray:
    """Every number of a nested list, in order (none: an empty array)."""
    if value is None:
        return np.zeros(0)
    if isinstance(value, list):
        return np.concatenate([_flat(v) for v in value]) if value else np.zeros(0)
    return np.array([float(value)])


BAD = {
    "an unknown key": ({"learning_rate": 0.1}, "unknown key(s) ['learning_rate']"),
    "no task": ({"task": None}, "'task' is missing"),          # write_config leaves a None out
    "a bottom width of 0": ({"bottom_sizes": [4, 0]}, "bottom_sizes must be a tuple of positive integers"),
    "a bottom for no party": ({"bottom_sizes": {"A": [4], "D": [2]}}, "bottom_sizes names ['D'], not data parties"),
    "a bottom that is a number": ({"bottom_sizes": 4}, "bottom_sizes must be \"auto\", an array of widths"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_training_settings_are_one_clear_line_at_every_party(trained, case):
    change, message = BAD[case]
    config = trained["config"](f"bad-{case.replace(' ', '-')}.toml", change)
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        load_config(config)
    results = run_all("party", config, trained["data"], trained["folder"] / "bad", timeout=60)
    for name, (code, out, err) in results.items():
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and message in lines[0], f"{name}: {err}"


REFUSED = {
    "warm_start": ({"training": {"warm_start": True}}, "a split network trains afresh (leave warm_start out)"),
    "table3": ({"prediction_mode": "table3"}, "a split network predicts privately only"),
    "sample_weight": ({"sample_weight": "w"}, "a split network does not take row weights"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_a_split_network_does_not_take_is_refused_by_name(trained, case):
    change, message = REFUSED[case]
    folder = trained["folder"]
    base = load_config(trained["whole"])
    parties = {n: {"role": e.role, "address": f"{e.address[0]}:{e.address[1]}", "certificate": e.certificate,
                   "key": e.key} for n, e in base.parties.items()}
    path = write_config(folder / f"refused-{case}.toml", base.ca, parties, dict(TRAINING, **change.get("training", {})),
                        **{k: v for k, v in change.items() if k != "training"})
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        load_config(path)


def test_vfl_serve_s_coordinator_of_a_network_with_one_feature_party_has_nothing_to_serve(trained, capsys):
    from vfl.cli import main

    assert main(["serve", "--config", str(trained["whole"]), "--role", "C"]) == 0
    assert "party C: a split network with one feature party is served without a coordinator (no masks to deal): " \
           "nothing to serve" in capsys.readouterr().out


def test_the_federation_toml_of_docs_mlp_md_loads_as_written(tmp_path):
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs" / "mlp.md"
    snippet = next(b for b in re.findall(r"```toml\n(.*?)```", docs.read_text(encoding="utf-8"), flags=re.S)
                   if 'model = "mlp"' in b)
    (tmp_path / "federation.toml").write_text(snippet)
    config = load_config(tmp_path / "federation.toml")
    settings = config.training
    assert config.family.name == "mlp" and config.roster == Roster(("telco",), "bank", "C") and config.label == "default"
    assert settings.task == "binary" and settings.hidden_layer_sizes == (16, 8) and settings.max_iter == 30
    assert settings.bottom_of("telco") == (8,) and settings.bottom_of("bank") == (4,) and settings.early_stopping


TAMPERED = {
    "a bottom that does not chain": (lambda s: s["bottom"][0].__setitem__(0, s["bottom"][0][0][:2]),
                                     "bottom[0] weights has shape (2, 4), expected (3, 'any')"),
    "a weight that is not finite": (lambda s: s["block"][1].__setitem__(2, float("nan")),
                                    "block holds a value that is not a finite number"),
    "another party's shard": (lambda s: s.__setitem__("party", "B"), "is not party A's split-network shard"),
}


@pytest.mark.parametrize("case", list(TAMPERED))
def test_a_tampered_shard_is_refused_naming_the_file_and_the_field(trained, tmp_path, case):
    from vfl.errors import DataError

    change, message = TAMPERED[case]
    tampered = shard(trained["folder"] / "run", "A")
    change(tampered)
    path = tmp_path / "model_A.json"
    path.write_text(json.dumps(tampered))          # json writes a NaN as NaN
    with pytest.raises(DataError, match=re.escape(message)) as caught:
        shards.read_shard(path, "A", "feature")
    assert str(path) in str(caught.value)


def test_shards_of_another_network_are_refused_and_every_peer_told(trained):
    config = trained["config"]("federation-wider.toml", {"hidden_layer_sizes": [5, 3]})
    results = run_all("predict", config, trained["data"], trained["folder"] / "run", timeout=90)
    for name in DATA_PARTIES:
        code, out, err = results[name]
        assert code == 2 and "has an interactive layer of 4 units, but" in err, f"{name}: {err}"
        assert "says hidden_layer_sizes [5, 3]" in err, err
    code, out, err = results["C"]
    assert code == 1 and "stopped on an error in its data (DataError)" in err, err
