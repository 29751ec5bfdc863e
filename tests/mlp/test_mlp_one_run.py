"""One run of the split-network family for both faces: the estimators (threads) and ``vfl party`` (processes).

Every party's start is secret and random, so two trainings never share a start.
The comparison therefore goes through the one thing both faces can share: a
checkpoint.  ``vfl party`` (A, the label party B, the coordinator C; ``align =
"same-ids"``) is stopped after epoch 2; from its parties' checkpoints, the run
the estimator runs (:func:`vfl.runs.mlp.training_programs` on the estimator's
own conversion of the tables, with the estimator's settings, which equal the
file's) and ``vfl party --resume`` end with the same network up to the fixed
point, and ``vfl predict`` scores what the estimator scores with those parties.
From scratch, the estimator and ``vfl party`` train networks of the same
structure and quality.  The same bad tables are refused with the same error on
both paths.
"""

import json
import signal
import time

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from vfl import VerticalDataset, VerticalMLPClassifier
from vfl.deploy.checkpoint import CheckpointStore
from vfl.deploy.config import load_config, write_config
from vfl.errors import DataError
from vfl.protocols import Roster
from vfl.runs import mlp as run
from vfl.runs.data import RoleData
from vfl.runs.threads import run_in_threads
from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports, start_parties

pytestmark = pytest.mark.slow    # processes and TLS links

ROLES = {"A": "feature", "B": "label", "C": "coordinator"}
DATA_PARTIES = ("A", "B")
#: the estimator's parameters; federation.toml's [training] adds model, task and iterations (max_iter)
PARAMS = {"hidden_layer_sizes": [4, 3], "bottom_sizes": [3], "activation": "tanh", "batch_size": 40,
          "tol": 0.0, "learning_rate_init": 0.05, "random_state": 4, "early_stopping": True,
          "validation_fraction": 0.2, "n_iter_no_change": 20}
EPOCHS = 5


def training(**changes):
    return {"model": "mlp", "task": "binary", "iterations": EPOCHS, **PARAMS, **changes}


def write_tables(folder, n_rows, seed=0):
    """A's and B's train and test CSVs (same ids, their own row orders); B's has the label."""
    rng = np.random.default_rng(seed)
    paths = {}
    for split, n in (("train", n_rows), ("test", 200)):
        x = rng.normal(size=(n, 5))
        y = x @ np.array([1.0, -1.0, 0.5, 2.0, -0.5]) + np.tanh(x[:, 0] * x[:, 3]) + rng.normal(scale=0.4, size=n) > 0
        ids = [f"r{split}{i:04d}" for i in range(n)]
        frames = {"A": pd.DataFrame(x[:, :3], columns=["a0", "a1", "a2"]),
                  "B": pd.DataFrame(x[:, 3:], columns=["b0", "b1"]).assign(label=np.where(y, "yes", "no"))}
        for name, frame in frames.items():
            frame.insert(0, "id", ids)
            path = folder / f"{name}_{split}.csv"
            frame.iloc[rng.permutation(n)].to_csv(path, index=False)
            paths[(name, split)] = path
    return paths


def dataset(paths, split="train"):
    """The CSVs as the estimator's VerticalDataset, rows in the order of their ids (as ``same-ids`` aligns them)."""
    frames = {name: pd.read_csv(paths[(name, split)], dtype={"id": str}).sort_values("id").reset_index(drop=True)
              for name in DATA_PARTIES}
    if split != "train":
        frames["B"] = frames["B"].drop(columns="label")
    return VerticalDataset(frames, label="label" if split == "train" else None, id_column="id")


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """Makes a folder's tables and federation.toml; starts ``vfl party`` / ``vfl predict`` there."""
    root = tmp_path_factory.mktemp("mlp-one-run")
    tls = write_federation_certs(root / "certs", tuple(ROLES))

    def make(name, n_rows=200, table=None):
        folder = root / name
        folder.mkdir()
        paths = write_tables(folder, n_rows)
        parties = {n: {"role": role, "address": f"127.0.0.1:{port}", "certificate": tls[n].certificate,
                       "key": tls[n].key} for (n, role), port in zip(ROLES.items(), _free_ports(len(ROLES)))}
        for entry in parties.values():      # a bottom of 3 over the epochs gives A's columns away; the subject
            if entry["role"] == "feature":  # here is one run through both faces, so A opts in on both
                entry["allow_reconstruction"] = True
        config = write_config(folder / "federation.toml", tls["B"].ca, parties, table or training(),
                              {"connect_timeout": 60, "timeout": 60}, align="same-ids")
        return folder, paths, config

    def start(command, folder, paths, config, extra=()):
        return start_parties(command, config, paths, folder / "work", roles=tuple(ROLES), extra=extra,
                             coordinator="C")

    def finish(parties, timeout=180):
        try:
            return {name: p.finish(timeout) for name, p in parties.items()}
        finally:
            for p in parties.values():
                p.kill()

    return make, start, finish


def assert_ok(results):
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"


def shard(folder, name):
    return json.loads((folder / "work" / name / f"model_{name}.json").read_text())


def _arrays(shard_: dict) -> list[np.ndarray]:
    """A shard's arrays in the order of the party's ``parameters()``."""
    arrays = [np.asarray(a) for layer in shard_["bottom"] for a in layer]
    arrays += [] if shard_["block"] is None else [np.asarray(shard_["block"])]
    if shard_["role"] == "label":
        arrays += [np.asarray(shard_["intercept"])] + [np.asarray(a) for layer in shard_["top"] for a in layer]
    return arrays


def test_from_the_same_checkpoint_vfl_party_and_the_estimators_run_end_with_the_same_network(federation):
    make, start, finish = federation
    folder, paths, config = make("checkpoint")
    settings = load_config(config).training
    model = VerticalMLPClassifier(max_iter=EPOCHS, verbose=False, allow_reconstruction=["A"], **PARAMS)
    assert model._settings("binary") == settings                 # the estimator's settings are the file's

    parties = start("party", folder, paths, config, ["--narrate"])
    try:
        parties["B"].wait_for_line("epoch 2/5 done", timeout=120)
        # B says so as it sends the verdict; A saves its checkpoint of that epoch on receiving it (racy at load 10)
        store = CheckpointStore(folder / "work" / "A" / "checkpoints", "A", load_config(config).fingerprint("train"))
        deadline = time.monotonic() + 60
        while not [e for e in store.epochs() if e >= 1] and time.monotonic() < deadline:
            time.sleep(0.05)
        parties["A"].signal(signal.SIGKILL)
        for name in ("B", "C"):
            code, out, err = parties[name].finish(90)
            assert code == 1, f"{name}: {err}"
    finally:
        for p in parties.values():
            p.kill()
    fingerprint = load_config(config).fingerprint("train")
    saved = {name: CheckpointStore(folder / "work" / name / "checkpoints", name, fingerprint).load()
             for name in DATA_PARTIES}
    assert min(max(s) for s in saved.values()) >= 1, saved.keys()

    data = dataset(paths)                                          # as the estimator's fit converts it
    roles = {name: RoleData(data.columns(name), data.features(name), data.labels if name == "B" else None)
             for name in DATA_PARTIES}
    roster = Roster(("A",), "B", "C")
    in_process = run_in_threads(roster, run.training_programs(roles, settings, roster, checkpoints=saved))
    assert_ok(finish(start("party", folder, paths, config, ["--resume"])))

    label = shard(folder, "B")
    record = in_process["B"].record
    np.testing.assert_allclose(label["loss_curve"], record["loss_curve"], rtol=0, atol=1e-9)
    assert label["validation_scores"] == record["validation_scores"] and label["n_iter"] == record["n_iter"] == EPOCHS
    for name in DATA_PARTIES:
        ours = in_process[name].party.parameters()
        theirs = _arrays(shard(folder, name))
        assert [a.shape for a in ours] == [a.shape for a in theirs], name
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-9, err_msg=name)

    assert_ok(finish(start("predict", folder, paths, config)))
    scores = pd.read_csv(folder / "work" / "B" / "scores.csv", dtype={"id": str}).sort_values("id")
    model._parties = {name: in_process[name].party for name in DATA_PARTIES}   # the estimator, holding that run
    model._roster, model._settings_, model.n_iter_ = roster, settings, EPOCHS
    model.feature_names_ = {name: data.columns(name) for name in DATA_PARTIES}
    model.classes_ = in_process["B"].party.classes
    expected = model.predict_proba(dataset(paths, "test"))[:, 1]
    np.testing.assert_allclose(scores["probability"].to_numpy(), expected, rtol=0, atol=1e-8)
    assert scores["probability"].std() > 0.05


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")    # tol = 0: every epoch runs
def test_from_scratch_the_estimator_and_vfl_party_train_networks_of_the_same_structure_and_quality(federation):
    make, start, finish = federation
    epochs = 20             # the starts differ: long enough for both to get near the best (no early stopping:
    #                         its best epoch by the accuracy of 40 validation rows varies from start to start)
    folder, paths, config = make("scratch", table=training(iterations=epochs, early_stopping=False))
    assert_ok(finish(start("party", folder, paths, config)))
    assert_ok(finish(start("predict", folder, paths, config)))
    model = VerticalMLPClassifier(max_iter=epochs, verbose=False, allow_reconstruction=["A"],
                                  **dict(PARAMS, early_stopping=False))
    model.fit(dataset(paths))

    for name in DATA_PARTIES:
        assert [a.shape for a in _arrays(shard(folder, name))] == \
            [a.shape for a in model._parties[name].parameters()], name
    label = shard(folder, "B")
    assert label["classes"] == model.classes_.tolist() == ["no", "yes"]
    assert label["n_iter"] == model.n_iter_ == epochs and len(label["loss_curve"]) == epochs
    test = pd.read_csv(paths[("B", "test")], dtype={"id": str}).sort_values("id")
    y = (test["label"] == "yes").to_numpy()
    scores = pd.read_csv(folder / "work" / "B" / "scores.csv", dtype={"id": str}).sort_values("id")
    ours = roc_auc_score(y, scores["probability"])
    theirs = roc_auc_score(y, model.predict_proba(dataset(paths, "test"))[:, 1])
    assert ours > 0.95 and theirs > 0.95 and abs(ours - theirs) < 0.03, (ours, theirs)   # measured: within 0.01


BAD_TABLES = {
    "too few rows": dict(n_rows=3, message="party B: 3 rows, fewer than the 4 a network needs"),
    "batches too small": dict(n_rows=200, changes={"batch_size": 8},
                              message="party A: a batch of 8 rows gives 32 values of the interactive layer's "
                                      "gradient"),
}


@pytest.mark.parametrize("case", list(BAD_TABLES))
def test_the_same_bad_table_is_refused_with_the_same_error_on_both_paths(federation, case):
    bad = BAD_TABLES[case]
    changes = bad.get("changes", {})
    make, start, finish = federation
    folder, paths, config = make(case.replace(" ", "-"), bad["n_rows"], training(**changes))
    with pytest.raises(Exception) as caught:
        VerticalMLPClassifier(max_iter=EPOCHS, verbose=False, allow_reconstruction=["A"],
                              **dict(PARAMS, **changes)).fit(dataset(paths))
    error = caught.value
    assert type(error) is DataError and str(error).startswith(bad["message"]), repr(error)

    results = finish(start("party", folder, paths, config), timeout=90)
    code, out, err = results["B"]
    assert code == 2, err                                  # bad input
    assert f"vfl party B: error: {error}" in err.splitlines()
    for name in ("A", "C"):
        code, out, err = results[name]
        assert code != 0 and "party B stopped on an error in its data (DataError)" in err, f"{name}: {err}"
