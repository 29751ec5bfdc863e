"""The split network: a bottom stack per party, the interactive layer that joins them, the top stack.

Party ``k`` runs its *bottom* stack (possibly empty) on its own columns
``x_k`` and gets ``h_k`` (``x_k`` itself when the bottom is empty).  The
*interactive layer* sums every party's output times that party's block of the
interactive weights::

    z = sum_k h_k W_k + b

and the *top* stack (the label party's) runs on ``f(z)``.  The interactive
layer is the network's first layer after the join: with ``hidden_layer_sizes =
(u_1, ..., u_m)``, it has ``u_1`` units and the top stack holds the rest and the
output layer (with no hidden layer at all, the interactive layer *is* the
output layer and uses the output activation).

:func:`join_forward` and :func:`join_backward` are the only steps that mix
parties: ``h_k W_k`` needs one party's output and the weights acting on it, and
its backward step returns ``dW_k = h_k^T delta`` and the gradient ``delta W_k^T``
that flows back into party ``k``'s bottom (the one the label-leak attacks of Li
et al. read).  The federated network will compute exactly these under
protection; everything else is one party's own arithmetic.

**The identities** (``tests/mlp/test_mlp_split.py``).  With every bottom empty,
the split network *is* the plain MLP whose first layer is ``vstack(W_k)`` (the
parties' columns side by side).  With bottoms of equal depth, the split network
equals the plain MLP whose bottom layers are ``block_diag`` of the parties'
layers (biases concatenated) followed by the interactive layer ``vstack(W_k)``;
its gradients equal the plain MLP's on the diagonal blocks, while the plain
MLP's off-diagonal blocks get gradients of their own — so training the split
network is training that plain MLP with those blocks held at zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vfl.errors import ConfigurationError
from vfl.parties.mlp.activations import activate, derivative
from vfl.parties.mlp.layers import Layer, backward, forward, layer_activations


@dataclass
class SplitNetwork:
    """The weights of a split network.

    Attributes
    ----------
    bottoms : list of list of (W, b)
        Per party, its bottom stack (``[]``: the party's columns go straight into the interactive layer).
    blocks : list of ndarray
        Per party, its block ``W_k`` of the interactive weights (rows: its bottom's outputs).
    bias : ndarray
        The interactive layer's intercept (the label party's).
    top : list of (W, b)
        The label party's top stack, output layer last (``[]``: the interactive layer is the output layer).
    """

    bottoms: list[list[Layer]]
    blocks: list[np.ndarray]
    bias: np.ndarray
    top: list[Layer]

    def parameters(self) -> list[np.ndarray]:
        """Every array, in a fixed order (bottoms, blocks, bias, top), for the optimizers."""
        out = [a for stack in self.bottoms for layer in stack for a in layer]
        return out + list(self.blocks) + [self.bias] + [a for layer in self.top for a in layer]

    def weight_matrices(self) -> list[np.ndarray]:
        """Every weight matrix (no intercept): what the L2 penalty counts."""
        return [w for stack in self.bottoms for w, _ in stack] + list(self.blocks) + [w for w, _ in self.top]

    def with_parameters(self, arrays: list[np.ndarray]) -> "SplitNetwork":
        """A network of the same shape holding ``arrays`` (in :meth:`parameters`' order)."""
        it = iter(arrays)
        bottoms = [[(next(it), next(it)) for _ in stack] for stack in self.bottoms]
        blocks = [next(it) for _ in self.blocks]
        bias = next(it)
        return SplitNetwork(bottoms, blocks, bias, [(next(it), next(it)) for _ in self.top])


def join_forward(hs: list[np.ndarray], blocks: list[np.ndarray], bias: np.ndarray) -> np.ndarray:
    """The interactive layer's pre-activation ``sum_k h_k W_k + b``."""
    if len(hs) != len(blocks):
        raise ConfigurationError(f"{len(hs)} parties' outputs for {len(blocks)} blocks of interactive weights")
    z = bias
    for h, w in zip(hs, blocks):
        z = z + h @ w
    return z


def join_backward(hs: list[np.ndarray], blocks: list[np.ndarray],
                  delta: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray]]:
    """From ``delta`` (the gradient on ``z``): each block's ``h_k^T delta``, the bias's, each party's ``delta W_k^T``."""
    return [h.T @ delta for h in hs], delta.sum(axis=0), [delta @ w.T for w in blocks]


def stack_activations(net: SplitNetwork, activation: str, out_activation: str) -> tuple[list[str], list[str]]:
    """The interactive layer's activation followed by the top's, and a bottom's (all hidden)."""
    return layer_activations(1 + len(net.top), activation, out_activation), [activation] * max(
        (len(stack) for stack in net.bottoms), default=0)


def split_forward(net: SplitNetwork, xs: list[np.ndarray], activation: str, out_activation: str) -> dict:
    """Every activation of the split network on the parties' columns ``xs``.

    Returns
    -------
    dict with ``bottoms`` (per party, :func:`~vfl.parties.mlp.layers.forward`'s list; its last entry is ``h_k``),
    ``z`` (the interactive pre-activation) and ``top`` (``[f(z), ..., output]``).
    """
    upper, hidden = stack_activations(net, activation, out_activation)
    bottoms = [forward(stack, x, hidden) for stack, x in zip(net.bottoms, xs)]
    z = join_forward([acts[-1] for acts in bottoms], net.blocks, net.bias)
    return {"bottoms": bottoms, "z": z, "top": forward(net.top, activate(upper[0], z), upper[1:])}


def split_backward(net: SplitNetwork, state: dict, delta_out: np.ndarray, activation: str,
                   out_activation: str) -> tuple[SplitNetwork, list[np.ndarray]]:
    """Raw gradients (sums over the rows, no penalty) of every weight, and the gradient on each ``h_k``.

    Parameters
    ----------
    state : dict
        What :func:`split_forward` returned.
    delta_out : ndarray
        The gradient on the output layer's pre-activation
        (:func:`~vfl.parties.mlp.losses.output_delta`).

    Returns
    -------
    grads : SplitNetwork
        The gradients, in the network's shape.
    grad_h : list of ndarray
        Per party, the gradient on its bottom's output ``h_k``: what flows back to it.
    """
    upper, hidden = stack_activations(net, activation, out_activation)
    if net.top:
        top_grads, grad_a = backward(net.top, state["top"], delta_out, upper[1:])
        delta_z = derivative(upper[0], state["top"][0], grad_a)
    else:
        top_grads, delta_z = [], delta_out
    hs = [acts[-1] for acts in state["bottoms"]]
    block_grads, bias_grad, grad_h = join_backward(hs, net.blocks, delta_z)
    bottom_grads = []
    for stack, acts, g in zip(net.bottoms, state["bottoms"], grad_h):
        bottom_grads.append(backward(stack, acts, derivative(activation, acts[-1], g), hidden)[0] if stack else [])
    return SplitNetwork(bottom_grads, block_grads, bias_grad, top_grads), grad_h
