"""Plain gradient descent on pooled data, on exactly the federated objective.

The reference the federated protocol must equal (up to fixed-point precision),
and the "centralized" baseline of comparisons.  Same loss, same penalty, same
batch schedule, same stopping rule, and — when given them — the same start and
the same differential-privacy noise.
"""

from __future__ import annotations

import math

import numpy as np

from vfl.crypto.randomness import uniform_floats
from vfl.errors import DivergenceError
from vfl.parties.linear import cg
from vfl.parties.objectives import get_objective
from vfl.parties.linear.optim import Optimizer, penalised_step
from vfl.parties.scoring import validation_score
from vfl.parties.holdout import validation_rows
from vfl.protocols.linear.settings import TrainingSettings, batch_sizes, batches
from vfl.protocols.linear.validation import Tracker
from vfl.protocols.linear.checks import diverged


def fit_gradient_descent(x, y, settings: TrainingSettings, seed: int | None = None, start=None,
                         noise=None, validation=None, sample_weight=None) -> dict:
    """Gradient descent, or conjugate gradient, on ``(1/n) sum l(z_i, y_i) + (alpha/2) ||w||^2``.

    ``settings.conjugate`` (``solver="cg"``, or ``"auto"`` where it applies) runs
    the parties' conjugate gradient (:mod:`vfl.parties.linear.cg`) on the pooled vector.

    Parameters
    ----------
    x : array of shape (n_rows, n_features)
    y : array of shape (n_rows,)
        Real targets, or -1/+1 labels for the logistic objective.
    settings : TrainingSettings
    seed : int, optional
        Batch-order seed; defaults to ``settings.random_state`` (needed for mini-batches).
    start : tuple (coef, intercept), optional
        Where to start.  By default zeros with ``settings.init == "zeros"``, else a
        random start of the same kind the parties draw (:func:`random_start`).  To
        reproduce a federated run, pass the parties' starts concatenated.
    noise : callable, optional
        With differential privacy: ``noise(n)`` returns the noise added to the
        residuals of a batch of ``n`` rows (the federated label party draws it from
        the CSPRNG; a test passes the same draws to both).  Linear labels are
        clipped to ``settings.dp_label_bound`` as the label party clips them.

    sample_weight : array of shape (n_rows,), optional
        Each row's weight in the loss (class weights included), as the label party
        holds them: the objective becomes ``(1/n) sum s_i l_i + penalty``.
    validation : tuple (x_val, y_val), optional
        With ``settings.early_stopping``: the validation rows; by default the rows
        :func:`~vfl.parties.holdout.validation_rows` holds out from the seed, as
        the parties do.

    Returns
    -------
    dict with ``coef``, ``intercept``, ``loss_curve`` (per epoch), ``n_iter``, and with
    early stopping ``validation_scores`` and ``best_epoch`` (whose weights are returned).

    Raises
    ------
    DivergenceError
        When the epoch losses diverge, by the coordinator's rule
        (:func:`vfl.protocols.linear.checks.diverged`).
    """
    objective = get_objective(settings.objective)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if settings.dp and settings.objective == "linear":
        y = np.clip(y, -settings.label_bound, settings.label_bound)
    seed = settings.random_state if seed is None else seed
    weights = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if settings.early_stopping and validation is None:
        if seed is None:
            raise ValueError("early stopping needs a seed (settings.random_state) to hold out validation rows")
        held = validation_rows(len(y), settings.validation_fraction, seed)
        validation = (x[held], y[held])
        x, y, weights = np.delete(x, held, axis=0), np.delete(y, held), np.delete(weights, held)
    n_rows, n_features = x.shape
    if settings.batch_size is not None and settings.batch_size < n_rows and seed is None:
        raise ValueError("mini-batch training needs a seed (settings.random_state) for the batch order")
    if start is None:
        start = random_start(x, y, settings) if settings.init == "random" else (np.zeros(n_features), 0.0)
    # weights, then the intercept: the parties' layout, so one optimizer runs over all of them
    params = np.append(np.array(start[0], dtype=np.float64), float(start[1]) if settings.fit_intercept else 0.0)
    penalised = np.append(np.ones(n_features), 0.0)
    penalty = settings.penalty_spec
    if settings.conjugate:
        return _conjugate_gradient(x, y, weights, params, penalised, settings, validation)
    optimizer = Optimizer(settings.optimizer, params.size, **settings.optimizer_hyper())
    per_epoch = len(batch_sizes(n_rows, settings.batch_size))
    tracker, snapshots = Tracker(settings), {}
    loss_curve: list[float] = []
    for epoch in range(settings.max_iter):
        losses, sizes = [], []
        for batch, rows in enumerate(batches(n_rows, settings.batch_size, seed or 0, epoch)):
            xb, yb, sb = x[rows], y[rows], weights[rows]
            z = xb @ params[:-1] + params[-1]
            losses.append(float(np.mean(sb * objective.loss(z, yb))) + penalty.value(params[:-1]))
            sizes.append(len(rows))
            residual = objective.residual(z, yb)
            if noise is not None:
                residual = residual + noise(len(rows))
            residual = sb * residual
            dz = objective.grad_scale * residual / len(rows)
            data_gradient = np.append(xb.T @ dz, float(dz.sum()) if settings.fit_intercept else 0.0)
            params, _ = penalised_step(optimizer, params, data_gradient, penalised, penalty,
                                       settings.step_size(epoch * per_epoch + batch + 1, epoch))
        loss_curve.append(float(np.average(losses, weights=sizes)))
        why = diverged(loss_curve, noisy=noise is not None)
        if why:
            raise DivergenceError(f"centralized training diverges: {why}")
        if settings.early_stopping:
            snapshots[epoch] = params.copy()
            z_val = validation[0] @ params[:-1] + params[-1]
            stop = tracker.add(epoch, validation_score(settings.scoring, objective, z_val, validation[1]))
            if stop or epoch + 1 >= settings.max_iter:
                params = snapshots[tracker.best_epoch]
                break
        elif settings.tol is not None and len(loss_curve) > 1 and abs(loss_curve[-2] - loss_curve[-1]) < settings.tol:
            break
    result = {"coef": params[:-1], "intercept": float(params[-1]), "loss_curve": loss_curve,
              "n_iter": len(loss_curve)}
    if settings.early_stopping:
        result.update(validation_scores=tracker.scores, best_epoch=tracker.best_epoch)
    return result


def _conjugate_gradient(x, y, weights, params, penalised, settings: TrainingSettings, validation) -> dict:
    """The parties' conjugate gradient (:mod:`vfl.protocols.linear.conjugate`) on pooled data, step for step."""
    objective = get_objective(settings.objective)
    alpha = settings.penalty_spec.alpha
    n_rows = len(y)
    design = np.hstack([x, np.ones((n_rows, 1))])
    if not settings.fit_intercept:
        penalised, design = penalised[:-1], x
        params = params[:-1]

    def gradient(at, labels):       # what a pass gives: 2a X^T S (X at - kappa y) / n (+ the penalty's gradient)
        z = design @ at
        return objective.grad_scale * design.T @ (weights * (z - labels)) / n_rows + alpha * penalised * at

    z = design @ params
    loss = float(np.mean(weights * objective.loss(z, y))) + settings.penalty_spec.value(params * penalised)
    directions = cg.Directions()
    directions.begin(gradient(params, objective.kappa * y))
    gamma_first = float(directions.sums()[0])
    slope, scale, curvatures, scales = -gamma_first, 1.0, [], []
    tracker, snapshots, loss_curve, converged = Tracker(settings), {}, [], False
    for epoch in range(settings.max_iter):
        probe = directions.probe()
        probed = gradient(probe, 0.0)                                   # H (s p)
        curvature = float(probe @ probed) / scale ** 2                  # p^T H p
        eta = cg.step_size(slope, curvature)
        params = directions.step(params, eta, probed)
        loss = cg.next_loss(loss, slope, eta, curvature)
        curvatures.append(curvature)
        scales.append(scale)
        gamma, betas, slope = cg.conjugation(directions.sums(), curvatures, scale, scales)
        scale = cg.probe_scale(gamma, gamma_first)
        directions.turn(betas, scale)
        loss_curve.append(loss)
        exhausted = cg.converged(gamma, gamma_first, None, curvature)
        if settings.early_stopping:
            snapshots[epoch] = params.copy()
            z_val = validation[0] @ params[:x.shape[1]] + (params[-1] if settings.fit_intercept else 0.0)
            converged = tracker.add(epoch, validation_score(settings.scoring, objective, z_val, validation[1]))
            if converged or exhausted or epoch + 1 >= settings.max_iter:
                params = snapshots[tracker.best_epoch]
                break
        else:
            converged = cg.converged(gamma, gamma_first, settings.tol, curvature)
            if converged or exhausted:
                break
    intercept = float(params[-1]) if settings.fit_intercept else 0.0
    result = {"coef": params[:x.shape[1]], "intercept": intercept, "loss_curve": loss_curve,
              "n_iter": len(loss_curve)}
    if settings.early_stopping:
        result.update(validation_scores=tracker.scores, best_epoch=tracker.best_epoch)
    return result


def random_start(x, y, settings: TrainingSettings) -> tuple[np.ndarray, float]:
    """A secret random start of the kind the parties draw, for pooled data (a baseline's start).

    Each weight uniform in ``[-a_j, a_j]``, ``a_j = 0.5 sqrt(3 / f) / rms_j``; the
    intercept uniform in ``[-kappa rms(y) / 2, kappa rms(y) / 2]`` — all from the CSPRNG.
    """
    x = np.asarray(x, dtype=np.float64)
    f = x.shape[1]
    rms = np.sqrt(np.mean(np.square(x), axis=0))
    coef = (2.0 * uniform_floats(f) - 1.0) * 0.5 * math.sqrt(3.0 / max(f, 1)) / np.where(rms > 0, rms, 1.0)
    scale = 0.5 * get_objective(settings.objective).kappa * (float(np.sqrt(np.mean(np.square(y)))) or 1.0)
    intercept = (2.0 * uniform_floats(1)[0] - 1.0) * scale if settings.fit_intercept else 0.0
    return coef, intercept
