"""One mini-batch of the split network: its loss and scikit-learn's gradients (``MLP._backprop``).

The loss is the task's loss (:mod:`~vfl.parties.mlp.losses`) plus the L2
penalty ``0.5 alpha sum ||W||^2 / s``; the gradients are ``(raw + alpha W) / s``
for each weight matrix and ``raw / s`` for each intercept, ``s`` the batch's
row count (or sum of sample weights).  Every weight matrix counts, bottoms and
interactive blocks included, so with empty bottoms this is scikit-learn's
``_backprop`` to the last bit of rounding.
"""

from __future__ import annotations

import numpy as np

from vfl.parties.mlp.losses import OUTPUT_ACTIVATION, l2_penalty, loss, output_delta, weight_sum
from vfl.parties.mlp.split import SplitNetwork, split_backward, split_forward


def output(net: SplitNetwork, xs: list[np.ndarray], activation: str, task: str) -> np.ndarray:
    """The network's output on the parties' columns (after the output activation)."""
    return split_forward(net, xs, activation, OUTPUT_ACTIVATION[task])["top"][-1]


def loss_and_gradients(net: SplitNetwork, xs: list[np.ndarray], y: np.ndarray, activation: str, task: str,
                       alpha: float, sample_weight: np.ndarray | None = None) -> tuple[float, SplitNetwork]:
    """A batch's penalised loss and the gradients of every weight, in the network's shape.

    Parameters
    ----------
    net : SplitNetwork
    xs : list of ndarray
        Each party's columns for the batch's rows.
    y : ndarray
        The batch's targets (:func:`~vfl.parties.mlp.losses.targets`).
    activation : str
        The hidden activation.
    task : str
        ``"binary"``, ``"multiclass"`` or ``"regression"``.
    alpha : float
        The L2 penalty (scikit-learn's ``alpha``).
    sample_weight : ndarray, optional
    """
    out_activation = OUTPUT_ACTIVATION[task]
    state = split_forward(net, xs, activation, out_activation)
    out = state["top"][-1]
    sw_sum = weight_sum(out.shape[0], sample_weight)
    value = loss(task, y, out, sample_weight) + l2_penalty(net.weight_matrices(), alpha, sw_sum)
    raw, _ = split_backward(net, state, output_delta(y, out, sample_weight), activation, out_activation)
    return value, scale(raw, net, alpha, sw_sum)


def scale(raw: SplitNetwork, net: SplitNetwork, alpha: float, sw_sum: float) -> SplitNetwork:
    """scikit-learn's gradients from raw sums: ``(raw + alpha W) / s`` for weights, ``raw / s`` for intercepts."""
    def weight(g, w):
        return (g + alpha * w) / sw_sum

    bottoms = [[(weight(gw, w), gb / sw_sum) for (gw, gb), (w, _) in zip(gs, stack)]
               for gs, stack in zip(raw.bottoms, net.bottoms)]
    blocks = [weight(g, w) for g, w in zip(raw.blocks, net.blocks)]
    top = [(weight(gw, w), gb / sw_sum) for (gw, gb), (w, _) in zip(raw.top, net.top)]
    return SplitNetwork(bottoms, blocks, raw.bias / sw_sum, top)
