"""Metrics a credit-scoring team reports, beside scikit-learn's.

Use scikit-learn where it has the metric (``roc_auc_score``, ``accuracy_score``,
``r2_score``); this module adds what it lacks.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_curve


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
