"""Additive secret shares over the ring Z_{2^256}, fixed-point numbers in it, and Beaver products.

Numbers only: nothing here knows which party holds what.  A value ``x`` is held
by two parties as shares ``x_0 + x_1 = x (mod 2^L)``, ``L = RING_BITS``; one
share alone is uniform over the ring and says nothing of ``x``.  Reals are
encoded at ``2^f`` (:func:`encode`, :func:`decode`); a product of two encoded
reals is at ``2^2f`` and each holder brings its own share back to ``2^f``
(:func:`truncate`, SecureML's local truncation: Mohassel and Zhang, S&P 2017),
which is off by at most one unit and fails only when a share wraps, with
probability below ``2^(b + 1 - L)`` for a value of ``b`` bits: with ``L = 256``
and values under ``2^120`` (``f = 40`` leaves 40 bits of integer part to a
product), below ``2^-135`` per value.

**Beaver products with a dealer.**  Two parties, one holding a matrix ``X`` (the
*left* factor) and the other ``Y`` (the *right*), end with shares of ``X Y`` (or
of ``X * Y`` elementwise) without showing either factor: a third party, the
dealer, draws uniform masks ``A`` (for the left holder) and ``B`` (for the
right) and shares of ``A B`` (:func:`deal`); the left holder sends ``E = X - A``
and the right ``F = Y - B``, each uniform over the ring; then::

    X Y = E F + E B + A F + A B
        = (X F + T_left) + (E B + T_right)        (T_left + T_right = A B)

the left holder computes the first bracket (:func:`left_share`), the right the
second (:func:`right_share`).  The dealer receives nothing; the two parties
receive only uniform openings.  This is Beaver's multiplication from
precomputed triples (CRYPTO 1991) with a dealer handing them out, as CrypTen's
trusted third party and Riazi et al.'s Chameleon do.

Arrays are numpy arrays of Python integers (``dtype=object``) in ``[0, 2^L)``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from vfl.errors import FixedPointOverflowError, ProtocolError

#: Bits of the ring: shares are integers modulo ``2^RING_BITS``.
RING_BITS = 256
#: Bytes per ring element on the wire.
RING_BYTES = RING_BITS // 8
_MODULUS = 1 << RING_BITS
_MASK = _MODULUS - 1
_HALF = 1 << (RING_BITS - 1)
#: The products :func:`deal` prepares.
OPERATIONS = ("matmul", "mul")


def reduce(values) -> np.ndarray:
    """``values`` modulo ``2^L``, as an object array."""
    return np.asarray(values, dtype=object) & _MASK


#: Largest magnitude :func:`encode` takes, in bits: a product of two such values at ``2^2f`` (``f <= 60``)
#: stays below ``2^200``, so a truncation fails with probability below ``2^-55`` per value, and
#: below ``2^-95`` at the default ``f = 40``.
VALUE_BITS = 40


def encode(values, frac_bits: int) -> np.ndarray:
    """Reals as ring elements: ``round(x 2^f) mod 2^L``.

    Raises
    ------
    FixedPointOverflowError
        A value is not finite or not below ``2^VALUE_BITS`` in magnitude.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size and not (np.all(np.isfinite(x)) and np.max(np.abs(x)) < 2.0 ** VALUE_BITS):
        raise FixedPointOverflowError(f"a value to share is not finite or not below 2^{VALUE_BITS} in magnitude")
    scaled = np.rint(np.ldexp(x, frac_bits))
    out = np.empty(x.shape, dtype=object)
    out.flat[:] = [int(v) & _MASK for v in scaled.flat]
    return out


def signed(values) -> np.ndarray:
    """Ring elements as signed integers in ``[-2^(L-1), 2^(L-1))``."""
    out = np.empty(np.shape(values), dtype=object)
    out.flat[:] = [int(v) - _MODULUS if int(v) >= _HALF else int(v) for v in np.asarray(values, dtype=object).flat]
    return out


def decode(values, frac_bits: int) -> np.ndarray:
    """Ring elements as reals: the signed integer over ``2^f``, correctly rounded to a double."""
    ints = signed(values)
    return np.array([float(v) for v in ints.flat], dtype=np.float64).reshape(ints.shape) * 2.0 ** -frac_bits


def uniform(shape) -> np.ndarray:
    """Ring elements drawn uniformly from the CSPRNG (``os.urandom``), never numpy's generator."""
    count = int(np.prod(shape, dtype=np.int64))
    raw = os.urandom(RING_BYTES * count)
    out = np.empty(count, dtype=object)
    out[:] = [int.from_bytes(raw[i:i + RING_BYTES], "little") for i in range(0, len(raw), RING_BYTES)]
    return out.reshape(shape)


def split(values) -> tuple[np.ndarray, np.ndarray]:
    """Two shares of ``values`` (ring elements): the second uniform, the first the difference."""
    other = uniform(np.shape(values))
    return reduce(np.asarray(values, dtype=object) - other), other


def zero_sum(count: int, shape) -> list[np.ndarray]:
    """``count`` arrays, all but the last uniform, adding up to zero: masks that cancel in a sum."""
    masks = [uniform(shape) for _ in range(count - 1)]
    total = sum(masks, np.zeros(shape, dtype=object))
    return masks + [reduce(-total)]


def truncate(share, frac_bits: int, first: bool) -> np.ndarray:
    """One holder's share of ``x / 2^f`` from its share of ``x`` (SecureML's local truncation).

    The two holders call it with ``first=True`` and ``first=False``; the shares they
    get add up to ``x / 2^f`` rounded down, or one unit off.
    """
    flat = np.asarray(share, dtype=object)
    if first:
        return flat >> frac_bits
    return reduce(-((_MODULUS - flat) >> frac_bits))


def apply(operation: str, left, right) -> np.ndarray:
    """``left @ right`` or ``left * right`` in the ring."""
    if operation == "matmul":
        return reduce(np.matmul(left, right))
    if operation == "mul":
        return reduce(np.multiply(left, right))
    raise ValueError(f"unknown ring operation {operation!r}; expected one of {OPERATIONS}")


@dataclass
class Half:
    """One holder's part of a Beaver triple: its mask and its share of the masks' product."""

    mask: np.ndarray
    share: np.ndarray


def deal(operation: str, left_shape, right_shape) -> tuple[Half, Half]:
    """The dealer's triple for one product: the left holder's half, then the right holder's."""
    left, right = uniform(left_shape), uniform(right_shape)
    share_left, share_right = split(apply(operation, left, right))
    return Half(left, share_left), Half(right, share_right)


def opening(factor, half: Half) -> np.ndarray:
    """What a holder sends for one product: its factor minus its mask (uniform over the ring)."""
    return reduce(np.asarray(factor, dtype=object) - half.mask)


def left_share(operation: str, factor, other_opening, half: Half) -> np.ndarray:
    """The left holder's share of the product: ``X F + T_left``."""
    return reduce(apply(operation, factor, other_opening) + half.share)


def right_share(operation: str, other_opening, half: Half) -> np.ndarray:
    """The right holder's share of the product: ``E B + T_right``."""
    return reduce(apply(operation, other_opening, half.mask) + half.share)


#: Bytes of a seed from which a party expands its masks (:func:`expand`).
SEED_BYTES = 32
#: The streams :func:`expand` draws from one seed: a holder's mask, and the left holder's share of the product.
MASK_STREAM, SHARE_STREAM = 0, 1


def new_seed() -> bytes:
    """A fresh seed from the operating system's CSPRNG."""
    return os.urandom(SEED_BYTES)


def expand(seed: bytes, shape, stream: int) -> np.ndarray:
    """Ring elements uniform to anyone without ``seed``: AES-256 in counter mode, keyed by the seed.

    A dealer that would send a party ``count`` uniform ring elements sends it the seed instead, and both
    expand the same elements: 32 bytes on the wire instead of ``32 count``.  ``stream`` separates the
    arrays drawn from one seed (the counter's starting block).
    """
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    if len(seed) != SEED_BYTES:
        raise ProtocolError(f"a seed of {len(seed)} bytes, {SEED_BYTES} expected")
    count = int(np.prod(shape, dtype=np.int64))
    nonce = (int(stream) << 64).to_bytes(16, "big")
    raw = Cipher(algorithms.AES(seed), modes.CTR(nonce)).encryptor().update(bytes(RING_BYTES * count))
    out = np.empty(count, dtype=object)
    out[:] = [int.from_bytes(raw[i:i + RING_BYTES], "little") for i in range(0, len(raw), RING_BYTES)]
    return out.reshape(tuple(shape))


def deal_seeded(operation: str, left_shape, right_shape) -> tuple[bytes, bytes, np.ndarray]:
    """A triple dealt by seeds: the left holder's seed, the right holder's seed and the right holder's share.

    The left holder expands its mask and its share of the product from its seed, the right holder
    its mask from its own; only the right holder's share (the product of the masks minus the left's
    share) crosses the wire in full.  :func:`seeded_half` rebuilds each :class:`Half`.
    """
    left_seed, right_seed = new_seed(), new_seed()
    left, right = expand(left_seed, left_shape, MASK_STREAM), expand(right_seed, right_shape, MASK_STREAM)
    product = apply(operation, left, right)
    share_left = expand(left_seed, product.shape, SHARE_STREAM)
    return left_seed, right_seed, reduce(product - share_left)


def seeded_half(seed: bytes, mask_shape, product_shape, right_share=None) -> Half:
    """A holder's :class:`Half` from its seed (and, for the right holder, the share it was sent)."""
    mask = expand(seed, mask_shape, MASK_STREAM)
    return Half(mask, expand(seed, product_shape, SHARE_STREAM) if right_share is None else right_share)


def to_bytes(values) -> bytes:
    """Ring elements, flattened in C order, as ``RING_BYTES`` little-endian bytes each."""
    return b"".join(int(v).to_bytes(RING_BYTES, "little") for v in np.asarray(values, dtype=object).flat)


def from_bytes(data: bytes, shape) -> np.ndarray:
    """The inverse of :func:`to_bytes` for an array of ``shape`` (a size that does not match is refused)."""
    count = int(np.prod(shape, dtype=np.int64))
    if len(data) != RING_BYTES * count:
        raise ProtocolError(f"{len(data)} bytes for {count} ring elements of {RING_BYTES} bytes each")
    out = np.empty(count, dtype=object)
    out[:] = [int.from_bytes(data[i:i + RING_BYTES], "little") for i in range(0, len(data), RING_BYTES)]
    return out.reshape(tuple(shape))
