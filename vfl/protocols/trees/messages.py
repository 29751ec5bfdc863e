"""What each message of gradient-boosted trees (SecureBoost) carries, by sender.

``(sender's role, name)`` -> description, as :mod:`vfl.protocols.messages` says.  The label party holds
the key; there is no coordinator, and no conjugate gradient.
"""

from __future__ import annotations

#: The trees' messages (:mod:`vfl.protocols.trees.training`, :mod:`vfl.protocols.trees.inference`).
MESSAGES = {
    ("label", "public_key"): "the label party's Paillier public key n",
    ("feature", "resume"): "the last iteration it completed (-1: none)",
    ("label", "start"): "the iteration to resume after, whether training had finished, the validation rows' seed, "
                        "row count and trees per iteration",
    ("label", "iteration"): "a new boosting iteration; whether the feature parties take part in its trees",
    ("label", "gradients"): "encrypted gradients and hessians [[g, h]], one packed ciphertext per row",
    ("label", "nodes"): "the rows of each new node (a bit per row of the split node), and the nodes to evaluate "
                        "(at the end, the tree's shape)",
    ("label", "round"): "a new round: how many nodes' sums to compute (node membership hidden), or the tree's shape",
    ("label", "round_gradients"): "encrypted gradients [[g, h, 1]] per row in its node's slot, zeros elsewhere",
    ("feature", "candidates"): "encrypted left sums [[G_L, H_L]] of its split candidates, shuffled, several per "
                               "ciphertext (standard mode: and a bit per candidate saying which stay worth "
                               "evaluating)",
    ("label", "split"): "which of its candidates won at which node (positions in its shuffled order)",
    ("feature", "partition"): "which rows of the node go left at its split, and the split's column index",
    ("feature", "validation_masks"): "per validation row, the leaves its own splits allow (a bit per leaf)",
    ("label", "control"): "continue or stop (the label party's validation score decides)",
    ("label", "predict"): "the number of rows to score, and the trees holding this party's splits",
    ("feature", "leaf_masks"): "per row, the leaves its own splits allow in each tree (a bit per leaf)",
}
