"""Numpy models whose parameters are one flat float64 vector.

A flat vector is what a client sends to the server and back, what the
aggregators in :mod:`vfl.horizontal.aggregation` average, and what the byte
counts in the training history measure.  Models hold only shapes and the L2
strength; parameters are always passed in explicitly, so one model object
serves the server and all clients.

Every model offers the same duck-typed interface (no base class):

``n_params``
    Length of the parameter vector.
``init_params(rng)``
    A starting vector.
``loss(w, X, y)`` / ``loss_and_grad(w, X, y)``
    Mean cross-entropy over the rows plus ``l2 / 2 * ||weights||^2`` (biases
    are not penalised), and its gradient.  ``y`` holds class *indices*
    ``0 .. n_classes - 1``.
``penalty(w)``
    The L2 term ``l2 / 2 * ||weights||^2`` alone, so the objective on
    ``(X, y)`` is the mean cross-entropy plus ``penalty(w)``.
``predict_proba(w, X)``
    Array of shape ``(n, n_classes)``.
"""

from __future__ import annotations

import numpy as np

from ._checks import check_hidden_layer_sizes, check_nonnegative_float, check_positive_int
from .errors import InvalidParameterError, ShapeMismatchError

__all__ = ["LogisticRegressionModel", "MLPModel", "MODELS", "make_model"]

#: Names accepted by :func:`make_model`.
MODELS = ("logreg", "mlp")


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """Overflow-free logistic function."""
    return np.exp(-np.logaddexp(0.0, -z))


def _check_vector(w: np.ndarray, n_params: int) -> None:
    if w.shape != (n_params,):
        raise ShapeMismatchError(f"parameter vector has shape {w.shape}; expected ({n_params},)")


class LogisticRegressionModel:
    """Logistic regression: sigmoid for two classes, softmax for more.

    Parameters
    ----------
    n_features : int
    n_classes : int
        2 gives the binary model with ``n_features + 1`` parameters (coefficients
        then intercept); more gives multinomial softmax with
        ``(n_features + 1) * n_classes`` parameters (the ``(n_features,
        n_classes)`` coefficient matrix row-major, then the intercepts).
    l2 : float, default=0.0
        Ridge penalty on the coefficients.
    """

    def __init__(self, n_features: int, n_classes: int, l2: float = 0.0):
        self.n_features = check_positive_int("n_features", n_features, minimum=0)
        self.n_classes = check_positive_int("n_classes", n_classes, minimum=2)
        self.l2 = check_nonnegative_float("l2", l2)
        self.binary = n_classes == 2
        width = 1 if self.binary else self.n_classes
        self.n_params = (self.n_features + 1) * width

    def init_params(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """Zeros: the loss is convex, so no symmetry needs breaking."""
        return np.zeros(self.n_params)

    def _split(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _check_vector(w, self.n_params)
        d = self.n_features
        if self.binary:
            return w[:d], w[d:]
        return w[: d * self.n_classes].reshape(d, self.n_classes), w[d * self.n_classes :]

    def _logits(self, w, X):
        coef, intercept = self._split(w)
        return X @ coef + intercept

    def loss_and_grad(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        coef, _ = self._split(w)
        z = self._logits(w, X)
        n = X.shape[0]
        if self.binary:
            loss = np.mean(np.logaddexp(0.0, z) - y * z)
            residual = (_sigmoid(z) - y) / n
        else:
            log_p = _log_softmax(z)
            loss = -np.mean(log_p[np.arange(n), y])
            residual = np.exp(log_p)
            residual[np.arange(n), y] -= 1.0
            residual /= n
        grad_coef = X.T @ residual + self.l2 * coef
        grad = np.concatenate([grad_coef.ravel(), np.atleast_1d(residual.sum(axis=0))])
        return float(loss + self.penalty(w)), grad

    def loss(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        return self.loss_and_grad(w, X, y)[0]

    def penalty(self, w: np.ndarray) -> float:
        """``l2 / 2 * ||coef||^2``; the intercepts are not penalised."""
        coef, _ = self._split(w)
        return float(0.5 * self.l2 * np.sum(coef**2))

    def predict_proba(self, w: np.ndarray, X: np.ndarray) -> np.ndarray:
        z = self._logits(w, X)
        if self.binary:
            p1 = _sigmoid(z)
            return np.column_stack([1.0 - p1, p1])
        return np.exp(_log_softmax(z))


class MLPModel:
    """Fully connected network with ReLU hidden layers and a softmax output.

    McMahan et al.'s "2NN" is ``hidden_layer_sizes=(200, 200)`` on 784 MNIST
    pixels; the default ``(64, 64)`` is the same shape scaled to the 64-pixel
    scikit-learn digits.

    Parameters
    ----------
    n_features, n_classes : int
    hidden_layer_sizes : tuple of int, default=(64, 64)
    l2 : float, default=0.0
        Ridge penalty on the weight matrices (not the biases).
    """

    def __init__(self, n_features: int, n_classes: int, hidden_layer_sizes=(64, 64), l2: float = 0.0):
        sizes = [check_positive_int("n_features", n_features), *check_hidden_layer_sizes(hidden_layer_sizes),
                 check_positive_int("n_classes", n_classes, minimum=2)]
        self.n_features, self.n_classes, self.l2 = sizes[0], sizes[-1], check_nonnegative_float("l2", l2)
        self.layer_sizes = tuple(sizes)
        self._shapes = [(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
        self.n_params = sum(a * b + b for a, b in self._shapes)

    def _layers(self, w: np.ndarray):
        """Views ``[(W1, b1), (W2, b2), ...]`` into the flat vector."""
        _check_vector(w, self.n_params)
        layers, start = [], 0
        for a, b in self._shapes:
            W = w[start : start + a * b].reshape(a, b)
            start += a * b
            layers.append((W, w[start : start + b]))
            start += b
        return layers

    def init_params(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """He-normal weights for the ReLU layers, zero biases."""
        rng = np.random.default_rng(rng)
        w = np.zeros(self.n_params)
        for W, _ in self._layers(w):
            W[...] = rng.normal(0.0, np.sqrt(2.0 / W.shape[0]), size=W.shape)
        return w

    def _forward(self, w, X):
        layers = self._layers(w)
        activations = [X]
        for i, (W, b) in enumerate(layers):
            z = activations[-1] @ W + b
            activations.append(np.maximum(z, 0.0) if i < len(layers) - 1 else z)
        return layers, activations

    def loss_and_grad(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        layers, acts = self._forward(w, X)
        n = X.shape[0]
        log_p = _log_softmax(acts[-1])
        loss = -np.mean(log_p[np.arange(n), y])
        delta = np.exp(log_p)
        delta[np.arange(n), y] -= 1.0
        delta /= n
        grads = []
        for i in range(len(layers) - 1, -1, -1):
            W, _ = layers[i]
            grads.append(((acts[i].T @ delta + self.l2 * W).ravel(), delta.sum(axis=0)))
            if i:
                delta = (delta @ W.T) * (acts[i] > 0)
        flat = np.concatenate([part for pair in reversed(grads) for part in pair])
        return float(loss + self.penalty(w)), flat

    def loss(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        return self.loss_and_grad(w, X, y)[0]

    def penalty(self, w: np.ndarray) -> float:
        """``l2 / 2`` times the squared norm of the weight matrices (biases are not penalised)."""
        return float(0.5 * self.l2 * sum(np.sum(W**2) for W, _ in self._layers(w)))

    def predict_proba(self, w: np.ndarray, X: np.ndarray) -> np.ndarray:
        return np.exp(_log_softmax(self._forward(w, X)[1][-1]))


def make_model(name: str, n_features: int, n_classes: int, *, hidden_layer_sizes=(64, 64), l2: float = 0.0):
    """Build a model by name: ``"logreg"`` or ``"mlp"``."""
    if name == "logreg":
        return LogisticRegressionModel(n_features, n_classes, l2=l2)
    if name == "mlp":
        return MLPModel(n_features, n_classes, hidden_layer_sizes=hidden_layer_sizes, l2=l2)
    raise InvalidParameterError(f"unknown model {name!r}; choose one of {MODELS}")
