"""The linear family's parties (linear and logistic regression): each holds only its own state.

* :mod:`~vfl.parties.linear.data_party` — what every data party does: its columns, weights, scores, gradient.
* :mod:`~vfl.parties.linear.feature_party` — a feature party (Yang et al.'s A; any number of them).
* :mod:`~vfl.parties.linear.label_party` — the label party (B): columns, labels, intercept, residual, loss.
* :mod:`~vfl.parties.linear.optim` — first-order update rules on a party's own weights.
* :mod:`~vfl.parties.linear.cg` — conjugate gradient's per-party arithmetic.
* :mod:`~vfl.parties.linear.packed` — several values per ciphertext (slots).
* :mod:`~vfl.parties.linear.dp` — the label party's Gaussian noise and its accounting.
* :mod:`~vfl.parties.linear.shares` — a data party's additive share of its weights (``protocol="shared"``).
* :mod:`~vfl.parties.linear.shareholders` — the coordinator's shares (``protocol="shared"``).

The coordinator (C) is every family's key holder, :class:`vfl.parties.Coordinator`; it is named here too
with Yang et al.'s parties for teaching.
"""

from vfl.parties.coordinator import Coordinator
from vfl.parties.linear import dp
from vfl.parties.linear.data_party import DataParty, FeatureParty, loss_part_bound, prediction_bound, score_bound
from vfl.parties.linear.feature_party import LinearFeatureParty, PartyA
from vfl.parties.linear.label_party import LinearLabelParty, PartyB

__all__ = ["Coordinator", "DataParty", "FeatureParty", "LinearFeatureParty", "LinearLabelParty", "PartyA", "PartyB",
           "dp", "loss_part_bound", "prediction_bound", "score_bound"]
