"""Dense layers and stacks of them: forward, backward, and scikit-learn's scaling of the gradients.

A layer is a pair ``(W, b)``: ``W`` of shape (inputs, units), ``b`` of shape
(units,).  A stack is a list of layers and one activation name per layer;
:func:`forward` keeps every activation (``acts[0]`` is the input) for
:func:`backward`, which takes the gradient on the *last* layer's
pre-activation and returns each layer's raw gradient (sums over the rows) and
the gradient on the stack's input (:func:`vfl.parties.mlp.step.scale` turns raw
sums into scikit-learn's gradients).
"""

from __future__ import annotations

import numpy as np

from vfl.parties.mlp.activations import activate, derivative

Layer = tuple[np.ndarray, np.ndarray]


def dense(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A dense layer's pre-activation ``x W + b``."""
    return x @ w + b


def dense_backward(x: np.ndarray, w: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From ``delta`` (the gradient on ``x W + b``): ``(x^T delta, sum of delta's rows, delta W^T)``.

    The last is the gradient on the layer's input ``x``.
    """
    return x.T @ delta, delta.sum(axis=0), delta @ w.T


def layer_activations(n_layers: int, activation: str, out_activation: str) -> list[str]:
    """Each layer's activation: ``activation`` for the hidden ones, ``out_activation`` for the last."""
    return [activation] * (n_layers - 1) + [out_activation] if n_layers else []


def forward(layers: list[Layer], x: np.ndarray, names: list[str]) -> list[np.ndarray]:
    """Every activation of the stack on ``x``: ``[x, f_0(x W_0 + b_0), ...]``."""
    acts = [x]
    for (w, b), name in zip(layers, names):
        acts.append(activate(name, dense(acts[-1], w, b)))
    return acts


def backward(layers: list[Layer], acts: list[np.ndarray], delta: np.ndarray,
             names: list[str]) -> tuple[list[Layer], np.ndarray]:
    """Raw gradients of every layer, and the gradient on the stack's input.

    Parameters
    ----------
    layers : list of (W, b)
    acts : list of ndarray
        What :func:`forward` returned for these layers.
    delta : ndarray
        The gradient on the last layer's pre-activation.
    names : list of str
        The layers' activations (the last one's is never used: ``delta`` is past it).

    Returns
    -------
    grads : list of (dW, db)
        Sums over the rows, without the penalty (:func:`vfl.parties.mlp.step.scale` adds it).
    grad_input : ndarray
        The gradient on ``acts[0]``.
    """
    grads: list[Layer] = [None] * len(layers)
    for i in range(len(layers) - 1, -1, -1):
        dw, db, grad_input = dense_backward(acts[i], layers[i][0], delta)
        grads[i] = (dw, db)
        if i:
            delta = derivative(names[i - 1], acts[i], grad_input)
    return grads, grad_input

