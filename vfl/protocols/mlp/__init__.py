"""Split networks (vertical neural networks): the settings and one program per role (docs/mlp.md)."""

from vfl.protocols.mlp.inference import predict_coordinator, predict_feature, predict_label
from vfl.protocols.mlp.settings import MLPSettings
from vfl.protocols.mlp.training import train_coordinator, train_feature, train_label

__all__ = ["MLPSettings", "predict_coordinator", "predict_feature", "predict_label", "train_coordinator",
           "train_feature", "train_label"]
