"""Encrypted sums per bucket: the homomorphic half of a histogram.

Given one ciphertext per row and, per row, the bucket it falls into for each of
several features (a *flat* slot index per row and feature), the encrypted sum of
a bucket is the product of its rows' ciphertexts modulo ``n^2``.  That is one
modular multiplication per row per feature, the whole cost of an encrypted
histogram; large calls are cut into row chunks and run on the thread's compute
plan (vfl's worker processes, or a joblib backend such as Dask), each chunk's
partial products multiplied together at the end.  An empty bucket's product is
1, an encryption of zero with no randomness: results are re-randomized before
they leave a party (:mod:`vfl.crypto.slots`).

Also here: running products (the encrypted prefix sums of buckets) and the
quotient of two histograms (``a / b``: a sibling's histogram from its parent's).
Numbers only: nothing here knows about parties or trees.
"""

from __future__ import annotations

import gmpy2
import numpy as np

from vfl.crypto import workers
from vfl.crypto.fast import task_ranges

#: Rows per task at most (bounds each task's message and memory).
MAX_ROWS_PER_TASK = 16_384


def _task_bucket_products(n2: int, ciphertexts: list, flat: np.ndarray, size: int) -> list:
    n2 = gmpy2.mpz(n2)
    out = [gmpy2.mpz(1)] * size
    for c, slots in zip(ciphertexts, flat.tolist()):
        for s in slots:
            out[s] = out[s] * c % n2
    return out


def bucket_products(public_key, ciphertexts: list, flat: np.ndarray, size: int, into: list | None = None) -> list:
    """For each of ``size`` buckets, the product of the ciphertexts of its rows.

    Parameters
    ----------
    public_key
        Its ``nsquare`` is the modulus.
    ciphertexts : list
        One per row.
    flat : int array (rows, features)
        Each row's bucket per feature, in ``[0, size)``.
    size : int
    into : list, optional
        Products of earlier rows (``size`` of them), multiplied into the result:
        rows can come in chunks, each chunk's ciphertexts dropped once summed.
    """
    flat = np.ascontiguousarray(flat, dtype=np.int64)
    if flat.ndim != 2 or len(flat) != len(ciphertexts):
        raise ValueError(f"bucket_products: {len(ciphertexts)} ciphertexts and bucket indices of shape {flat.shape}")
    if flat.size and (flat.min() < 0 or flat.max() >= size):
        raise ValueError(f"bucket_products: a bucket index is outside [0, {size})")
    n2 = public_key.nsquare
    ranges = task_ranges(len(ciphertexts), max(1, flat.shape[1]), MAX_ROWS_PER_TASK)
    parts = workers.run(_task_bucket_products, [(int(n2), ciphertexts[lo:hi], flat[lo:hi], size)
                                                 for lo, hi in ranges])
    if into is not None:
        if len(into) != size:
            raise ValueError(f"bucket_products: {len(into)} earlier products for {size} buckets")
        parts = [into, *parts]
    out = parts[0]
    for part in parts[1:]:
        out = [a * b % n2 for a, b in zip(out, part)]
    return out


def running_products(public_key, values: list) -> list:
    """``[v_0, v_0 v_1, v_0 v_1 v_2, ...]`` modulo ``n^2``: the encrypted prefix sums."""
    n2 = public_key.nsquare
    out, acc = [], gmpy2.mpz(1)
    for v in values:
        acc = acc * v % n2
        out.append(acc)
    return out


def quotients(public_key, a: list, b: list) -> list:
    """``a_i / b_i`` modulo ``n^2`` (the encryption of ``m(a_i) - m(b_i)``)."""
    n2 = public_key.nsquare
    if len(a) != len(b):
        raise ValueError(f"quotients: {len(a)} and {len(b)} ciphertexts")
    return [x * gmpy2.invert(y, n2) % n2 for x, y in zip(a, b)]
