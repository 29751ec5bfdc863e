"""Conjugate gradient on the quadratic objective, split the way the weights are split.

The objective of both models is a quadratic in the weights ``w`` (all parties'
weights and the intercept), ``L(w) = L(w_t) + g_t . (w - w_t) + 1/2 (w - w_t)^T H (w - w_t)``
with ``H = (2a / n) X^T S X + alpha P`` (``S`` the row weights, ``P`` the penalised
coordinates).  Conjugate gradient with an exact line search minimises it in at most
as many steps as there are weights, each step needing one product ``H p``::

    p_0 = -g_0
    eta_t = gamma_t / (p_t^T H p_t)                      gamma_t = ||g_t||^2
    w_{t+1} = w_t + eta_t p_t,   g_{t+1} = g_t + eta_t H p_t
    p_{t+1} = -g_{t+1} + (gamma_{t+1} / gamma_t) p_t
    L(w_{t+1}) = L(w_t) - eta_t gamma_t + eta_t^2 (p_t^T H p_t) / 2

(``g_t . p_t = -gamma_t`` because each line search is exact.)  Every vector is a
concatenation of the parties' blocks, and every update above is block by block:
a party holds its blocks of ``w``, ``g``, ``p`` and ``H p`` and nothing else.  The
scalars are sums over the parties, which the coordinator learns:
``gamma_t`` and ``p_t^T H p_t``; it answers with ``eta_t`` and ``beta_t``.

:class:`Directions` is one party's state; the functions below are the coordinator's
arithmetic.  :func:`vfl.centralized.fit_gradient_descent` runs the same code on
the pooled vector, so the federated run equals it up to the fixed-point precision.
"""

from __future__ import annotations

import numpy as np


class Directions:
    """One party's blocks of the gradient ``g`` and the search direction ``p``."""

    def __init__(self, gradient=None, direction=None):
        self.gradient = None if gradient is None else np.asarray(gradient, dtype=np.float64)
        self.direction = None if direction is None else np.asarray(direction, dtype=np.float64)

    @property
    def started(self) -> bool:
        return self.gradient is not None

    def begin(self, gradient) -> None:
        """The first gradient: the first direction is steepest descent."""
        self.gradient = np.asarray(gradient, dtype=np.float64)
        self.direction = -self.gradient

    def norm_part(self) -> float:
        """This party's share of ``gamma = ||g||^2``."""
        return float(self.gradient @ self.gradient)

    def step(self, params: np.ndarray, eta: float, curvature) -> np.ndarray:
        """Move along ``p`` by ``eta``; the gradient follows by ``eta H p`` (``curvature`` is this block of ``H p``)."""
        self.gradient = self.gradient + eta * np.asarray(curvature, dtype=np.float64)
        return params + eta * self.direction

    def turn(self, beta: float) -> None:
        """The next direction, conjugate to the previous ones: ``-g + beta p``."""
        self.direction = -self.gradient + beta * self.direction

    def state(self) -> dict:
        return {"gradient": self.gradient.tolist(), "direction": self.direction.tolist()} if self.started else {}

    @classmethod
    def from_state(cls, state: dict | None) -> "Directions":
        state = state or {}
        return cls(state.get("gradient"), state.get("direction"))


def step_size(gamma: float, curvature: float) -> float:
    """``eta = gamma / p^T H p``: the exact minimiser along ``p`` (0 along a direction without curvature)."""
    return gamma / curvature if curvature > 0 else 0.0


def next_loss(loss: float, gamma: float, eta: float, curvature: float) -> float:
    """The objective after the step, from the scalars alone (the objective is quadratic)."""
    return loss - eta * gamma + 0.5 * eta * eta * curvature


def conjugacy(gamma_next: float, gamma: float) -> float:
    """``beta = gamma_{t+1} / gamma_t`` (Fletcher-Reeves; equal to Polak-Ribiere under exact line searches)."""
    return gamma_next / gamma if gamma > 0 else 0.0


def converged(gamma: float, gamma_first: float, tol: float | None, curvature: float) -> bool:
    """Stop when ``||g||`` has fallen to ``tol ||g_0||``, or no direction is left (zero gradient or curvature)."""
    if gamma <= 0 or curvature <= 0:
        return True
    return tol is not None and gamma <= tol * tol * gamma_first
