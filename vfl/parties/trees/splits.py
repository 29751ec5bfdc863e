"""Histograms, split candidates and their gains: the arithmetic of one node, on integers.

A party's columns are binned (:mod:`vfl.parties.binning`); for a node (a set of
rows) and columns of integer values per row (``G``, ``H`` and a count of one),
the *histogram* holds each column's sums per bin, a last bin per feature for
missing values.  A *candidate* is a split "bin ``<= j``" of one feature, with
the rows whose value is missing sent left or right; its *left sums* are a
prefix of the feature's histogram, plus the missing bin if they go left.

Candidates of a party come in a fixed order (:class:`CandidateTable`): by
feature, then bin, then missing values left before right.  Across parties the
order is the data parties' order (feature parties, then the label party).  The
best split of a node is the candidate of highest gain; among equal gains, the
first in that order.  The centralized reference and the federated label party
both call :func:`gains` on the same integers, so they agree split for split.

A feature without missing values in the training rows has one candidate per
threshold (missing values, if any show up later, go left); a feature with
missing values has both directions per threshold and one more candidate that
separates the missing values from all others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vfl.errors import ConfigurationError
from vfl.parties.binning import offsets

#: Bits per half when integer sums go through floating point (exact while each half's sum < 2^53).
_HALF = 26


@dataclass(frozen=True)
class SplitRules:
    """What makes a split acceptable, and how gains are counted.

    Parameters
    ----------
    min_samples_leaf : int
        Rows each child must hold, at least.
    min_child_weight : float
        Hessian sum each child must hold, at least.
    l2_regularization : float
        ``lambda`` in ``G^2 / (H + lambda)``.
    frac_bits : int
        The fixed point of the integer sums (``g = G 2^-frac_bits``).
    """

    min_samples_leaf: int = 20
    min_child_weight: float = 1e-3
    l2_regularization: float = 0.0
    frac_bits: int = 16

    def __post_init__(self):
        if isinstance(self.min_samples_leaf, bool) or not isinstance(self.min_samples_leaf, (int, np.integer)) \
                or self.min_samples_leaf < 1:
            raise ConfigurationError(f"min_samples_leaf must be a positive integer, got {self.min_samples_leaf!r}")
        for name in ("min_child_weight", "l2_regularization"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
                    or not np.isfinite(value) or value < 0:
                raise ConfigurationError(f"{name} must be a non-negative number, got {value!r}")


def histogram(flat: np.ndarray, rows: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of ``values[rows]`` (rows by columns) per flat slot: ``(size, columns)``.

    Sums go through ``np.bincount`` in two halves of each value, so they are exact
    integers whatever their size (as long as the totals fit int64).
    """
    idx = flat[rows].ravel()
    out = np.empty((size, values.shape[1]), dtype=np.int64)
    chosen = values[rows]
    features = flat.shape[1]
    for c in range(values.shape[1]):
        column = np.repeat(chosen[:, c], features)
        high, low = column >> _HALF, column & ((1 << _HALF) - 1)
        out[:, c] = (np.rint(np.bincount(idx, weights=high, minlength=size)).astype(np.int64) << _HALF) \
            + np.rint(np.bincount(idx, weights=low, minlength=size)).astype(np.int64)
    return out


class CandidateTable:
    """A party's candidates in their fixed order: ``feature``, ``bin``, ``missing_left`` per candidate.

    Parameters
    ----------
    n_bins : array of int
        Bins of non-missing values per feature.
    has_missing : array of bool
        Whether the feature had missing values in the training rows.
    """

    def __init__(self, n_bins, has_missing):
        self.n_bins = np.asarray(n_bins, dtype=np.int64)
        self.has_missing = np.asarray(has_missing, dtype=bool)
        self.offsets = offsets(self.n_bins)
        feature, bin_, left = [], [], []
        for f, (nb, missing) in enumerate(zip(self.n_bins.tolist(), self.has_missing.tolist())):
            for j in range(nb - 1):
                feature.append(f), bin_.append(j), left.append(True)
                if missing:
                    feature.append(f), bin_.append(j), left.append(False)
            if missing:
                feature.append(f), bin_.append(nb - 1), left.append(False)
        self.feature = np.asarray(feature, dtype=np.int64)
        self.bin = np.asarray(bin_, dtype=np.int64)
        self.missing_left = np.asarray(left, dtype=bool)
        #: each candidate's prefix end and its feature's missing slot, in the flat histogram
        self._prefix_end = self.offsets[self.feature] + self.bin
        self._missing_slot = self.offsets[self.feature] + self.n_bins[self.feature]

    def __len__(self) -> int:
        return len(self.feature)

    @property
    def size(self) -> int:
        """Slots of the flat histogram."""
        return int(self.offsets[-1])

    def prefix_positions(self):
        """Per feature, the flat slots whose running sums are the candidates' prefixes (for encrypted sums)."""
        return [(int(self.offsets[f]), int(nb)) for f, nb in enumerate(self.n_bins)]

    def left_sums(self, hist: np.ndarray) -> np.ndarray:
        """Each candidate's left sums (candidates by columns) from a node's flat histogram."""
        running = np.zeros_like(hist)
        for f, nb in enumerate(self.n_bins.tolist()):
            start = int(self.offsets[f])
            running[start:start + nb] = np.cumsum(hist[start:start + nb], axis=0)
        left = running[self._prefix_end]
        return left + np.where(self.missing_left[:, None], hist[self._missing_slot], 0)

    def worth_sending(self, counts: np.ndarray, rules: SplitRules) -> np.ndarray:
        """The candidates a feature party that knows the node's rows sends: valid by counts, one per partition.

        ``counts`` is the node's flat histogram of row counts.  A candidate is
        dropped if a child would hold fewer than ``min_samples_leaf`` rows, or if
        an earlier candidate of the same feature sends the same rows left (an empty
        bin, or no missing value in the node): the earlier one wins any tie anyway.
        """
        left = self.left_sums(counts[:, None])[:, 0]
        total = counts[self.offsets[0]:self.offsets[1]].sum() if len(self.n_bins) else 0
        missing = counts[self._missing_slot]
        nonmissing_left = left - np.where(self.missing_left, missing, 0)
        valid = (left >= rules.min_samples_leaf) & (total - left >= rules.min_samples_leaf)
        keep = np.zeros(len(self), dtype=bool)
        seen = set()
        for i in np.flatnonzero(valid).tolist():
            signature = (int(self.feature[i]), int(nonmissing_left[i]),
                         bool(self.missing_left[i]) if missing[i] > 0 else None)
            if signature not in seen:
                seen.add(signature)
                keep[i] = True
        return keep


def _term(g: np.ndarray, h: np.ndarray, lam: float) -> np.ndarray:
    denominator = h + lam
    safe = np.where(denominator > 0, denominator, 1.0)
    return np.where(denominator > 0, g * g / safe, 0.0)


def gains(left_g, left_h, node_g: int, node_h: int, rules: SplitRules, left_n=None, node_n: int | None = None):
    """The gain of each candidate, ``-inf`` where a child breaks the rules.

    ``(G_L^2 / (H_L + l) + G_R^2 / (H_R + l) - G^2 / (H + l)) / 2`` on the sums
    scaled to real units (``2^-frac_bits``, exact); a child needs at least
    ``min_child_weight`` hessian and, when ``left_n`` is given, ``min_samples_leaf``
    rows.
    """
    scale = 2.0 ** -rules.frac_bits
    left_g = np.asarray(left_g, dtype=np.int64)
    left_h = np.asarray(left_h, dtype=np.int64)
    gl, hl = left_g * scale, left_h * scale
    gr, hr = (node_g - left_g) * scale, (node_h - left_h) * scale
    lam = float(rules.l2_regularization)
    parent = _term(np.float64(node_g * scale), np.float64(node_h * scale), lam)
    gain = 0.5 * (_term(gl, hl, lam) + _term(gr, hr, lam) - parent)
    valid = (hl >= rules.min_child_weight) & (hr >= rules.min_child_weight)
    if left_n is not None:
        left_n = np.asarray(left_n, dtype=np.int64)
        valid &= (left_n >= rules.min_samples_leaf) & (node_n - left_n >= rules.min_samples_leaf)
    return np.where(valid, gain, -np.inf)


def best(gain: np.ndarray) -> tuple[float, np.ndarray]:
    """The highest gain if positive (else ``-inf``) and the candidates that reach it, in order."""
    if len(gain) == 0:
        return -np.inf, np.empty(0, dtype=np.int64)
    top = float(np.max(gain))
    if not top > 0:
        return -np.inf, np.empty(0, dtype=np.int64)
    return top, np.flatnonzero(gain == top)


def goes_left(codes: np.ndarray, missing_code: int, feature: int, bin_: int, missing_left: bool) -> np.ndarray:
    """Directions at the split "bin ``<= bin_`` of ``feature``", missing values as ``missing_left`` says."""
    column = codes[:, feature].astype(np.int64)
    return np.where(column == missing_code, missing_left, column <= bin_)


def sums_to_send(nodes, parent_of: dict, size_of: dict, children_of: dict) -> list[tuple[int, int | None, list]]:
    """Which node's sums travel for a round's ``nodes``: one per parent, the smaller of its two children.

    Returns ``(sent, parent, served)`` per parent in the order of ``nodes``: the
    sums of ``sent`` (the root, or the child of ``parent`` with fewer rows, the
    lower id on a tie) serve the evaluated nodes ``served``; a sibling's sums are
    its parent's minus ``sent``'s.  Both sides of the protocol compute the same plan.
    """
    plan, seen = [], set()
    for node in nodes:
        parent = parent_of.get(node)
        if parent in seen:
            continue
        seen.add(parent)
        if parent is None:
            plan.append((node, None, [node]))
            continue
        pair = children_of[parent]
        sent = min(pair, key=lambda c: (size_of[c], c))
        plan.append((sent, parent, [c for c in pair if c in nodes]))
    return plan
