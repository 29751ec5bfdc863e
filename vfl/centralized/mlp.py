"""The split network trained on the pooled table: the reference a federated network must equal.

:func:`fit_mlp` trains a :class:`~vfl.parties.mlp.SplitNetwork` (a bottom stack
per party, the interactive layer, the top stack; with every bottom empty, a
plain MLP on the parties' columns side by side) from the start it is given, on
the mini-batches it is given, with scikit-learn's losses, penalty and
optimizers.  With empty bottoms, ``shuffle=False`` batches and the same start it
equals scikit-learn's ``MLPClassifier`` / ``MLPRegressor`` epoch for epoch
(``tests/mlp/test_mlp_sklearn.py``).  It never draws a random number: the
start comes from :func:`vfl.parties.mlp.initial_network` or from the caller.
"""

from __future__ import annotations

import numpy as np

from vfl.errors import ConfigurationError
from vfl.parties.mlp.losses import check_task, targets
from vfl.parties.mlp.optim import make_optimizer
from vfl.parties.mlp.split import SplitNetwork
from vfl.parties.mlp.step import loss_and_gradients, output


def sklearn_batches(n_rows: int, batch_size: int) -> list[np.ndarray]:
    """One epoch's batches as scikit-learn makes them with ``shuffle=False``: consecutive rows, the last shorter."""
    size = int(np.clip(batch_size, 1, n_rows))
    return [np.arange(start, min(start + size, n_rows)) for start in range(0, n_rows, size)]


def fit_mlp(xs: list[np.ndarray], y: np.ndarray, start: SplitNetwork, *, task: str, activation: str = "relu",
            solver: str = "adam", alpha: float = 0.0001, batch_size: int = 200, learning_rate_init: float = 0.001,
            max_iter: int = 200, momentum: float = 0.9, nesterovs_momentum: bool = True, beta_1: float = 0.9,
            beta_2: float = 0.999, epsilon: float = 1e-8, batches=None, sample_weight=None) -> dict:
    """Train the split network on the pooled columns, from ``start``, epoch after epoch.

    Parameters
    ----------
    xs : list of ndarray
        Each party's columns, rows aligned (one array: a single party).
    y : ndarray
        Labels (``"binary"``, ``"multiclass"``) or targets (``"regression"``).
    start : SplitNetwork
        The initial weights (not changed).
    task : str
        ``"binary"``, ``"multiclass"`` or ``"regression"``.
    activation, solver, alpha, batch_size, learning_rate_init, max_iter, momentum, nesterovs_momentum, beta_1, \
beta_2, epsilon
        scikit-learn's names and meanings (``learning_rate="constant"``; no early stopping: ``max_iter`` epochs).
    batches : callable, optional
        ``batches(epoch)`` returns that epoch's list of row-index arrays; by default
        :func:`sklearn_batches` every epoch.
    sample_weight : ndarray, optional
        Each row's weight, as scikit-learn's ``fit(..., sample_weight)``.

    Returns
    -------
    dict with ``network`` (the fitted :class:`~vfl.parties.mlp.SplitNetwork`), ``loss_curve`` (per epoch,
    scikit-learn's ``loss_curve_``: the batches' losses weighted by their row counts) and ``classes``
    (None for regression).
    """
    xs = _parties(xs)
    n_rows = xs[0].shape[0]
    if any(x.shape[0] != n_rows for x in xs):
        raise ConfigurationError(f"the parties' columns have {[x.shape[0] for x in xs]} rows; they must be aligned")
    target, classes = targets(y, check_task(task))
    weights = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    params = [np.array(a, dtype=np.float64) for a in start.parameters()]
    net = start.with_parameters(params)
    optimizer = make_optimizer(solver, [a.shape for a in params], learning_rate_init=learning_rate_init,
                               momentum=momentum, nesterovs_momentum=nesterovs_momentum, beta_1=beta_1,
                               beta_2=beta_2, epsilon=epsilon)
    loss_curve = []
    for epoch in range(max_iter):
        total, rows_seen = 0.0, 0
        for rows in (batches(epoch) if batches is not None else sklearn_batches(n_rows, batch_size)):
            value, grads = loss_and_gradients(net, [x[rows] for x in xs], target[rows], activation, task, alpha,
                                              None if weights is None else weights[rows])
            total += value * len(rows)
            rows_seen += len(rows)
            net = net.with_parameters(optimizer.step(net.parameters(), grads.parameters()))
        loss_curve.append(total / rows_seen)
    return {"network": net, "loss_curve": loss_curve, "classes": classes}


def predict_proba(network: SplitNetwork, xs: list[np.ndarray], activation: str, task: str) -> np.ndarray:
    """Class probabilities (rows, classes): ``[1 - p, p]`` for binary, the softmax for multi-class."""
    if check_task(task) == "regression":
        raise ConfigurationError("predict_proba needs a classification task, got 'regression'")
    out = output(network, _parties(xs), activation, task)
    return np.column_stack([1 - out[:, 0], out[:, 0]]) if task == "binary" else out


def predict(network: SplitNetwork, xs: list[np.ndarray], activation: str, task: str, classes=None) -> np.ndarray:
    """Predicted classes (``classes[argmax]``; ``fit_mlp``'s ``classes``) or, for regression, the outputs."""
    if check_task(task) == "regression":
        out = output(network, _parties(xs), activation, task)
        return out[:, 0] if out.shape[1] == 1 else out
    proba = predict_proba(network, xs, activation, task)
    picked = proba.argmax(axis=1)
    return picked if classes is None else np.asarray(classes)[picked]


def _parties(xs) -> list[np.ndarray]:
    return [np.asarray(x, dtype=np.float64) for x in ([xs] if isinstance(xs, np.ndarray) else xs)]
