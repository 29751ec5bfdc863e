"""What each message of a split network carries, by sender (:mod:`vfl.protocols.mlp.training` and
:mod:`~vfl.protocols.mlp.inference`).

``(sender's role, name)`` -> description, as :mod:`vfl.protocols.messages` says.  ``<x>``: an additive
share of ``x`` over the ring (:mod:`vfl.crypto.ring`); nothing here is Paillier-encrypted.
"""

from __future__ import annotations

_PART = "its part h_k W_k of the interactive layer per row, fixed point (two feature parties or more: plus C's mask, " \
        "the masks summing to zero)"

#: The split network's messages.
MESSAGES = {
    ("feature", "widths"): "its row and column counts, its bottom's output width, its last saved epoch",
    ("label", "plan"): "to each feature party the batch-order seed, its fan-in, the validation rows and where to "
                       "resume; to C the row count, the validation rows, where to resume and every feature party's "
                       "input width",
    ("coordinator", "part_mask"): "its mask for the part of each row (the feature parties' masks sum to zero)",
    ("coordinator", "validation_part_mask"): "validation rows: its mask for the part of each row (the masks sum to "
                                             "zero)",
    ("coordinator", "triples"): "its halves of the Beaver triples of the batch's backward pass (random numbers)",
    ("feature", "part"): _PART,
    ("feature", "validation_part"): "validation rows: " + _PART,
    ("feature", "opening"): "openings of its factors in the backward pass, uniform: each is hidden by a triple",
    ("label", "opening"): "openings of <delta> and its other factors in the backward pass, uniform: each is hidden "
                          "by a triple",
    ("label", "gradient_shares"): "its shares of the feature party's batch-summed gradients: with the party's own, "
                                  "the gradients",
    ("feature", "penalty"): "the sum of its squared weights over the epoch's batches (for the penalised loss)",
    ("label", "epoch"): "whether to stop, and whether the epoch was the best so far (early stopping)",
    ("feature", "predict"): "the number of rows it scores",
    ("label", "predict"): "the number of rows to score (two feature parties or more: C deals the masks)",
    ("feature", "explained_part"): "for an explanation, its part h_k W_k of the interactive layer for every row, "
                                   "unmasked (checked as a release first), and its part at its training mean",
}
