"""Neural networks split across parties (split learning): the arithmetic, on numpy, as scikit-learn's MLP.

* :mod:`~vfl.parties.mlp.activations` — ``identity``, ``logistic``, ``tanh``, ``relu``, ``softmax``; derivatives.
* :mod:`~vfl.parties.mlp.layers` — dense layers and stacks of them: forward, backward.
* :mod:`~vfl.parties.mlp.losses` — per task the output activation, the loss, its delta and the L2 penalty.
* :mod:`~vfl.parties.mlp.optim` — scikit-learn's SGD (momentum, Nesterov) and Adam.
* :mod:`~vfl.parties.mlp.split` — :class:`SplitNetwork`: bottoms, the interactive layer's join, the top.
* :mod:`~vfl.parties.mlp.starts` — Glorot-uniform starting weights from the CSPRNG.
* :mod:`~vfl.parties.mlp.step` — one mini-batch's loss and gradients, as scikit-learn's ``_backprop``.

Each party holds only its own layers: a feature party its bottom, the label party its bottom and the
top.  The protocol of the federated network is :mod:`vfl.protocols.mlp`, its run :mod:`vfl.runs.mlp`;
the pooled reference it equals is :mod:`vfl.centralized.mlp` (docs/mlp.md).
"""

from vfl.parties.mlp.optim import SGD, Adam, make_optimizer
from vfl.parties.mlp.split import SplitNetwork, join_backward, join_forward, split_backward, split_forward
from vfl.parties.mlp.starts import initial_network
from vfl.parties.mlp.step import loss_and_gradients, output

__all__ = ["Adam", "SGD", "SplitNetwork", "initial_network", "join_backward", "join_forward",
           "loss_and_gradients", "make_optimizer", "output", "split_backward", "split_forward"]
