"""The numbers of KKRT's batched oblivious PRF: ids to bins and code words, OPRF outputs, their length.

Numbers only (the protocol is :mod:`vfl.protocols.psi_kkrt`).  Kolesnikov, Kumaresan, Rosulek and Trieu,
"Efficient Batched Oblivious PRF with Applications to Private Set Intersection" (CCS 2016): OT extension
(:mod:`vfl.crypto.ot`) where the receiver's choice in OT ``j`` is not a bit but the code word ``C(r_j)``
of its input ``r_j``; the sender, holding a secret ``s`` of :data:`CODE_BITS` bits and the rows ``q_j``,
can then evaluate ``F_j(x) = H(q_j xor (C(x) and s))`` on any ``x``, which equals the receiver's
``H(t_j)`` exactly when ``x = r_j``.

* **Item digests** (:func:`digest_ids`).  BLAKE2b of each id under the run's salt, 40 bytes: the first
  16 are the item's key ``k(x)``, the next three 8-byte words give its three cuckoo bins (each word mod
  ``m``).  Distinct ids get distinct keys except with probability ``n_R n_S / 2^124`` (the code uses 124
  of the 128 bits).
* **Code** (:func:`code_rows`).  ``C(x || i)`` for the item placed by hash function ``i``: AES-128
  (key from the salt) of four blocks, the item's key with its first byte's low four bits set to
  ``4 i + b`` for block ``b``: 512 bits, a pseudorandom code.  Including ``i`` keeps the sender's
  three values of an item distinct even when two of its bins coincide.  KKRT need every pair of
  distinct inputs the sender evaluates against a receiver's row to have code words at Hamming distance
  at least the computational parameter 128: for a random code of width 512 a pair falls short with
  probability 2^-102.3 (``P[Binomial(512, 1/2) < 128]``), so at most 2^-77 over the ``3 n_S <= 3 * 10^7``
  pairs of a run (width 448 would give 2^-41.7, 424 2^-29.5).
* **Outputs** (:func:`outputs`).  ``H`` is BLAKE2b with a digest of :func:`output_bytes` bytes (a random
  oracle, as in KKRT's proof), one call per value.
* **Output length** (:func:`output_bytes`).  The receiver compares each of its ``n_R`` values with the
  ``n_S`` values of one of the sender's three lists (the one of the hash function that placed its item),
  so a false match has probability at most ``n_R n_S 2^-l``; ``l = 40 + ceil(log2(n_R n_S))`` bits,
  rounded up to bytes (at least 8), keeps it below 2^-40 (10 bytes at 10^6 x 10^6, 11 at 10^7 x 10^7).
"""

from __future__ import annotations

import hashlib
import math
from functools import partial
from operator import methodcaller

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

#: Width of the pseudorandom code, in bits and bytes: the number of base OTs.
CODE_BITS = 512
CODE_BYTES = CODE_BITS // 8
#: Statistical security of the matching (false matches).
STAT_BITS = 40
KEY_BYTES = 16
_DIGEST_BYTES = 40
_ID_TAG = b"vfl-kkrt-1/id"
_CODE_TAG = b"vfl-kkrt-1/code"
_BLOCK_BITS = np.arange(4, dtype=np.uint8)


def output_bytes(n_receiver: int, n_sender: int) -> int:
    """Bytes of an OPRF output: ``40 + ceil(log2(n_R n_S))`` bits, rounded up, and at least 8 (one sort key)."""
    bits = STAT_BITS + math.ceil(math.log2(max(1, n_receiver) * max(1, n_sender)))
    return max(8, -(-bits // 8))


def digest_ids(ids, salt: bytes, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Each id's key and its three bins in a table of ``m``.

    Returns
    -------
    keys : numpy.ndarray
        ``(n, 16)`` ``uint8``.
    bins : numpy.ndarray
        ``(n, 3)`` ``int64`` in ``[0, m)``.
    """
    base = hashlib.blake2b(_ID_TAG + hashlib.sha256(salt).digest(), digest_size=_DIGEST_BYTES)

    def one(value, copy=base.copy):
        h = copy()
        h.update(value)
        return h.digest()

    raw = np.frombuffer(b"".join(map(one, ids)), np.uint8).reshape(-1, _DIGEST_BYTES)
    words = raw[:, KEY_BYTES:].copy().view("<u8")
    return np.ascontiguousarray(raw[:, :KEY_BYTES]), (words % np.uint64(m)).astype(np.int64)


def code_key(salt: bytes) -> bytes:
    """The AES-128 key of the run's code."""
    return hashlib.sha256(_CODE_TAG + salt).digest()[:16]


def code_rows(key: bytes, keys: np.ndarray, function) -> np.ndarray:
    """``C(x || i)`` for each item key: ``(n, 64)`` ``uint8``.

    ``function`` is the hash function's index ``i`` (0, 1 or 2), one for all or one per item.
    """
    keys = np.ascontiguousarray(keys, np.uint8)
    blocks = np.repeat(keys.view(f"V{KEY_BYTES}").ravel(), 4).view(np.uint8).reshape(-1, 4, KEY_BYTES)
    tweak = (np.asarray(function, np.uint8).reshape(-1, 1) << 2) | _BLOCK_BITS
    blocks[:, :, 0] = (blocks[:, :, 0] & 0xF0) | tweak
    encrypt = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return np.frombuffer(encrypt.update(blocks.tobytes()), np.uint8).reshape(-1, CODE_BYTES)


def outputs(rows: np.ndarray, size: int) -> np.ndarray:
    """``H`` of each 64-byte row, ``size`` bytes each: ``(n, size)`` ``uint8``."""
    if not len(rows):
        return np.zeros((0, size), np.uint8)
    values = np.ascontiguousarray(rows).view(f"V{CODE_BYTES}").ravel().tolist()
    digests = map(methodcaller("digest"), map(partial(hashlib.blake2b, digest_size=size), values))
    return np.frombuffer(b"".join(digests), np.uint8).reshape(-1, size)


def take_rows(rows: np.ndarray, index) -> np.ndarray:
    """``rows[index]`` for a 2-D ``uint8`` array, each row copied whole (through a void view: several times faster)."""
    rows = np.ascontiguousarray(rows)
    width = rows.shape[1]
    return rows.view(f"V{width}").ravel()[index].view(np.uint8).reshape(-1, width)


def put_rows(target: np.ndarray, index, rows: np.ndarray) -> None:
    """``target[index] = rows`` for a contiguous 2-D ``uint8`` ``target``, row by whole row."""
    width = target.shape[1]
    target.view(f"V{width}").ravel()[index] = np.ascontiguousarray(rows).view(f"V{width}").ravel()


def first_word(values: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each value (at least 8 bytes long) as a big-endian ``uint64``: the primary sort key."""
    return np.ascontiguousarray(values[:, :8]).view(">u8").ravel().astype(np.uint64)


def sort_keys(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two ``uint64`` keys per value (big-endian: its first 8 bytes, the rest zero-padded), ordered as the bytes."""
    n, size = values.shape
    padded = np.zeros((n, 16), np.uint8)
    padded[:, :size] = values
    keys = padded.view(">u8")
    return keys[:, 0].astype(np.uint64), keys[:, 1].astype(np.uint64)
