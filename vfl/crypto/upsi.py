"""The X25519 oblivious PRF of the unbalanced PSI: one key over a large set, blinded queries from a small one.

Numbers only.  The large party holds a secret scalar ``k`` (clamped as X25519 clamps) and a public key
id ``s`` (32 random bytes, drawn with ``k``); ``H`` hashes an id onto the curve under the domain
``tag ‖ s`` exactly as the Diffie–Hellman PSI does (:func:`vfl.crypto.group.hash_to_group`: never the
twist), and the PRF is::

    F_k(x) = SHA-256(tag' ‖ seed(x) ‖ u(k · H(x)))          (cut to w bytes)

with ``seed(x)`` the first hash of ``x`` (binding ``x``, as RFC 9497's ``H2(x, k H1(x))`` does).  The
large party computes it over its whole set (:func:`outputs`); the small party obtains it for its own
ids without learning ``k`` and without the large party learning the ids:

    small:  r clamped, R = r · H(y)                     -> large     (:func:`blinding`, :func:`query`)
    large:  E = k · R  (R checked: canonical, on the curve, not of small order)  -> small  (:func:`evaluate`)
    small:  u(k · H(y)) = u(c · E) with c ≡ ±r⁻¹ (mod L), then F_k(y)             (:func:`unblind`, :func:`finalize`)

**Unblinding with X25519.**  X25519 clamps every scalar (a multiple of 8 in ``[2^254, 2^255)``), so an
inverse cannot be passed as it is (the reason :mod:`vfl.crypto.oprf` runs on Edwards25519).  But every
point in play after the first blinding lies in the subgroup of prime order ``L``, where a scalar acts
through its residue mod ``L``, and x-only arithmetic cannot tell ``c`` from ``-c``: a clamped ``c = 8γ``
with ``8γ ≡ ±r⁻¹`` exists unless ``γ = ±r⁻¹/8 mod L`` falls in a band of width about ``2^125`` (a
``2^-127`` chance; then :func:`blinding` draws ``r`` again).  Every ladder is then X25519, on Intel's
multi-buffer engine where it runs (:mod:`vfl.crypto.mb`), with one ``r`` for all of a run's queries:
the large party sees ``r · H(y)`` for the small party's ids, exactly what the hub of the DH PSI sees of
a spoke's ids (``b · H(y)``), pseudorandom under the decisional Diffie–Hellman assumption.

**Output width** (:func:`output_width`): ``w`` bytes with ``2^(8w) >= 2^41 · n_large · n_small``, so
that a false match between any query and any of the large party's outputs, or a query's output equal to
another of the large party's (which would make its row ambiguous), has probability at most ``2^-40``
(a union bound over ``n_large · n_small`` pairs, twice).
"""

from __future__ import annotations

import math
import os

from vfl.crypto import group

#: Bytes of a key id (public: it names the key and salts the hash onto the curve).
KEY_ID_BYTES = 32
#: Widest output kept (the large party's cache keeps this many bytes; a run uses a prefix).
FULL_BYTES = 16
#: The false-match probability the output width bounds: 2^-SECURITY.
SECURITY = 40
_HASH_TAG = b"vfl-upsi-1/id/"
_OUT_TAG = b"vfl-upsi-1/out"


def new_key() -> tuple[bytes, bytes]:
    """A fresh ``(scalar, key id)``: a clamped X25519 scalar and 32 public bytes, both from the OS CSPRNG."""
    return group.random_scalar(), os.urandom(KEY_ID_BYTES)


def domain(key_id: bytes) -> bytes:
    """The hashing domain of a key: ``tag ‖ key id``."""
    return _HASH_TAG + bytes(key_id)


def output_width(n_large: int, n_small: int) -> int:
    """Bytes of an output for a ``2^-40`` false-match (or ambiguity) probability: ``ceil((41 + log2(n_L n_S)) / 8)``.

    At least 8.  Raises ``ValueError`` past :data:`FULL_BYTES` (more than about 2^87 pairs).
    """
    bits = SECURITY + 1 + math.log2(max(1, n_large)) + math.log2(max(1, n_small))
    width = max(8, math.ceil(bits / 8))
    if width > FULL_BYTES:
        raise ValueError(f"{n_large} x {n_small} ids need outputs of {width} bytes; at most {FULL_BYTES} are kept")
    return width


def outputs(ids, key: bytes, key_id: bytes, size: int = FULL_BYTES) -> bytes:
    """The large party's ``F_k(x)`` for every id, ``size`` bytes each (``size`` a multiple of 8), back to back."""
    return group.hash_and_digest(ids, domain(key_id), key, _OUT_TAG, size)


def blinding() -> tuple[bytes, bytes]:
    """A run's blinding scalar ``r`` and its unblinding scalar ``c`` (clamped, ``c · r ≡ ±1 mod L``)."""
    while True:
        r = group.random_scalar()
        inverse = pow(int.from_bytes(r, "little"), -1, group.ORDER)
        gamma = inverse * pow(8, -1, group.ORDER) % group.ORDER
        for g in (gamma, group.ORDER - gamma):
            if 2 ** 251 <= g < 2 ** 252:
                return r, (8 * g).to_bytes(group.SCALAR_BYTES, "little")


def query(ids, key_id: bytes, r: bytes) -> tuple[bytes, bytes]:
    """The small party's ``(seeds, r · H(y))`` for its ids (the seeds stay with it, for :func:`finalize`)."""
    own = group.seeds(ids, domain(key_id))
    return own, group.map_and_blind(own, r)       # the seeds hashed once


def evaluate(points: bytes, key: bytes) -> bytes:
    """The large party's ``k · R`` for each blinded point, every point checked first.

    Raises
    ------
    vfl.crypto.group.InvalidPointError
        A point that is not canonical, on the twist, or of small order (its position in ``index``).
    """
    return group.blind(points, key)


def unblind(points: bytes, c: bytes) -> bytes:
    """``c · E = k · H(y)`` for each evaluated point, checked as :func:`evaluate` checks."""
    return group.blind(points, c)


def finalize(seeds: bytes, points: bytes, size: int) -> bytes:
    """``F_k(y)`` from the seeds and the unblinded points, ``size`` bytes each (any size up to 32)."""
    full = -(-size // 8) * 8
    digests = group.digest_points(seeds, points, _OUT_TAG, full)
    if full == size:
        return digests
    return b"".join(digests[i:i + size] for i in range(0, len(digests), full))
