"""The linear family's protocols, each one program per role (feature party, label party, coordinator).

* :mod:`~vfl.protocols.linear.training` — Yang et al. 2019, Table 2: training, step by step.
* :mod:`~vfl.protocols.linear.passes` — one encrypted pass (scores, residual, gradients) of that table.
* :mod:`~vfl.protocols.linear.conjugate` — conjugate gradient over those passes (the full-batch default).
* :mod:`~vfl.protocols.linear.shared` — ``protocol="shared"``: weights shared with C, no party learns a gradient.
* :mod:`~vfl.protocols.linear.validation` — early stopping on held-out rows.
* :mod:`~vfl.protocols.linear.inference` — scoring new rows (private by default; Table 3 for teaching).
* :mod:`~vfl.protocols.linear.settings` — the shared settings and the batch schedule.
* :mod:`~vfl.protocols.linear.checks` — what every party checks before it runs (score span, equations).
"""

from vfl.protocols.linear.inference import (predict_a, predict_b, predict_c, predict_coordinator, predict_feature,
                                            predict_label)
from vfl.protocols.linear.settings import (TrainingSettings, batch_sizes, batches, check_batch_size,
                                           check_gradient_equations, gradient_unknowns)
from vfl.protocols.linear.training import run_a, run_b, run_c, train_coordinator, train_feature, train_label

__all__ = ["TrainingSettings", "batch_sizes", "batches", "check_batch_size", "check_gradient_equations",
           "gradient_unknowns", "predict_a", "predict_b", "predict_c", "predict_coordinator", "predict_feature",
           "predict_label", "run_a", "run_b", "run_c", "train_coordinator", "train_feature", "train_label"]
