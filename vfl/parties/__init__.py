"""Each party's own state and arithmetic: a party computes only on what it holds.

One folder per model family, one module per role inside it; what every family shares stays here, and
imports no family.

* :mod:`~vfl.parties.linear` — linear and logistic regression: ``LinearFeatureParty`` (Yang et al.'s A),
  ``LinearLabelParty`` (B); ``PartyA`` and ``PartyB`` are their teaching names.
* :mod:`~vfl.parties.trees` — gradient-boosted trees (SecureBoost).
* :mod:`~vfl.parties.credit` — the credit-scoring pipeline (WOE/IV, selection, scorecard).
* :mod:`~vfl.parties.mlp` — split neural networks.

Shared by every family:

* :mod:`~vfl.parties.coordinator` — the key holder (C): the Paillier private key, decrypting masked values.
* :mod:`~vfl.parties.labels` — the label party's labels as targets and row weights.
* :mod:`~vfl.parties.objectives` — the squared and Taylor-logistic losses.
* :mod:`~vfl.parties.holdout` — the rows held out for early stopping, from the shared seed.
* :mod:`~vfl.parties.privacy` — differential privacy's accounting.
* :mod:`~vfl.parties.scaling` — each party's standardization of its own columns.
* :mod:`~vfl.parties.binning` — each party's bins of its own columns (trees, credit).
* :mod:`~vfl.parties.scoring` — validation scores.
* :mod:`~vfl.parties.wire` — vectors and residues as message fields.

Messages between parties are sequenced by :mod:`vfl.protocols`.
"""

from vfl.parties.coordinator import Coordinator
from vfl.parties.labels import class_weights, row_weights, targets
from vfl.parties.objectives import LINEAR, LOGISTIC, Objective, get_objective
from vfl.parties.wire import pack_residues, pack_vector, unpack_residues, unpack_vector

__all__ = ["Coordinator", "LINEAR", "LOGISTIC", "Objective", "class_weights", "get_objective", "pack_residues",
           "pack_vector", "row_weights", "targets", "unpack_residues", "unpack_vector"]

#: Names this package gave before the families stood side by side, and where they live now.
_MOVED = {name: "vfl.parties.linear" for name in
          ("PartyA", "PartyB", "LinearFeatureParty", "LinearLabelParty", "DataParty", "FeatureParty", "dp",
           "loss_part_bound", "prediction_bound", "score_bound")}


def __getattr__(name: str):
    if name in _MOVED:
        raise AttributeError(f"vfl.parties.{name} is the linear family's: import it from {_MOVED[name]} "
                             f"(from {_MOVED[name]} import {name})")
    raise AttributeError(f"module 'vfl.parties' has no attribute {name!r}")
