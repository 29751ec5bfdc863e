"""Party-level Shapley values of boosted trees: equal to a pooled brute-force computation, inside prediction."""

import itertools
from math import factorial

import numpy as np
import pandas as pd
import pytest

from vfl import ConfigurationError, VerticalDataset, VerticalGradientBoostingClassifier, VerticalGradientBoostingRegressor
from vfl import ensemble
from vfl.runs.threads import run_in_threads

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
KEYS = dict(key_bits=1024, insecure=True)


def data(n=300, seed=0, regression=False, missing=True):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6))
    z = x @ np.array([1.0, -1.0, 0.5, 2.0, -0.3, 0.7]) + 0.8 * x[:, 0] * x[:, 3]
    if missing:
        x[rng.random(n) < 0.1, 2] = np.nan
    y = z + 0.2 * rng.normal(size=n) if regression else (z + rng.normal(size=n) > 0).astype(int)
    return VerticalDataset({"bank": pd.DataFrame(x[:, :2], columns=["b0", "b1"]).assign(y=y),
                            "telco": pd.DataFrame(x[:, 2:4], columns=["t0", "t1"]),
                            "shop": pd.DataFrame(x[:, 4:], columns=["s0", "s1"])}, label="y"), x


def pooled_trees(model):
    """Every tree with every split on raw values (column of the pooled table, threshold, missing_left), as one
    data holder would see it: the pooled model the federated one equals."""
    parties = model._parties
    label = parties["bank"]
    features = list(model.feature_parties_)
    offset = {"bank": 0, "telco": 2, "shop": 4}
    raw = {}
    for k in features:
        for (tree, node, *_), split in zip(parties[k].own_splits(), parties[k].raw_splits()):
            raw[(tree, node)] = (offset[k] + split[0], split[1], split[2], k)
    out = []
    for i, entry in enumerate(label.trees):
        tree = entry["tree"]
        splits = {}
        for node in np.flatnonzero(tree.left >= 0):
            if int(tree.owner[node]) == len(features):
                feature, bin_, missing_left = entry["splits"][int(node)]
                thresholds = label.binner.thresholds_[feature]
                threshold = float(thresholds[bin_]) if bin_ < len(thresholds) else np.inf
                splits[int(node)] = (feature, threshold, missing_left, "bank")
            else:
                splits[int(node)] = raw[(i, int(node))]
        out.append((tree, splits))
    return out, label


def goes_left(split, row):
    column, threshold, missing_left, _ = split
    return missing_left if np.isnan(row[column]) else row[column] <= threshold


def brute_force(model, x, x_train):
    """Shapley values by every ordering of the parties; covers counted by routing the training rows afresh."""
    trees, label = pooled_trees(model)
    train = x_train[label.train_rows]
    players = ["bank", *model.feature_parties_]

    def counts(tree, splits):
        c = np.zeros(len(tree.left))
        for row in train:
            node = 0
            c[node] += 1
            while tree.left[node] >= 0:
                node = tree.left[node] if goes_left(splits[node], row) else tree.right[node]
                c[node] += 1
        return c

    covers = [counts(t, s) for t, s in trees]

    def value(row, present):
        total = float(label.baseline[0])
        for (tree, splits), c in zip(trees, covers):
            def walk(node):
                if tree.left[node] < 0:
                    return tree.value[node]
                l, r = tree.left[node], tree.right[node]
                if splits[node][3] in present:
                    return walk(l if goes_left(splits[node], row) else r)
                return (c[l] * walk(l) + c[r] * walk(r)) / c[node]
            total += walk(0)
        return total

    out = np.zeros((len(x), len(players)))
    for r, row in enumerate(x):
        for order in itertools.permutations(players):
            before = set()
            for p in order:
                out[r, players.index(p)] += value(row, before | {p}) - value(row, before)
                before.add(p)
    return out / factorial(len(players)), np.array([value(row, set()) for row in x])


@pytest.mark.parametrize("estimator", [VerticalGradientBoostingClassifier, VerticalGradientBoostingRegressor])
def test_party_shapley_values_equal_the_pooled_brute_force(estimator):
    regression = estimator is VerticalGradientBoostingRegressor
    d, x = data(regression=regression)
    model = estimator(max_iter=6, max_depth=3, allow_reconstruction=["telco", "shop"], **KEYS).fit(d)
    explained = model.explain(d)
    assert list(explained.columns) == ["bank", "telco", "shop", "base_value"]
    raw = model.decision_function(d) if not regression else model.predict(d)
    np.testing.assert_allclose(explained.sum(axis=1), raw, atol=1e-6)
    rows = np.arange(0, len(x), 7)
    expected, base = brute_force(model, x[rows], x)
    np.testing.assert_allclose(explained[["bank", "telco", "shop"]].to_numpy()[rows], expected, atol=1e-6)
    np.testing.assert_allclose(explained["base_value"].to_numpy()[rows], base, atol=1e-6)


def test_the_feature_parties_send_exactly_what_prediction_sends_and_are_checked(monkeypatch):
    d, _ = data()
    model = VerticalGradientBoostingClassifier(max_iter=4, max_depth=3, allow_reconstruction=["telco", "shop"],
                                               **KEYS).fit(d)
    seen = []

    def recording(roster, programs, transcript=None, n_jobs=None):
        return run_in_threads(roster, programs, transcript, n_jobs=n_jobs,
                              on_message=lambda direction, peer, message, size: seen.append(
                                  (direction, peer, message.name, sorted(message.fields), size)))
    monkeypatch.setattr(ensemble, "run_in_threads", recording)
    model.decision_function(d)
    predicted, seen[:] = list(seen), []
    model.explain(d)
    assert sorted(seen) == sorted(predicted)       # the same messages, fields and sizes: nothing more leaves
    assert {name for direction, peer, name, *_ in seen if direction == "->" and peer == "bank"} == {"leaf_masks"}


def test_sides_that_give_a_column_away_are_refused_unless_the_party_opts_in():
    rng = np.random.default_rng(2)
    flag = rng.integers(0, 2, 300).astype(float)
    x = rng.normal(size=(300, 2))
    d = VerticalDataset({"bank": pd.DataFrame(x, columns=["b0", "b1"]).assign(
        y=((x[:, 0] + 2 * flag + rng.normal(size=300)) > 1).astype(int)),
        "telco": pd.DataFrame({"flag": flag})}, label="y")
    model = VerticalGradientBoostingClassifier(max_iter=3, max_depth=2, **KEYS).fit(d)
    with pytest.raises(ConfigurationError, match="party telco: releasing the side of each of its splits.*'flag'"):
        model.explain(d)
    model.set_params(allow_reconstruction=["telco"])
    np.testing.assert_allclose(model.explain(d).sum(axis=1), model.decision_function(d), atol=1e-6)


def test_reasons_name_parties_and_a_multiclass_model_is_refused():
    d, _ = data()
    model = VerticalGradientBoostingClassifier(max_iter=4, max_depth=3, allow_reconstruction=["telco", "shop"],
                                               **KEYS).fit(d)
    explained = model.explain(d)
    reasons = model.predict_reasons(d, k=2)
    top = explained[["bank", "telco", "shop"]].to_numpy().argmax(axis=1)
    positive = explained[["bank", "telco", "shop"]].to_numpy().max(axis=1) > 0
    names = np.array(["information from bank", "information from telco", "information from shop"])
    assert (reasons["reason_1"].to_numpy()[positive] == names[top[positive]]).all()
    rng = np.random.default_rng(1)
    three = VerticalDataset({"bank": pd.DataFrame(rng.normal(size=(150, 2)), columns=["b0", "b1"]).assign(
        y=rng.integers(0, 3, 150)), "telco": pd.DataFrame(rng.normal(size=(150, 2)), columns=["t0", "t1"])}, label="y")
    multi = VerticalGradientBoostingClassifier(max_iter=2, max_depth=2, allow_reconstruction=["telco"],
                                               **KEYS).fit(three)
    with pytest.raises(ConfigurationError, match="one tree per iteration"):
        multi.explain(three)


def test_with_one_column_per_party_the_values_are_shap_s_path_dependent_tree_shap():
    shap = pytest.importorskip("shap")
    from vfl.parties.explain import node_counts

    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 3))
    x[rng.random(300) < 0.1, 1] = np.nan
    y = (x[:, 0] + np.nan_to_num(x[:, 1]) * x[:, 2] + rng.normal(size=300) > 0).astype(int)
    d = VerticalDataset({"bank": pd.DataFrame({"b": x[:, 0], "y": y}), "telco": pd.DataFrame({"t": x[:, 1]}),
                         "shop": pd.DataFrame({"s": x[:, 2]})}, label="y")
    model = VerticalGradientBoostingClassifier(max_iter=5, max_depth=3, allow_reconstruction=["telco", "shop"],
                                               **KEYS).fit(d)
    offset = {"bank": 0, "telco": 1, "shop": 2}
    parties, label = model._parties, model._parties["bank"]
    raw = {}
    for k in ("telco", "shop"):
        for (tree, node, *_), (_, threshold, missing_left) in zip(parties[k].own_splits(), parties[k].raw_splits()):
            raw[(tree, node)] = (offset[k], threshold, missing_left)
    trees = []
    for i, entry in enumerate(label.trees):
        tree = entry["tree"]
        n = len(tree.left)
        features, thresholds, default = np.zeros(n, int), np.zeros(n), np.full(n, -1)
        for node in np.flatnonzero(tree.left >= 0):
            if (i, int(node)) in raw:
                features[node], thresholds[node], missing_left = raw[(i, int(node))]
            else:
                feature, bin_, missing_left = entry["splits"][int(node)]
                edges = label.binner.thresholds_[feature]
                thresholds[node] = edges[bin_] if bin_ < len(edges) else np.inf
            default[node] = tree.left[node] if missing_left else tree.right[node]
        weight = node_counts(tree.left, tree.right, entry["counts"])
        values = np.where(tree.left < 0, tree.value, 0.0)
        for node in range(n - 1, -1, -1):
            if tree.left[node] >= 0:
                values[node] = (weight[tree.left[node]] * values[tree.left[node]]
                                + weight[tree.right[node]] * values[tree.right[node]]) / weight[node]
        trees.append({"children_left": tree.left, "children_right": tree.right, "children_default": default,
                      "features": features, "thresholds": thresholds, "values": values[:, None],
                      "node_sample_weight": weight})
    explainer = shap.TreeExplainer({"trees": trees, "base_offset": float(label.baseline[0])},
                                   feature_perturbation="tree_path_dependent")
    expected = explainer.shap_values(x)
    explained = model.explain(d)
    np.testing.assert_allclose(explained[["bank", "telco", "shop"]].to_numpy(), expected, atol=1e-6)
    np.testing.assert_allclose(explained["base_value"], np.ravel(explainer.expected_value)[0], atol=1e-6)


def test_the_label_party_s_shard_keeps_each_leaf_s_training_rows(tmp_path):
    from vfl.deploy.shards.trees import read_shard, shard_party, write_shard

    d, x = data(n=200)
    model = VerticalGradientBoostingClassifier(max_iter=3, max_depth=2, allow_reconstruction=["telco", "shop"],
                                               **KEYS).fit(d)
    label = model._parties["bank"]
    path = write_shard(tmp_path / "bank.json", label, "label", "fp", label="y", feature_parties=["telco", "shop"],
                       n_iter=3)
    loaded = shard_party(read_shard(path, "bank", "label"), x[:, :2], "bank")
    for saved, kept in zip(loaded.trees, label.trees):
        np.testing.assert_array_equal(saved["counts"], kept["counts"])
        assert saved["counts"].sum() == len(label.train_rows)
