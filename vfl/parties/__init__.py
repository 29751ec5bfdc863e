"""The three roles. Each holds only its own state and computes only on what it holds.

* :class:`PartyA` — feature columns.
* :class:`PartyB` — feature columns, labels and the intercept.
* :class:`Coordinator` — the Paillier private key.

Messages between them are sequenced by :mod:`vfl.protocols`.
"""

from vfl.parties import dp
from vfl.parties.coordinator import Coordinator
from vfl.parties.feature_party import FeatureParty, loss_part_bound, prediction_bound, score_bound
from vfl.parties.objectives import LINEAR, LOGISTIC, Objective, get_objective
from vfl.parties.party_a import PartyA
from vfl.parties.party_b import PartyB, class_weights
from vfl.parties.wire import pack_residues, pack_vector, unpack_residues, unpack_vector

__all__ = ["Coordinator", "dp", "FeatureParty", "LINEAR", "LOGISTIC", "Objective", "PartyA", "PartyB", "class_weights",
           "get_objective", "loss_part_bound", "pack_residues", "pack_vector", "prediction_bound", "score_bound",
           "unpack_residues", "unpack_vector"]
