"""What every boosting party holds of its own columns: their bins, and the leaves its splits allow."""

from __future__ import annotations

import numpy as np

from vfl.errors import DataError
from vfl.parties.binning import Binner
from vfl.parties.binning import flat_bins
from vfl.parties.trees.splits import CandidateTable, goes_left
from vfl.parties.trees.tree import allowed_leaves


class BinnedColumns:
    """A party's columns binned with its own thresholds (fitted on ``features`` unless ``binner`` is given).

    Parameters
    ----------
    features : array (rows, columns)
        Its aligned rows, in its own units; NaN is a missing value.
    role : str
        Its name in the federation.
    columns : list of str, optional
    binner : Binner, optional
        Thresholds fitted earlier (prediction).
    max_bins : int
    """

    def __init__(self, features, role: str, columns=None, binner: Binner | None = None, max_bins: int = 32):
        self.role = role
        self.columns = list(columns) if columns is not None else [f"x{j}" for j in range(np.shape(features)[1])]
        where = f"party {role}"
        self.binner = binner if binner is not None else Binner(max_bins).fit(features, where, self.columns)
        self.codes = self.binner.transform(features, where, self.columns)
        self.n_rows = len(self.codes)
        self.table = CandidateTable(self.binner.n_bins_, self.binner.has_missing_)
        self.flat = flat_bins(self.codes, self.binner.n_bins_, self.binner.missing_code)

    @property
    def n_columns(self) -> int:
        return len(self.columns)

    def bin_new(self, features) -> np.ndarray:
        """New rows binned with the training thresholds."""
        features = np.asarray(features, dtype=np.float64)
        if features.ndim != 2 or features.shape[1] != self.n_columns:
            raise DataError(f"party {self.role}: expected {self.n_columns} columns {self.columns}, got shape "
                            f"{features.shape}")
        return self.binner.transform(features, f"party {self.role}", self.columns)

    def allowed(self, left, right, splits: dict, codes: np.ndarray) -> np.ndarray:
        """Per row of ``codes``, the leaves this party's ``splits`` ({node: split}) allow in a tree of that shape."""
        own = {node: goes_left(codes, self.binner.missing_code, *split) for node, split in splits.items()}
        return allowed_leaves(left, right, len(codes), own)
