"""Metrics a credit-scoring team reports, beside scikit-learn's.

Use scikit-learn where it has the metric (``roc_auc_score``, ``accuracy_score``,
``r2_score``); this module adds what it lacks: :func:`ks_statistic`, the
Kolmogorov-Smirnov statistic (the same function the label party uses to score
validation rows, :mod:`vfl.parties.scoring`).
"""

from vfl.parties.scoring import ks_statistic

__all__ = ["ks_statistic"]
