"""Plain gradient descent on pooled data, on exactly the federated objective.

The reference the federated protocol must equal (up to fixed-point precision),
and the "centralized" baseline of comparisons.  Same loss, same penalty, same
batch schedule, same stopping rule.
"""

from __future__ import annotations

import numpy as np

from vfl.parties.objectives import get_objective
from vfl.protocols.settings import TrainingSettings, batches


def fit_gradient_descent(x, y, settings: TrainingSettings, seed: int | None = None) -> dict:
    """Gradient descent from zero on ``(1/n) sum l(z_i, y_i) + (alpha/2) ||w||^2``.

    Parameters
    ----------
    x : array of shape (n_rows, n_features)
    y : array of shape (n_rows,)
        Real targets, or -1/+1 labels for the logistic objective.
    settings : TrainingSettings
    seed : int, optional
        Batch-order seed; defaults to ``settings.random_state`` (needed for mini-batches).

    Returns
    -------
    dict with ``coef``, ``intercept``, ``loss_curve`` (per epoch) and ``n_iter``.
    """
    objective = get_objective(settings.objective)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n_rows, n_features = x.shape
    seed = settings.random_state if seed is None else seed
    if settings.batch_size is not None and settings.batch_size < n_rows and seed is None:
        raise ValueError("mini-batch training needs a seed (settings.random_state) for the batch order")
    w, b = np.zeros(n_features), 0.0
    loss_curve: list[float] = []
    for epoch in range(settings.max_iter):
        losses, sizes = [], []
        for rows in batches(n_rows, settings.batch_size, seed or 0, epoch):
            xb, yb = x[rows], y[rows]
            z = xb @ w + b
            losses.append(float(np.mean(objective.loss(z, yb))) + 0.5 * settings.alpha * float(w @ w))
            sizes.append(len(rows))
            dz = objective.grad_scale * objective.residual(z, yb) / len(rows)
            grad_w = xb.T @ dz + settings.alpha * w
            grad_b = float(dz.sum()) if settings.fit_intercept else 0.0
            w, b = w - settings.learning_rate * grad_w, b - settings.learning_rate * grad_b
        loss_curve.append(float(np.average(losses, weights=sizes)))
        if settings.tol is not None and len(loss_curve) > 1 and abs(loss_curve[-2] - loss_curve[-1]) < settings.tol:
            break
    return {"coef": w, "intercept": b, "loss_curve": loss_curve, "n_iter": len(loss_curve)}
