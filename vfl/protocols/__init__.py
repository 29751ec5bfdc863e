"""The papers' steps, one program per role; one folder per model family.

* :mod:`~vfl.protocols.linear` — linear and logistic regression: Yang et al.'s training and
  inference, conjugate gradient, the shared protocol.
* :mod:`~vfl.protocols.trees` — gradient-boosted trees (SecureBoost): training and prediction.
* :mod:`~vfl.protocols.credit` — WOE/IV, selection and the Pearson block of the credit pipeline.
* :mod:`~vfl.protocols.mlp` — split neural networks.

Shared by every family (and importing none):

* :mod:`~vfl.protocols.psi` — aligning the parties' ids by private set intersection.
* :mod:`~vfl.protocols.roster` — who plays which role, by the names users gave the parties.
* :mod:`~vfl.protocols.fields` — the checked fields of received messages.
* :mod:`~vfl.protocols.release` — the release check of what a feature party's per-row outputs give away.
"""

from vfl.protocols.roster import TWO_PARTY, Roster

__all__ = ["Roster", "TWO_PARTY"]

_LINEAR = ("TrainingSettings", "batch_sizes", "batches", "check_batch_size", "check_gradient_equations",
           "gradient_unknowns", "predict_a", "predict_b", "predict_c", "predict_coordinator", "predict_feature",
           "predict_label", "run_a", "run_b", "run_c", "train_coordinator", "train_feature", "train_label")


def __getattr__(name: str):
    if name in _LINEAR:
        raise AttributeError(f"vfl.protocols.{name} is the linear family's: import it from vfl.protocols.linear "
                             f"(from vfl.protocols.linear import {name})")
    raise AttributeError(f"module 'vfl.protocols' has no attribute {name!r}")
