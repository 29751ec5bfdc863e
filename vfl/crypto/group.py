"""The prime-order group of Edwards25519 for Diffie–Hellman blinding (libsodium through PyNaCl).

Numbers only: messages in, points out.  What a message *is* (an id, its
canonical form) is the caller's business.

* :func:`hash_to_group` — SHA-512 of the domain-separated message; each half of
  the digest goes through libsodium's Elligator 2 map
  (``crypto_core_ed25519_from_uniform``, which also clears the cofactor) and
  the two points are added.  This is the shape of RFC 9380's random-oracle
  ``hash_to_curve`` (two maps and a sum), so hashed points are spread over the
  whole subgroup rather than over the image of one map.
* :func:`random_scalar` — a fresh secret scalar: 64 bytes from the operating
  system's CSPRNG reduced modulo the group order ``L``; never zero.
* :func:`blind` — ``scalar · P`` for every point, with
  ``crypto_scalarmult_ed25519_noclamp``.  libsodium refuses any input that is
  not the canonical encoding of a point of the prime-order subgroup other than
  the identity (it checks canonical form, on the curve, small order, and
  ``L · P = 0``), so every point blinded has been fully validated; a refused
  point raises :class:`InvalidPointError` with its position.
* :func:`validate` — the same checks without blinding
  (``crypto_core_ed25519_is_valid_point``, and not the identity).

Points travel as one ``bytes`` string of fixed-width 32-byte encodings
(:data:`POINT_BYTES`).  Work on many points is split into tasks and spread over
the worker processes of :mod:`vfl.crypto.workers` (both cores); a task's points
and results cross the pipe as arrays of 64-bit words (the scalar as hex
text), never pickled.  The secret scalar thus reaches the party's own worker
processes (its children, on its machine), or under a joblib backend the party's
own cluster (:mod:`vfl.crypto.compute`), and nothing else.  cffi releases the
GIL inside libsodium, so threads would use both cores too; measured on a 2-core
machine, two threads blinded at about 1.75 times one core's rate and the two
worker processes at about 2 times, and the pool was already there.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
from nacl import bindings as sodium

from vfl.crypto import workers
from vfl.errors import ProtocolError

#: Bytes of an encoded point.
POINT_BYTES = 32
#: Bytes of an encoded scalar (little-endian, below :data:`ORDER`).
SCALAR_BYTES = 32
#: The order ``L`` of the prime-order subgroup.
ORDER = 2 ** 252 + 27742317777372353535851937790883648493
#: The identity's encoding (y = 1).
IDENTITY = b"\x01" + bytes(31)
#: Most points in one worker task (a task of this size takes about a second).
TASK_POINTS = 1 << 13


class InvalidPointError(ProtocolError):
    """A point that is not the encoding of an element of the prime-order subgroup (or is the identity).

    Attributes
    ----------
    index : int
        Position of the first bad point in the sequence given.
    """

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


# -- fixed-width point strings ---------------------------------------------------------
def count(points: bytes) -> int:
    """The number of points in ``points``; raises :class:`InvalidPointError` if its length is not a multiple of 32."""
    if len(points) % POINT_BYTES:
        raise InvalidPointError(len(points) // POINT_BYTES,
                                f"{len(points)} bytes do not hold whole {POINT_BYTES}-byte points")
    return len(points) // POINT_BYTES


def split(points: bytes) -> list[bytes]:
    """``points`` as a list of 32-byte encodings."""
    return [points[i:i + POINT_BYTES] for i in range(0, count(points) * POINT_BYTES, POINT_BYTES)]


def _words(data: bytes) -> np.ndarray:
    # Bytes cross the worker pipe as little-endian 64-bit words (lengths here are multiples of 32).
    return np.frombuffer(data, dtype="<u8").astype(np.uint64)


def _unwords(words: np.ndarray) -> bytes:
    return np.asarray(words).astype("<u8").tobytes()


def _tasks(n: int, width: int) -> list[tuple[int, int]]:
    """Byte ranges splitting ``n`` items of ``width`` bytes into tasks: at least one per worker, each bounded."""
    parts = max(1, min(n, max(workers.worker_count(), -(-n // TASK_POINTS))))
    bounds = [n * k // parts for k in range(parts + 1)]
    return [(lo * width, hi * width) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def _parallel(fn, data: bytes, width: int, *extra) -> bytes:
    """Run ``fn(words, *extra)`` on slices of ``data`` (items of ``width`` bytes); join the points returned.

    Each task returns ``(points as words, index of the first refused item or -1)``.
    """
    n = len(data) // width
    if n == 0:
        return b""
    ranges = _tasks(n, width)
    results = workers.run(fn, [(_words(data[lo:hi]),) + extra for lo, hi in ranges])
    out = []
    for (lo, _), (words, bad) in zip(ranges, results):
        if bad >= 0:
            index = lo // width + bad
            raise InvalidPointError(index, f"point {index} is not an element of the prime-order subgroup "
                                           f"of Edwards25519 (bad encoding, not on the curve, small order or "
                                           f"outside the subgroup)")
        out.append(_unwords(words))
    return b"".join(out)


# -- scalars --------------------------------------------------------------------------------
def random_scalar() -> bytes:
    """A fresh secret scalar in ``[1, L)``: 64 CSPRNG bytes reduced modulo ``L`` (bias below 2⁻²⁵⁰)."""
    while True:
        scalar = sodium.crypto_core_ed25519_scalar_reduce(os.urandom(64))
        if any(scalar):
            return scalar


def _check_scalar(scalar: bytes) -> bytes:
    scalar = bytes(scalar)
    if len(scalar) != SCALAR_BYTES or not 0 < int.from_bytes(scalar, "little") < ORDER:
        raise ValueError("a blinding scalar is 32 little-endian bytes encoding an integer in [1, L)")
    return scalar


# -- hashing -----------------------------------------------------------------------------------
def _digests(messages, domain: bytes) -> bytes:
    """SHA-512 of ``len(domain) ‖ domain ‖ message`` for every message, back to back (64 bytes each)."""
    domain = bytes(domain)
    if len(domain) > 255:
        raise ValueError("a hashing domain is at most 255 bytes")
    prefix = hashlib.sha512(bytes([len(domain)]) + domain)
    out = bytearray()
    for message in messages:
        h = prefix.copy()
        h.update(message)
        out += h.digest()
    return bytes(out)


def hash_to_group(messages, domain: bytes) -> bytes:
    """Hash each message to a point of the prime-order subgroup.

    Parameters
    ----------
    messages : iterable of bytes
    domain : bytes
        Domain separation (at most 255 bytes), e.g. a protocol tag and a per-run salt.

    Returns
    -------
    bytes
        The points, 32 bytes each, in the order of ``messages``.
    """
    return _parallel(_task_hash, _digests(messages, domain), 64, "")


def hash_and_blind(messages, domain: bytes, scalar: bytes) -> bytes:
    """``blind(hash_to_group(messages, domain), scalar)`` in one pass over the workers."""
    return _parallel(_task_hash, _digests(messages, domain), 64, _check_scalar(scalar).hex())


def blind(points: bytes, scalar: bytes) -> bytes:
    """``scalar · P`` for every point ``P``; every input point is validated first.

    Raises
    ------
    InvalidPointError
        A point is not a canonical encoding of a non-identity element of the
        prime-order subgroup; ``index`` is its position.
    """
    count(points)
    return _parallel(_task_blind, bytes(points), POINT_BYTES, _check_scalar(scalar).hex())


def validate(points: bytes) -> None:
    """Check every point: canonical, on the curve, in the prime-order subgroup, not the identity.

    Raises
    ------
    InvalidPointError
        Naming the position of the first bad point.
    """
    count(points)
    _parallel(_task_validate, bytes(points), POINT_BYTES)


# -- worker tasks (also run in this process when there are no workers) --------------------------
def _task_hash(words: np.ndarray, scalar_hex: str) -> tuple:
    """Map 64-byte digests to points (two Elligator 2 maps, added); blind them if a scalar is given."""
    data = _unwords(words)
    scalar = bytes.fromhex(scalar_hex)
    from_uniform, add, mul = (sodium.crypto_core_ed25519_from_uniform, sodium.crypto_core_ed25519_add,
                              sodium.crypto_scalarmult_ed25519_noclamp)
    out = []
    for i in range(0, len(data), 64):
        point = add(from_uniform(data[i:i + 32]), from_uniform(data[i + 32:i + 64]))
        out.append(mul(scalar, point) if scalar else point)
    return _words(b"".join(out)), -1


def _task_blind(words: np.ndarray, scalar_hex: str) -> tuple:
    """``scalar · P`` for each point; stops at the first point libsodium refuses."""
    data = _unwords(words)
    scalar = bytes.fromhex(scalar_hex)
    mul = sodium.crypto_scalarmult_ed25519_noclamp
    out = []
    for k, i in enumerate(range(0, len(data), POINT_BYTES)):
        try:
            out.append(mul(scalar, data[i:i + POINT_BYTES]))
        except Exception:  # libsodium returned -1: not a valid subgroup point (PyNaCl raises RuntimeError)
            return np.zeros(0, dtype=np.uint64), k
    return _words(b"".join(out)), -1


def _task_validate(words: np.ndarray) -> tuple:
    data = _unwords(words)
    valid = sodium.crypto_core_ed25519_is_valid_point
    for k, i in enumerate(range(0, len(data), POINT_BYTES)):
        point = data[i:i + POINT_BYTES]
        if point == IDENTITY or not valid(point):
            return np.zeros(0, dtype=np.uint64), k
    return np.zeros(0, dtype=np.uint64), -1

