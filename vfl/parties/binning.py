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

Three strategies (``strategy``):

* ``"quantile"`` (above): about as many rows in every bin;
* ``"uniform"``: equal-width bins between the column's smallest and largest
  value (with no more distinct values than ``max_bins``, the midpoints, as above);
* ``"monotone"``: for the label party's own columns, which it can bin with its
  labels (:func:`monotone_thresholds`): quantile pre-bins merged until the event
  rate rises or falls monotonically from bin to bin (pool adjacent violators),
  every bin holds ``min_bin_fraction`` of the rows, and at most ``max_bins``
  remain (merging the neighbours whose merge loses the least information
  value).  Pre-bins are the quantile bins of ``2 * max_bins`` (at least 20).
"""

from __future__ import annotations

import math

import numpy as np

from vfl.errors import ConfigurationError, DataError

#: The most bins for non-missing values (codes fit in a byte with the missing bin).
MAX_BINS = 255
#: How a column's thresholds are chosen (see the module's docstring).
STRATEGIES = ("quantile", "uniform", "monotone")


def check_max_bins(max_bins) -> int:
    """``max_bins`` as an int in ``[2, 255]``, else a :class:`ConfigurationError`."""
    if isinstance(max_bins, bool) or not isinstance(max_bins, (int, np.integer)) or not 2 <= max_bins <= MAX_BINS:
        raise ConfigurationError(f"max_bins must be an integer from 2 to {MAX_BINS}, got {max_bins!r}")
    return int(max_bins)


def check_strategy(strategy) -> str:
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise ConfigurationError(f"the binning strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
    return strategy


def column_thresholds(values: np.ndarray, max_bins: int, strategy: str = "quantile") -> np.ndarray:
    """The ascending thresholds of one column (NaN ignored); empty for a column with one value or none.

    ``strategy`` is ``"quantile"`` or ``"uniform"`` (``"monotone"`` needs the
    labels: :func:`monotone_thresholds`).
    """
    values = values[~np.isnan(values)]
    distinct = np.unique(values)
    if len(distinct) <= max_bins:
        return (distinct[:-1] + distinct[1:]) / 2.0
    if strategy == "uniform":
        return np.unique(np.linspace(distinct[0], distinct[-1], num=max_bins + 1)[1:-1])
    percentiles = np.linspace(0, 100, num=max_bins + 1)[1:-1]
    return np.unique(np.percentile(values, percentiles, method="averaged_inverted_cdf"))


def monotone_thresholds(values: np.ndarray, events: np.ndarray, max_bins: int,
                        min_bin_fraction: float = 0.05) -> np.ndarray:
    """Thresholds whose bins have a monotone event rate (the label party's own columns).

    Parameters
    ----------
    values : float array (rows,)
        One column; NaN (missing) rows are left out (they get their own bin).
    events : bool array (rows,)
        Whether each row is an event (the positive class).
    max_bins : int
    min_bin_fraction : float
        Each bin holds at least this share of the non-missing rows (when it can).

    The direction (rising or falling) is the one of the larger information
    value once monotone; ties go to rising.
    """
    present = ~np.isnan(values)
    values, events = values[present], np.asarray(events, dtype=bool)[present]
    pre = column_thresholds(values, max(20, 2 * max_bins))
    if not len(pre):
        return pre
    codes = np.searchsorted(pre, values, side="left")
    counts = np.bincount(codes, minlength=len(pre) + 1).astype(np.float64)
    hits = np.bincount(codes, weights=events, minlength=len(pre) + 1)
    best = None
    for rising in (True, False):
        edges = _monotone_edges(counts, hits, rising, max_bins, max(1.0, min_bin_fraction * counts.sum()))
        iv = _iv(*_merged(counts, hits, edges))
        if best is None or iv > best[0] + 1e-12:
            best = (iv, edges)
    return pre[best[1]]


def _merged(counts: np.ndarray, hits: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows and events per bin when pre-bins are cut after the pre-thresholds ``edges``."""
    starts = np.concatenate([[0], edges + 1])
    return np.add.reduceat(counts, starts), np.add.reduceat(hits, starts)


def _iv(counts: np.ndarray, hits: np.ndarray) -> float:
    """Information value of bins (FATE's 0.5 adjustment for a bin without events or non-events)."""
    misses = counts - hits
    if hits.sum() <= 0 or misses.sum() <= 0:
        return 0.0
    zero = (hits == 0) | (misses == 0)
    e, m = np.where(zero, hits + 0.5, hits) / hits.sum(), np.where(zero, misses + 0.5, misses) / misses.sum()
    return math.fsum(((e - m) * np.log(e / m)).tolist())


def _monotone_edges(counts, hits, rising: bool, max_bins: int, min_rows: float) -> np.ndarray:
    """Which pre-thresholds stay: pool adjacent violators, then small bins, then the fewest-loss merges."""
    bins = [[c, h, i] for i, (c, h) in enumerate(zip(counts, hits)) if c > 0]   # rows, events, last pre-bin

    def rate(b):
        return b[1] / b[0]

    def merge(i):                       # bin i absorbs bin i + 1
        bins[i] = [bins[i][0] + bins[i + 1][0], bins[i][1] + bins[i + 1][1], bins[i + 1][2]]
        del bins[i + 1]

    i = 0
    while i < len(bins) - 1:            # pool adjacent violators
        if (rate(bins[i]) > rate(bins[i + 1])) if rising else (rate(bins[i]) < rate(bins[i + 1])):
            merge(i)
            i = max(i - 1, 0)
        else:
            i += 1
    while len(bins) > 1 and min(b[0] for b in bins) < min_rows:
        i = min(range(len(bins)), key=lambda j: bins[j][0])
        if i == len(bins) - 1 or (i > 0 and abs(rate(bins[i - 1]) - rate(bins[i]))
                                   <= abs(rate(bins[i + 1]) - rate(bins[i]))):
            i -= 1
        merge(i)
    while len(bins) > max_bins:
        losses = []
        for i in range(len(bins) - 1):
            trial = bins[:i] + [[bins[i][0] + bins[i + 1][0], bins[i][1] + bins[i + 1][1], 0]] + bins[i + 2:]
            losses.append(-_iv(np.array([b[0] for b in trial]), np.array([b[1] for b in trial])))
        merge(int(np.argmin(losses)))
    return np.asarray([b[2] for b in bins[:-1]], dtype=np.int64)


class Binner:
    """Thresholds per column, fitted on one party's own training rows.

    Parameters
    ----------
    max_bins : int, default=32
        Bins for non-missing values per column, at most; missing values get one more.
    strategy : {"quantile", "uniform", "monotone"}, default="quantile"
        How thresholds are chosen; ``"monotone"`` needs the labels at :meth:`fit`
        (the label party's own columns).
    min_bin_fraction : float, default=0.05
        ``"monotone"``: each bin holds at least this share of the rows.

    Attributes
    ----------
    thresholds_ : list of ndarray
        Per column, the ascending thresholds (``n_bins_[j] - 1`` of them).
    n_bins_ : ndarray of int
        Per column, the bins its non-missing values fall into.
    has_missing_ : ndarray of bool
        Per column, whether the training rows held a missing value.
    """

    def __init__(self, max_bins: int = 32, strategy: str = "quantile", min_bin_fraction: float = 0.05):
        self.max_bins = check_max_bins(max_bins)
        self.strategy = check_strategy(strategy)
        if isinstance(min_bin_fraction, bool) or not isinstance(min_bin_fraction, (int, float, np.floating)) \
                or not 0 <= min_bin_fraction < 0.5:
            raise ConfigurationError(f"min_bin_fraction must be a number in [0, 0.5), got {min_bin_fraction!r}")
        self.min_bin_fraction = float(min_bin_fraction)

    @property
    def missing_code(self) -> int:
        """The code of a missing value: ``max_bins``."""
        return self.max_bins

    def fit(self, x: np.ndarray, where: str = "the data", columns=None, events=None) -> "Binner":
        """Fit the thresholds of every column of ``x`` (rows, columns); NaN is missing, infinity refused.

        ``events`` (bool per row: the positive class) is needed by ``strategy="monotone"`` only.
        """
        x = _matrix(x, where, columns)
        if self.strategy == "monotone":
            if events is None or len(events) != len(x):
                raise ConfigurationError(f"{where}: monotone binning uses the labels; only the label party can bin "
                                         "its own columns so (the others: 'quantile' or 'uniform')")
            with np.errstate(over="ignore", invalid="ignore"):
                self.thresholds_ = [monotone_thresholds(x[:, j], events, self.max_bins, self.min_bin_fraction)
                                    for j in range(x.shape[1])]
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                self.thresholds_ = [column_thresholds(x[:, j], self.max_bins, self.strategy)
                                    for j in range(x.shape[1])]
        _check_thresholds(self.thresholds_, x, where, columns)
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

    def fit_transform(self, x: np.ndarray, where: str = "the data", columns=None, events=None) -> np.ndarray:
        return self.fit(x, where, columns, events).transform(x, where, columns)

    def to_dict(self) -> dict:
        """JSON-ready: the thresholds are the party's own secret (they stay in its model shard)."""
        saved = {"max_bins": self.max_bins, "thresholds": [t.tolist() for t in self.thresholds_],
                 "has_missing": [bool(v) for v in self.has_missing_]}
        if self.strategy != "quantile":
            saved["strategy"] = self.strategy
        return saved

    def subset(self, columns) -> "Binner":
        """The same binning of only ``columns`` (indices), in that order."""
        out = Binner(self.max_bins, self.strategy, self.min_bin_fraction)
        out.thresholds_ = [self.thresholds_[j] for j in columns]
        out.n_bins_ = self.n_bins_[list(columns)]
        out.has_missing_ = self.has_missing_[list(columns)]
        return out

    @classmethod
    def from_dict(cls, saved: dict) -> "Binner":
        binner = cls(saved["max_bins"], saved.get("strategy", "quantile"))
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


def _check_thresholds(thresholds: list, x: np.ndarray, where: str, columns) -> None:
    """Refuse a column whose thresholds overflow float64 (two values near 1e308 average to infinity).

    Such a threshold would put rows in the wrong bin without a word.
    """
    for j, column in enumerate(thresholds):
        if np.isfinite(column).all():
            continue
        name = repr(list(columns)[j]) if columns is not None else str(j)
        values = np.where(np.isnan(x[:, j]), 0.0, np.abs(x[:, j]))
        row = int(np.argmax(values))
        raise DataError(f"{where}, column {name}: cannot be binned, its values are too large for float64 "
                        f"arithmetic (value {x[row, j]:.6g} at row {row}: the bin thresholds between them "
                        "overflow); rescale the column (divide it by a power of ten) or remove the outlying value")


def offsets(n_bins) -> np.ndarray:
    """Where each feature's bins start in a party's flat histogram (``n_bins[f] + 1`` slots each: the last is missing)."""
    sizes = np.asarray(n_bins, dtype=np.int64) + 1
    return np.concatenate([[0], np.cumsum(sizes)])


def flat_bins(codes: np.ndarray, n_bins, missing_code: int) -> np.ndarray:
    """Each row's flat histogram slot per feature (rows by features), missing values in their feature's last slot."""
    codes = np.asarray(codes, dtype=np.int64)
    n_bins = np.asarray(n_bins, dtype=np.int64)
    local = np.where(codes == missing_code, n_bins[None, :], codes)
    return local + offsets(n_bins)[None, :-1]
