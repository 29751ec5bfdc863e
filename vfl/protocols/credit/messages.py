"""What each message of the credit-scoring pipeline carries, by sender: WOE and IV, selection and the Pearson
block (the label party holds the key), the pipeline's own steps in ``vfl party``
(:mod:`vfl.federation.credit`), and the scorecard's logistic regression (the linear family's messages).

``(sender's role, name)`` -> description, as :mod:`vfl.protocols.messages` says.
"""

from __future__ import annotations

from vfl.protocols.linear.messages import MESSAGES as LINEAR

#: The pipeline's messages, the scorecard's model included.
MESSAGES = {
    **LINEAR,
    # vfl party's pipeline (vfl.federation.credit)
    ("feature", "pipeline_resume"): "whether it has the checkpoint of WOE/IV and selection",
    ("label", "pipeline_resume"): "whether every party resumes from its checkpoint of WOE/IV and selection",
    ("feature", "model_columns"): "how many model columns its selected columns make (WOE values or bin indicators)",
    # WOE and IV (vfl.protocols.credit.woe)
    ("label", "woe_start"): "the label party's Paillier public key n, row and class counts, rows per chunk",
    ("label", "classes"): "encrypted one-hot class [[1{y = c}]] per row, one packed ciphertext per row, a chunk of "
                          "rows",
    ("feature", "bins"): "how many bins each of its columns has (a missing-value bin included)",
    ("feature", "counts"): "encrypted class counts [[sum 1{y = c}]] of every bin of every column, bins shuffled per "
                           "column",
    # selection (vfl.protocols.credit.selection, vfl.protocols.credit.pearson)
    ("label", "iv_kept"): "which of its columns the IV rules keep (a bit per column)",
    ("label", "pearson_start"): "Paillier public key n, row and column counts, rows per chunk and the bits of its "
                                "rounded standardized values",
    ("feature", "pearson_columns"): "its column count and the bits of its rounded standardized values",
    ("label", "pearson_rows"): "encrypted standardized values [[z]], its columns side by side in one ciphertext per "
                               "row",
    ("feature", "pearson_products"): "encrypted sums over rows [[sum z_a z_b]], one ciphertext per column of its own",
    ("label", "pearson"): "the Pearson correlations between its columns and the feature party's, which both learn",
    ("feature", "own_correlation"): "the correlations among its own IV-kept columns",
    ("label", "plan"): "which of its columns are selected (with share_woe: every bin's WOE, in a shuffled order, and "
                       "each IV)",
}
