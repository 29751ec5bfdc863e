"""A party's model columns from its bins (WOE values or bin indicators), and the scorecard's points.

**Coding.** Each party turns its selected columns' bins into model columns:

* ``"woe"`` — one column per selected column, each row's bin's WOE (the label
  party always: it computed them; a feature party only with ``share_woe``);
* ``"bins"`` — one indicator column per bin that held training rows, but the
  column's most populous bin (the reference): a feature party that was not
  given its WOE values learns nothing from the WOE step, and its model weights
  per bin are its points directly.

A bin that held no training row codes as WOE 0 (or as the reference bin).

**Points.** With the anchors (Siddiqi's names): ``base_score`` points at odds of
``base_odds`` to one (non-events to events), and ``pdo`` points to double the
odds, ``factor = pdo / ln 2`` and ``offset = base_score - factor ln(base_odds)``;
a row's score is ``offset - factor z`` for the model's log-odds of the event
``z``.  The model is ``z = b + sum_P (w_P . x_P + c_P)`` (``c_P``: what party
``P``'s standardization adds), so the score splits exactly into the label
party's base points ``offset - factor b`` and, per party and selected column
``j`` of its ``m_P``, per bin ``k``: ``-factor (w_j x_jk + c_P / m_P)``.  Each
party holds its own points; the sum over a row's bins and the base points is
the score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vfl.errors import ConfigurationError, DataError

CODINGS = ("woe", "bins")


@dataclass(frozen=True)
class ScorecardScale:
    """The anchors of the points: ``base_score`` at odds ``base_odds``:1, ``pdo`` points to double the odds."""

    base_score: float = 600.0
    base_odds: float = 50.0
    pdo: float = 20.0

    def __post_init__(self):
        for name in ("base_score", "base_odds", "pdo"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(value) or (name != "base_score" and value <= 0):
                raise ConfigurationError(f"{name} must be a finite number" + ("" if name == "base_score" else
                                                                             " above 0") + f", got {value!r}")

    @property
    def factor(self) -> float:
        return self.pdo / math.log(2.0)

    @property
    def offset(self) -> float:
        return self.base_score - self.factor * math.log(self.base_odds)

    def score(self, z) -> np.ndarray:
        """Scores from log-odds of the event."""
        return self.offset - self.factor * np.asarray(z, dtype=np.float64)

    def to_dict(self) -> dict:
        return {"base_score": float(self.base_score), "base_odds": float(self.base_odds), "pdo": float(self.pdo)}


class Coder:
    """One party's model columns from its selected columns' bins.

    Parameters
    ----------
    coding : {"woe", "bins"}
    sizes : sequence of int
        Bins of every one of the party's columns (missing last), its binner's ``n_bins_ + 1``.
    selected : sequence of int
        The selected columns' indices.
    columns : list of str
        All its columns' names.
    woe : list of arrays, optional
        ``"woe"``: per selected column, the WOE of each of its bins.
    counts : list of arrays, optional
        ``"bins"``: per selected column, its training rows per bin.
    """

    def __init__(self, coding: str, sizes, selected, columns, woe=None, counts=None):
        if coding not in CODINGS:
            raise ConfigurationError(f"coding must be one of {list(CODINGS)}, got {coding!r}")
        self.coding = coding
        self.sizes = [int(s) for s in sizes]
        self.selected = [int(j) for j in selected]
        self.columns = list(columns)
        if coding == "woe":
            if woe is None or len(woe) != len(self.selected):
                raise ValueError("woe coding needs the WOE values of every selected column")
            self.woe = [np.asarray(w, dtype=np.float64) for w in woe]
            self.levels = None
        else:
            if counts is None or len(counts) != len(self.selected):
                raise ValueError("bins coding needs the training rows per bin of every selected column")
            self.woe = None
            self.levels = []
            for c in counts:
                c = np.asarray(c)
                reference = int(np.argmax(c))
                self.levels.append([k for k in range(len(c)) if c[k] > 0 and k != reference])
        for j, values in zip(self.selected, self.woe or self.levels):
            if not 0 <= j < len(self.sizes) or (coding == "woe" and len(values) != self.sizes[j]):
                raise ValueError(f"column {j} does not fit the bins")

    @property
    def names(self) -> list[str]:
        """The model columns' names: the selected columns (woe), or ``column=bin k`` (bins)."""
        if self.coding == "woe":
            return [self.columns[j] for j in self.selected]
        return [f"{self.columns[j]}=bin{k}" for j, levels in zip(self.selected, self.levels) for k in levels]

    def transform(self, flat_codes: np.ndarray) -> np.ndarray:
        """Model columns from each row's bin per column (``flat_codes``: rows by all columns, missing = last bin)."""
        flat_codes = np.asarray(flat_codes, dtype=np.int64)
        if flat_codes.ndim != 2 or flat_codes.shape[1] != len(self.sizes):
            raise DataError(f"expected bins of {len(self.sizes)} columns, got shape {flat_codes.shape}")
        if self.coding == "woe":
            return np.column_stack([w[flat_codes[:, j]] for j, w in zip(self.selected, self.woe)]) \
                if self.selected else np.empty((len(flat_codes), 0))
        parts = [(flat_codes[:, j] == k).astype(np.float64) for j, levels in zip(self.selected, self.levels)
                 for k in levels]
        return np.column_stack(parts) if parts else np.empty((len(flat_codes), 0))

    def points(self, coef, constant: float, scale: ScorecardScale) -> list[np.ndarray]:
        """Points of every bin of every selected column, from the unscaled weights and the party's constant."""
        coef = np.asarray(coef, dtype=np.float64)
        share = constant / len(self.selected) if self.selected else 0.0
        out, at = [], 0
        for i, j in enumerate(self.selected):
            if self.coding == "woe":
                value = coef[i] * self.woe[i]
            else:
                value = np.zeros(self.sizes[j])
                for k in self.levels[i]:
                    value[k] = coef[at]
                    at += 1
            out.append(-scale.factor * (value + share))
        return out

    def to_dict(self) -> dict:
        saved = {"coding": self.coding, "sizes": self.sizes, "selected": self.selected, "columns": self.columns}
        if self.coding == "woe":
            saved["woe"] = [w.tolist() for w in self.woe]
        else:
            saved["levels"] = self.levels
        return saved

    @classmethod
    def from_dict(cls, saved: dict) -> "Coder":
        coder = cls.__new__(cls)
        coder.coding = saved["coding"]
        if coder.coding not in CODINGS:
            raise ValueError(f"unknown coding {coder.coding!r}")
        coder.sizes = [int(s) for s in saved["sizes"]]
        coder.selected = [int(j) for j in saved["selected"]]
        coder.columns = [str(c) for c in saved["columns"]]
        coder.woe = [np.asarray(w, dtype=np.float64) for w in saved["woe"]] if coder.coding == "woe" else None
        coder.levels = [[int(k) for k in lv] for lv in saved["levels"]] if coder.coding == "bins" else None
        for j, values in zip(coder.selected, coder.woe or coder.levels):
            if not 0 <= j < len(coder.sizes) or (coder.coding == "woe" and (len(values) != coder.sizes[j]
                                                                           or not np.all(np.isfinite(values)))) \
                    or (coder.coding == "bins" and any(not 0 <= k < coder.sizes[j] for k in values)):
                raise ValueError(f"column {j}: values that do not fit its bins")
        return coder


def flat_codes(codes: np.ndarray, n_bins, missing_code: int) -> np.ndarray:
    """Each row's bin per column with missing values in the column's last bin (``n_bins[j]``)."""
    codes = np.asarray(codes, dtype=np.int64)
    return np.where(codes == missing_code, np.asarray(n_bins, dtype=np.int64)[None, :], codes)
