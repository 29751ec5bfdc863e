"""Gradient-boosted trees across parties (SecureBoost, Cheng et al. 2019): one program per role.

* :mod:`vfl.protocols.boosting.settings` — the settings every party shares.
* :mod:`vfl.protocols.boosting.training` — training, the label party holding the key.
* :mod:`vfl.protocols.boosting.inference` — private prediction by leaf masks.
"""

from vfl.protocols.boosting.inference import predict_feature, predict_label
from vfl.protocols.boosting.settings import BoostingSettings, should_stop
from vfl.protocols.boosting.training import run_feature, run_label, split_rows

__all__ = ["BoostingSettings", "predict_feature", "predict_label", "run_feature", "run_label", "should_stop",
           "split_rows"]
