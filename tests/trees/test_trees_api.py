"""The boosting estimators as a scikit-learn user meets them: parameters, fitted attributes, clear errors."""

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from tree_data import make_tree_data, opted_in
from vfl import ConfigurationError, DataError, NotFittedError, VerticalDataset
from vfl.ensemble import VerticalGradientBoostingClassifier, VerticalGradientBoostingRegressor

FAST = dict(key_bits=1024, insecure=True, early_stopping=False)


@pytest.fixture(scope="module")
def fitted():
    data, y = make_tree_data(160, seed=11)
    # the coded column a1 decodes from A's split sides: A opts in (tree_data.opted_in)
    return (VerticalGradientBoostingClassifier(max_iter=3, min_samples_leaf=5, **FAST, **opted_in(data)).fit(data),
            data, y)


def test_parameters_follow_scikit_learn(fitted):
    model, _, _ = fitted
    params = model.get_params()
    for name in ("max_iter", "learning_rate", "max_depth", "max_leaf_nodes", "max_bins", "l2_regularization",
                 "min_samples_leaf", "min_child_weight", "early_stopping", "random_state", "hide_membership"):
        assert name in params
    copy = clone(model).set_params(max_iter=7)
    assert copy.max_iter == 7 and not hasattr(copy, "n_iter_")


def test_fitted_attributes(fitted):
    model, data, y = fitted
    assert model.n_iter_ == 3 and model.n_trees_per_iteration_ == 1 and len(model.trees_) == 3
    assert model.label_party_ == "B" and model.feature_parties_ == ("A",)
    importances = model.feature_importances_
    assert set(importances) == {"A", "B"} and [len(v) for v in importances.values()] == [3, 3]
    assert sum(v.sum() for v in importances.values()) == pytest.approx(1.0)
    assert importances["A"][0] > 0                  # A's first column drives the target
    proba = model.predict_proba(data)
    assert proba.shape == (160, 2) and np.allclose(proba.sum(axis=1), 1)
    assert model.score(data) > 0.8 and len(model.transcript_.records) > 0


def test_string_classes_and_missing_values_at_prediction():
    data, y = make_tree_data(160, seed=12)
    frames = {p: pd.DataFrame(data.features(p), columns=data.columns(p)) for p in data.parties}
    frames["B"]["y"] = np.where(y == 1, "default", "repaid")
    model = VerticalGradientBoostingClassifier(max_iter=2, **FAST).fit(VerticalDataset(frames, label="y"))
    assert list(model.classes_) == ["default", "repaid"]
    new = {p: f.drop(columns="y", errors="ignore").iloc[:5].copy() for p, f in frames.items()}
    new["A"].iloc[:, :] = np.nan                                 # every value of A missing: default directions
    assert set(model.predict(VerticalDataset(new))) <= {"default", "repaid"}


def test_regression_scores_r2():
    data, y = make_tree_data(160, task="regression", seed=13)
    model = VerticalGradientBoostingRegressor(max_iter=5, learning_rate=0.5, **FAST, **opted_in(data)).fit(data)
    assert model.predict(data).shape == (160,) and model.score(data) > 0.5


def test_errors_name_the_problem(fitted):
    model, data, _ = fitted
    with pytest.raises(NotFittedError, match="not fitted"):
        VerticalGradientBoostingClassifier().predict(data)
    with pytest.raises(DataError, match=r"not scikit-learn's \(X, y\)"):
        VerticalGradientBoostingClassifier(**FAST).fit(np.zeros((3, 2)), np.zeros(3))
    frames = {p: pd.DataFrame(data.features(p), columns=data.columns(p)) for p in data.parties}
    renamed = dict(frames, A=frames["A"].rename(columns={"a0": "other"}))
    with pytest.raises(DataError, match=r"party A: prediction columns differ .*missing \['a0'\]"):
        model.predict(VerticalDataset(renamed))
    one_class = dict(frames, B=frames["B"].assign(y=1))
    with pytest.raises(DataError, match="party B: the label column holds one class only"):
        VerticalGradientBoostingClassifier(**FAST).fit(VerticalDataset(one_class, label="y"))
    words = dict(frames, B=frames["B"].assign(y=["x"] * 160))
    with pytest.raises(DataError, match="party B: the label column holds values that are not numbers"):
        VerticalGradientBoostingRegressor(**FAST).fit(VerticalDataset(words, label="y"))


@pytest.mark.parametrize("params, message", [
    (dict(max_bins=300), "max_bins must be an integer from 2 to 255"),
    (dict(learning_rate=0), r"learning_rate must be in \(0, 1\]"),
    (dict(max_depth=None), "set max_depth or max_leaf_nodes"),
    (dict(early_stopping="yes"), "early_stopping must be 'auto', True or False"),
    (dict(hide_membership="false"), "hide_membership must be True or False"),
    (dict(scoring="r2"), r"scoring for loss='log_loss' must be one of"),
    (dict(min_samples_leaf=0), "min_samples_leaf must be a positive integer"),
    (dict(key_bits=1024, insecure=False), "below the secure minimum of 2048"),
])
def test_bad_parameters_are_refused_before_any_work(params, message):
    data, _ = make_tree_data(40, seed=14)
    kwargs = {**FAST, **params}
    with pytest.raises(ConfigurationError, match=message):
        VerticalGradientBoostingClassifier(**kwargs).fit(data)


@pytest.mark.parametrize("hide", [False, True], ids=["standard", "hidden-membership"])
def test_a_feature_party_with_nothing_to_split_on_takes_part_all_the_same(hide):
    """A constant column and a column of missing values only: no candidate, yet the protocol runs its course."""
    rng = np.random.default_rng(15)
    b = pd.DataFrame({"x": rng.normal(size=120)})
    b["y"] = (b["x"] > 0).astype(int)
    a = pd.DataFrame({"constant": np.ones(120), "empty": np.full(120, np.nan)})
    data = VerticalDataset({"A": a, "B": b}, label="y")
    model = VerticalGradientBoostingClassifier(max_iter=2, label_party_trees=0, hide_membership=hide,
                                               **FAST).fit(data)
    assert all(set(t.owner[t.owner >= 0].tolist()) == {1} for t in model.trees_)     # every split is B's
    assert model.score(data) > 0.95


@pytest.mark.parametrize("fraction,message", [
    (0.99, r"holds out 59 of the 60 rows for early stopping and leaves 1 to train on, not the 40 a tree needs"),
    (0.01, r"holds out 1 of the 60 rows for early stopping, too few to score"),
])
def test_a_validation_split_leaving_too_few_rows_is_refused_as_the_linear_models_do(fraction, message):
    data, _ = make_tree_data(60, seed=11)
    model = VerticalGradientBoostingClassifier(max_iter=2, key_bits=1024, insecure=True, early_stopping=True,
                                               validation_fraction=fraction)
    with pytest.raises(ConfigurationError, match=message):
        model.fit(data)
