"""Lossless: federated boosting grows the trees of boosting on the pooled bins, split for split.

Every test fits a federated model (real Paillier, in-process parties) and the
pooled reference (:func:`vfl.centralized.trees.fit_boosting`) on the same
bins and settings, then compares every tree: its shape, the party owning each
split, the split itself (the feature party's own record of it against the
reference's column, bin and missing-value direction) and the leaf values.
"""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from tree_data import make_tree_data, opted_in
from vfl.centralized.trees import fit_boosting
from vfl.ensemble import VerticalGradientBoostingClassifier, VerticalGradientBoostingRegressor

FAST = dict(key_bits=1024, insecure=True)


def pooled(model, y, n_classes=None):
    """The reference on the federated parties' own bins, in the data parties' order."""
    names = model._roster.data_parties
    parties = [model._parties[n] for n in names]
    label = model._parties[model.label_party_]
    seed = model._seed_
    return fit_boosting([p.codes for p in parties], [p.binner for p in parties], label.y, model._settings(),
                        n_classes, seed)


def assert_same_trees(model, reference):
    label = model._parties[model.label_party_]
    names = model._roster.data_parties
    expected = [t for iteration in reference.trees for t in iteration]
    splits = [s for iteration in reference.splits for s in iteration]
    assert len(label.trees) == len(expected) == model.n_iter_ * model.n_trees_per_iteration_
    for index, (entry, tree, split_of) in enumerate(zip(label.trees, expected, splits)):
        fed = entry["tree"]
        assert np.array_equal(fed.left, tree.left) and np.array_equal(fed.right, tree.right), f"tree {index} shape"
        assert np.array_equal(fed.owner, tree.owner), f"tree {index} owners"
        np.testing.assert_array_equal(fed.value, tree.value, err_msg=f"tree {index} leaf values")
        for node, (party, feature, bin_, missing_left) in split_of.items():
            name = names[party]
            if name == model.label_party_:
                assert entry["splits"][node] == (feature, bin_, missing_left)
            else:
                record = next(t for t in model._parties[name].trees if t["index"] == index)
                assert record["splits"][node] == (feature, bin_, missing_left), f"tree {index} node {node}"
                assert entry["foreign"][node] == feature


@pytest.mark.parametrize("hide", [False, True], ids=["standard", "hidden-membership"])
def test_binary_two_parties_with_missing_values(hide):
    data, y = make_tree_data(240, seed=1)
    model = VerticalGradientBoostingClassifier(max_iter=4, learning_rate=0.3, min_samples_leaf=5,
                                               early_stopping=False, hide_membership=hide, **FAST,
                                               **opted_in(data)).fit(data)     # a1 is coded: A opts in
    reference = pooled(model, y, 2)
    assert_same_trees(model, reference)
    np.testing.assert_array_equal(model.decision_function(data), reference.raw[:, 0])
    assert {model._roster.data_parties[o] for t in model.trees_ for o in t.owner[t.owner >= 0]} == {"A", "B"}


@pytest.mark.parametrize("hide", [False, True], ids=["standard", "hidden-membership"])
def test_multiclass_three_parties_best_first(hide):
    data, y = make_tree_data(240, parties=("A", "C", "B"), columns=2, task="multiclass", seed=2)
    model = VerticalGradientBoostingClassifier(max_iter=2, max_leaf_nodes=5, max_depth=None, min_samples_leaf=8,
                                               label_party_trees=0, early_stopping=False, hide_membership=hide,
                                               **FAST, **opted_in(data)).fit(data)     # coded columns: opt in
    assert model.n_trees_per_iteration_ == 3 and list(model.classes_) == [0, 1, 2]
    reference = pooled(model, y, 3)
    assert_same_trees(model, reference)
    assert max(len(t.leaves) for t in model.trees_) == 5
    np.testing.assert_allclose(model.predict_proba(data).sum(axis=1), 1.0)


@pytest.mark.parametrize("hide", [False, True], ids=["standard", "hidden-membership"])
def test_regression_with_l2_and_min_child_weight(hide):
    data, y = make_tree_data(200, parties=("A", "C", "B"), task="regression", seed=3)
    model = VerticalGradientBoostingRegressor(max_iter=3, max_depth=4, l2_regularization=1.5, min_child_weight=2.0,
                                              min_samples_leaf=4, learning_rate=0.5, early_stopping=False,
                                              hide_membership=hide, **FAST, **opted_in(data)).fit(data)   # opt in
    reference = pooled(model, y)
    assert_same_trees(model, reference)
    np.testing.assert_array_equal(model.predict(data), reference.raw[:, 0])
    assert model.score(data) > 0.5


def test_early_stopping_holds_out_the_same_rows_and_stops_at_the_same_iteration():
    data, y = make_tree_data(300, seed=4)
    model = VerticalGradientBoostingClassifier(max_iter=30, learning_rate=0.5, max_depth=2, early_stopping=True,
                                               n_iter_no_change=2, validation_fraction=0.3, random_state=7,
                                               **FAST).fit(data)
    reference = pooled(model, y, 2)
    assert model.n_iter_ < 30 and model.n_iter_ == reference.n_iter
    np.testing.assert_allclose(model.validation_score_, reference.validation_scores)
    assert_same_trees(model, reference)


def test_label_party_trees_use_only_the_label_party_columns():
    data, y = make_tree_data(200, seed=5)
    model = VerticalGradientBoostingClassifier(max_iter=3, label_party_trees=2, early_stopping=False,
                                               **FAST).fit(data)
    assert_same_trees(model, pooled(model, y, 2))
    label = model._roster.data_parties.index("B")
    for tree in model.trees_[:2]:
        assert set(tree.owner[tree.owner >= 0].tolist()) <= {label}
    assert [t["index"] for t in model._parties["A"].trees] == [2]      # A took part in the third tree only


def test_auc_within_0002_of_xgboost_hist_on_the_same_bins():
    """The same bins (each party's codes as XGBoost features), depth, learning rate and regularization."""
    import xgboost as xgb          # in the test extra: a reference, not optional
    data, y = make_tree_data(600, seed=6, missing=0.05)
    settings = dict(max_iter=10, learning_rate=0.3, max_depth=3)
    model = VerticalGradientBoostingClassifier(min_samples_leaf=1, min_child_weight=1.0, l2_regularization=1.0,
                                               label_party_trees=0, early_stopping=False, **settings,
                                               **FAST, **opted_in(data)).fit(data)     # a1 is coded: opt in
    codes = np.hstack([model._parties[n].codes.astype(float) for n in model._roster.data_parties])
    codes[codes == model._parties["A"].binner.missing_code] = np.nan
    booster = xgb.train({"objective": "binary:logistic", "tree_method": "hist", "max_bin": 256,
                         "max_depth": 3, "eta": 0.3, "lambda": 1.0, "min_child_weight": 1.0,
                         "base_score": float(1 / (1 + np.exp(-model.baseline_[0])))},
                        xgb.DMatrix(codes, label=y), num_boost_round=10)
    ours = roc_auc_score(y, model.decision_function(data))
    theirs = roc_auc_score(y, booster.predict(xgb.DMatrix(codes), output_margin=True))
    assert abs(ours - theirs) <= 0.002, (ours, theirs)


@pytest.mark.parametrize("hide", [False, True], ids=["standard", "hidden-membership"])
def test_gradients_split_over_many_messages_give_the_same_trees(monkeypatch, hide):
    """A million rows' ciphertexts do not fit one frame: they travel in parts (here of 50), checked in order."""
    from vfl.protocols.trees import training

    monkeypatch.setattr(training, "PART", 50)
    data, y = make_tree_data(180, seed=8)
    model = VerticalGradientBoostingClassifier(max_iter=2, label_party_trees=0, early_stopping=False,
                                               hide_membership=hide, **FAST, **opted_in(data)).fit(data)   # opt in
    assert_same_trees(model, pooled(model, y, 2))
    parts = model.transcript_.to_frame()
    assert (parts["name"] == ("round_gradients" if hide else "gradients")).sum() >= 2 * 4


@pytest.mark.parametrize("min_samples_leaf, travel", [(1, False), (4, False), (5, True)])
def test_hidden_membership_sends_no_row_counts_when_min_child_weight_implies_them(monkeypatch, min_samples_leaf,
                                                                                 travel):
    """Log loss (h <= 1/4) with min_child_weight 1: a valid child has 4 rows at least, so with min_samples_leaf <= 4
    the count slot does not travel (2 slots per node, not 3) and the trees are still the pooled ones."""
    from vfl.parties.trees.label_party import ForeignSums

    columns = []
    original = ForeignSums.__init__

    def spy(self, count):
        columns.append(count)
        original(self, count)

    monkeypatch.setattr(ForeignSums, "__init__", spy)
    data, y = make_tree_data(240, seed=11, missing=0.05)
    model = VerticalGradientBoostingClassifier(max_iter=2, max_depth=4, learning_rate=0.3,
                                               min_samples_leaf=min_samples_leaf, min_child_weight=1.0,
                                               l2_regularization=0.1, label_party_trees=0, early_stopping=False,
                                               hide_membership=True, **FAST).fit(data)
    assert_same_trees(model, pooled(model, y, 2))
    assert columns and set(columns) == {3 if travel else 2}          # (G, H, N) or (G, H) per candidate


@pytest.mark.parametrize("hide", [False, True], ids=["standard", "hidden-membership"])
def test_small_nodes_with_extreme_gradients_stay_exact(hide):
    """Lanes sized by the bounds, not by the data: three outliers whose gradients sit near the loss's bound (the
    target scale is set by them), isolated in nodes of a row or two (min_samples_leaf 1, depth 6), every other
    gradient tiny; every sum decodes exactly, so the trees are the pooled ones, leaf values bit for bit."""
    import pandas as pd

    from vfl import VerticalDataset

    rng = np.random.default_rng(12)
    x = rng.normal(size=(160, 4))
    y = 10 * x[:, 0] - 5 * (x[:, 2] > 0) + rng.normal(size=160)
    y[[3, 50, 51]] = [1e6, -1e6, 9.9e5]
    ids = np.arange(160)
    frames = {"A": pd.DataFrame({"id": ids, "a0": x[:, 0], "a1": x[:, 1]}),
              "B": pd.DataFrame({"id": ids, "b0": x[:, 2], "b1": x[:, 3], "y": y})}
    data = VerticalDataset(frames, label="y", id_column="id")
    model = VerticalGradientBoostingRegressor(max_iter=2, max_depth=6, min_samples_leaf=1, min_child_weight=0.0,
                                              learning_rate=1.0, early_stopping=False, label_party_trees=0,
                                              hide_membership=hide, **FAST, **opted_in(data)).fit(data)   # opt in
    reference = pooled(model, y)
    assert_same_trees(model, reference)
    np.testing.assert_array_equal(model.predict(data), reference.raw[:, 0])
    assert abs(model.predict(data)[3] - 1e6) < 1e5              # the outlier got a leaf of its own (or nearly)
