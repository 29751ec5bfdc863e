"""Cuckoo hashing with three hash functions and no stash, sized for a failure probability of at most 2^-40.

Numbers only.  Each of ``n`` items has three bins ``h_0, h_1, h_2`` among ``m`` (uniform and independent,
from a keyed hash of the item: :mod:`vfl.crypto.kkrt`); :func:`place` puts every item in one of its
bins, one item per bin, or fails.

**Table size** (:func:`table_size`).  A placement exists unless some set ``S`` of ``k`` items has all its
``3k`` bins among fewer than ``k`` bins (Hall's condition), so for uniform, independent bins::

    P[no placement] <= B(n, m) = sum_{k=2..n} C(n, k) C(m, k-1) ((k-1)/m)^(3k)

(the union over every set of ``k`` items and every set of ``k - 1`` bins holding all their choices).
The table has the fewest bins ``m`` (a multiple of 8) with ``B(n, m) <= 2^-40``, computed exactly
(:func:`failure_bound`, in log space) for ``n <= 2^16``; above that, ``m = 1.57 n``, for which the
same bound was computed to be below 2^-40 at ``n = 2^16, 10^5, 10^6, 10^7`` (it falls as ``n`` grows:
the least ratio meeting 2^-40 is 1.569 at 4,096 items, 1.562 from 10^5 on).  Small sets get a larger
ratio (3.5 at 1,000 items, 14 at 100, 55 at 10; 264 bins for 2).  This is a proven bound for random bins, above the
empirical ratios (1.27 to 1.48) used elsewhere for stash-free tables: the price is a table about 6%
larger than 1.48 n.

**Placement** (:func:`place`).  Rounds of cuckoo insertion on all pending items at once (each moves to
its next hash function when it loses its bin), then, for any left after :data:`ROUNDS` rounds, a
breadth-first search for an augmenting path (Kuhn's algorithm), which finds a placement whenever
one exists: so the table fails exactly when no placement exists, with probability at most
``B(n, m) <= 2^-40``.
"""

from __future__ import annotations

from collections import deque

import numpy as np

#: Hash functions per item.
HASHES = 3
#: Statistical security: the table fails with probability at most 2^-STAT_BITS.
STAT_BITS = 40
#: Bins per item above EXACT_UP_TO items (checked against failure_bound in the tests).
LARGE_RATIO = 1.57
EXACT_UP_TO = 1 << 16
#: Rounds of parallel insertion before the exact search takes the rest.
ROUNDS = 200


class CuckooFailure(RuntimeError):
    """No placement of the items exists for these hash values (probability at most 2^-40)."""


def _log_factorials(top: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, top + 1, dtype=np.float64)))])


def failure_bound(n: int, m: int) -> float:
    """``log2 B(n, m)``: the union bound on the probability that ``n`` items have no placement in ``m`` bins."""
    if n < 2:
        return float("-inf")
    logf = _log_factorials(max(n, m))
    k = np.arange(2, min(n, m + 1) + 1)
    terms = (logf[n] - logf[k] - logf[n - k]) + (logf[m] - logf[k - 1] - logf[m - k + 1]) \
        + HASHES * k * np.log((k - 1) / m)
    top = terms.max()
    return float((top + np.log(np.exp(terms - top).sum())) / np.log(2))


def table_size(n: int) -> int:
    """Bins for ``n`` items: the fewest (a multiple of 8) with failure probability at most 2^-40."""
    if n < 1:
        raise ValueError("a cuckoo table needs at least one item")
    if n > EXACT_UP_TO:
        return -(-int(np.ceil(LARGE_RATIO * n)) // 8) * 8
    lo, hi = max(n, 8), 64 * n + 1024            # two items need 256 bins (m^-5 <= 2^-40)
    while lo < hi:                                  # failure_bound falls as m grows
        mid = (lo + hi) // 2
        if failure_bound(n, mid) <= -STAT_BITS:
            hi = mid
        else:
            lo = mid + 1
    return -(-lo // 8) * 8


def place(bins: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Put every item in one of its bins.

    Parameters
    ----------
    bins : numpy.ndarray
        ``(n, 3)`` integers in ``[0, m)``: the bins of each item.
    m : int
        Bins in the table.

    Returns
    -------
    table : numpy.ndarray
        ``(m,)`` ``int64``: the item in each bin, or -1.
    chosen : numpy.ndarray
        ``(n,)`` ``int8``: the hash function that placed each item (``bins[i, chosen[i]]`` is its bin).

    Raises
    ------
    CuckooFailure
        No placement exists.
    """
    bins = np.asarray(bins, dtype=np.int64)
    n = len(bins)
    table = np.full(m, -1, np.int64)
    chosen = np.zeros(n, np.int8)
    pending = np.arange(n, dtype=np.int64)
    for _ in range(ROUNDS):
        if not len(pending):
            break
        target = bins[pending, chosen[pending]]
        before = table[target]
        table[target] = pending                      # among items aiming at one bin, the last one wins it
        won = table[target] == pending
        evicted = before[won]
        evicted = evicted[evicted >= 0]
        pending = np.concatenate([pending[~won], evicted])
        chosen[pending] = (chosen[pending] + 1) % HASHES
    for item in pending.tolist():
        _augment(item, bins, table, chosen)
    return table, chosen


def _augment(item: int, bins: np.ndarray, table: np.ndarray, chosen: np.ndarray) -> None:
    """Place ``item`` along a shortest augmenting path (breadth first), or raise :class:`CuckooFailure`."""
    parent: dict[int, tuple[int, int]] = {}       # bin -> (item that would move into it, from which bin or -1)
    queue = deque()
    for f in range(HASHES):
        b = int(bins[item, f])
        if b not in parent:
            parent[b] = (item, -1)
            queue.append(b)
    while queue:
        b = queue.popleft()
        occupant = int(table[b])
        if occupant < 0:                          # an empty bin: shift every item along the path
            while True:
                mover, source = parent[b]
                table[b] = mover
                chosen[mover] = int(np.flatnonzero(bins[mover] == b)[0])
                if source < 0:
                    return
                b = source
        for f in range(HASHES):
            nb = int(bins[occupant, f])
            if nb not in parent:
                parent[nb] = (occupant, b)
                queue.append(nb)
    raise CuckooFailure(f"cuckoo hashing found no placement for {len(bins)} items in {len(table)} bins "
                        f"(probability at most 2^-{STAT_BITS})")
