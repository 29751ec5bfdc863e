"""Each party's own state and arithmetic: a party computes only on what it holds.

One folder per model family, one module per role inside it; what every family shares stays here.

* :mod:`~vfl.parties.linear` — linear and logistic regression: ``LinearFeatureParty`` (A),
  ``LinearLabelParty`` (B), ``Coordinator`` (C).
* :mod:`~vfl.parties.trees` — gradient-boosted trees (SecureBoost).
* :mod:`~vfl.parties.credit` — the credit-scoring pipeline (WOE/IV, selection, scorecard).
* :mod:`~vfl.parties.labels` — the label party's labels as targets and row weights.
* :mod:`~vfl.parties.scaling` — each party's standardization of its own columns.
* :mod:`~vfl.parties.binning` — each party's bins of its own columns (trees, credit).
* :mod:`~vfl.parties.scoring` — validation scores.
* :mod:`~vfl.parties.wire` — vectors and residues as message fields.

Yang et al.'s names stay for teaching: :class:`PartyA` is the linear feature party, :class:`PartyB`
the linear label party. Messages between parties are sequenced by :mod:`vfl.protocols`.
"""

from vfl.parties.linear import dp
from vfl.parties.linear.coordinator import Coordinator
from vfl.parties.linear.data_party import DataParty, FeatureParty, loss_part_bound, prediction_bound, score_bound
from vfl.parties.labels import class_weights, row_weights, targets
from vfl.parties.linear.objectives import LINEAR, LOGISTIC, Objective, get_objective
from vfl.parties.linear.feature_party import LinearFeatureParty, PartyA
from vfl.parties.linear.label_party import LinearLabelParty, PartyB
from vfl.parties.wire import pack_residues, pack_vector, unpack_residues, unpack_vector

__all__ = ["Coordinator", "DataParty", "dp", "FeatureParty", "LinearFeatureParty", "LinearLabelParty", "LINEAR", "LOGISTIC", "Objective", "PartyA", "PartyB", "class_weights",
           "get_objective", "loss_part_bound", "pack_residues", "pack_vector", "prediction_bound", "row_weights",
           "score_bound", "targets", "unpack_residues", "unpack_vector"]
