"""Gradient-boosted trees: the arithmetic each party runs on its own, and the two boosting parties.

* :mod:`~vfl.parties.trees.loss` — the label party's losses: baselines, gradients, hessians, quantized.
* :mod:`~vfl.parties.trees.splits` — histograms, split candidates and gains on integers.
* :mod:`~vfl.parties.trees.grower` — which nodes to evaluate and split, and the leaf values.
* :mod:`~vfl.parties.trees.tree` — a tree's shape, and the leaves a party's own splits allow.
* :mod:`~vfl.parties.trees.columns` — a party's binned columns.
* :mod:`~vfl.parties.trees.feature_party` — :class:`TreeFeatureParty`: histograms of its own bins, its thresholds.
* :mod:`~vfl.parties.trees.label_party` — :class:`TreeLabelParty`: gradients, the key pair, every split's gain.
* :mod:`~vfl.parties.trees.layout` — the packing of candidate sums into ciphertext slots.

Binning is :mod:`vfl.parties.binning`.  The messages between the parties are
sequenced by :mod:`vfl.protocols.trees`.
"""

from vfl.parties.trees.grower import TreeGrower
from vfl.parties.trees.loss import LOSSES, SCORINGS, Loss, loss_from_dict, make_loss, quantize, validation_score
from vfl.parties.binning import flat_bins
from vfl.parties.trees.splits import CandidateTable, SplitRules, best, gains, histogram
from vfl.parties.trees.tree import Tree, allowed_leaves, check_shape, leaf_of

__all__ = ["CandidateTable", "LOSSES", "Loss", "SplitRules", "Tree", "TreeGrower", "allowed_leaves", "best",
           "check_shape", "flat_bins", "gains", "histogram", "leaf_of", "loss_from_dict", "make_loss", "quantize",
           "SCORINGS", "validation_score"]
