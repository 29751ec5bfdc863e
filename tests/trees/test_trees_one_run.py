"""One run of the trees family for both faces: the estimators (threads) and ``vfl party`` (processes).

The same table goes through :class:`vfl.VerticalGradientBoostingClassifier` and
through ``vfl party`` / ``vfl predict`` (one process per party, ``align =
"same-ids"``): the shards hold the estimator's trees, bins and leaf values, and
``vfl predict``'s scores are the estimator's.  The same bad tables (too few rows
for ``min_samples_leaf``, one class only, targets that are not numbers) are
refused with the same error type and message: the label party's ``vfl party``
exits with code 2 (bad input) printing the estimator's message, and the feature
parties stop on its abort, which names the error's type.
"""

import json

import numpy as np
import pandas as pd
import pytest

from vfl import VerticalDataset, VerticalGradientBoostingClassifier, VerticalGradientBoostingRegressor
from vfl.deploy.config import write_config
from vfl.errors import DataError
from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports, start_parties

pytestmark = pytest.mark.slow    # processes and TLS links

FEATURES = ("shop", "telco")
LABEL = "bank"
ROLES = {"shop": "feature", "telco": "feature", LABEL: "label"}
NAMES = tuple(ROLES)
#: ``[training]`` of federation.toml and the estimator's parameters (``iterations`` is ``max_iter``).
TRAINING = {"loss": "log_loss", "iterations": 4, "learning_rate": 0.4, "max_depth": 3, "max_bins": 16,
            "min_samples_leaf": 5, "early_stopping": True, "validation_fraction": 0.2, "n_iter_no_change": 20,
            "random_state": 3, "key_bits": 1024, "insecure": True}


def write_tables(folder, n_rows, labels=None, seed=0):
    """Every party's train and test CSVs (their own row orders), gaps in each party's first column."""
    rng = np.random.default_rng(seed)
    paths = {}
    for split, n in (("train", n_rows), ("test", 30)):
        x = rng.normal(size=(n, 6))
        y = (x[:, 0] > 0.2) + x[:, 2] * (x[:, 4] > 0) + 0.5 * x[:, 5] + rng.normal(scale=0.3, size=n) > 0.6
        for p, name in enumerate(NAMES):
            block = x[:, 2 * p:2 * p + 2].copy()
            block[rng.random(n) < 0.1, 0] = np.nan
            frame = pd.DataFrame(block, columns=[f"{name}_{j}" for j in range(2)])
            frame.insert(0, "id", [f"r{split}{i:04d}" for i in range(n)])
            if name == LABEL:
                frame["label"] = np.where(y, "default", "repaid") if labels is None else labels(n)
            path = folder / f"{name}_{split}.csv"
            frame.iloc[rng.permutation(n)].to_csv(path, index=False)
            paths[(name, split)] = path
    return paths


def dataset(paths, split="train"):
    """The CSVs as the estimator's VerticalDataset, rows in the order of their ids (as ``same-ids`` aligns them)."""
    frames = {name: pd.read_csv(paths[(name, split)], dtype={"id": str}).sort_values("id").reset_index(drop=True)
              for name in NAMES}
    if split != "train":
        frames[LABEL] = frames[LABEL].drop(columns="label")
    return VerticalDataset(frames, label="label" if split == "train" else None, id_column="id")


def estimator(training):
    values = dict(training)
    kind = VerticalGradientBoostingRegressor if values.pop("loss") == "squared_error" else \
        VerticalGradientBoostingClassifier
    return kind(max_iter=values.pop("iterations"), **values)


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """Makes a folder's certificates, tables and federation.toml; runs ``vfl party``/``vfl predict`` there."""
    root = tmp_path_factory.mktemp("one-run")
    tls = write_federation_certs(root / "certs", NAMES)

    def make(name, n_rows=200, labels=None, training=None):
        folder = root / name
        folder.mkdir()
        paths = write_tables(folder, n_rows, labels)
        parties = {n: {"role": role, "address": f"127.0.0.1:{port}", "certificate": tls[n].certificate,
                       "key": tls[n].key} for (n, role), port in zip(ROLES.items(), _free_ports(len(ROLES)))}
        config = write_config(folder / "federation.toml", tls[LABEL].ca, parties,
                              {"model": "gradient_boosting", **(training or TRAINING)},
                              {"connect_timeout": 30, "timeout": 30}, align="same-ids")
        return folder, paths, config

    def run(command, folder, paths, config):
        parties = start_parties(command, config, paths, folder / "work", roles=NAMES, coordinator=None)
        try:
            return {name: p.finish(180) for name, p in parties.items()}
        finally:
            for p in parties.values():
                p.kill()

    return make, run


def shard(folder, name):
    return json.loads((folder / "work" / name / f"model_{name}.json").read_text())


def test_vfl_party_and_the_estimator_train_the_same_trees_and_score_the_same(federation):
    make, run = federation
    folder, paths, config = make("model")
    results = run("party", folder, paths, config)
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"
    model = estimator(TRAINING).fit(dataset(paths))

    label = shard(folder, LABEL)
    trained = model._parties[LABEL].state()
    assert label["trees"] == json.loads(json.dumps(trained["trees"]))      # shapes, owners, values, gains, splits
    assert len(label["trees"]) == model.n_iter_ == label["n_iter"] == TRAINING["iterations"]
    assert label["baseline"] == trained["baseline"] and label["loss"] == trained["loss"]
    assert label["classes"] == model.classes_.tolist() == ["default", "repaid"]
    assert label["validation_scores"] == model.validation_score_.tolist()
    assert len(label["validation_scores"]) == TRAINING["iterations"]
    for name in NAMES:
        party = model._parties[name]
        assert shard(folder, name)["binning"] == json.loads(json.dumps(party.binner.to_dict())), name
        if name != LABEL:
            assert shard(folder, name)["trees"] == party.state()["trees"], name
            assert shard(folder, name)["trees"], f"{name} holds no split: the test would compare nothing"

    results = run("predict", folder, paths, config)
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"
    scores = pd.read_csv(folder / "work" / LABEL / "scores.csv", dtype={"id": str}).sort_values("id")
    expected = model.decision_function(dataset(paths, "test"))
    np.testing.assert_allclose(scores["score"].to_numpy(), expected, rtol=0, atol=1e-12)
    assert scores["score"].std() > 0


def _estimator_error(paths, training):
    with pytest.raises(Exception) as caught:
        estimator(training).fit(dataset(paths))
    return caught.value


BAD_TABLES = {
    "too few rows": dict(n_rows=12, training=TRAINING,
                         message="party bank: 12 rows, fewer than the 14 a split needs (min_samples_leaf=7 on "
                                 "each side): every tree would be a single leaf"),
    "one class": dict(n_rows=60, labels=lambda n: ["repaid"] * n, training=TRAINING,
                      message="party bank: the label column holds one class only"),
    "targets not numbers": dict(n_rows=60, training=dict(TRAINING, loss="squared_error"),
                                message="party bank: the label column holds values that are not numbers"),
}


@pytest.mark.parametrize("case", list(BAD_TABLES))
def test_the_same_bad_table_is_refused_with_the_same_error_on_both_paths(federation, case):
    bad = dict(BAD_TABLES[case])
    training = dict(bad.pop("training"), **({"min_samples_leaf": 7} if case == "too few rows" else {}))
    make, run = federation
    folder, paths, config = make(case.replace(" ", "-"), bad["n_rows"], bad.get("labels"), training)
    error = _estimator_error(paths, training)
    assert type(error) is DataError and str(error).startswith(bad["message"]), repr(error)

    results = run("party", folder, paths, config)
    code, out, err = results[LABEL]
    assert code == 2, err                                  # bad input, as DataError and ConfigurationError
    assert f"vfl party {LABEL}: error: {error}" in err.splitlines()
    for name in FEATURES:
        code, out, err = results[name]
        assert code != 0 and f"party {LABEL} stopped on an error in its data (DataError)" in err, f"{name}: {err}"
