"""Gradient-boosted trees: the arithmetic each party runs on its own, and the two boosting parties.

* :mod:`~vfl.parties.boosting.loss` — the label party's losses: baselines, gradients, hessians, quantized.
* :mod:`~vfl.parties.boosting.splits` — histograms, split candidates and gains on integers.
* :mod:`~vfl.parties.boosting.grower` — which nodes to evaluate and split, and the leaf values.
* :mod:`~vfl.parties.boosting.tree` — a tree's shape, and the leaves a party's own splits allow.

Binning is :mod:`vfl.parties.binning`.  The messages between the parties are
sequenced by :mod:`vfl.protocols.boosting`.
"""

from vfl.parties.boosting.grower import TreeGrower
from vfl.parties.boosting.loss import LOSSES, SCORINGS, Loss, loss_from_dict, make_loss, quantize, validation_score
from vfl.parties.boosting.splits import CandidateTable, SplitRules, best, flat_bins, gains, histogram
from vfl.parties.boosting.tree import Tree, allowed_leaves, check_shape, leaf_of

__all__ = ["CandidateTable", "LOSSES", "Loss", "SplitRules", "Tree", "TreeGrower", "allowed_leaves", "best",
           "check_shape", "flat_bins", "gains", "histogram", "leaf_of", "loss_from_dict", "make_loss", "quantize",
           "SCORINGS", "validation_score"]
