"""Weight of evidence and information value per bin, from event counts: the arithmetic both sides share.

For a column cut into bins, with ``e_b`` events and ``m_b`` non-events in bin
``b`` and ``E``, ``M`` in all::

    WOE_b = ln( (e_b / E) / (m_b / M) )         IV = sum_b (e_b / E - m_b / M) WOE_b

(FATE's convention: a positive WOE is a bin riskier than the whole.)  A bin
with no event or no non-event gets ``0.5`` added to both of its counts (FATE's
``adjustment_factor``); an empty bin has WOE 0 and adds nothing to the IV.  With
more than two classes every class is the event in turn (one-vs-rest), and a
column's IV for selection is the largest of its classes' IVs.

The label party computes these from the counts it decrypts (a feature party's
bins) or counts itself (its own columns); the pooled reference
(:mod:`vfl.centralized_credit`) calls the same function on the same integers,
so the values are bit for bit the same.

The encrypted counts: each row is one ciphertext holding its class as a one-hot
row of ``K`` slots (:func:`class_group`), so the sum over a bin's rows is the
bin's count of every class.  Slot widths come from the row count only.
"""

from __future__ import annotations

import math

import numpy as np

from vfl.crypto.slots import Group

#: Added to both counts of a bin with no event or no non-event (FATE's ``adjustment_factor``).
ADJUSTMENT = 0.5


def woe_iv(events, counts, adjustment: float = ADJUSTMENT) -> tuple[np.ndarray, np.ndarray]:
    """WOE and IV share of each bin of one column, from its events and rows per bin (integer arrays).

    Returns ``(woe, iv)``: ``math.fsum(iv)`` is the column's information value (exactly rounded, so the
    same in any order of the bins).  Totals
    are the sums over the bins; a column whose rows are all events or all
    non-events has WOE 0 everywhere.
    """
    events = np.asarray(events, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    misses = counts - events
    woe = np.zeros(len(counts))
    iv = np.zeros(len(counts))
    total_e, total_m = int(events.sum()), int(misses.sum())
    used = counts > 0
    if total_e == 0 or total_m == 0 or not used.any():
        return woe, iv
    zero = used & ((events == 0) | (misses == 0))
    e = np.where(zero, events + adjustment, events).astype(np.float64) / total_e
    m = np.where(zero, misses + adjustment, misses).astype(np.float64) / total_m
    woe[used] = np.log(e[used] / m[used])
    iv[used] = (e[used] - m[used]) * woe[used]
    return woe, iv


def class_tables(class_counts: np.ndarray) -> dict:
    """WOE and IV of one column for every class against the rest, from its per-bin class counts.

    ``class_counts`` is (bins, classes).  Returns ``{"counts": rows per bin, "events":
    (bins, K), "woe": (bins, K), "iv": (K,)}``; a binary column has ``K = 1`` (the
    second class is the event).
    """
    class_counts = np.asarray(class_counts, dtype=np.int64)
    rows = class_counts.sum(axis=1)
    positive = [1] if class_counts.shape[1] == 2 else list(range(class_counts.shape[1]))
    woe = np.zeros((len(rows), len(positive)))
    ivs = np.zeros(len(positive))
    for k, c in enumerate(positive):
        woe[:, k], share = woe_iv(class_counts[:, c], rows)
        ivs[k] = math.fsum(share.tolist())        # exactly rounded: the same whatever the bins' order
    return {"counts": rows, "events": class_counts[:, positive], "woe": woe, "iv": ivs}


def selection_iv(ivs: np.ndarray) -> float:
    """The IV a column is selected by: its only IV (binary), the largest of one-vs-rest IVs (more classes)."""
    return float(np.max(ivs)) if len(ivs) else 0.0


def class_group(n_classes: int, n_rows: int) -> Group:
    """Slots of one row's one-hot class (and of a sum over at most ``n_rows`` rows): ``bits(n) + 1`` each."""
    width = max(1, int(n_rows).bit_length()) + 1
    return Group((width,) * n_classes)
