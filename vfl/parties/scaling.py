"""Each party's own standardization: its columns to mean 0 and standard deviation 1, on its training rows.

Scaling needs no message: a party's mean and standard deviation are computed from
its own rows and never leave it (they are stored in its model shard).  Gradient
steps and conjugate gradient both converge far faster on standardized columns, and
the fixed-point range then fits columns in any units.  The weights the protocol
trains are in standardized units; :meth:`Standardizer.unscale` gives them in the
column's own units, and the constant each party's part of the score then carries.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from vfl.errors import ConstantColumnWarning, DataError


@dataclass(frozen=True)
class Standardizer:
    """A party's column means and standard deviations (population: ``ddof=0``, as scikit-learn's scaler).

    Parameters
    ----------
    mean, scale : arrays of shape (n_columns,)
    """

    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, features, role: str, columns) -> "Standardizer":
        """Fit on a party's training rows; a column that cannot be scaled is a :class:`~vfl.errors.DataError`.

        A constant column (one value in every one of two or more rows, an image's
        blank border pixel) says nothing to a linear model: it is dropped, with a
        :class:`~vfl.errors.ConstantColumnWarning` naming the party and the column.
        It keeps its place, with an infinite scale: it standardizes to 0 in every
        row, training and prediction alike, and its weight in its own units is 0.
        A column whose mean, standard deviation or scaled values overflow float64
        (one value of 1e200 squares to infinity) is refused, naming the party and
        the column: dividing by an infinite scale would silently zero it.  A single
        row is refused as such.
        """
        x = np.asarray(features, dtype=np.float64)
        if x.shape[0] == 1:
            raise DataError(f"party {role}: only one row to train on; standardizing its columns (and training a "
                            "model) needs at least two rows")
        with np.errstate(over="ignore", invalid="ignore"):
            mean = x.mean(axis=0) if x.shape[0] else np.zeros(x.shape[1])
            scale = x.std(axis=0) if x.shape[0] else np.zeros(x.shape[1])
            scaled = (x - mean) / np.where(scale > 0, scale, 1.0)
        check_scaled(x, mean, scale, scaled, f"party {role}", columns)
        for j in np.flatnonzero(~(scale > 0)):
            if x.shape[0] >= 2 and np.all(x[:, j] == x[0, j]):
                warnings.warn(f"party {role}, column {list(columns)[j]!r}: holds {x[0, j]:.6g} in every training "
                              "row, so it carries nothing; it is left out of the model (its weight is 0)",
                              ConstantColumnWarning, stacklevel=3)
                mean[j], scale[j] = x[0, j], np.inf
                continue
            value = f"{x[0, j]:.6g} in every row" if x.shape[0] else "no rows"
            raise DataError(f"party {role}, column {list(columns)[j]!r}: cannot be standardized, it holds {value}; "
                            "drop the column (it carries no information), or set standardize=False")
        return cls(mean, scale)

    @property
    def dropped(self) -> np.ndarray:
        """The indices of the columns left out as constant (infinite scale)."""
        return np.flatnonzero(np.isinf(self.scale))

    def transform(self, features, where: str = "the data", columns=None) -> np.ndarray:
        """``(x - mean) / scale``, column by column; a value that overflows is a :class:`~vfl.errors.DataError`.

        ``where`` (``"party A"``) and ``columns`` name the cell in the error.
        """
        x = np.asarray(features, dtype=np.float64)
        scaled = self.apply(x)
        check_scaled(x, self.mean, np.where(np.isinf(self.scale), 1.0, self.scale), scaled, where, columns)  # inf: dropped
        return scaled

    def apply(self, features) -> np.ndarray:
        """``(x - mean) / scale`` unchecked: a value that overflows is infinite (a service rates rows one by one)."""
        with np.errstate(over="ignore", invalid="ignore"):
            return (np.asarray(features, dtype=np.float64) - self.mean) / self.scale

    def unscale(self, coef) -> tuple[np.ndarray, np.ndarray]:
        """Weights for the unscaled columns, and the constant they add to the score.

        ``sum_j w_j (x_j - m_j) / s_j = sum_j (w_j / s_j) x_j - sum_j w_j m_j / s_j``: returns
        ``w / s`` and ``-sum_j w_j m_j / s_j`` (one per model for a 2-D ``coef``, one row per model).
        """
        coef = np.asarray(coef, dtype=np.float64)
        unscaled = coef / self.scale
        return unscaled, -(unscaled @ self.mean)

    def to_dict(self) -> dict:
        """JSON numbers only: a dropped column's scale is written as 1 and its index under ``"dropped"``."""
        table = {"mean": [float(v) for v in self.mean],
                 "scale": [1.0 if np.isinf(v) else float(v) for v in self.scale]}
        if self.dropped.size:
            table["dropped"] = [int(j) for j in self.dropped]
        return table

    @classmethod
    def from_dict(cls, table: dict, n_columns: int, where: str) -> "Standardizer":
        """The scaler a model shard stores, checked: ``n_columns`` finite means and positive finite scales."""
        try:
            mean = np.asarray(table["mean"], dtype=np.float64)
            scale = np.asarray(table["scale"], dtype=np.float64)
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{where}: 'standardize' must hold lists 'mean' and 'scale' of numbers") from None
        if mean.shape != (n_columns,) or scale.shape != (n_columns,):
            raise DataError(f"{where}: 'standardize' must hold {n_columns} means and scales, one per column")
        if not (np.isfinite(mean).all() and np.isfinite(scale).all() and (scale > 0).all()):
            raise DataError(f"{where}: 'standardize' needs finite means and positive finite scales")
        dropped = table.get("dropped", [])
        if not isinstance(dropped, list) or not all(isinstance(j, int) and not isinstance(j, bool)
                                                    and 0 <= j < n_columns for j in dropped):
            raise DataError(f"{where}: 'standardize' 'dropped' must list column indices below {n_columns}")
        scale = scale.copy()
        scale[dropped] = np.inf
        return cls(mean, scale)


def check_scaled(x: np.ndarray, mean: np.ndarray, scale: np.ndarray, scaled: np.ndarray, where: str,
                 columns=None) -> None:
    """Refuse a column whose mean, scale or scaled values overflow float64 (where its values were finite).

    The one check of standardization at training (:meth:`Standardizer.fit`) and
    at prediction (:meth:`Standardizer.transform`), for the API and ``vfl party``
    alike.  NaN and infinity in the input are left to the data checks that name them.
    """
    finite = np.isfinite(x)
    bad = (~np.isfinite(mean)) | (~np.isfinite(scale)) | ((~np.isfinite(scaled)) & finite).any(axis=0)
    if x.ndim != 2 or not bad.any():
        return
    j = int(np.flatnonzero(bad)[0])
    name = repr(list(columns)[j]) if columns is not None else str(j)
    magnitude = np.where(finite[:, j], np.abs(x[:, j]), 0.0)
    row = int(np.argmax(magnitude))
    raise DataError(
        f"{where}, column {name}: cannot be standardized, its values are too large for float64 arithmetic "
        f"(value {x[row, j]:.6g} at row {row}: the column's mean, standard deviation or scaled values overflow); "
        "rescale the column (divide it by a power of ten) or remove the outlying value")
