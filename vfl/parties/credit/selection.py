"""Which columns stay: information value (threshold, top-k per party, top-k overall), then correlation or VIF.

Pure functions of the IVs (which the label party holds for every party's
columns) and of correlations; the label party runs them and tells each party
only which of its own columns stay (the *plan*).

Order of the rules: IV at least ``iv_threshold``; then the ``top_k_per_party``
highest IVs of each party; then the ``top_k`` highest overall; then, among the
survivors from the highest IV down, a column is dropped if its absolute
correlation with a column already kept exceeds ``max_correlation``; then, while
the largest variance inflation factor exceeds ``max_vif``, the column with the
largest is dropped (of equal ones, the lower IV).  Ties in IV go to the earlier party (feature parties in
order, then the label party) and the earlier column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vfl.errors import ConfigurationError


def _optional(value, name: str, kind: str, low: float, high: float = math.inf) -> None:
    if value is None:
        return
    ok = (isinstance(value, (int, np.integer)) if kind == "int" else
          isinstance(value, (int, float, np.integer, np.floating))) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not low <= value <= high:
        what = "a whole number" if kind == "int" else "a number"
        raise ConfigurationError(f"{name} must be None or {what} from {low:g}"
                                 + (f" to {high:g}" if high != math.inf else "") + f", got {value!r}")


@dataclass(frozen=True)
class SelectionRules:
    """How columns are selected (every rule optional; ``None`` leaves it out).

    Parameters
    ----------
    iv_threshold : float or None, default=0.02
        Keep columns of at least this IV (0.02: Siddiqi's "unpredictive" bound).
    top_k_per_party : int or None
        Then keep each party's ``k`` highest IVs.
    top_k : int or None
        Then keep the ``k`` highest IVs of all parties.
    max_correlation : float or None
        Then drop a column whose absolute Pearson correlation with a kept column of
        higher IV exceeds this, in (0, 1].
    max_vif : float or None
        Then drop the column of the largest variance inflation factor while it exceeds this (at least 1).
    """

    iv_threshold: float | None = 0.02
    top_k_per_party: int | None = None
    top_k: int | None = None
    max_correlation: float | None = None
    max_vif: float | None = None

    def __post_init__(self):
        _optional(self.iv_threshold, "iv_threshold", "real", 0.0)
        _optional(self.top_k_per_party, "top_k_per_party", "int", 1)
        _optional(self.top_k, "top_k", "int", 1)
        _optional(self.max_correlation, "max_correlation", "real", 1e-9, 1.0)
        _optional(self.max_vif, "max_vif", "real", 1.0)

    @property
    def needs_correlation(self) -> bool:
        return self.max_correlation is not None or self.max_vif is not None

    def to_dict(self) -> dict:
        return {"iv_threshold": self.iv_threshold, "top_k_per_party": self.top_k_per_party, "top_k": self.top_k,
                "max_correlation": self.max_correlation, "max_vif": self.max_vif}


def _ranked(candidates: list, ivs: dict, order: list) -> list:
    """``(party, column)`` pairs from the highest IV down; ties by party order, then column."""
    return sorted(candidates, key=lambda pc: (-ivs[pc[0]][pc[1]], order.index(pc[0]), pc[1]))


def select_by_iv(ivs: dict, rules: SelectionRules) -> dict:
    """Each party's columns kept by the IV rules: ``{party: bool array}`` (``ivs``: party -> IV per column)."""
    order = list(ivs)
    kept = [(p, j) for p in order for j in range(len(ivs[p]))
            if rules.iv_threshold is None or ivs[p][j] >= rules.iv_threshold]
    if rules.top_k_per_party is not None:
        kept = [pc for p in order for pc in _ranked([pc for pc in kept if pc[0] == p], ivs, order)
                [:rules.top_k_per_party]]
    if rules.top_k is not None:
        kept = _ranked(kept, ivs, order)[:rules.top_k]
    return {p: np.isin(np.arange(len(ivs[p])), [j for q, j in kept if q == p]) for p in order}


def check_selected(kept: dict, ivs: dict, rules: SelectionRules) -> None:
    """Refuse a selection that keeps no column of any party: the model would have nothing to train on.

    Names the rules to relax and the highest IV there was (``kept``: party -> bool per column).
    """
    if any(np.any(k) for k in kept.values()):
        return
    given = [f"{name}={value!r}" for name, value in rules.to_dict().items() if value is not None]
    found = [(float(iv), p, j) for p, values in ivs.items() for j, iv in enumerate(values)]
    best = f"; the highest IV is {max(found)[0]:.4g} (party {max(found)[1]}'s column #{max(found)[2]})" if found else ""
    lower = f" to at most {max(found)[0]:.4g}" if found else ""
    raise ConfigurationError(f"the selection keeps no column of any party under {', '.join(given) or 'its rules'}"
                             f"{best}: lower iv_threshold{lower} so that the model has a column to train on")


def select_by_correlation(columns: list, ivs: dict, correlation: np.ndarray, rules: SelectionRules,
                          groups: list | None = None) -> np.ndarray:
    """Which of ``columns`` (``(party, column)`` pairs) stay under ``max_correlation`` and ``max_vif``.

    Parameters
    ----------
    columns : list of (party, column)
    ivs : dict
        Party -> IV per column.
    correlation : array (len(columns), len(columns))
        Pearson correlations; NaN where unknown (two feature parties' columns:
        they never exchange messages).
    groups : list of lists of int, optional
        Index sets of ``columns`` whose correlation matrix is fully known; the VIF
        of a column is its largest within any group holding it.  Default: one
        group of all columns.
    """
    order = list(ivs)
    keep = np.ones(len(columns), dtype=bool)
    rank = _ranked(list(columns), ivs, order)
    position = {pc: i for i, pc in enumerate(columns)}
    if rules.max_correlation is not None:
        accepted = []
        for pc in rank:
            i = position[pc]
            near = [a for a in accepted if abs(correlation[i, a]) > rules.max_correlation]
            if near:
                keep[i] = False
            else:
                accepted.append(i)
    if rules.max_vif is not None:
        groups = groups if groups is not None else [list(range(len(columns)))]
        while keep.sum() > 1:
            vif = np.full(len(columns), -np.inf)
            for group in groups:
                members = [i for i in group if keep[i]]
                if len(members) > 1:
                    vif[members] = np.maximum(vif[members], inflation_factors(correlation[np.ix_(members, members)]))
            worst = max(np.flatnonzero(keep), key=lambda i: (round(float(vif[i]), 9), rank.index(columns[i])))
            if vif[worst] <= rules.max_vif:
                break
            keep[worst] = False
    return keep


def inflation_factors(correlation: np.ndarray) -> np.ndarray:
    """Variance inflation factors from a correlation matrix: the diagonal of its inverse (inf if singular)."""
    correlation = np.asarray(correlation, dtype=np.float64)
    try:
        inverse = np.linalg.inv(correlation)
    except np.linalg.LinAlgError:
        return np.full(len(correlation), np.inf)
    out = np.diag(inverse).copy()
    out[~np.isfinite(out) | (out > 1e12)] = np.inf
    return out
