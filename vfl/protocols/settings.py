"""The settings every party must share, and the batch schedule they all derive from them."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np

from vfl.crypto import check_key_bits
from vfl.errors import ConfigurationError, DataError
from vfl.parties import get_objective


@dataclass(frozen=True)
class TrainingSettings:
    """Shared training settings; all three parties must hold the same ones.

    Parameters
    ----------
    objective : {"linear", "logistic"}
    learning_rate : float
        Constant step size of gradient descent.
    max_iter : int
        Maximum number of epochs (passes over the data).
    alpha : float
        L2 penalty ``(alpha / 2) ||w||^2``; the intercept is not penalised.
    batch_size : int or None
        Rows per gradient step; ``None`` is full batch.
    tol : float or None
        Stop when the epoch loss changes by less than ``tol``; ``None`` runs ``max_iter`` epochs.
    fit_intercept : bool
        Party B holds an intercept.
    key_bits : int
        Paillier modulus size.
    insecure : bool
        Allow ``key_bits`` below 2048 (teaching and tests only).
    frac_bits : int
        Fixed-point precision of the whole protocol.
    random_state : int or None
        Seed of the batch order (not of any cryptographic randomness); ``None`` draws one.
    """

    objective: str = "logistic"
    learning_rate: float = 0.1
    max_iter: int = 30
    alpha: float = 0.0
    batch_size: int | None = None
    tol: float | None = 1e-4
    fit_intercept: bool = True
    key_bits: int = 2048
    insecure: bool = False
    frac_bits: int = 32
    random_state: int | None = None

    def __post_init__(self):
        get_objective(self.objective)
        _check(_is_real(self.learning_rate) and self.learning_rate > 0, "learning_rate must be a positive number",
               self.learning_rate)
        _check(_is_int(self.max_iter) and self.max_iter >= 1, "max_iter must be a positive integer", self.max_iter)
        _check(_is_real(self.alpha) and self.alpha >= 0, "alpha must be a non-negative number", self.alpha)
        _check(self.batch_size is None or (_is_int(self.batch_size) and self.batch_size >= 1),
               "batch_size must be None or a positive integer", self.batch_size)
        _check(self.tol is None or (_is_real(self.tol) and self.tol >= 0), "tol must be None or >= 0", self.tol)
        _check(_is_int(self.frac_bits) and 8 <= self.frac_bits <= 128, "frac_bits must be in [8, 128]",
               self.frac_bits)
        _check(self.random_state is None or _is_int(self.random_state), "random_state must be None or an integer",
               self.random_state)
        _check(_is_bool(self.fit_intercept), "fit_intercept must be True or False", self.fit_intercept)
        _check(_is_bool(self.insecure), "insecure must be True or False", self.insecure)
        check_key_bits(self.key_bits, self.insecure)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of the settings: equal settings, equal fingerprint."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_bool(v) -> bool:
    """A boolean proper: the string ``"false"`` is truthy, so it is no answer to a yes/no setting."""
    return isinstance(v, (bool, np.bool_))


def _is_real(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)


def _check(ok: bool, message: str, value) -> None:
    if not ok:
        raise ConfigurationError(f"{message}, got {value!r}")


def batch_sizes(n_rows: int, batch_size: int | None) -> list[int]:
    """Sizes of the batches of one epoch: full batches, the remainder folded into the last one.

    Every batch therefore has at least ``batch_size`` rows (or all rows, if fewer).
    """
    if batch_size is None or batch_size >= n_rows:
        return [n_rows]
    count = n_rows // batch_size
    sizes = [batch_size] * count
    sizes[-1] += n_rows - count * batch_size
    return sizes


def batches(n_rows: int, batch_size: int | None, seed: int, epoch: int) -> list[np.ndarray]:
    """The row indices of each batch of ``epoch``: A and B compute the same list from a shared seed.

    Full batch keeps the natural order; mini-batches shuffle each epoch.  The order
    depends on the seed and the epoch only, never on labels or features.
    """
    sizes = batch_sizes(n_rows, batch_size)
    if len(sizes) == 1:
        return [np.arange(n_rows)]
    order = np.random.default_rng([int(seed), int(epoch)]).permutation(n_rows)
    return np.split(order, np.cumsum(sizes)[:-1])


def check_batch_size(role: str, n_rows: int, batch_size: int | None, n_gradient_values: int) -> None:
    """Refuse batches no larger than what a party learns per step.

    A party that learns ``k`` gradient values ``X^T d`` of a batch of ``m <= k`` rows
    could solve for the per-sample residuals ``d`` and so for its peer's scores.
    """
    smallest = min(batch_sizes(n_rows, batch_size))
    if smallest <= n_gradient_values:
        what = "the data set" if smallest == n_rows else f"a batch of {smallest} rows"
        raise DataError(
            f"party {role}: {what} is not larger than the {n_gradient_values} gradient values party {role} "
            f"learns per step, so {role} could solve for the per-sample residuals; "
            f"use batch_size > {n_gradient_values} (and more rows than that)"
        )
