"""The federated split network equals the pooled one (vfl.centralized.mlp.fit_mlp), and refuses bad input.

Every role's run (vfl.runs.mlp, the one the estimators use) is started from given weights; the
pooled network gets the same start and the same batches (rebuilt from the run's seed), and the
two are compared epoch by epoch (the loss curve) and weight by weight at the end.  The only
difference allowed is the shared backward pass's fixed point (2^-40 per product).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import vfl
from vfl.centralized.mlp import fit_mlp
from vfl.errors import ConfigurationError, DataError, DivergenceError
from vfl.parties.mlp import initial_network
from vfl.parties.scaling import Standardizer
from vfl.protocols import Roster
from vfl.protocols.mlp import MLPSettings
from vfl.protocols.mlp.settings import batches
from vfl.runs import mlp as run
from vfl.runs.data import RoleData
from vfl.runs.threads import run_in_threads


def _data(n=400, widths=(4, 3), task="binary", seed=0):
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=(n, w)) for w in widths]
    signal = sum(x[:, 0] for x in xs) + 0.5 * rng.normal(size=n)
    if task == "binary":
        y = (signal > 0).astype(int)
    elif task == "multiclass":
        y = np.digitize(signal, [-0.7, 0.7])
    else:
        y = signal
    return xs, y


def _federated_and_pooled(xs, y, settings, names, label_columns=True):
    """Train both; ``names``: the data parties, label party last (it holds ``xs[-1]`` if ``label_columns``)."""
    roster = Roster(tuple(names[:-1]), names[-1], "C")
    widths = [x.shape[1] for x in xs]
    holders = names if label_columns else names[:-1]
    bottoms = [settings.bottom_of(n, x.shape[1], feature=n != names[-1]) for n, x in zip(holders, xs)]
    n_out = 1 if settings.task != "multiclass" else len(np.unique(y))
    start = initial_network(widths, bottoms, settings.hidden_layer_sizes, n_out, settings.activation)
    starts = {n: (start.bottoms[i], start.blocks[i]) for i, n in enumerate(names[:-1])}
    own = (start.bottoms[-1], start.blocks[-1]) if label_columns else ([], None)
    starts[names[-1]] = (*own, start.bias, start.top)
    data = {n: RoleData([f"{n}{j}" for j in range(x.shape[1])], x) for n, x in zip(names[:-1], xs)}
    label_x = xs[-1] if label_columns else np.zeros((len(y), 0))
    data[names[-1]] = RoleData([f"{names[-1]}{j}" for j in range(label_x.shape[1])], label_x, labels=y)
    results = run_in_threads(roster, run.training_programs(data, settings, roster, starts=starts))
    record = results[names[-1]].record
    seed, n = record["seed"], len(y)
    size = settings.effective_batch(n)
    # the pooled network on each party's columns as that party scaled them (standardize, its own)
    scaled = [Standardizer.fit(x, n, list(range(x.shape[1]))).apply(x) if settings.standardize and x.shape[1] else x
              for n, x in zip(holders, xs)]
    pooled = fit_mlp(scaled, y, start, task=settings.task, activation=settings.activation, solver=settings.solver,
                     alpha=settings.alpha, learning_rate_init=settings.learning_rate_init, max_iter=record["n_iter"],
                     momentum=settings.momentum, nesterovs_momentum=settings.nesterovs_momentum,
                     batches=lambda e: batches(n, size, seed, e, settings.shuffle))
    return results, record, pooled


def _assert_equal(results, record, pooled, names, label_columns=True, tol=1e-8):
    np.testing.assert_allclose(record["loss_curve"], pooled["loss_curve"], rtol=0, atol=tol)
    net = pooled["network"]
    for i, name in enumerate(names[:-1]):
        party = results[name].party
        np.testing.assert_allclose(party.block, net.blocks[i], atol=tol)
        for (w, b), (w2, b2) in zip(party.bottom, net.bottoms[i]):
            np.testing.assert_allclose(w, w2, atol=tol)
            np.testing.assert_allclose(b, b2, atol=tol)
    label = results[names[-1]].party
    if label_columns:
        np.testing.assert_allclose(label.block, net.blocks[-1], atol=tol)
    np.testing.assert_allclose(label.bias, net.bias, atol=tol)
    for (w, b), (w2, b2) in zip(label.top, net.top):
        np.testing.assert_allclose(w, w2, atol=tol)
        np.testing.assert_allclose(b, b2, atol=tol)


def test_two_parties_with_bottoms_equal_the_pooled_network_epoch_by_epoch():
    xs, y = _data()
    settings = MLPSettings(task="binary", hidden_layer_sizes=(6, 4), bottom_sizes={"A": (5,), "B": (3,)},
                           activation="tanh", batch_size=80, max_iter=4, alpha=0.01, tol=0.0,
                           learning_rate_init=0.01)
    results, record, pooled = _federated_and_pooled(xs, y, settings, ["A", "B"])
    assert record["n_iter"] == 4
    _assert_equal(results, record, pooled, ["A", "B"])


def test_three_feature_parties_masked_and_a_label_party_with_no_column_equal_the_pooled_network():
    xs, y = _data(n=450, widths=(3, 2, 4), task="multiclass")
    settings = MLPSettings(task="multiclass", hidden_layer_sizes=(5,), bottom_sizes={"A1": (4, 3), "A3": (2,)},
                           activation="relu", solver="sgd", momentum=0.8, batch_size=90, max_iter=3, alpha=0.001,
                           tol=0.0, learning_rate_init=0.05)
    names = ["A1", "A2", "A3", "B"]
    results, record, pooled = _federated_and_pooled(xs, y, settings, names, label_columns=False)
    _assert_equal(results, record, pooled, names, label_columns=False)


@pytest.mark.parametrize("activation", ["logistic", "identity"])
def test_regression_with_a_two_layer_bottom_equals_the_pooled_network(activation):
    xs, y = _data(n=300, widths=(3, 2), task="regression")
    settings = MLPSettings(task="regression", hidden_layer_sizes=(4, 3), default_bottom=(4, 3),
                           activation=activation, batch_size=60, max_iter=3, alpha=0.0, tol=0.0, shuffle=False,
                           learning_rate_init=0.01)
    results, record, pooled = _federated_and_pooled(xs, y, settings, ["A", "B"])
    _assert_equal(results, record, pooled, ["A", "B"])


def test_every_party_draws_its_own_secret_start_so_two_fits_differ():
    xs, y = _data(n=300)
    frames = {"A": pd.DataFrame(xs[0], columns=list("abcd")),
              "B": pd.DataFrame(xs[1], columns=list("efg")).assign(y=y)}
    data = vfl.VerticalDataset(frames, label="y")
    fits = [vfl.VerticalMLPClassifier((4,), max_iter=1, batch_size=60, random_state=3, verbose=False).fit(data)
            for _ in range(2)]
    assert not np.allclose(fits[0].network_.blocks[0], fits[1].network_.blocks[0])


def test_early_stopping_keeps_the_best_epoch_and_scores_it_on_the_validation_rows():
    xs, y = _data(n=500)
    frames = {"A": pd.DataFrame(xs[0], columns=list("abcd")),
              "B": pd.DataFrame(xs[1], columns=list("efg")).assign(y=y)}
    data = vfl.VerticalDataset(frames, label="y")
    # A's 4 columns through a bottom of 2 over many epochs: its release check would refuse (tests/mlp/
    # test_mlp_release.py); here the subject is early stopping, so A opts in
    model = vfl.VerticalMLPClassifier((6,), max_iter=60, batch_size=50, learning_rate_init=0.05, early_stopping=True,
                                      n_iter_no_change=3, random_state=11, verbose=False,
                                      allow_reconstruction=["A"]).fit(data)
    assert model.n_iter_ < 60
    assert len(model.validation_scores_) == model.n_iter_
    assert model.best_validation_score_ == max(model.validation_scores_)
    from vfl.protocols.mlp.training import schedule, validation_count

    settings = model._settings_
    _, val = schedule(500, settings, 11, validation_count(500, settings))
    net = model.network_
    from vfl.centralized.mlp import predict

    kept = predict(net, [xs[0][val], xs[1][val]], "relu", "binary")
    # the federated score is of fixed-point outputs, this one of floats: a row on the boundary may fall either side
    # (one of 50 seen once in many runs)
    assert np.mean(kept == y[val]) == pytest.approx(model.best_validation_score_, abs=1.01 / len(val))


def test_the_estimator_reaches_scikit_learns_auc_on_breast_cancer():
    from sklearn.datasets import load_breast_cancer
    from sklearn.metrics import roc_auc_score
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    frames = {"A": pd.DataFrame(X[:, :20], columns=[f"a{i}" for i in range(20)]),
              "B": pd.DataFrame(X[:, 20:], columns=[f"b{i}" for i in range(10)]).assign(y=y)}
    data = vfl.VerticalDataset(frames, label="y")
    # scikit-learn's network: no bottom (A's 20 columns straight into the 8 units, a linear image of its rows
    # that A's release check measures: A opts in here)
    model = vfl.VerticalMLPClassifier((8,), max_iter=30, batch_size=64, learning_rate_init=0.01, tol=0,
                                      verbose=False, bottom_sizes=(), allow_reconstruction=["A"])
    with pytest.warns(Warning):
        model.fit(data)
    reference = MLPClassifier((8,), max_iter=30, batch_size=64, learning_rate_init=0.01, tol=0, random_state=0)
    with pytest.warns(Warning):
        reference.fit(X, y)
    auc = roc_auc_score(y, model.predict_proba(data)[:, 1])
    assert auc > roc_auc_score(y, reference.predict_proba(X)[:, 1]) - 0.01
    assert model.score(data) > 0.95
    assert list(model.classes_) == [0, 1]


# --------------------------------------------------------------------------------------------- bad input


def _frames(n=300, nan_at=None):
    xs, y = _data(n=n)
    a = pd.DataFrame(xs[0], columns=list("abcd"))
    if nan_at is not None:
        a.iloc[nan_at, 1] = np.nan
    return {"A": a, "B": pd.DataFrame(xs[1], columns=list("efg")).assign(y=y)}


def test_a_batch_so_small_that_gradients_would_give_the_rows_away_is_refused_naming_the_party():
    data = vfl.VerticalDataset(_frames(), label="y")
    with pytest.raises(DataError, match=r"party A: a batch of 10 rows .* use batch_size > "):
        vfl.VerticalMLPClassifier((4,), bottom_sizes=(8,), batch_size=10, verbose=False).fit(data)


def test_a_missing_value_is_refused_naming_party_column_and_row():
    data = vfl.VerticalDataset(_frames(nan_at=17), label="y")
    with pytest.raises(DataError, match=r"party A, column 'b': NaN at row 17"):
        vfl.VerticalMLPClassifier((4,), verbose=False).fit(data)


def test_a_diverging_fit_says_which_setting_to_change():
    data = vfl.VerticalDataset(_frames(), label="y")
    with pytest.raises(DivergenceError, match="learning_rate_init"):
        vfl.VerticalMLPRegressor((4,), activation="identity", solver="sgd", learning_rate_init=1e6, max_iter=50,
                                 batch_size=100, verbose=False).fit(data)


@pytest.mark.parametrize("params, message", [
    ({"solver": "lbfgs"}, "solver must be 'adam' or 'sgd'"),
    ({"hidden_layer_sizes": ()}, "interactive layer"),
    ({"bottom_sizes": {"Z": (3,)}}, r"bottom_sizes names \['Z'\]"),
    ({"activation": "softmax"}, "activation must be one of"),
    ({"batch_size": 0}, "batch_size must be"),
    ({"dp_epsilon": 1.0}, "both dp_epsilon and dp_delta"),
    ({"dp_epsilon": 1.0, "dp_delta": 1e-5, "early_stopping": True}, "set early_stopping=False"),
])
def test_bad_settings_are_refused_by_name(params, message):
    data = vfl.VerticalDataset(_frames(), label="y")
    with pytest.raises(ConfigurationError, match=message):
        vfl.VerticalMLPClassifier(**{"verbose": False, **params}).fit(data)


def test_prediction_columns_must_be_the_training_columns():
    data = vfl.VerticalDataset(_frames(), label="y")
    model = vfl.VerticalMLPClassifier((4,), max_iter=2, batch_size=100, verbose=False,
                                      allow_reconstruction=["A"])          # the subject: prediction's columns
    with pytest.warns(Warning):
        model.fit(data)
    frames = _frames()
    frames["A"] = frames["A"].rename(columns={"a": "z"})
    with pytest.raises(DataError, match="party A: prediction columns differ"):
        model.predict(vfl.VerticalDataset(frames, label="y"))


def test_a_resumed_run_equals_an_uninterrupted_one():
    """The label party fails after saving epoch 2 of 5 while the feature party saved epoch 3: the run resumes
    after epoch 2 (the last every party completed) and ends with the uninterrupted run's network."""
    import json

    xs, y = _data(n=300)
    settings = MLPSettings(task="binary", hidden_layer_sizes=(4, 3), default_bottom=(3,), activation="tanh",
                           batch_size=60, max_iter=5, tol=0.0, learning_rate_init=0.02, random_state=5,
                           early_stopping=True, validation_fraction=0.2)
    roster = Roster(("A",), "B", "C")
    start = initial_network([4, 3], [(3,), (3,)], (4, 3), 1, "tanh")
    starts = {"A": (start.bottoms[0], start.blocks[0]), "B": (start.bottoms[1], start.blocks[1], start.bias, start.top)}
    data = {"A": RoleData(list("abcd"), xs[0]), "B": RoleData(list("efg"), xs[1], labels=y)}
    whole = run_in_threads(roster, run.training_programs(data, settings, roster, starts=starts))
    saved = {"A": {}, "B": {}}

    def keep(name):
        def hook(epoch, state):
            if name == "B" and epoch == 3:
                raise RuntimeError("the label party's machine went down")
            saved[name][epoch] = json.loads(json.dumps(state))          # as a checkpoint file keeps it
        return hook

    with pytest.raises(Exception, match="went down"):
        run_in_threads(roster, run.training_programs(data, settings, roster, starts=starts,
                                                     on_steps={"A": keep("A"), "B": keep("B")}))
    assert max(saved["A"]) == 3 and max(saved["B"]) == 2
    resumed = run_in_threads(roster, run.training_programs(data, settings, roster, checkpoints=saved))
    np.testing.assert_allclose(resumed["B"].record["loss_curve"], whole["B"].record["loss_curve"], atol=1e-9)
    assert resumed["B"].record["validation_scores"] == whole["B"].record["validation_scores"]
    for name in ("A", "B"):
        for a, b in zip(resumed[name].party.parameters(), whole[name].party.parameters()):
            np.testing.assert_allclose(a, b, atol=1e-9)


def test_label_dp_spends_the_budget_asked_for_and_runs_every_epoch():
    data = vfl.VerticalDataset(_frames(), label="y")
    model = vfl.VerticalMLPClassifier((4,), max_iter=4, batch_size=60, tol=0.5, n_iter_no_change=1,
                                      allow_reconstruction=["A"],
                                      dp_epsilon=2.0, dp_delta=1e-5, verbose=False).fit(data)
    assert model.n_iter_ == 4                     # tol would have stopped it: with DP every epoch runs
    assert model.dp_spent_[0] == pytest.approx(2.0, rel=1e-3) and model.dp_spent_[1] == 1e-5
    assert model.dp_noise_std_ > 1.0
    frames = _frames()
    regression = vfl.VerticalDataset(frames, label="y")
    with pytest.raises(ConfigurationError, match="dp_label_bound"):
        vfl.VerticalMLPRegressor((4,), dp_epsilon=1.0, dp_delta=1e-5, verbose=False).fit(regression)


def test_mini_batches_without_label_dp_warn_of_the_leak_and_with_dp_do_not():
    import warnings

    from vfl.errors import LabelLeakWarning

    data = vfl.VerticalDataset(_frames(), label="y")
    with pytest.warns(LabelLeakWarning, match="dp_epsilon"):
        vfl.VerticalMLPClassifier((4,), max_iter=1, batch_size=60, verbose=False).fit(data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vfl.VerticalMLPClassifier((4,), max_iter=1, batch_size=60, dp_epsilon=4.0, dp_delta=1e-5,
                                  verbose=False).fit(data)
    assert not [w for w in caught if issubclass(w.category, LabelLeakWarning)]
