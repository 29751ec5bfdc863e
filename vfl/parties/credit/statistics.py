"""A party's own statistics (table statistics, population stability) and the arithmetic of the encrypted Pearson.

Table statistics and the population stability index are each party's own:
computed on its rows, they cross no link.

The Pearson correlation between two parties' columns (:mod:`vfl.protocols.credit`):
each party standardizes its columns (mean 0, standard deviation 1 over the
rows, population form; a missing value becomes 0, the column's mean), rounds
them to ``frac_bits`` fractional bits; the key holder encrypts its rows packed
(its columns side by side in signed slots, :func:`product_group`), the other
party raises them to its own rounded values and multiplies over the rows (one
multi-exponentiation per column), so each slot sums ``z_a z_b 2^(2f)`` over
the rows: ``n 2^(2f)`` times the correlation, up to the rounding (at most
``2^-f`` times the largest ``|z|`` per row in each factor).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from vfl.crypto.slots import Group

#: Fractional bits of the standardized values in the encrypted Pearson correlation.
PEARSON_FRAC_BITS = 20
#: The smallest share a bin counts with in the population stability index (an empty bin would make it infinite).
PSI_FLOOR = 1e-4


def describe(x: np.ndarray, columns) -> pd.DataFrame:
    """Per column: rows, missing values, mean, sample standard deviation, min, quartiles, max (missing left out)."""
    x = np.asarray(x, dtype=np.float64)
    rows = []
    for j, name in enumerate(columns):
        column = x[:, j]
        present = column[~np.isnan(column)]
        stats = {"column": str(name), "count": int(present.size), "missing": int(column.size - present.size)}
        if present.size:
            q = np.percentile(present, [0, 25, 50, 75, 100])
            stats.update(mean=float(present.mean()), std=float(present.std(ddof=1)) if present.size > 1 else np.nan,
                         min=float(q[0]), q25=float(q[1]), median=float(q[2]), q75=float(q[3]), max=float(q[4]))
        else:
            stats.update(mean=np.nan, std=np.nan, min=np.nan, q25=np.nan, median=np.nan, q75=np.nan, max=np.nan)
        rows.append(stats)
    return pd.DataFrame(rows).set_index("column")


def population_stability(expected, actual, floor: float = PSI_FLOOR) -> float:
    """PSI of one column: ``sum (a - e) ln(a / e)`` over bins, ``a``, ``e`` the shares of rows (floored at ``floor``).

    ``expected`` and ``actual`` are rows per bin (training, scoring), in the same bins.
    """
    e = np.asarray(expected, dtype=np.float64)
    a = np.asarray(actual, dtype=np.float64)
    if e.sum() <= 0 or a.sum() <= 0:
        return float("nan")
    e = np.maximum(e / e.sum(), floor)
    a = np.maximum(a / a.sum(), floor)
    return float(np.sum((a - e) * np.log(a / e)))


def standardized(x: np.ndarray) -> np.ndarray:
    """Columns at mean 0 and (population) standard deviation 1, a missing value at 0; a constant column all 0."""
    x = np.asarray(x, dtype=np.float64)
    mean = np.nanmean(x, axis=0) if len(x) else np.zeros(x.shape[1])
    centred = np.where(np.isnan(x), 0.0, x - mean)
    scale = np.sqrt(np.mean(centred ** 2, axis=0))
    return np.where(scale > 0, centred / np.where(scale > 0, scale, 1.0), 0.0)


def rounded(z: np.ndarray, frac_bits: int = PEARSON_FRAC_BITS) -> np.ndarray:
    """Standardized values as signed integers at ``frac_bits`` fractional bits."""
    return np.rint(np.ldexp(np.asarray(z, dtype=np.float64), frac_bits)).astype(np.int64)


def value_bits(values: np.ndarray) -> int:
    """Bits of the largest magnitude among integer ``values`` (at least 1)."""
    return max(1, int(np.max(np.abs(values))).bit_length()) if np.size(values) else 1


def product_group(n_slots: int, n_rows: int, bits_a: int, bits_b: int) -> Group:
    """Signed slots for sums over ``n_rows`` rows of products of values of ``bits_a`` and ``bits_b`` bits."""
    return Group((bits_a + bits_b + max(1, int(n_rows).bit_length()) + 1,) * n_slots)


def pooled_pearson(x_a: np.ndarray, x_b: np.ndarray, frac_bits: int = PEARSON_FRAC_BITS) -> np.ndarray:
    """The encrypted protocol's result computed in the clear: the same rounded values, the same integers."""
    za, zb = rounded(standardized(x_a), frac_bits), rounded(standardized(x_b), frac_bits)
    sums = za.T.astype(object) @ zb.astype(object)
    return np.asarray(sums, dtype=np.float64) / (len(za) * 2.0 ** (2 * frac_bits))
