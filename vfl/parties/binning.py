"""Each party's own binning of its own columns: thresholds, bin codes, a bin for missing values.

A column's non-missing values fall into at most ``max_bins`` bins separated by
ascending thresholds ``t_0 < t_1 < ...``: bin ``j`` holds ``t_(j-1) < x <= t_j``.
With no more distinct values than ``max_bins``, every distinct value has its own
bin and the thresholds are the midpoints between neighbours; otherwise the
thresholds are the column's quantiles at ``k / max_bins`` (the averaged
inverted CDF), duplicates removed, as scikit-learn's
``HistGradientBoostingClassifier`` bins (without its subsampling).  Missing values (NaN) get the code
``max_bins`` whatever the column.

A split "bin ``<= j``" is the split "``x <= t_j``" on raw values, so a party
that keeps its thresholds can score new rows without binning them; the
thresholds never leave the party that owns the column.  Binning is per column,
so a party binning its own columns gets exactly the bins a centralized binner
would give the same columns of the pooled table.
"""

from __future__ import annotations

import numpy as np

from vfl.errors import ConfigurationError, DataError

#: The most bins for non-missing values (codes fit in a byte with the missing bin).
MAX_BINS = 255


def check_max_bins(max_bins) -> int:
    """``max_bins`` as an int in ``[2, 255]``, else a :class:`ConfigurationError`."""
    if isinstance(max_bins, bool) or not isinstance(max_bins, (int, np.integer)) or not 2 <= max_bins <= MAX_BINS:
        raise ConfigurationError(f"max_bins must be an integer from 2 to {MAX_BINS}, got {max_bins!r}")
    return int(max_bins)


def column_thresholds(values: np.ndarray, max_bins: int) -> np.ndarray:
    """The ascending thresholds of one column (NaN ignored); empty for a column with one value or none."""
    values = values[~np.isnan(values)]
    distinct = np.unique(values)
    if len(distinct) <= max_bins:
        return (distinct[:-1] + distinct[1:]) / 2.0
    percentiles = np.linspace(0, 100, num=max_bins + 1)[1:-1]
    return np.unique(np.percentile(values, percentiles, method="averaged_inverted_cdf"))


class Binner:
    """Thresholds per column, fitted on one party's own training rows.

    Parameters
    ----------
    max_bins : int, default=32
        Bins for non-missing values per column, at most; missing values get one more.

    Attributes
    ----------
    thresholds_ : list of ndarray
        Per column, the ascending thresholds (``n_bins_[j] - 1`` of them).
    n_bins_ : ndarray of int
        Per column, the bins its non-missing values fall into.
    has_missing_ : ndarray of bool
        Per column, whether the training rows held a missing value.
    """

    def __init__(self, max_bins: int = 32):
        self.max_bins = check_max_bins(max_bins)

    @property
    def missing_code(self) -> int:
        """The code of a missing value: ``max_bins``."""
        return self.max_bins

    def fit(self, x: np.ndarray, where: str = "the data", columns=None) -> "Binner":
        """Fit the thresholds of every column of ``x`` (rows, columns); NaN is missing, infinity refused."""
        x = _matrix(x, where, columns)
        self.thresholds_ = [column_thresholds(x[:, j], self.max_bins) for j in range(x.shape[1])]
        self.n_bins_ = np.array([len(t) + 1 for t in self.thresholds_], dtype=np.int64)
        self.has_missing_ = np.isnan(x).any(axis=0)
        return self

    def transform(self, x: np.ndarray, where: str = "the data", columns=None) -> np.ndarray:
        """Bin codes (uint16, rows by columns): ``j`` for bin ``j``, :attr:`missing_code` for NaN."""
        x = _matrix(x, where, columns)
        if x.shape[1] != len(self.thresholds_):
            raise DataError(f"{where}: {x.shape[1]} columns, but the binning was fitted on {len(self.thresholds_)}")
        codes = np.empty(x.shape, dtype=np.uint16)
        for j, thresholds in enumerate(self.thresholds_):
            column = x[:, j]
            codes[:, j] = np.searchsorted(thresholds, column, side="left")
            codes[np.isnan(column), j] = self.missing_code
        return codes

    def fit_transform(self, x: np.ndarray, where: str = "the data", columns=None) -> np.ndarray:
        return self.fit(x, where, columns).transform(x, where, columns)

    def to_dict(self) -> dict:
        """JSON-ready: the thresholds are the party's own secret (they stay in its model shard)."""
        return {"max_bins": self.max_bins, "thresholds": [t.tolist() for t in self.thresholds_],
                "has_missing": [bool(v) for v in self.has_missing_]}

    @classmethod
    def from_dict(cls, saved: dict) -> "Binner":
        binner = cls(saved["max_bins"])
        binner.thresholds_ = [np.asarray(t, dtype=np.float64) for t in saved["thresholds"]]
        binner.n_bins_ = np.array([len(t) + 1 for t in binner.thresholds_], dtype=np.int64)
        binner.has_missing_ = np.asarray(saved["has_missing"], dtype=bool)
        return binner


def _matrix(x, where: str, columns) -> np.ndarray:
    """``x`` as a 2-D float array with no infinity (NaN allowed: it is a missing value)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise DataError(f"{where}: expected a 2-D table, got shape {x.shape}")
    infinite = np.isinf(x)
    if infinite.any():
        row, col = map(int, np.argwhere(infinite)[0])
        name = repr(list(columns)[col]) if columns is not None else str(col)
        raise DataError(f"{where}, column {name}: infinity at row {row}")
    return x
