"""The three roles. Each party holds only its own state and computes only on what it holds.

* :class:`PartyA` — a feature party's columns (there may be any number of feature parties).
* :class:`PartyB` — the label party: feature columns, labels and the intercept.
* :class:`Coordinator` — the Paillier private key.

The label party's labels become targets (one per class for one-vs-rest) and row
weights in :mod:`~vfl.parties.labels`.

Beside them, the arithmetic a party runs on its own: :mod:`~vfl.parties.optim`
(update rules), :mod:`~vfl.parties.dp` (the label party's noise and its
accounting), :mod:`~vfl.parties.scoring` (validation scores) and
:mod:`~vfl.parties.packed` (packed slots).

Messages between them are sequenced by :mod:`vfl.protocols`.
"""

from vfl.parties import dp
from vfl.parties.coordinator import Coordinator
from vfl.parties.feature_party import FeatureParty, loss_part_bound, prediction_bound, score_bound
from vfl.parties.labels import class_weights, row_weights, targets
from vfl.parties.objectives import LINEAR, LOGISTIC, Objective, get_objective
from vfl.parties.party_a import PartyA
from vfl.parties.party_b import PartyB
from vfl.parties.wire import pack_residues, pack_vector, unpack_residues, unpack_vector

__all__ = ["Coordinator", "dp", "FeatureParty", "LINEAR", "LOGISTIC", "Objective", "PartyA", "PartyB", "class_weights",
           "get_objective", "loss_part_bound", "pack_residues", "pack_vector", "prediction_bound", "row_weights",
           "score_bound", "targets", "unpack_residues", "unpack_vector"]
