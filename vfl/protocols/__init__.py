"""The protocols, each written as one program per role (A, B, C).

* :mod:`vfl.protocols.training` — Yang et al. 2019, Table 2 (linear and logistic regression).
* :mod:`vfl.protocols.inference` — scoring new rows (private by default; Table 3 for teaching).
* :mod:`vfl.protocols.settings` — the shared settings and batch schedule.
"""

from vfl.protocols.inference import predict_a, predict_b, predict_c
from vfl.protocols.roster import TWO_PARTY, Roster
from vfl.protocols.settings import (TrainingSettings, batch_sizes, batches, check_batch_size,
                                    check_gradient_equations, gradient_unknowns)
from vfl.protocols.training import run_a, run_b, run_c

__all__ = ["Roster", "TWO_PARTY", "TrainingSettings", "batch_sizes", "batches", "check_batch_size", "check_gradient_equations",
           "gradient_unknowns", "predict_a", "predict_b",
           "predict_c", "run_a", "run_b", "run_c"]
