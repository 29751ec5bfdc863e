"""What each message of the linear family carries, by sender (training, conjugate gradient, the shared
protocol, early stopping, prediction, and the runs' setup in :mod:`vfl.runs.linear`).

``(sender's role, name)`` -> description, as :mod:`vfl.protocols.messages` says; ``k`` is one feature party,
B the label party, C the coordinator.  A masked value is decrypted but still hidden by a mask only its
receiver (or, for C's replies, the party that chose it) can remove; it is never "encrypted".
"""

from __future__ import annotations

#: What only the shared protocol (:mod:`vfl.protocols.linear.shared`) sends in a pass.
_SHARED_ONLY = {
    ("coordinator", "weight_share"): "C's share of the party's weights, encrypted [[c_k]]",
    ("coordinator", "returned_gradient_share"): "C's share of the party's gradient, encrypted afresh "
                                                "[[X_k^T d + rho_k]]",
    ("feature", "gradient_share"): "encrypted gradient plus its own mask [[X_k^T d + 2^V + rho_k]]: C keeps "
                                   "X_k^T d + rho_k as its share, the party -rho_k",
    ("label", "gradient_share"): "encrypted gradient plus its own mask [[X_B^T d + 2^V + rho_B]]: C keeps "
                                 "X_B^T d + rho_B as its share, the party -rho_B",
    ("feature", "packed_gradient_share"): "encrypted gradient products, packed, every slot masked: C keeps slot "
                                          "s-1, X_k^T d + rho_k, as its share, the party -rho_k",
    ("label", "packed_gradient_share"): "encrypted gradient products, packed, every slot masked: C keeps slot "
                                        "s-1, X_B^T d + rho_B, as its share, the party -rho_B",
    ("feature", "loss_share"): "encrypted share of the loss [[a_k.G_k - rho_k.c_k + penalty]] (a_k: its share)",
}
#: A pass of the shared protocol on the validation rows sends these, prefixed ``validation_``.
_SHARED_PASS = (*_SHARED_ONLY, ("feature", "scores"), ("feature", "packed_scores"), ("label", "residual"),
                ("label", "packed_residual"), ("label", "loss"))

#: The linear family's messages.
MESSAGES = {
    # setup (vfl.runs.linear, vfl.protocols.linear.training)
    ("label", "columns"): "every data party's column count (for the gradient-equations check)",
    ("label", "models"): "how many models the run trains or scores (one per class for one-vs-rest)",
    ("feature", "resume"): "the last epoch it completed (-1: none)",
    ("label", "resume"): "the last epoch it completed (-1: none)",
    ("coordinator", "public_key"): "Paillier public key n (training: and the fixed-point precision)",
    ("coordinator", "start"): "the epoch to resume after (-1: from the start) and whether training had finished",
    ("label", "schedule"): "to each feature party the batch-order seed and the row count; to C the row count (the "
                           "shared protocol with early stopping: and the validation rows' count)",
    # one pass of Table 2 (vfl.protocols.linear.passes)
    ("feature", "scores"): "encrypted partial scores [[u_k]] of its rows (a batch, or the rows to score)",
    ("feature", "packed_scores"): "encrypted partial scores [[u_k]], packed",
    ("label", "residual"): "encrypted residuals [[d]] = sum_k [[u_k]] + u_B - kappa y",
    ("label", "packed_residual"): "encrypted residuals [[d]] = sum_k [[u_k]] + u_B - kappa y, packed",
    ("feature", "masked_gradient"): "encrypted gradient plus its mask [[X_k^T d + R]]",
    ("label", "masked_gradient"): "encrypted gradient plus its mask [[X_B^T d + R]]",
    ("feature", "masked_packed_gradient"): "encrypted gradient products, packed, every slot masked by the party",
    ("label", "masked_packed_gradient"): "encrypted gradient products, packed, every slot masked by the party",
    ("feature", "loss_part"): "encrypted loss part [[a u_k.d + penalty]]",
    ("feature", "packed_loss_part"): "encrypted loss part [[a u_k.d + penalty]] in slot s-1",
    ("label", "loss"): "encrypted batch loss [[L]]",
    ("label", "packed_loss"): "encrypted batch loss [[L]] in slot s-1, every other slot masked",
    ("coordinator", "gradient"): "its gradient, decrypted but still masked by the party's own mask: X^T d + R",
    ("coordinator", "control"): "continue or stop, and the best epoch with early stopping (conjugate gradient: also "
                                "beta, the next direction's weights, and the next probe's scale)",
    # conjugate gradient (vfl.protocols.linear.conjugate)
    ("feature", "norm_part"): "encrypted share of the sums of gradient products [[|g_k|^2]] conjugate gradient needs",
    ("label", "norm"): "encrypted sums of gradient products [[|g|^2]], summed over the parties",
    ("coordinator", "step"): "conjugate gradient's step size eta along the direction p",
    # early stopping (vfl.protocols.linear.validation)
    ("feature", "validation_scores"): "validation rows: encrypted partial scores [[u_k]]",
    ("label", "masked_validation"): "validation rows: encrypted scores plus its mask [[z + R]]",
    ("coordinator", "validation"): "validation rows: the scores, decrypted but still masked by the label party: "
                                   "z + R",
    ("label", "early_stop"): "whether the validation score says stop, and the best epoch so far",
    # prediction, and the training metrics round (vfl.protocols.linear.inference)
    ("label", "rows"): "number of rows to score",
    ("label", "masked_scores"): "encrypted scores plus its mask [[z + R]]",
    ("label", "masked_packed_scores"): "encrypted scores, packed, plus one mask uniform over Z_n per ciphertext "
                                       "[[Z + R]]",
    ("coordinator", "scores"): "the scores, decrypted but still masked by the label party: z + R (mode table3: "
                               "the scores z in clear)",
    ("coordinator", "packed_scores"): "the packed scores, decrypted but still masked by the label party: Z + R",
    ("feature", "partial_scores"): "its partial scores u_k in clear (mode table3: C learns them)",
    ("label", "partial_scores"): "its partial scores u_B in clear (mode table3: C learns them)",
    # the shared protocol (vfl.protocols.linear.shared): no party learns a gradient
    ("feature", "parameters"): "how many parameters it holds a share of (its weights)",
    ("label", "parameters"): "how many parameters it holds a share of (its weights and the intercept)",
    ("coordinator", "model_share"): "C's share of the party's weights, masked by the party's own share: with it, "
                                    "its weights",
    **_SHARED_ONLY,
}
MESSAGES.update({(role, "validation_" + name): "validation rows: " + MESSAGES[role, name]
                 for role, name in _SHARED_PASS})
MESSAGES[("feature", "validation_scores")] = "validation rows: encrypted partial scores [[u_k]]"
MESSAGES[("label", "validation_loss")] = ("validation rows: encrypted loss less C's part: C learns the validation "
                                          "loss")
