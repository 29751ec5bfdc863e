"""What the label party scores its validation rows with (it alone sees their scores and labels)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import accuracy_score, r2_score, roc_auc_score, roc_curve

from vfl.parties.objectives import Objective

#: Scorings where a lower value is better.
LOWER_IS_BETTER = ("loss",)


def ks_statistic(y_true, y_score, pos_label=None) -> float:
    """The Kolmogorov-Smirnov statistic of a binary classifier's scores.

    The largest gap between the cumulative score distributions of the positive
    and the negative class, ``max_t |TPR(t) - FPR(t)|``: 0 for scores that do not
    separate the classes, 1 for a perfect separation.

    Parameters
    ----------
    y_true : array of shape (n,)
        Binary labels.
    y_score : array of shape (n,)
        Scores or probabilities of the positive class.
    pos_label : int or str, optional
        The positive class, as for :func:`sklearn.metrics.roc_curve`.
    """
    fpr, tpr, _ = roc_curve(y_true, y_score, pos_label=pos_label)
    return float(np.max(np.abs(tpr - fpr)))


def validation_score(scoring: str, objective: Objective, z: np.ndarray, y: np.ndarray) -> float:
    """The score of the scores ``z`` against labels ``y`` in the objective's coding (-1/+1 for logistic)."""
    if scoring == "loss":
        return float(np.mean(objective.loss(z, y)))
    if scoring == "r2":
        return float(r2_score(y, z))
    positive = (y > 0).astype(int)
    if scoring == "roc_auc":
        return float(roc_auc_score(positive, z))
    if scoring == "ks":
        return ks_statistic(positive, z)
    if scoring == "accuracy":
        return float(accuracy_score(positive, (z >= 0).astype(int)))
    raise ValueError(f"unknown scoring {scoring!r}")


def improved(scoring: str, score: float, best: float | None, tol: float | None) -> bool:
    """Whether ``score`` beats ``best`` by more than ``tol`` (0 when ``None``)."""
    if best is None:
        return True
    margin = tol or 0.0
    return score < best - margin if scoring in LOWER_IS_BETTER else score > best + margin
