"""Gradient-boosted trees across parties (SecureBoost, Cheng et al. 2019): one program per role.

* :mod:`vfl.protocols.trees.settings` — the settings every party shares.
* :mod:`vfl.protocols.trees.training` — training, the label party holding the key.
* :mod:`vfl.protocols.trees.inference` — private prediction by leaf masks.
"""

from vfl.protocols.trees.inference import predict_feature, predict_label
from vfl.protocols.trees.settings import BoostingSettings, TreeSettings, should_stop
from vfl.protocols.trees.training import run_feature, run_label, split_rows, train_feature, train_label

__all__ = ["BoostingSettings", "TreeSettings", "predict_feature", "predict_label", "run_feature", "run_label", "should_stop",
           "split_rows", "train_feature", "train_label"]
