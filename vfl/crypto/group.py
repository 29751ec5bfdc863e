"""Curve25519 in Montgomery form (X25519) for Diffie–Hellman blinding: libsodium's ladder through PyNaCl.

Numbers only: messages in, points out.  What a message *is* (an id, its
canonical form) is the caller's business.  A point travels as its 32-byte
little-endian u-coordinate (:data:`POINT_BYTES`); ``P`` and ``-P`` share it,
which x-only Diffie–Hellman never needs to tell apart.

* :func:`hash_to_group` — a message to a point *of the curve* (never its twist):
  ``seed = SHA-512(len(domain) ‖ domain ‖ message)``, then the first of
  ``u_t = SHA-512(tag ‖ seed ‖ t) mod p`` (t = 0, 1, ...) for which
  ``u³ + 486662·u² + u`` is a non-zero square (a Jacobi symbol): about two
  tries per message.  Each ``u_t`` is uniform in the field up to 2⁻²⁵⁷, so the
  point is uniform over the curve's points (up to sign).  Hashing straight to a
  u-coordinate without the test would put half the ids on the twist, and which
  curve a blinded point lies on is public: a peer could test a guessed id's
  curve against it.  Here every hashed point is on the curve.
* :func:`random_scalar` — 32 bytes from the operating system's CSPRNG, clamped as
  X25519 clamps (``8·k`` with ``2²⁵¹ <= k < 2²⁵²``): the factor 8 clears the
  cofactor, so every blinded point lies in the prime-order subgroup (order
  ``L = 2²⁵² + 27742317777372353535851937790883648493``).
* :func:`blind` — ``scalar · P`` for every point with ``crypto_scalarmult``
  (X25519's Montgomery ladder, constant time).  Every point received is checked
  first: a canonical encoding (``u < p``), on the curve rather than the twist
  (a Jacobi symbol), and libsodium refuses the points of small order (an
  all-zero result); a refused point raises :class:`InvalidPointError` with its
  position.  Clamping alone would make any point harmless to the scalar (the
  twist's group order is 4 times a 253-bit prime, so no small subgroup leaks
  bits of it); the checks also refuse a peer that does not follow the protocol.
* :func:`blind_digests` — blinding a peer's points and hashing each result to a
  short digest in one pass (what the PSI sends back instead of points).
* :func:`hash_and_digest` — hashing, blinding and digesting one's own messages in
  one pass, each digest binding its message's seed (:func:`seeds`): the outputs
  of the unbalanced PSI's OPRF (:mod:`vfl.crypto.upsi`).

Work on many points is split into tasks shared by the calling thread and the
lanes of its plan (:mod:`vfl.crypto.compute`: with two cores, two lanes).  On
the fast engine the heavy work (the ladders, and the power of each curve test)
runs in Intel's library, which :mod:`ctypes` calls with the GIL released, so
the other lanes are threads of this process
(:func:`vfl.crypto.workers.run_threads`; from :data:`MIN_THREAD_ITEMS` points):
no interpreter to start, nothing through a pipe, and the secret scalar stays
in this process.  On libsodium (a ladder a call from a Python loop, and GMP's
Jacobi symbol, which holds the GIL: two threads measured slower than one) they
are worker processes
(:func:`vfl.crypto.workers.run_sharing`: one worker process and this thread),
started only for :data:`MIN_POOL_ITEMS` points or more unless they are running;
a task's points and results cross the pipe as arrays of 64-bit words (the
scalar as hex text), never pickled, and the secret scalar thus reaches the
party's own worker processes (its children, on its machine), or under a joblib
backend the party's own cluster, and nothing else.  The ladders run on
:mod:`vfl.crypto.mb`: Intel's 8-way multi-buffer X25519 (``vfl[fast-crypto]``,
AVX-512 IFMA; about 7.5 µs a point) where it runs, libsodium's
``crypto_scalarmult`` (about 31 µs) otherwise, with the same bytes and the same
refusals; :func:`engine` says which ran and why.  Hashing and checks run in
batches (each try of the map for all pending seeds: SHA-512 over rows of one
byte array, the reduction mod ``p`` vectorized in numpy; the curve tests eight
at a time on the fast engine's field arithmetic): about 4.5 µs per own id
(three SHA-512 and two curve tests) and 1 µs per peer point.
"""

from __future__ import annotations

import hashlib
import operator
import os

import gmpy2
import numpy as np
from nacl import bindings as sodium

from vfl.crypto import mb, workers
from vfl.errors import ProtocolError

try:                   # CPython's own SHA-512: the same function, built without OpenSSL's per-object setup cost
    from _sha512 import sha512 as _sha512
except ImportError:    # pragma: no cover - other interpreters, or Python 3.12+ (_sha2)
    try:
        from _sha2 import sha512 as _sha512
    except ImportError:
        _sha512 = hashlib.sha512
_DIGEST = operator.methodcaller("digest")

#: Bytes of an encoded point (its u-coordinate).
POINT_BYTES = 32
#: Bytes of a scalar.
SCALAR_BYTES = 32
#: The field's prime.
PRIME = 2 ** 255 - 19
#: The order ``L`` of the curve's prime-order subgroup.
ORDER = 2 ** 252 + 27742317777372353535851937790883648493
#: The Montgomery coefficient ``A`` of ``v² = u³ + A·u² + u``.
A = 486662
#: Most points in one worker task (a task of this size takes about a quarter of a second).
TASK_POINTS = 1 << 13
#: Fewest points worth starting the worker processes for: fewer run in the calling thread unless the workers are
#: running already (an interpreter with numpy costs about 0.3 s of CPU to start, the time of ~40,000 ladders).
MIN_POOL_ITEMS = 1 << 14
#: Fewest points split over threads on the fast engine (:func:`vfl.crypto.workers.run_threads`): fewer run in the
#: calling thread.  A thread starts in about 0.1 ms, but each batch of hashes holds the GIL for up to a few ms
#: (the other lane then waits up to the 5 ms switch interval): measured on a loaded 2-core machine, two threads
#: were slower than one up to 10^4 points and at par at 16,384; the PSI's chunks (32,768 points) are split.
MIN_THREAD_ITEMS = 1 << 14
#: Bytes of a seed (the first hash of a message).
SEED_BYTES = 32
_MAP_TAG = b"vfl-x25519/map"
_P = gmpy2.mpz(PRIME)
#: The X25519 engines that ran this process's ladders (here or in its worker processes), by name.
_USED: set[str] = set()


class InvalidPointError(ProtocolError):
    """A point that is not the canonical u-coordinate of a curve point of large order.

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
    # Bytes cross the worker pipe as little-endian 64-bit words (lengths here are multiples of 8).
    return np.frombuffer(data, dtype="<u8").astype(np.uint64)


def _unwords(words: np.ndarray) -> bytes:
    return np.asarray(words).astype("<u8").tobytes()


def _tasks(n: int, width: int, lanes: int) -> list[tuple[int, int]]:
    """Byte ranges splitting ``n`` items of ``width`` bytes into tasks: at least one per lane, each bounded."""
    parts = max(1, min(n, max(lanes, -(-n // TASK_POINTS))))
    bounds = [n * k // parts for k in range(parts + 1)]
    return [(lo * width, hi * width) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def _parallel(fn, data: bytes, width: int, *extra) -> bytes:
    """Run ``fn(words, *extra)`` on slices of ``data`` (items of ``width`` bytes); join what the tasks return.

    Each task returns ``(result as words, index of the first refused item or -1, the X25519 engine it used)``.
    """
    n = len(data) // width
    if n == 0:
        return b""
    lanes = workers.thread_lanes() if mb.releases_gil() else 0
    if lanes >= 2:          # the fast engine: threads of this process (the ladders and curve tests free the GIL)
        ranges = [(0, n * width)] if n < MIN_THREAD_ITEMS else _tasks(n, width, lanes)
        results = workers.run_threads(fn, [(_words(data[lo:hi]),) + extra for lo, hi in ranges], lanes)
    else:
        ranges = [(0, n * width)] if n < MIN_POOL_ITEMS and not workers.started() \
            else _tasks(n, width, workers.worker_count())
        results = workers.run_sharing(fn, [(_words(data[lo:hi]),) + extra for lo, hi in ranges])
    out = []
    for (lo, _), (words, bad, used) in zip(ranges, results):
        if used:
            _USED.add(used)
        if bad >= 0:
            index = lo // width + bad
            raise InvalidPointError(index, f"point {index} is not the u-coordinate of a point of large order on "
                                           "Curve25519 (not canonical, on the twist, or of small order)")
        out.append(_unwords(words))
    return b"".join(out)


def engine() -> dict:
    """Which X25519 engine this process's ladders run on (:func:`vfl.crypto.mb.engine`), and why not the fast one.

    ``ran`` lists the engines that have run ladders so far, here or in the worker processes (which
    choose for themselves, the same way): what a PSI records beside the choice.
    """
    report = mb.engine()
    report["ran"] = sorted(_USED)
    return report


def engine_record() -> dict:
    """What a PSI's result and run record keep of its X25519 engine: :func:`engine` without the library's path.

    ``{"engine": "ipp-crypto-mb8" | "libsodium", "reason": "" or why not Intel's multi-buffer ladder,
    "ran": [...], "curve_check": ..., "version": ...}``.
    """
    report = engine()
    return {key: report[key] for key in ("engine", "reason", "ran", "curve_check", "version") if key in report}


# -- scalars --------------------------------------------------------------------------------
def random_scalar() -> bytes:
    """A fresh secret scalar: 32 CSPRNG bytes, clamped (a multiple of 8, bit 254 set, bit 255 clear)."""
    scalar = bytearray(os.urandom(SCALAR_BYTES))
    scalar[0] &= 248
    scalar[31] = (scalar[31] & 127) | 64
    return bytes(scalar)


def _check_scalar(scalar: bytes) -> bytes:
    scalar = bytes(scalar)
    if len(scalar) != SCALAR_BYTES or scalar[0] & 7 or scalar[31] & 0xC0 != 0x40:
        raise ValueError("a blinding scalar is 32 bytes, clamped as X25519 clamps (see random_scalar)")
    return scalar


# -- hashing -----------------------------------------------------------------------------------
def _seeds(messages, domain: bytes) -> bytes:
    """``SHA-512(len(domain) ‖ domain ‖ message)[:32]`` for every message, back to back."""
    domain = bytes(domain)
    if len(domain) > 255:
        raise ValueError("a hashing domain is at most 255 bytes")
    prefix = _sha512(bytes([len(domain)]) + domain)        # CPython's: copies cost less than OpenSSL's
    out = bytearray()
    for message in messages:
        h = prefix.copy()
        h.update(message)
        out += h.digest()[:SEED_BYTES]
    return bytes(out)


def _on_curve(u) -> bool:
    """Whether ``u`` (in ``[0, p)``) is the u-coordinate of a curve point other than the one of order 2."""
    return gmpy2.jacobi(u * (u * (u + A) + 1) % _P, _P) == 1


def _map_to_curve(seed: bytes) -> bytes:
    """The first ``SHA-512(tag ‖ seed ‖ t) mod p`` that is on the curve, as 32 bytes."""
    t = 0
    while True:
        u = gmpy2.mpz(int.from_bytes(hashlib.sha512(_MAP_TAG + seed + bytes([t])).digest(), "little")) % _P
        if _on_curve(u):
            return int(u).to_bytes(POINT_BYTES, "little")
        t += 1      # each try succeeds with probability 1/2: 256 failures in a row is a 2^-256 event


def hash_to_group(messages, domain: bytes) -> bytes:
    """Hash each message to a point of the curve (its u-coordinate).

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
    return _parallel(_task_hash, _seeds(messages, domain), SEED_BYTES, "")


def hash_and_blind(messages, domain: bytes, scalar: bytes) -> bytes:
    """``blind(hash_to_group(messages, domain), scalar)`` in one pass over the workers."""
    return map_and_blind(_seeds(messages, domain), scalar)


def map_and_blind(seeds_: bytes, scalar: bytes) -> bytes:
    """:func:`hash_and_blind` from the messages' seeds (:func:`seeds`, 32 bytes each, back to back): a caller that
    reorders its messages can hash them once and reorder the seeds as an array."""
    if len(seeds_) % SEED_BYTES:
        raise ValueError("seeds are 32 bytes each")
    return _parallel(_task_hash, bytes(seeds_), SEED_BYTES, _check_scalar(scalar).hex())


def seeds(messages, domain: bytes) -> bytes:
    """The first hash of each message, 32 bytes each, back to back: what :func:`hash_to_group` maps to the curve.

    ``SHA-512(len(domain) ‖ domain ‖ message)[:32]``; a collision-resistant stand-in for the message
    wherever a later hash must bind it (:func:`hash_and_digest`).
    """
    return _seeds(messages, domain)


def hash_and_digest(messages, domain: bytes, scalar: bytes, key: bytes, size: int) -> bytes:
    """``SHA-256(key ‖ seed(m) ‖ scalar · H(m))[:size]`` for every message, in one pass over the workers.

    A keyed function of each message that only the holder of ``scalar`` can compute (the OPRF outputs
    of :mod:`vfl.crypto.upsi`, binding the message through its seed as RFC 9497 binds the input).
    ``size`` is a multiple of 8 from 8 to 32.
    """
    if size % 8 or not 8 <= size <= 32:
        raise ValueError("a digest is 8, 16, 24 or 32 bytes")
    return _parallel(_task_hash_digest, _seeds(messages, domain), SEED_BYTES, _check_scalar(scalar).hex(),
                     bytes(key).hex(), size)


def digest_points(seeds_: bytes, points: bytes, key: bytes, size: int) -> bytes:
    """``SHA-256(key ‖ seed ‖ point)[:size]`` for each (seed, point) pair: :func:`hash_and_digest`'s last step."""
    if len(seeds_) // SEED_BYTES != count(points) or len(seeds_) % SEED_BYTES:
        raise ValueError("one 32-byte seed per point")
    prefix = hashlib.sha256(bytes(key))
    out = []
    for i in range(0, len(points), POINT_BYTES):
        h = prefix.copy()
        h.update(seeds_[i:i + SEED_BYTES])
        h.update(points[i:i + POINT_BYTES])
        out.append(h.digest()[:size])
    return b"".join(out)


def blind(points: bytes, scalar: bytes) -> bytes:
    """``scalar · P`` for every point ``P``; every point is checked first.

    Raises
    ------
    InvalidPointError
        A point is not canonical, not on the curve, or of small order; ``index`` is its position.
    """
    count(points)
    return _parallel(_task_blind, bytes(points), POINT_BYTES, _check_scalar(scalar).hex(), "", 0)


def blind_digests(points: bytes, scalar: bytes, key: bytes, size: int) -> bytes:
    """``SHA-256(key ‖ scalar · P)[:size]`` for every point ``P`` (checked as :func:`blind` checks it).

    ``size`` is a multiple of 8 from 8 to 32.
    """
    count(points)
    if size % 8 or not 8 <= size <= 32:
        raise ValueError("a digest is 8, 16, 24 or 32 bytes")
    return _parallel(_task_blind, bytes(points), POINT_BYTES, _check_scalar(scalar).hex(), bytes(key).hex(), size)


# -- worker tasks (also run in this process when there are no workers) --------------------------
def _task_hash(words: np.ndarray, scalar_hex: str) -> tuple:
    """Map seeds to curve points; blind them if a scalar is given."""
    points = _map_many(_unwords(words))
    if not scalar_hex:
        return _words(points), -1, ""
    out, bad, used = _ladder(points, bytes.fromhex(scalar_hex))
    return _words(out), bad, used


def _task_hash_digest(words: np.ndarray, scalar_hex: str, key_hex: str, size: int) -> tuple:
    """Map seeds to curve points, blind them, and digest each with its seed (:func:`hash_and_digest`)."""
    seeds_ = _unwords(words)
    out, bad, used = _ladder(_map_many(seeds_), bytes.fromhex(scalar_hex))
    if bad >= 0:        # a hashed point of small order: a 2^-250 event
        return np.zeros(0, dtype=np.uint64), bad, used
    return _words(digest_points(seeds_, out, bytes.fromhex(key_hex), size)), -1, used


def _map_many(seeds: bytes) -> bytes:
    """:func:`_map_to_curve` of every seed, each try of all the seeds still without a point at once.

    The same points as one seed at a time (tested): try ``t`` of a seed is ``SHA-512(tag ‖ seed ‖ t) mod p``
    and its curve test (:func:`vfl.crypto.mb.on_curve_many`) runs on all the seeds at try ``t`` together.
    The hash inputs are rows of one byte array (handed to SHA-512 as bytes without a Python loop), and the
    reduction mod ``p`` runs on all the digests of a try at once (:func:`_reduce_512`).
    """
    n = len(seeds) // SEED_BYTES
    result = np.zeros((n, 4), dtype=np.uint64)
    width = len(_MAP_TAG) + SEED_BYTES + 1
    rows = np.empty((n, width), dtype=np.uint8)
    rows[:, :len(_MAP_TAG)] = np.frombuffer(_MAP_TAG, dtype=np.uint8)
    rows[:, len(_MAP_TAG):-1] = np.frombuffer(seeds, dtype=np.uint8).reshape(n, SEED_BYTES)
    void, sha, digest = np.dtype(f"V{width}"), _sha512, _DIGEST
    pending = np.arange(n)
    t = 0
    while pending.size:
        rows[pending, -1] = t
        items = (rows if pending.size == n else rows[pending]).view(void).reshape(-1).tolist()
        candidates = _reduce_512(b"".join(map(digest, map(sha, items))))
        ok = mb.on_curve_many(candidates)
        result[pending[ok]] = candidates[ok]
        pending = pending[~ok]
        t += 1      # each try succeeds with probability 1/2: 256 failures in a row is a 2^-256 event
    return result.astype("<u8").tobytes()


_M32 = np.uint64(0xFFFFFFFF)


def _carry(limbs: np.ndarray) -> np.ndarray:
    """Propagate carries through rows of 32-bit limbs held in 64-bit lanes (shape ``(8, n)``); the carry out."""
    carry = np.zeros(limbs.shape[1], dtype=np.uint64)
    for i in range(limbs.shape[0]):
        limbs[i] += carry
        carry = limbs[i] >> np.uint64(32)
        limbs[i] &= _M32
    return carry


def _reduce_512(digests: bytes) -> np.ndarray:
    """Each 64-byte little-endian number of ``digests`` mod ``p = 2^255 - 19``, as rows of four 64-bit words.

    Vectorized over all the numbers: ``x = L + 2^256 H ≡ L + 38 H``, folded until it fits 256 bits, then
    ``2^255 ≡ 19`` and one conditional subtraction of ``p``.  Equal to Python's ``x % p`` (tested).
    """
    limbs = np.frombuffer(digests, dtype="<u4").reshape(-1, 16).T.astype(np.uint64)       # (16, n)
    y = limbs[:8] + np.uint64(38) * limbs[8:]                                              # < 2^38 a limb
    carry = _carry(y)
    while carry.any():                              # 2^256 ≡ 38: at most a few rounds
        y[0] += np.uint64(38) * carry
        carry = _carry(y)
    top = y[7] >> np.uint64(31)                     # 2^255 ≡ 19
    y[7] &= np.uint64(0x7FFFFFFF)
    y[0] += np.uint64(19) * top
    _carry(y)                                       # now y < 2^255 + 19 < 2p
    z = y.copy()
    z[0] += np.uint64(19)
    _carry(z)
    over = (z[7] >> np.uint64(31)).astype(bool)     # y + 19 >= 2^255, i.e. y >= p: take y - p
    z[7] &= np.uint64(0x7FFFFFFF)
    y[:, over] = z[:, over]
    words = y[0::2] | (y[1::2] << np.uint64(32))                                           # (4, n)
    return np.ascontiguousarray(words.T)


_P_WORDS = np.frombuffer(PRIME.to_bytes(POINT_BYTES, "little"), dtype="<u8")


def _first_bad(points: bytes) -> int:
    """The index of the first point that is not canonical (``u >= p``) or not on the curve, or -1."""
    words = np.frombuffer(points, dtype="<u8").reshape(-1, 4)
    # u >= p, compared from the top word down (p's top word is 2^63 - 1, its two middle words all ones)
    top, high = words[:, 3], _P_WORDS[3]
    too_big = (top > high) | ((top == high) & (words[:, 2] == _P_WORDS[2]) & (words[:, 1] == _P_WORDS[1])
                              & (words[:, 0] >= _P_WORDS[0]))
    good = ~too_big
    good[good] = mb.on_curve_many(words[good])
    return int(np.argmin(good)) if not good.all() else -1


def _task_blind(words: np.ndarray, scalar_hex: str, key_hex: str, size: int) -> tuple:
    """Check and blind each point; digest the results if a key is given; stop at the first refused point."""
    points = _unwords(words)
    bad = _first_bad(points)
    if bad >= 0:
        return np.zeros(0, dtype=np.uint64), bad, ""
    out, bad, used = _ladder(points, bytes.fromhex(scalar_hex))
    if bad >= 0:
        return np.zeros(0, dtype=np.uint64), bad, used
    if key_hex:
        prefix = hashlib.sha256(bytes.fromhex(key_hex))
        copy = prefix.copy
        digests = []
        for i in range(0, len(out), POINT_BYTES):
            h = copy()
            h.update(out[i:i + POINT_BYTES])
            digests.append(h.digest()[:size])
        out = b"".join(digests)
    return _words(out), -1, used


def _ladder(points: bytes, scalar: bytes) -> tuple[bytes, int, str]:
    """X25519 of every point, as libsodium's ``crypto_scalarmult`` (:func:`vfl.crypto.mb.x25519_many`: Intel's
    8-way ladder where it runs, libsodium's otherwise): ``(results, index of a refused point or -1, engine)``."""
    used = mb.engine()["engine"]
    out, ok = mb.x25519_many(scalar, points)
    if not ok.all():        # the all-zero result: a point of small order
        return b"", int(np.argmin(ok)), used
    return out, -1, used
