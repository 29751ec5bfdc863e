"""The papers' steps, one program per role; one folder per model family.

* :mod:`~vfl.protocols.linear` — linear and logistic regression: Yang et al.'s training and
  inference, conjugate gradient, the shared protocol.
* :mod:`~vfl.protocols.trees` — gradient-boosted trees (SecureBoost): training and prediction.
* :mod:`~vfl.protocols.credit` — WOE/IV, selection and the Pearson block of the credit pipeline.
* :mod:`~vfl.protocols.psi` — aligning the parties' ids by private set intersection (every family).
* :mod:`~vfl.protocols.roster` — who plays which role, by the names users gave the parties.
* :mod:`~vfl.protocols.fields` — the checked fields of received messages.
"""

from vfl.protocols.linear.inference import (predict_a, predict_b, predict_c, predict_coordinator, predict_feature,
                                           predict_label)
from vfl.protocols.roster import TWO_PARTY, Roster
from vfl.protocols.linear.settings import (TrainingSettings, batch_sizes, batches, check_batch_size,
                                    check_gradient_equations, gradient_unknowns)
from vfl.protocols.linear.training import run_a, run_b, run_c, train_coordinator, train_feature, train_label

__all__ = ["Roster", "TWO_PARTY", "TrainingSettings", "batch_sizes", "batches", "check_batch_size", "check_gradient_equations",
           "gradient_unknowns", "predict_a", "predict_b",
           "predict_c", "predict_coordinator", "predict_feature", "predict_label", "run_a", "run_b", "run_c",
           "train_coordinator", "train_feature", "train_label"]
