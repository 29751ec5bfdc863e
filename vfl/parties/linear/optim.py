"""How a party turns its gradient into new weights: optimizers, penalties, learning-rate schedules.

Pure arithmetic on numpy vectors, shared by the parties (each updates only its
own weights) and by the centralized reference (which updates all weights at
once).  Every rule here is *coordinate-wise*: the new value of a weight depends
only on that weight's own gradient history.  So a party running the rule on its
slice gives exactly the slice of the centralized run, and the coordinator never
needs to see a gradient (unlike FATE 2.x, whose arbiter runs the optimizer on
every plaintext gradient).

Optimizers (scikit-learn's MLP names and defaults where it has them):

* ``"sgd"``: ``w <- w - eta g``;
* ``"momentum"``: ``v <- mu v - eta g``, ``w <- w + v`` (``momentum=0.9``);
* ``"nesterov"``: as momentum, then ``w <- w + mu v - eta g`` (Sutskever et al.'s
  form, as scikit-learn's ``nesterovs_momentum``);
* ``"adagrad"``: ``G <- G + g^2``, ``w <- w - eta g / (sqrt(G) + eps)``;
* ``"rmsprop"``: ``S <- rho S + (1 - rho) g^2``, ``w <- w - eta g / (sqrt(S) + eps)`` (``rho=0.99``, as torch and FATE);
* ``"adam"``: Kingma & Ba with scikit-learn's defaults ``beta_1=0.9``,
  ``beta_2=0.999``, ``epsilon=1e-8`` and its bias correction folded into the rate:
  ``eta_t = eta sqrt(1 - beta_2^t) / (1 - beta_1^t)``, ``w <- w - eta_t m / (sqrt(v) + eps)``.

Penalties: ``alpha (l1_ratio ||w||_1 + (1 - l1_ratio) / 2 ||w||^2)`` (``"l2"``:
``l1_ratio = 0``; ``"l1"``: 1; ``"elasticnet"``: between; ``"none"``: ``alpha = 0``).
The L2 part enters the gradient; the L1 part is a proximal step after the
optimizer's: ``w <- sign(w) max(|w| - eta_t alpha l1_ratio, 0)`` (soft threshold),
which sets weights exactly to zero.  The intercept is never penalised.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

OPTIMIZERS = ("sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam")
PENALTIES = ("l2", "l1", "elasticnet", "none")
SCHEDULES = ("constant", "invscaling", "step")
#: Hyper-parameters of the optimizers, scikit-learn's MLP defaults where it has them.
DEFAULTS = {"momentum": 0.9, "rho": 0.99, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-8}


@dataclass(frozen=True)
class Penalty:
    """``alpha (l1_ratio ||w||_1 + (1 - l1_ratio) / 2 ||w||^2)``; the default ``Penalty(alpha)`` is today's L2."""

    alpha: float = 0.0
    l1_ratio: float = 0.0

    @classmethod
    def of(cls, penalty: str, alpha: float, l1_ratio: float) -> "Penalty":
        """From scikit-learn's parameters ``penalty``, ``alpha`` and ``l1_ratio``."""
        return cls(0.0 if penalty == "none" else float(alpha), l1_ratio_of(penalty, l1_ratio))

    def value(self, coef: np.ndarray) -> float:
        return penalty_value(coef, self.alpha, self.l1_ratio)


def l1_ratio_of(penalty: str, l1_ratio: float) -> float:
    """The share of the penalty that is L1: 0 for ``"l2"``, 1 for ``"l1"``, ``l1_ratio`` for elastic net."""
    return {"l2": 0.0, "l1": 1.0, "elasticnet": float(l1_ratio), "none": 0.0}[penalty]


def penalty_value(coef: np.ndarray, alpha: float, l1_ratio: float) -> float:
    """``alpha (l1_ratio ||w||_1 + (1 - l1_ratio) / 2 ||w||^2)`` of the (penalised) weights ``coef``."""
    with np.errstate(over="ignore", invalid="ignore"):
        return alpha * (l1_ratio * float(np.abs(coef).sum()) + 0.5 * (1.0 - l1_ratio) * float(coef @ coef))


def learning_rate(schedule: str, eta0: float, step: int, epoch: int, power_t: float = 0.5,
                  decay_rate: float = 0.5, decay_steps: int = 10) -> float:
    """The step size of gradient step ``step`` (counted from 1) in epoch ``epoch`` (from 0).

    ``"constant"``: ``eta0``; ``"invscaling"``: ``eta0 / step^power_t``; ``"step"``:
    ``eta0 decay_rate^floor(epoch / decay_steps)``.
    """
    if schedule == "constant":
        return eta0
    if schedule == "invscaling":
        return eta0 / math.pow(step, power_t)
    if schedule == "step":
        return eta0 * math.pow(decay_rate, epoch // decay_steps)
    raise ValueError(f"unknown learning-rate schedule {schedule!r}; known: {SCHEDULES}")


class Optimizer:
    """One party's optimizer: its state has the shape of the party's parameters.

    Parameters
    ----------
    name : str
        One of :data:`OPTIMIZERS`.
    size : int
        Number of parameters (weights, and the intercept if the party has one).
    **hyper
        Overrides of :data:`DEFAULTS`.
    """

    def __init__(self, name: str, size: int, **hyper):
        if name not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {name!r}; known: {OPTIMIZERS}")
        self.name = name
        self.hyper = {**DEFAULTS, **hyper}
        self.steps = 0
        self.first = np.zeros(size)     # momentum: velocity; adam: m; adagrad: G; rmsprop: S
        self.second = np.zeros(size)    # adam: v

    def update(self, params: np.ndarray, gradient: np.ndarray, eta: float) -> np.ndarray:
        """The parameters after one step of size ``eta`` along ``gradient`` (penalty's L2 part included)."""
        h = self.hyper
        self.steps += 1
        g = np.asarray(gradient, dtype=np.float64)
        if self.name == "sgd":
            return params - eta * g
        if self.name in ("momentum", "nesterov"):
            self.first = h["momentum"] * self.first - eta * g
            step = h["momentum"] * self.first - eta * g if self.name == "nesterov" else self.first
            return params + step
        if self.name == "adagrad":
            self.first = self.first + g * g
            return params - eta * g / (np.sqrt(self.first) + h["epsilon"])
        if self.name == "rmsprop":
            self.first = h["rho"] * self.first + (1.0 - h["rho"]) * g * g
            return params - eta * g / (np.sqrt(self.first) + h["epsilon"])
        # adam
        self.first = h["beta_1"] * self.first + (1.0 - h["beta_1"]) * g
        self.second = h["beta_2"] * self.second + (1.0 - h["beta_2"]) * g * g
        eta_t = eta * math.sqrt(1.0 - h["beta_2"] ** self.steps) / (1.0 - h["beta_1"] ** self.steps)
        return params - eta_t * self.first / (np.sqrt(self.second) + h["epsilon"])

    def state(self) -> dict:
        return {"steps": self.steps, "first": self.first.tolist(), "second": self.second.tolist()}

    def load_state(self, state: dict) -> None:
        first, second = np.asarray(state["first"], dtype=np.float64), np.asarray(state["second"], dtype=np.float64)
        if first.shape != self.first.shape or second.shape != self.second.shape:
            raise ValueError(f"saved optimizer state has {first.size} values, the model {self.first.size}")
        self.steps, self.first, self.second = int(state["steps"]), first, second


def soft_threshold(values: np.ndarray, threshold: float) -> np.ndarray:
    """The L1 proximal step: ``sign(v) max(|v| - threshold, 0)``."""
    return np.sign(values) * np.maximum(np.abs(values) - threshold, 0.0)


def penalised_step(optimizer: Optimizer, params: np.ndarray, data_gradient: np.ndarray, penalised: np.ndarray,
                   penalty: Penalty, eta: float) -> tuple[np.ndarray, np.ndarray]:
    """One update: the L2 part of the penalty joins the gradient, then the optimizer, then the L1 proximal step.

    ``penalised`` is 1 for weights and 0 for the intercept.  Returns the new
    parameters and the gradient the optimizer was given.
    """
    alpha, l1_ratio = penalty.alpha, penalty.l1_ratio
    gradient = data_gradient + alpha * (1.0 - l1_ratio) * penalised * params
    new = optimizer.update(params, gradient, eta)
    if alpha and l1_ratio:
        shrunk = soft_threshold(new, eta * alpha * l1_ratio)
        new = np.where(penalised > 0, shrunk, new)
    return new, gradient
