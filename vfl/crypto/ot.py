"""Oblivious transfer: base OTs on Curve25519 and the column maths of IKNP-style OT extension.

Numbers only.  Two pieces, used by the KKRT batched OPRF (:mod:`vfl.crypto.kkrt`):

**Base OTs** (Chou and Orlandi's "simplest OT", semi-honest use).  The sender holds, for each
``i < count``, two seeds it does not choose; the receiver gets the seed of its choice bit ``c_i``
and nothing of the other, and the sender learns nothing of ``c_i``::

    sender:    a uniform in Z_L,  A = a G                                   -> receiver  (:func:`sender_start`)
    receiver:  b_i uniform,  B_i = b_i G + c_i A                            -> sender    (:func:`receiver_choose`)
    receiver:  seed_i = H(i, A, B_i, b_i A)
    sender:    seed_i^0 = H(i, A, B_i, a B_i),  seed_i^1 = H(i, A, B_i, a B_i - a A)   (:func:`sender_seeds`)

``G`` generates the prime-order subgroup of Curve25519 in its Edwards form (Edwards25519): X25519's
x-only ladder cannot add points, which this OT needs, so it runs on the same curve through libsodium's
Edwards25519 functions (``crypto_scalarmult_ed25519_noclamp``, ``crypto_core_ed25519_add`` / ``sub``),
as :mod:`vfl.crypto.oprf` does.  ``B_i`` is uniform in the group whatever ``c_i`` is, so the sender's
view is independent of the choices; with ``c_i = 0`` the receiver would need ``a b_i G - a A`` to learn
``seed_i^1`` (the computational Diffie–Hellman problem), likewise for ``c_i = 1``.  ``H`` is SHA-256 cut
to 16 bytes (a random oracle).  Every point received is checked with libsodium's
``crypto_core_ed25519_is_valid_point`` (canonical, on the curve, in the prime-order subgroup, not of
small order) before it is used: :class:`~vfl.errors.ProtocolError` otherwise.

**Extension columns.**  Each seed keys AES-128 in CTR mode (:class:`Streams`): a pseudorandom
column of bits, one bit per OT of the extension, produced chunk by chunk into preallocated buffers.
:func:`transpose` turns a bit matrix around (columns to rows and back) word by word: 8x8 bit blocks
gathered into ``uint64`` words, transposed in place by three masked shifts each, scattered back.

Bit order, everywhere: bit ``c`` of a row of bytes is bit ``c % 8`` (least significant first) of byte
``c // 8``.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from nacl import bindings as sodium

from vfl.errors import ProtocolError

#: Bytes of a point (Edwards25519, compressed) and of a seed (an AES-128 key).
POINT_BYTES = 32
SEED_BYTES = 16
_TAG = b"vfl-ot-1/co15"


# -- base OTs ---------------------------------------------------------------------------------
def _scalar() -> bytes:
    """A scalar uniform in ``[1, L)`` from the OS CSPRNG."""
    while True:
        scalar = sodium.crypto_core_ed25519_scalar_reduce(os.urandom(64))
        if any(scalar):
            return scalar


def check_point(point, what: str) -> bytes:
    """``point`` if it is a valid point of the prime-order subgroup, else a :class:`ProtocolError` naming ``what``."""
    if not isinstance(point, (bytes, bytearray)) or len(point) != POINT_BYTES \
            or not sodium.crypto_core_ed25519_is_valid_point(bytes(point)):
        raise ProtocolError(f"{what} is not a point of Edwards25519's prime-order subgroup (wrong size, not "
                            "canonical, off the curve, or of small order)")
    return bytes(point)


def _seed(index: int, big_a: bytes, big_b: bytes, shared: bytes) -> bytes:
    return hashlib.sha256(_TAG + index.to_bytes(4, "big") + big_a + big_b + shared).digest()[:SEED_BYTES]


def sender_start() -> tuple[bytes, bytes]:
    """The sender's secret ``a`` and its public ``A = a G`` (one for all the OTs of a batch)."""
    a = _scalar()
    return a, sodium.crypto_scalarmult_ed25519_base_noclamp(a)


def receiver_choose(big_a: bytes, choices: np.ndarray) -> tuple[bytes, list[bytes]]:
    """The receiver's points ``B_i`` (concatenated) and the seeds of its choices.

    Parameters
    ----------
    big_a : bytes
        The sender's ``A`` (checked).
    choices : numpy.ndarray
        One choice bit (0 or 1) per OT.

    Returns
    -------
    points : bytes
        ``B_0 || B_1 || ...``, :data:`POINT_BYTES` each, for the sender.
    seeds : list of bytes
        ``seed_i^{c_i}``, :data:`SEED_BYTES` each.
    """
    big_a = check_point(big_a, "the OT sender's point A")
    points, seeds = [], []
    for i, c in enumerate(np.asarray(choices).tolist()):
        b = _scalar()
        big_b = sodium.crypto_scalarmult_ed25519_base_noclamp(b)
        if c:
            big_b = sodium.crypto_core_ed25519_add(big_b, big_a)
        points.append(big_b)
        seeds.append(_seed(i, big_a, big_b, sodium.crypto_scalarmult_ed25519_noclamp(b, big_a)))
    return b"".join(points), seeds


def sender_seeds(a: bytes, big_a: bytes, points: bytes, count: int) -> tuple[list[bytes], list[bytes]]:
    """Both seeds of every OT, from the receiver's points (each checked; a bad one is refused by position).

    Returns
    -------
    seeds0, seeds1 : list of bytes
        ``seed_i^0`` and ``seed_i^1``.
    """
    if not isinstance(points, bytes) or len(points) != count * POINT_BYTES:
        raise ProtocolError(f"{count} OT points ({count * POINT_BYTES} bytes) expected")
    a_a = sodium.crypto_scalarmult_ed25519_noclamp(a, big_a)
    seeds0, seeds1 = [], []
    for i in range(count):
        big_b = check_point(points[i * POINT_BYTES:(i + 1) * POINT_BYTES], f"OT point {i}")
        a_b = sodium.crypto_scalarmult_ed25519_noclamp(a, big_b)
        seeds0.append(_seed(i, big_a, big_b, a_b))
        seeds1.append(_seed(i, big_a, big_b, sodium.crypto_core_ed25519_sub(a_b, a_a)))
    return seeds0, seeds1


# -- extension columns ------------------------------------------------------------------------
class Streams:
    """One AES-128-CTR key stream per seed: the pseudorandom columns of an OT extension, chunk by chunk.

    ``next(nbytes)`` returns a ``(len(seeds), nbytes)`` ``uint8`` array: the next ``nbytes`` of every
    stream, written into one preallocated buffer (reused by the following call).
    """

    def __init__(self, seeds):
        self._streams = [Cipher(algorithms.AES(bytes(s)), modes.CTR(bytes(16))).encryptor() for s in seeds]
        self._buffer = np.empty((len(self._streams), 0), np.uint8)
        self._zeros = b""

    def next(self, nbytes: int) -> np.ndarray:
        if self._buffer.shape[1] != nbytes + 16:       # CTR's update_into asks for a block's slack
            self._buffer = np.empty((len(self._streams), nbytes + 16), np.uint8)
            self._zeros = bytes(nbytes)
        for stream, row in zip(self._streams, self._buffer):
            stream.update_into(self._zeros, row)
        return self._buffer[:, :nbytes]


_M1, _M2, _M3 = np.uint64(0x00AA00AA00AA00AA), np.uint64(0x0000CCCC0000CCCC), np.uint64(0x00000000F0F0F0F0)
_S1, _S2, _S3 = np.uint64(7), np.uint64(14), np.uint64(28)


def _transpose_8x8(x: np.ndarray) -> np.ndarray:
    """Transpose, in place, the 8x8 bit matrix in each ``uint64`` (bit ``8 r + c`` holds row ``r``, column ``c``)."""
    for mask, shift in ((_M1, _S1), (_M2, _S2), (_M3, _S3)):
        t = x >> shift                  # swap the bits under ``mask`` with those ``shift`` places above them
        t ^= x
        t &= mask
        x ^= t
        t <<= shift
        x ^= t
    return x


def transpose(bits: np.ndarray) -> np.ndarray:
    """The transpose of a bit matrix held as bytes.

    Parameters
    ----------
    bits : numpy.ndarray
        ``(R, C // 8)`` ``uint8``: ``R`` rows of ``C`` bits; ``R`` and ``C`` multiples of 8.

    Returns
    -------
    numpy.ndarray
        ``(C, R // 8)`` ``uint8``: row ``c`` holds column ``c`` of ``bits``.
    """
    rows, width = bits.shape
    if rows % 8:
        raise ValueError(f"transpose: {rows} rows is not a multiple of 8")
    # blocks[r8, c8] = the 8 bytes of rows 8 r8 .. 8 r8 + 7 at byte c8: byte i is row i of an 8x8 block
    blocks = np.array(bits.reshape(rows // 8, 8, width).transpose(0, 2, 1), order="C")    # a copy: changed in place
    words = _transpose_8x8(blocks.view(np.uint64).reshape(rows // 8, width))
    # byte j of a transposed block is output row 8 c8 + j at byte r8
    out = words.view(np.uint8).reshape(rows // 8, width, 8).transpose(1, 2, 0)
    return np.ascontiguousarray(out).reshape(width * 8, rows // 8)


def random_bits(count: int) -> np.ndarray:
    """``count`` bits (0 or 1, ``uint8``) from the OS CSPRNG."""
    return np.unpackbits(np.frombuffer(os.urandom((count + 7) // 8), np.uint8), bitorder="little")[:count]
