"""Conjugate gradient on the quadratic objective, split the way the weights are split.

The objective of both models is a quadratic in the weights ``w`` (all parties'
weights and the intercept), ``L(w) = L(w_t) + g_t . (w - w_t) + 1/2 (w - w_t)^T H (w - w_t)``
with ``H = (2a / n) X^T S X + alpha P`` (``S`` the row weights, ``P`` the penalised
coordinates).  Conjugate directions with exact line searches minimise it in at
most as many steps as there are weights, each step needing one product ``H p``::

    p_0 = -g_0
    eta_t = -(g_t . p_t) / (p_t^T H p_t)
    w_{t+1} = w_t + eta_t p_t,   g_{t+1} = g_t + eta_t H p_t
    p_{t+1} = -g_{t+1} + sum_{i <= t} beta_i p_i,   beta_i = (g_{t+1} . H p_i) / (p_i^T H p_i)
    L(w_{t+1}) = L(w_t) + eta_t (g_t . p_t) + eta_t^2 (p_t^T H p_t) / 2

In exact arithmetic every ``beta_i`` but the last is zero and this is the
conjugate gradient method.  The passes round to ``2^-frac_bits``, though, and
plain CG, which conjugates only against the last direction, amplifies that
rounding step by step until its directions are no longer conjugate and it
crawls; conjugating against every earlier direction (the products ``H p_i`` are
kept) holds it to the optimum in about as many steps as there are weights.  For
the same reason the pass runs at the *probe* ``s_t p_t``, with ``s_t = sqrt(gamma_0 /
gamma_t)`` (``gamma = ||g||^2``) from the coordinator: as large as the first direction,
so that the fixed-point scores of a shrinking ``p`` keep their precision; and the
sums the coordinator decrypts are of the probes and of ``s_t g``, which keep the
size of the first step's (it divides the scales out).

Every vector is a concatenation of the parties' blocks, and every update above
is block by block: a party holds its blocks of ``w``, ``g``, the ``p_i`` and ``H p_i``
and nothing else.  The scalars are sums over the parties, which the coordinator
learns: ``p_t^T H p_t`` from the pass, then ``||g||^2``, ``g . H p_i`` and ``g . p_i``
(:meth:`Directions.sums`); it answers with ``eta``, the ``beta``'s and ``s``.

:class:`Directions` is one party's state; the functions below are the coordinator's
arithmetic.  :func:`vfl.centralized.fit_gradient_descent` runs the same code on
the pooled vector, so the federated run equals it up to the fixed-point precision.
"""

from __future__ import annotations

import numpy as np


class Directions:
    """One party's blocks of the gradient ``g``, the direction ``p``, and the earlier ``p_i`` and ``H p_i``."""

    def __init__(self, gradient=None, direction=None, scale: float = 1.0, past=(), products=(), scales=()):
        self.gradient = None if gradient is None else np.asarray(gradient, dtype=np.float64)
        self.direction = None if direction is None else np.asarray(direction, dtype=np.float64)
        #: ``s_t``: the pass runs at the probe ``s_t p_t`` (see the module)
        self.scale = float(scale)
        #: the earlier directions ``p_i`` and this party's blocks of ``H p_i``
        self.past = [np.asarray(p, dtype=np.float64) for p in past]
        self.products = [np.asarray(q, dtype=np.float64) for q in products]
        #: the probe scale each earlier direction was probed at
        self.scales = [float(v) for v in scales]

    @property
    def started(self) -> bool:
        return self.gradient is not None

    def begin(self, gradient) -> None:
        """The first gradient: the first direction is steepest descent."""
        self.gradient = np.asarray(gradient, dtype=np.float64)
        self.direction = -self.gradient

    def probe(self) -> np.ndarray:
        """Where the pass for ``H p`` runs: ``s p`` (see the module)."""
        return self.scale * self.direction

    def step(self, params: np.ndarray, eta: float, probed) -> np.ndarray:
        """Move along ``p`` by ``eta``; the gradient follows by ``eta H p``; ``p`` and ``H p`` are kept.

        ``probed`` is this party's block of ``H (s p)``, from the pass at the probe.
        """
        product = np.asarray(probed, dtype=np.float64) / self.scale
        self.past.append(self.direction)
        self.products.append(product)
        self.scales.append(self.scale)
        self.gradient = self.gradient + eta * product
        return params + eta * self.direction

    def sums(self) -> np.ndarray:
        """This party's shares of ``||g||^2``, of ``g . H p_i`` and of ``g . p_i`` for every earlier direction.

        Of ``s g`` and the probes ``s_i p_i``, in fact, so that every share keeps the size of
        the first step's in fixed point: :func:`conjugation` divides the scales out.
        """
        g = self.scale * self.gradient
        return np.concatenate([[g @ g], [s * (g @ q) for s, q in zip(self.scales, self.products)],
                               [s * (g @ p) for s, p in zip(self.scales, self.past)]])

    def turn(self, betas, scale: float) -> None:
        """The next direction, conjugate to every earlier one: ``-g + sum_i beta_i p_i``; the next probe scale."""
        direction = -self.gradient
        for beta, past in zip(betas, self.past):
            direction = direction + beta * past
        self.direction, self.scale = direction, float(scale)

    def state(self) -> dict:
        if not self.started:
            return {}
        return {"gradient": self.gradient.tolist(), "direction": self.direction.tolist(), "scale": self.scale,
                "past": [p.tolist() for p in self.past], "products": [q.tolist() for q in self.products],
                "scales": list(self.scales)}

    @classmethod
    def from_state(cls, state: dict | None) -> "Directions":
        state = state or {}
        return cls(state.get("gradient"), state.get("direction"), state.get("scale", 1.0), state.get("past", ()),
                   state.get("products", ()), state.get("scales", ()))


def step_size(slope: float, curvature: float) -> float:
    """``eta = -(g . p) / p^T H p``: the exact minimiser along ``p`` (0 along a direction without curvature)."""
    return -slope / curvature if curvature > 0 else 0.0


def next_loss(loss: float, slope: float, eta: float, curvature: float) -> float:
    """The objective after the step, from the scalars alone (the objective is quadratic)."""
    return loss + eta * slope + 0.5 * eta * eta * curvature


def conjugation(sums, curvatures, scale: float, scales) -> tuple[float, np.ndarray, float]:
    """From the summed :meth:`Directions.sums` and every ``p_i^T H p_i``: ``gamma``, the ``beta``'s, ``g . p_next``.

    ``scale`` is the probe scale the sums were taken at, ``scales`` each earlier
    direction's.  ``beta_i = (g . H p_i) / (p_i^T H p_i)`` makes the next direction
    conjugate to every ``p_i``, and its slope ``g . p_next = -gamma + sum_i beta_i (g . p_i)``
    gives the next step size without another message.
    """
    sums = np.asarray(sums, dtype=np.float64)
    t = len(curvatures)
    each = scale * np.asarray(scales, dtype=np.float64)
    gamma, along, slopes = float(sums[0]) / scale ** 2, sums[1:1 + t] / each, sums[1 + t:1 + 2 * t] / each
    c = np.asarray(curvatures, dtype=np.float64)
    betas = np.divide(along, c, out=np.zeros(t), where=c > 0)
    return gamma, betas, -gamma + float(betas @ slopes)


def probe_scale(gamma: float, gamma_first: float) -> float:
    """``s = sqrt(gamma_0 / gamma)``: the probe ``s p`` is as large as the first direction."""
    return float(np.sqrt(gamma_first / gamma)) if gamma > 0 and gamma_first > 0 else 1.0


def converged(gamma: float, gamma_first: float, tol: float | None, curvature: float) -> bool:
    """Stop when ``||g||`` has fallen to ``tol ||g_0||``, or no direction is left (zero gradient or curvature)."""
    if gamma <= 0 or curvature <= 0:
        return True
    return tol is not None and gamma <= tol * tol * gamma_first
