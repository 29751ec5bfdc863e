"""vfl's pooled reference equals scikit-learn's ``MLPClassifier`` / ``MLPRegressor`` from the same start.

How scikit-learn is started from given weights (the way that works, in
scikit-learn 1.3 to 1.9): build the estimator with ``warm_start=True``,
``shuffle=False``, ``max_iter=1`` (and ``solver``, ``batch_size``, ``alpha``,
...), ``fit`` it once to create ``coefs_`` / ``intercepts_`` of the right shapes
(a ``ConvergenceWarning``, ignored), overwrite both lists with copies of the
start, and ``fit`` again: with ``warm_start`` the weights are kept
(``_initialize`` is skipped) while a fresh optimizer is built (``incremental``
is False), so the second fit is one epoch from the start with zero momentum /
Adam moments, exactly as :func:`vfl.centralized.mlp.fit_mlp` starts.  Its
``loss_curve_[-1]`` is that epoch's loss.  (``partial_fit`` would instead keep
the first fit's optimizer state.)  For more epochs, ``max_iter`` of the second
fit is the number of epochs (``n_iter_no_change`` is set huge, so no early stop).

With every bottom empty the split network is scikit-learn's network: the
interactive layer's blocks stacked are ``coefs_[0]``, its bias
``intercepts_[0]``, the top stack the remaining layers.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier, MLPRegressor

from vfl.centralized.mlp import fit_mlp, predict, predict_proba, sklearn_batches
from vfl.parties.mlp import SplitNetwork
from vfl.parties.mlp.activations import HIDDEN

SPLIT = [0, 2, 5, 6]      # three parties' columns: [0, 2), [2, 5), [5, 6)
TOLERANCE = 1e-10


def _data(task, seed=0, n_rows=61):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, SPLIT[-1]))
    if task == "binary":
        y = np.where(x[:, 0] - x[:, 3] + 0.3 * rng.normal(size=n_rows) > 0, "yes", "no")
    elif task == "multiclass":
        y = np.digitize(x[:, 1] + x[:, 4], [-0.5, 0.5])
    elif task == "regression":
        y = x @ rng.normal(size=SPLIT[-1]) + 0.1 * rng.normal(size=n_rows)
    else:                                   # two regression outputs
        y = np.column_stack([x[:, 0] - x[:, 5], x[:, 2] * x[:, 3]])
    return x, y


def _sklearn(task, x, y, start_seed, epochs, sample_weight=None, **settings):
    """scikit-learn's estimator fitted ``epochs`` epochs from a start of its shape (see the module docstring)."""
    estimator = (MLPRegressor if task.startswith("regression") else MLPClassifier)(
        warm_start=True, shuffle=False, max_iter=1, tol=0.0, n_iter_no_change=10 ** 6, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        estimator.fit(x, y)
        rng = np.random.default_rng(start_seed)
        coefs = [c + rng.normal(scale=0.3, size=c.shape) for c in estimator.coefs_]
        intercepts = [b + rng.normal(scale=0.3, size=b.shape) for b in estimator.intercepts_]
        estimator.coefs_, estimator.intercepts_ = [c.copy() for c in coefs], [b.copy() for b in intercepts]
        estimator.max_iter = epochs
        estimator.fit(x, y, sample_weight=sample_weight)
    start = SplitNetwork([[] for _ in SPLIT[1:]], [coefs[0][a:b] for a, b in zip(SPLIT[:-1], SPLIT[1:])],
                         intercepts[0], list(zip(coefs[1:], intercepts[1:])))
    return estimator, start


def _parts(x):
    return [x[:, a:b] for a, b in zip(SPLIT[:-1], SPLIT[1:])]


def _assert_same_network(net, estimator):
    assert np.abs(np.vstack(net.blocks) - estimator.coefs_[0]).max() < TOLERANCE
    assert np.abs(net.bias - estimator.intercepts_[0]).max() < TOLERANCE
    for (w, b), c, i in zip(net.top, estimator.coefs_[1:], estimator.intercepts_[1:]):
        assert np.abs(w - c).max() < TOLERANCE and np.abs(b - i).max() < TOLERANCE


@pytest.mark.parametrize("solver", ["sgd", "adam"])
@pytest.mark.parametrize("task, sk_task", [("binary", "binary"), ("multiclass", "multiclass"),
                                           ("regression", "regression"), ("regression", "regression2")])
@pytest.mark.parametrize("activation", HIDDEN)
def test_one_epoch_equals_scikit_learn_from_the_same_start(activation, task, sk_task, solver):
    x, y = _data(sk_task)
    settings = dict(hidden_layer_sizes=(4, 3), activation=activation, solver=solver, alpha=0.2, batch_size=16,
                    learning_rate_init=0.05)
    estimator, start = _sklearn(sk_task, x, y, start_seed=1, epochs=1, **settings)
    settings.pop("hidden_layer_sizes")
    fitted = fit_mlp(_parts(x), y, start, task=task, max_iter=1, **settings)
    _assert_same_network(fitted["network"], estimator)
    assert abs(fitted["loss_curve"][0] - estimator.loss_curve_[-1]) < TOLERANCE


@pytest.mark.parametrize("solver, options", [("sgd", dict(nesterovs_momentum=False, momentum=0.5)),
                                             ("sgd", dict(momentum=0.0)),
                                             ("adam", dict(beta_1=0.5, beta_2=0.9, epsilon=1e-4))])
def test_several_epochs_with_sample_weights_and_every_optimizer_setting_equal_scikit_learn(solver, options):
    x, y = _data("multiclass", seed=3)
    weights = np.random.default_rng(4).uniform(0.5, 2.0, size=len(y))
    settings = dict(hidden_layer_sizes=(5,), activation="tanh", solver=solver, alpha=0.05, batch_size=20,
                    learning_rate_init=0.03, **options)
    estimator, start = _sklearn("multiclass", x, y, start_seed=5, epochs=4, sample_weight=weights, **settings)
    settings.pop("hidden_layer_sizes")
    fitted = fit_mlp(_parts(x), y, start, task="multiclass", max_iter=4, sample_weight=weights, **settings)
    _assert_same_network(fitted["network"], estimator)
    np.testing.assert_allclose(fitted["loss_curve"], estimator.loss_curve_[1:], rtol=0, atol=TOLERANCE)


def test_no_hidden_layer_makes_the_interactive_layer_the_output_layer_as_in_scikit_learn():
    x, y = _data("binary", seed=6)
    estimator, start = _sklearn("binary", x, y, start_seed=7, epochs=2, hidden_layer_sizes=(), solver="adam",
                                alpha=0.1, batch_size=25, learning_rate_init=0.1)
    assert start.top == []
    fitted = fit_mlp(_parts(x), y, start, task="binary", max_iter=2, solver="adam", alpha=0.1, batch_size=25,
                     learning_rate_init=0.1)
    _assert_same_network(fitted["network"], estimator)


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_predictions_equal_scikit_learns(task):
    x, y = _data(task, seed=8)
    settings = dict(hidden_layer_sizes=(6, 2), activation="relu", solver="adam", alpha=0.01, batch_size=10)
    estimator, start = _sklearn(task, x, y, start_seed=9, epochs=3, **settings)
    settings.pop("hidden_layer_sizes")
    fitted = fit_mlp(_parts(x), y, start, task=task, max_iter=3, **settings)
    net = fitted["network"]
    if task == "regression":
        np.testing.assert_allclose(predict(net, _parts(x), "relu", task), estimator.predict(x), atol=TOLERANCE)
        return
    np.testing.assert_allclose(predict_proba(net, _parts(x), "relu", task), estimator.predict_proba(x),
                               atol=TOLERANCE)
    assert np.array_equal(predict(net, _parts(x), "relu", task, fitted["classes"]), estimator.predict(x))


def test_given_batches_replace_scikit_learns_and_change_the_result():
    """``batches(epoch)`` sets the rows of every step: scikit-learn's own order gives its result, another order
    (the rows reversed) another."""
    x, y = _data("binary", seed=10)
    estimator, start = _sklearn("binary", x, y, start_seed=11, epochs=2, hidden_layer_sizes=(3,), solver="sgd",
                                batch_size=8, learning_rate_init=0.1)
    common = dict(task="binary", max_iter=2, solver="sgd", batch_size=8, learning_rate_init=0.1)
    ours = fit_mlp(_parts(x), y, start, batches=lambda epoch: sklearn_batches(len(y), 8), **common)
    _assert_same_network(ours["network"], estimator)
    reversed_rows = fit_mlp(_parts(x), y, start, batches=lambda epoch: [r[::-1] for r in
                                                                        sklearn_batches(len(y), 8)[::-1]], **common)
    assert np.abs(reversed_rows["network"].blocks[0] - ours["network"].blocks[0]).max() > 1e-6


def test_a_fit_that_ends_no_better_than_a_constant_says_so():
    """Columns in units 10^4 apart and no scaling: the network learns nothing and the fit warns, naming the fix; the
    same data standardized (the default) learns and does not warn."""
    import warnings

    import pandas as pd

    from vfl import VerticalDataset
    from vfl.errors import NoBetterThanChanceWarning
    from vfl.neural_network import VerticalMLPClassifier

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 4))
    y = (x[:, 0] + x[:, 2] > 0).astype(int)
    a = pd.DataFrame({"id": range(200), "a0": x[:, 0] * 1e4, "a1": x[:, 1] * 1e4})
    b = pd.DataFrame({"id": range(200), "b0": x[:, 2], "b1": x[:, 3], "y": y})
    data = VerticalDataset({"A": a, "B": b}, label="y", id_column="id")
    fit = dict(max_iter=15, random_state=0, allow_reconstruction=["A"], verbose=False)
    with pytest.warns(NoBetterThanChanceWarning, match="no better than a constant prediction .*standardize=True"):
        VerticalMLPClassifier(standardize=False, **fit).fit(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoBetterThanChanceWarning)
        VerticalMLPClassifier(**fit).fit(data)
