"""The rows every party holds out for early stopping, agreed from the shared seed, and the check of that split.

Shared by every family (linear, trees, credit, networks) and by the centralized references, so that a
federated fit and its centralized twin hold out the same rows.
"""

from __future__ import annotations

import math

import numpy as np

from vfl.errors import ConfigurationError

#: Fewest validation rows early stopping scores: one row's score is noise, and ranks nothing (roc_auc, ks).
MIN_VALIDATION_ROWS = 2


def validation_rows(n_rows: int, fraction: float, seed: int) -> np.ndarray:
    """The rows held out for validation: ``ceil(fraction n)`` of them, chosen from the shared seed only.

    Every party computes the same rows from the seed and the row count, so the
    split is agreed without any party looking at the labels.
    """
    count = min(max(1, math.ceil(fraction * n_rows)), n_rows - 1)
    return np.sort(np.random.default_rng([int(seed), 0x76616C]).permutation(n_rows)[:count])


def check_split(n_rows: int, fraction: float, least: int, why: str,
                advice: str = "or pass fit(..., validation=...)") -> None:
    """Refuse a validation split that leaves fewer than ``least`` rows to train on, or too few to validate on.

    The rows held out are :func:`validation_rows`'s
    (``ceil(fraction * n_rows)``, at least one, all rows but one at most).
    ``why`` says where ``least`` comes from; ``advice`` the other way out.
    """
    held = min(max(1, math.ceil(fraction * n_rows)), n_rows - 1)
    left = n_rows - held
    if left < least:
        raise ConfigurationError(
            f"validation_fraction={fraction:g} holds out {held} of the {n_rows} rows for early "
            f"stopping and leaves {left} to train on, not {why}; lower validation_fraction (at most "
            f"{math.floor(max(n_rows - least, 0) / n_rows * 1000) / 1000:g} here) {advice}")
    if held < MIN_VALIDATION_ROWS:
        raise ConfigurationError(
            f"validation_fraction={fraction:g} holds out {held} of the {n_rows} rows for early stopping, too few "
            f"to score (at least {MIN_VALIDATION_ROWS}); raise validation_fraction (at least "
            f"{math.ceil(MIN_VALIDATION_ROWS / n_rows * 1000) / 1000:g} here) {advice}")
