"""The boosting losses, held by the label party: baseline, gradients and hessians, quantized.

Each loss turns raw scores ``F`` (one column per tree of an iteration: one for
binary log loss and squared error, one per class for the multinomial log loss)
and the targets into a gradient ``g`` and hessian ``h`` per row and column; a
tree fits ``-g / h`` (a Newton step), as XGBoost, LightGBM and scikit-learn's
``HistGradientBoosting*`` do.

**Fixed point.** ``g`` and ``h`` are rounded to integers ``G = round(g 2^f)``,
``H = round(h 2^f)`` before anything else uses them: the federated label
party encrypts exactly these, and the centralized reference sums exactly
these, so both find the same splits and leaf values (quantized gradients, as
LightGBM's quantized training uses).  The bounds are public, per loss
(:data:`BOUNDS`): log losses give ``|g| <= 1`` and ``h <= 1/4``; for squared
error ``h = 1``, and the label party divides its targets by a power of two ``s``
above ``max |y - mean(y)|`` (exact in floating point), fits the trees to
``y / s`` and multiplies the leaf values back, which changes no split and keeps
``|g| < 4`` without telling anyone the label range.
"""

from __future__ import annotations

import math

import numpy as np

from vfl.errors import ConfigurationError, DataError, FixedPointOverflowError

#: Per loss, ``(a, b)``: every ``|g| <= 2^a`` and ``0 <= h <= 2^b`` (the slots are sized for them).
BOUNDS = {"log_loss": (0, -2), "squared_error": (2, 0)}
#: Probabilities are kept in [EPS, 1 - EPS] for the baselines' logarithms.
EPS = 1e-12


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -700, 700)))


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def class_probabilities(raw: np.ndarray) -> np.ndarray:
    """A classifier's probabilities (rows, classes) from its raw scores (rows, trees per iteration).

    One tree per iteration (two classes): the sigmoid of the score is the second class's
    probability; one per class: the softmax.
    """
    if raw.shape[1] == 1:
        p = _sigmoid(raw[:, 0])
        return np.column_stack([1 - p, p])
    return _softmax(raw)


class Loss:
    """What a boosting loss gives the label party; see the module docstring."""

    name = ""
    #: Raw-score columns, that is trees per boosting iteration.
    n_trees = 1
    #: Leaf values are multiplied by this (the squared error's target scale).
    value_scale = 1.0

    def baseline(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def gradients(self, raw: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def loss(self, raw: np.ndarray, y: np.ndarray) -> float:
        raise NotImplementedError

    def to_dict(self) -> dict:
        return {"name": self.name, "n_trees": self.n_trees, "value_scale": self.value_scale}


class BinaryLogLoss(Loss):
    """Log loss of labels 0/1 with ``p = sigmoid(F)``: ``g = p - y``, ``h = p (1 - p)``."""

    name = "binary_log_loss"

    def baseline(self, y):
        p = float(np.clip(np.mean(y), EPS, 1 - EPS))
        return np.array([math.log(p / (1 - p))])

    def gradients(self, raw, y):
        p = _sigmoid(raw[:, 0])
        return (p - y)[:, None], (p * (1 - p))[:, None]

    def loss(self, raw, y):
        z = raw[:, 0]
        return float(np.mean(np.logaddexp(0.0, z) - y * z))


class MultinomialLogLoss(Loss):
    """Log loss of labels ``0..K-1`` with ``p = softmax(F)``: per class ``g = p_k - [y = k]``, ``h = p_k (1 - p_k)``."""

    name = "multinomial_log_loss"

    def __init__(self, n_classes: int):
        self.n_trees = int(n_classes)

    def baseline(self, y):
        prior = np.clip(np.bincount(y.astype(np.int64), minlength=self.n_trees) / len(y), EPS, 1.0)
        return np.log(prior)

    def gradients(self, raw, y):
        p = _softmax(raw)
        onehot = np.zeros_like(p)
        onehot[np.arange(len(y)), y.astype(np.int64)] = 1.0
        return p - onehot, p * (1 - p)

    def loss(self, raw, y):
        shifted = raw - raw.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        return float(-np.mean(logp[np.arange(len(y)), y.astype(np.int64)]))

    def to_dict(self):
        return {**super().to_dict(), "n_classes": self.n_trees}


class SquaredError(Loss):
    """Half the squared error of ``y / s``: ``g = (F - y) / s``, ``h = 1``; leaf values times ``s``.

    ``s`` is the power of two at or above ``max |y - mean(y)|`` (1 for constant targets),
    set by :meth:`fit_scale` from the training targets; raw scores stay in ``y``'s units.
    """

    name = "squared_error"

    def __init__(self, value_scale: float = 1.0):
        self.value_scale = float(value_scale)

    def fit_scale(self, y: np.ndarray) -> "SquaredError":
        spread = float(np.max(np.abs(y - np.mean(y)))) if len(y) else 0.0
        self.value_scale = 2.0 ** math.ceil(math.log2(spread)) if spread > 0 else 1.0
        return self

    def baseline(self, y):
        return np.array([float(np.mean(y))])

    def gradients(self, raw, y):
        g = (raw[:, 0] - y) / self.value_scale
        return g[:, None], np.ones((len(y), 1))

    def loss(self, raw, y):
        return float(np.mean((raw[:, 0] - y) ** 2) / 2.0)


LOSSES = ("log_loss", "squared_error")


def make_loss(name: str, n_classes: int | None = None, y=None) -> Loss:
    """The loss for ``name`` ("log_loss": binary or multinomial by ``n_classes``; "squared_error")."""
    if name == "log_loss":
        if n_classes is None or n_classes < 2:
            raise DataError(f"log loss needs at least two classes, got {n_classes}")
        return BinaryLogLoss() if n_classes == 2 else MultinomialLogLoss(n_classes)
    if name == "squared_error":
        loss = SquaredError()
        return loss.fit_scale(np.asarray(y, dtype=np.float64)) if y is not None else loss
    raise ConfigurationError(f"loss must be one of {LOSSES}, got {name!r}")


def loss_from_dict(saved: dict) -> Loss:
    name = saved["name"]
    if name == BinaryLogLoss.name:
        return BinaryLogLoss()
    if name == MultinomialLogLoss.name:
        return MultinomialLogLoss(saved["n_classes"])
    if name == SquaredError.name:
        return SquaredError(saved["value_scale"])
    raise DataError(f"unknown boosting loss {name!r} in a model")


def quantize(values, frac_bits: int, bound_bits: int, what: str = "gradient") -> np.ndarray:
    """``round(v 2^frac_bits)`` as int64; a value beyond ``2^bound_bits`` in magnitude is refused."""
    values = np.asarray(values, dtype=np.float64)
    if not np.isfinite(values).all() or (np.abs(values) > 2.0 ** bound_bits).any():
        raise FixedPointOverflowError(
            f"a {what} is not finite or above {2.0 ** bound_bits:g} in magnitude; the boosting diverged "
            "(lower learning_rate)")
    return np.rint(np.ldexp(values, frac_bits)).astype(np.int64)


#: Validation scores each loss can stop on (higher is better; "loss" enters negated).
SCORINGS = {"log_loss": ("loss", "roc_auc", "accuracy"), "squared_error": ("loss", "r2")}


def validation_score(scoring: str, loss: Loss, raw: np.ndarray, y: np.ndarray) -> float:
    """A higher-is-better score of raw scores: the negated loss, ROC AUC, accuracy or R^2."""
    from sklearn.metrics import accuracy_score, r2_score, roc_auc_score

    if scoring == "loss":
        return -loss.loss(raw, y)
    if scoring == "r2":
        return float(r2_score(y, raw[:, 0]))
    if scoring == "accuracy":
        predicted = (raw[:, 0] > 0).astype(np.int64) if raw.shape[1] == 1 else np.argmax(raw, axis=1)
        return float(accuracy_score(y, predicted))
    if scoring == "roc_auc":
        if raw.shape[1] == 1:
            return float(roc_auc_score(y, raw[:, 0]))
        return float(roc_auc_score(y, _softmax(raw), multi_class="ovr"))
    raise ValueError(f"unknown scoring {scoring!r}")
