"""What every family's estimators do alike: one label check, score(data, y), pickling, checks before fit.

The linear models, the trees and the split networks share these by construction
(one function each in :mod:`vfl.parties.labels`, :mod:`vfl.dataset`,
:mod:`vfl.crypto.compute`); these tests hold each family to them.
"""

import copy
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest

from vfl import (ConfigurationError, DataError, NotFittedError, VerticalDataset, VerticalGradientBoostingClassifier,
                 VerticalGradientBoostingRegressor, VerticalLinearRegression, VerticalLogisticRegression,
                 VerticalMLPClassifier, VerticalMLPRegressor)

KEYS = dict(key_bits=1024, insecure=True)
CLASSIFIERS = {"logistic": lambda: VerticalLogisticRegression(max_iter=2, **KEYS),
               "trees": lambda: VerticalGradientBoostingClassifier(max_iter=2, max_depth=2, **KEYS),
               # A's 2 columns through a bottom of 1, over 2 epochs: two views that give them away; A opts in here
               "network": lambda: VerticalMLPClassifier(max_iter=2, random_state=0, allow_reconstruction=["A"])}
REGRESSORS = {"linear": lambda: VerticalLinearRegression(max_iter=2, **KEYS),
              "trees": lambda: VerticalGradientBoostingRegressor(max_iter=2, max_depth=2, **KEYS),
              "network": lambda: VerticalMLPRegressor(max_iter=2, random_state=0, allow_reconstruction=["A"])}


def data(labels, n=120, a=None):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4))
    frame_a = pd.DataFrame(x[:, :2], columns=["a0", "a1"]) if a is None else a
    frame_b = pd.DataFrame(x[:, 2:], columns=["b0", "b1"]).assign(y=labels(x) if callable(labels) else labels)
    return VerticalDataset({"A": frame_a, "B": frame_b}, label="y")


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("family", list(CLASSIFIERS))
@pytest.mark.parametrize("labels, words", [
    (lambda x: x.sum(axis=1), r"party B: .* needs class labels, but the label is a continuous target \(120 distinct"),
    (lambda x: pd.Series(["yes" if v > 0 else 1 for v in x[:, 0]], dtype=object),
     r"party B: the label mixes value types \(int, str\)"),
    (lambda x: np.ones(len(x), dtype=int), r"party B: the label column holds one class only \(1\)")],
    ids=["continuous", "mixed types", "one class"])
def test_every_classifier_checks_its_labels_alike(family, labels, words):
    with pytest.raises(DataError, match=words):
        CLASSIFIERS[family]().fit(data(labels))


@pytest.mark.parametrize("family", list(REGRESSORS))
def test_every_regressor_refuses_labels_that_are_not_numbers(family):
    with pytest.raises(DataError, match="party B: .*(not numbers|numeric label)"):
        REGRESSORS[family]().fit(data(lambda x: np.where(x[:, 0] > 0, "yes", "no")))


@pytest.mark.parametrize("family", list(CLASSIFIERS))
def test_score_takes_y_when_given_and_the_fit_pickles(family):
    fitted = data(lambda x: (x.sum(axis=1) > 0).astype(int))
    model = CLASSIFIERS[family]().fit(fitted)
    y = fitted.labels
    assert model.score(fitted, y) == model.score(fitted)
    assert model.score(fitted, 1 - y) == pytest.approx(1 - model.score(fitted))
    unlabelled = VerticalDataset({p: fitted._frame(p) for p in fitted.parties})
    assert model.score(unlabelled, y) == model.score(fitted)
    again, copied = pickle.loads(pickle.dumps(model)), copy.deepcopy(model)
    np.testing.assert_array_equal(again.predict_proba(fitted), model.predict_proba(fitted))
    np.testing.assert_array_equal(copied.predict_proba(fitted), model.predict_proba(fitted))


@pytest.mark.parametrize("family", list(CLASSIFIERS))
def test_predict_before_fit_is_not_fitted_in_every_family(family):
    with pytest.raises(NotFittedError):
        CLASSIFIERS[family]().predict(data(lambda x: (x[:, 0] > 0).astype(int)))


def test_a_party_with_no_column_is_refused_by_the_linear_models_naming_it():
    labels = lambda x: (x[:, 0] > 0).astype(int)                           # noqa: E731
    for frames, party in [(data(labels, a=pd.DataFrame(index=range(120))), "A")]:
        with pytest.raises(DataError, match=f"party {party}: no feature columns"):
            VerticalLogisticRegression(max_iter=2, **KEYS).fit(frames)
    only_label = data(labels)
    only_label = VerticalDataset({"A": only_label._frame("A"), "B": pd.DataFrame({"y": only_label.labels})}, label="y")
    with pytest.raises(DataError, match="party B: no feature columns"):
        VerticalLogisticRegression(max_iter=2, **KEYS).fit(only_label)


def test_a_missing_value_names_the_models_that_refuse_it():
    frame_a = pd.DataFrame({"a0": [0.1, np.nan] * 60, "a1": np.arange(120.0)})
    with pytest.raises(DataError, match="column 'a0': NaN at row 1.*neural networks need every value"):
        VerticalMLPClassifier(max_iter=1).fit(data(lambda x: (x[:, 0] > 0).astype(int), a=frame_a))


def test_column_names_equal_as_text_are_duplicates():
    frame_a = pd.DataFrame([[1.0, 2.0]] * 4, columns=[1, "1"])
    with pytest.raises(DataError, match=r"party A: duplicate column name\(s\) \['1'\]"):
        VerticalDataset({"A": frame_a, "B": pd.DataFrame({"b": [1.0] * 4, "y": [0, 1, 0, 1]})}, label="y")


@pytest.mark.parametrize("make", [lambda: VerticalGradientBoostingClassifier(engine=3, **KEYS),
                                  lambda: VerticalLogisticRegression(engine="nope", **KEYS)])
def test_an_engine_that_is_not_registered_is_refused(make):
    with pytest.raises(ConfigurationError, match="engine must be None or the name of a registered crypto engine"):
        make().fit(data(lambda x: (x[:, 0] > 0).astype(int)))


def test_intersect_takes_party_names_as_text():
    from vfl.psi import intersect

    a = pd.DataFrame({"id": [1, 2, 3, 4], "f": [1.0, 2.0, 3.0, 4.0]})
    b = pd.DataFrame({"id": [4, 3, 9], "y": [0, 1, 0]})
    aligned = intersect({0: a, 1: b}, "id", label="y")
    assert set(aligned) == {"0", "1"} and sorted(aligned["0"]["id"]) == ["3", "4"]
    with pytest.raises(DataError, match="two parties have the same name as text"):
        intersect({1: a, "1": b}, "id", label="y")


def test_each_estimator_says_whether_it_classifies_or_regresses_as_scikit_learn_asks():
    from sklearn.base import clone, is_classifier, is_regressor

    for make in CLASSIFIERS.values():
        assert is_classifier(make()) and not is_regressor(make()) and is_classifier(clone(make()))
    for make in REGRESSORS.values():
        assert is_regressor(make()) and not is_classifier(make())
