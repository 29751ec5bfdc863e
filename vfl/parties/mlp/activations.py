"""The activations of a dense layer, and their derivatives read from the activated values.

As scikit-learn's ``neural_network._base``: a derivative is written in terms of
the layer's *output* ``a = f(z)`` (``relu``: ``a > 0``; ``tanh``: ``1 - a**2``;
``logistic``: ``a (1 - a)``), so the backward pass needs only the activations the
forward pass kept.  ``softmax`` is an output activation only: its derivative is
folded into the loss (:func:`vfl.parties.mlp.losses.output_delta`).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from vfl.errors import ConfigurationError

#: Activations a hidden layer may use (scikit-learn's ``activation``).
HIDDEN = ("identity", "logistic", "tanh", "relu")


def identity(z: np.ndarray) -> np.ndarray:
    """``f(z) = z``."""
    return z


def logistic(z: np.ndarray) -> np.ndarray:
    """``f(z) = 1 / (1 + exp(-z))`` (scipy's ``expit``, as scikit-learn)."""
    return expit(z)


def tanh(z: np.ndarray) -> np.ndarray:
    """``f(z) = tanh(z)``."""
    return np.tanh(z)


def relu(z: np.ndarray) -> np.ndarray:
    """``f(z) = max(z, 0)``."""
    return np.maximum(z, 0)


def softmax(z: np.ndarray) -> np.ndarray:
    """Each row's ``exp(z - max z)`` over its sum: the multi-class output."""
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


ACTIVATIONS = {"identity": identity, "logistic": logistic, "tanh": tanh, "relu": relu, "softmax": softmax}


def activate(name: str, z: np.ndarray) -> np.ndarray:
    """The activation ``name`` applied to the pre-activations ``z`` (a new array)."""
    try:
        return ACTIVATIONS[name](z)
    except KeyError:
        raise ConfigurationError(f"activation must be one of {sorted(ACTIVATIONS)}, got {name!r}") from None


def derivative(name: str, a: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """``grad * f'(z)``: the gradient with respect to ``z`` from the one with respect to ``a = f(z)``.

    Parameters
    ----------
    name : str
        A hidden activation (:data:`HIDDEN`).
    a : ndarray
        The activated values the forward pass returned.
    grad : ndarray
        The gradient of the loss with respect to ``a``.
    """
    if name == "identity":
        return grad
    if name == "logistic":
        return grad * a * (1 - a)
    if name == "tanh":
        return grad * (1 - a ** 2)
    if name == "relu":
        return np.where(a == 0, 0.0, grad)
    raise ConfigurationError(f"a hidden layer's activation must be one of {list(HIDDEN)}, got {name!r}")
