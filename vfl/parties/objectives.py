"""The two objectives as quadratics in the score ``z``, so HE can evaluate them.

Each per-sample loss is ``l(z, y) = a z^2 + b y z + c(y)``:

* linear regression, ``l = (z - y)^2 / 2``: ``a = 1/2``, ``b = -1``, ``c(y) = y^2 / 2``;
* logistic regression with labels in {-1, +1}, the second-order Taylor expansion
  of ``log(1 + exp(-y z))`` at 0 (Hardy et al. 2017),
  ``l = log 2 - y z / 2 + z^2 / 8``: ``a = 1/8``, ``b = -1/2``, ``c(y) = log 2``.

With ``z = u_A + u_B`` everything the protocol needs follows from ``a`` and ``b``:

* ``dl/dz = 2a (z - kappa y)`` with ``kappa = -b / 2a``; B forms the residual
  ``[[d]] = [[u_A]] + (u_B - kappa y)`` and the gradients are ``2a X^T d / n``;
* ``sum_i l_i = a sum u_A^2 + sum_i u_A,i (2a u_B,i + b y_i) + sum_i (a u_B,i^2 + b y_i u_B,i + c(y_i))``:
  the first sum is A's, the middle one is ``[[u_A]]`` dotted with B's plaintext,
  the last is B's alone.

The objective minimised is ``(1/n) sum_i l_i + (alpha / 2) ||w||^2`` (intercept
not penalised), by plain gradient descent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Objective:
    """A loss ``a z^2 + b y z + c(y)`` per sample."""

    name: str
    a: float
    b: float
    c_constant: float = 0.0      # c(y) = c_constant + c_square * y^2
    c_square: float = 0.0

    @property
    def grad_scale(self) -> float:
        """``2a``: the gradient of the loss in ``z`` is ``grad_scale * (z - kappa * y)``."""
        return 2.0 * self.a

    @property
    def kappa(self) -> float:
        """The label's coefficient in the residual ``d = z - kappa * y``."""
        return -self.b / (2.0 * self.a)

    def c(self, y: np.ndarray) -> np.ndarray:
        return self.c_constant + self.c_square * np.square(y)

    def loss(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per-sample loss."""
        return self.a * z * z + self.b * y * z + self.c(y)

    def residual(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``d = z - kappa y``, so that ``dl/dz = grad_scale * d``."""
        return z - self.kappa * y

    def curvature(self) -> "Objective":
        """``a z^2`` alone: the loss's second-order part, with no label term.

        At the scores ``q = X p`` of a direction ``p`` its residual is ``q`` itself, its
        gradient ``2a X^T q / n`` is the data part of ``H p``, and its loss ``a ||q||^2``
        (plus the penalty at ``p``) is ``n p^T H p / 2``.
        """
        return Objective(f"{self.name} curvature", a=self.a, b=0.0)


LINEAR = Objective("linear", a=0.5, b=-1.0, c_square=0.5)
LOGISTIC = Objective("logistic", a=0.125, b=-0.5, c_constant=math.log(2.0))
OBJECTIVES = {o.name: o for o in (LINEAR, LOGISTIC)}


def get_objective(name: str) -> Objective:
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise ValueError(f"unknown objective {name!r}; known: {sorted(OBJECTIVES)}") from None
