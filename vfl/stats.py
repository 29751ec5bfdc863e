"""Table statistics across parties: each party's own, the Pearson matrix between two parties, population stability.

* :func:`table_statistics` — each party's own columns: count, missing, mean, standard
  deviation, quartiles (computed where the columns are; nothing crosses).
* :func:`pearson` — the Pearson correlations between two parties' columns under the
  first party's Paillier key (:mod:`vfl.protocols.credit.pearson`): neither sees the
  other's columns; both learn the matrix.
* :func:`population_stability` — per column, the population stability index between
  training and scoring rows in the training bins, at each party (nothing crosses).

``vfl party`` writes the first and last for every party (``statistics_NAME.csv``,
``psi_NAME.csv`` at ``vfl predict``); the arithmetic is :mod:`vfl.parties.credit.statistics`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from vfl import inprocess
from vfl.dataset import VerticalDataset
from vfl.errors import DataError
from vfl.parties.binning import Binner
from vfl.parties.credit.statistics import describe, population_stability as _psi
from vfl.parties.credit.scorecard import flat_codes
from vfl.transport import Transcript

__all__ = ["pearson", "population_stability", "table_statistics"]


def table_statistics(data: VerticalDataset) -> dict:
    """Each party's own table statistics: ``{party: DataFrame}`` (a row per column; missing values left out)."""
    if not isinstance(data, VerticalDataset):
        raise DataError(f"table_statistics takes a VerticalDataset, got {type(data).__name__}")
    return {party: describe(data.features(party), data.columns(party)) for party in data.parties}


def pearson(data: VerticalDataset, first: str, second: str, key_bits: int = 2048, insecure: bool = False,
            transcript: Transcript | None = None, n_jobs=None) -> pd.DataFrame:
    """The Pearson correlations of ``first``'s columns (rows) with ``second``'s (columns), computed under encryption.

    ``first`` makes the key pair and encrypts its standardized columns; ``second``
    combines them with its own; ``first`` decrypts the sums over the rows, one per
    pair of columns, and both learn the matrix.  A missing value counts as its
    column's mean.  Equal to the Pearson correlations of the same values within
    the fixed point (``2^-20`` per value).
    """
    if not isinstance(data, VerticalDataset):
        raise DataError(f"pearson takes a VerticalDataset, got {type(data).__name__}")
    for party in (first, second):
        if party not in data.parties:
            raise DataError(f"no party named {party!r}; parties are {list(data.parties)}")
    if first == second:
        raise DataError(f"pearson correlates two parties' columns; {first!r} is named twice (a party's own "
                        "correlations need no protocol: pandas' DataFrame.corr)")
    both = inprocess.pearson(data.features(first), data.features(second), first, second, key_bits, insecure,
                             transcript, n_jobs=n_jobs)
    return pd.DataFrame(both[first], index=data.columns(first), columns=data.columns(second))


def population_stability(binner: Binner, training, scoring, columns=None) -> pd.Series:
    """PSI per column between a party's training rows and its scoring rows, in the training bins (missing a bin).

    Conventional reading: below 0.1 stable, 0.1 to 0.25 a shift to watch, above 0.25 a shift.
    """
    def counts(x):
        codes = flat_codes(binner.transform(x, "population_stability", columns), binner.n_bins_, binner.missing_code)
        return [np.bincount(codes[:, j], minlength=int(binner.n_bins_[j]) + 1) for j in range(codes.shape[1])]

    names = list(columns) if columns is not None else [f"x{j}" for j in range(len(binner.thresholds_))]
    return pd.Series([_psi(a, b) for a, b in zip(counts(training), counts(scoring))], index=names, name="psi")
