"""Several fixed-point integers in one Paillier plaintext: slot layouts, packing and masking.

Numbers only.  A plaintext of a ``k``-bit modulus holds ``s`` *slots* of ``w`` bits::

    P = v_0 + v_1 2^w + v_2 2^(2w) + ... + v_(s-1) 2^((s-1) w)

Adding two packed plaintexts adds slot by slot, as long as no slot's sum leaves
its ``w`` bits (no carry or borrow crosses into a neighbour).  The slot width
therefore comes from a public bound: every value that will ever sit in a slot is
below ``2^value_bits`` in magnitude, and the layout leaves room above it for a
mask and a margin (:class:`SlotLayout`).

Per-slot statistical masking.  Before the key holder decrypts, each slot gets
``v + 2^value_bits + r`` with ``r`` uniform in ``[0, 2^(value_bits + 1 + sigma))``:
the offset makes the slot non-negative, and the statistical distance between
the slot's distributions for any two values ``|v|, |v'| < 2^value_bits`` is at
most ``2^-sigma`` (``sigma`` = :data:`STATISTICAL_BITS` = 80).  The masked slot is
below ``2^(value_bits + 2 + sigma)``, so ``w = value_bits + 2 + sigma`` keeps every
slot inside its own bits.  Masks come from :mod:`secrets`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import gmpy2
import numpy as np

from vfl.errors import FixedPointOverflowError

#: Bits of statistical hiding per masked slot: what the key holder sees of a value is at
#: most ``2^-80`` (in statistical distance) from what it would see of any other value in range.
STATISTICAL_BITS = 80


@dataclass(frozen=True)
class SlotLayout:
    """How values sit in a plaintext: ``slots`` slots of ``slot_bits`` bits, values below ``2^value_bits``.

    Parameters
    ----------
    value_bits : int
        Every (signed) value placed in a slot has ``|v| < 2^value_bits``.
    slot_bits : int
        ``w``: at least ``value_bits + 2 + statistical_bits``.
    slots : int
        ``s``: slots per plaintext.
    statistical_bits : int
        ``sigma``: the width by which a mask exceeds the value it hides.
    """

    value_bits: int
    slot_bits: int
    slots: int
    statistical_bits: int = STATISTICAL_BITS

    def __post_init__(self):
        if self.slot_bits < self.value_bits + 2 + self.statistical_bits:
            raise ValueError(f"slots of {self.slot_bits} bits cannot hold {self.value_bits}-bit values with "
                             f"{self.statistical_bits} bits of masking")
        if self.slots < 1:
            raise ValueError("a layout needs at least one slot")

    @property
    def offset(self) -> int:
        """``2^value_bits``: added to a slot with its mask, so the masked slot is non-negative."""
        return 1 << self.value_bits

    @property
    def mask_bits(self) -> int:
        """Masks are uniform in ``[0, 2^mask_bits)``: ``value_bits + 1 + statistical_bits``."""
        return self.value_bits + 1 + self.statistical_bits

    def ciphertexts(self, count: int) -> int:
        """Packed plaintexts needed for ``count`` values."""
        return -(-count // self.slots)

    def to_fields(self) -> dict:
        return {"value_bits": self.value_bits, "slot_bits": self.slot_bits, "slots": self.slots}


def layout_for(plaintext_bits: int, value_bits: int, product: bool = False,
               statistical_bits: int = STATISTICAL_BITS, guard_bits: int = 0) -> SlotLayout:
    """The layout with the most slots for values below ``2^value_bits`` in a ``plaintext_bits``-bit modulus.

    With ``product`` the plaintext must hold ``2s - 1`` slot positions: the product
    of a packed plaintext with an exponent packing ``s`` values in reverse slot
    order spans that many.  Packed integers stay below ``2^(plaintext_bits - 2)``,
    far from ``n / 2``.  ``guard_bits`` widen every slot above its masked value
    (:func:`guarded_position_value` checks that they stay clear).

    Raises
    ------
    FixedPointOverflowError
        When not even one slot fits.
    """
    width = value_bits + 2 + statistical_bits + guard_bits
    positions = (plaintext_bits - 2) // width
    slots = (positions + 1) // 2 if product else positions
    if slots < 1:
        raise FixedPointOverflowError(
            f"a {width}-bit slot ({value_bits}-bit values and {statistical_bits} bits of masking) does not fit "
            f"a {plaintext_bits}-bit plaintext; lower the declared bounds or use a larger key")
    return SlotLayout(value_bits, width, slots, statistical_bits)


def check_values(values, layout: SlotLayout, what: str = "value") -> None:
    """Refuse (before anything is encrypted) a value outside ``(-2^value_bits, 2^value_bits)``."""
    limit = layout.offset
    for i, v in enumerate(values):
        if not -limit < v < limit:
            raise FixedPointOverflowError(
                f"{what} at position {i} does not fit a {layout.slot_bits}-bit slot "
                f"(|value| < 2^{layout.value_bits} in fixed point)")


def pack(values, layout: SlotLayout) -> list:
    """Signed integers packed ``layout.slots`` per plaintext (the last one padded with zeros).

    Slot ``j`` of plaintext ``i`` holds ``values[i * s + j]``; the packed integer is
    ``sum_j v_j 2^(j w)``, which may be negative (the encryption takes it mod ``n``).
    """
    values = [int(v) for v in values]
    check_values(values, layout)
    return _combine(values, layout)


def pack_exact(values, layout: SlotLayout) -> list:
    """Signed integers of any size packed as :func:`pack` does, unchecked: for one term of a packed sum.

    A value beyond its slot spills into its neighbours, but the packed integer is
    still exactly ``sum_j v_j 2^(j w)``, so a sum of such terms whose slot sums are in
    range packs those sums (the shared protocol's ``X a + X c``: each term as large
    as the shares, the sum a score).
    """
    return _combine([int(v) for v in values], layout)


def pack_unsigned(values, layout: SlotLayout) -> list:
    """Non-negative slot values below ``2^slot_bits`` packed as :func:`pack` does (masked shares)."""
    values = [int(v) for v in values]
    top = 1 << layout.slot_bits
    for i, v in enumerate(values):
        if not 0 <= v < top:
            raise FixedPointOverflowError(f"masked slot value at position {i} does not fit {layout.slot_bits} bits")
    return _combine(values, layout)


def _combine(values: list, layout: SlotLayout) -> list:
    """``sum_j v_(is + j) 2^(j w)`` for each group of ``s`` values."""
    s, w = layout.slots, layout.slot_bits
    out = []
    for start in range(0, len(values), s):
        acc = 0
        for v in reversed(values[start:start + s]):
            acc = (acc << w) + v
        out.append(gmpy2.mpz(acc))
    return out


def unpack(plaintexts, layout: SlotLayout, count: int) -> list:
    """The ``count`` non-negative slot values (``w``-bit digits) of packed plaintexts, in order.

    Raises
    ------
    FixedPointOverflowError
        When a plaintext is negative or longer than its slots (a slot overflowed).
    """
    s, w = layout.slots, layout.slot_bits
    if len(plaintexts) != layout.ciphertexts(count):
        raise ValueError(f"{len(plaintexts)} packed plaintexts for {count} values of {s} per plaintext")
    top = gmpy2.mpz(1) << (s * w)
    digit = (gmpy2.mpz(1) << w) - 1
    out = []
    for i, p in enumerate(plaintexts):
        p = gmpy2.mpz(p)
        if not 0 <= p < top:
            raise FixedPointOverflowError(f"packed plaintext {i} is outside its {s} slots of {w} bits")
        for _ in range(min(s, count - len(out))):
            out.append(int(p & digit))
            p >>= w
    return out


def slot_masks(count: int, layout: SlotLayout) -> list:
    """``count`` fresh masks, uniform in ``[0, 2^mask_bits)`` (CSPRNG)."""
    bits = layout.mask_bits
    return [secrets.randbits(bits) for _ in range(count)]


def masked_slots(values, masks, layout: SlotLayout) -> list:
    """``v + 2^value_bits + r`` per slot: what one party adds to hide ``v``'s slot from the key holder."""
    offset = layout.offset
    return [int(v) + offset + int(r) for v, r in zip(values, masks)]


def unmask(digits, masks, layout: SlotLayout, what: str = "value") -> list:
    """The signed values from masked slot digits and their masks.

    Raises
    ------
    FixedPointOverflowError
        When a result is out of range (something wrapped: it never should).
    """
    if len(digits) != len(masks):
        raise ValueError(f"{what}: {len(digits)} masked slots for {len(masks)} masks")
    offset = layout.offset
    out = [int(d) - offset - int(r) for d, r in zip(digits, masks)]
    for i, v in enumerate(out):
        if not -offset < v < offset:
            raise FixedPointOverflowError(f"{what} at position {i} overflowed its slot")
    return out


# -- products of packed ciphertexts with reversed packed exponents ------------------------------

def positions(layout: SlotLayout) -> int:
    """Slot positions of a product: ``2s - 1``."""
    return 2 * layout.slots - 1


def pack_positions(rows, layout: SlotLayout) -> list:
    """One plaintext per row of non-negative per-position values (``2s - 1`` of them, each below ``2^w``)."""
    w, top = layout.slot_bits, 1 << layout.slot_bits
    out = []
    for row in rows:
        acc = 0
        for v in reversed(row):
            v = int(v)
            if not 0 <= v < top:
                raise FixedPointOverflowError(f"a masked slot value does not fit {w} bits")
            acc = (acc << w) + v
        out.append(gmpy2.mpz(acc))
    return out


def slot_products(public_key, engine, ciphertexts, exponents, layout: SlotLayout) -> list:
    """For each row ``e`` of ``exponents`` (one exponent per packed value): ``[[sum_t e_t v_t]]`` in slot ``s - 1``.

    ``ciphertexts`` pack the values ``v`` ``s`` per plaintext (slot ``j`` of
    ciphertext ``k`` holds ``v_(ks + j)``).  Raising ciphertext ``k`` to the exponent
    that packs ``e_(ks), ..., e_(ks + s - 1)`` in reverse slot order puts
    ``sum_j e_(ks + j) v_(ks + j)`` in position ``s - 1`` of the product, and cross
    terms ``e_(ks + j) v_(ks + i)`` (``i != j``) in position ``i + s - 1 - j``.  That
    exponent has ``(s - 1) w`` more bits than ``e``; instead, per slot position ``j``,
    ``M_j = prod_k c_k^(e_(ks + j))`` is one more column of one multi-exponentiation
    with the short exponents ``e``, and the product is Horner's
    ``(...(M_0^(2^w) M_1)^(2^w) ...) M_(s-1)``: ``(s - 1) w`` squarings per row of
    ``exponents``.  Exponents past the last value (padding) multiply empty slots.
    """
    s, w = layout.slots, layout.slot_bits
    q = len(ciphertexts)
    matrix = exponents if isinstance(exponents, np.ndarray) and exponents.dtype == np.int64 else \
        np.asarray(exponents, dtype=object)
    if matrix.ndim != 2 or not (q - 1) * s < matrix.shape[1] <= q * s:
        raise ValueError(f"slot_products: {q} packed ciphertexts of {s} slots and exponent rows of "
                         f"{matrix.shape[-1]} values")
    cols, count = matrix.shape
    if count < q * s:       # pad by repeating the first value: constant columns stay constant
        matrix = np.concatenate([matrix, np.repeat(matrix[:, :1], q * s - count, axis=1)], axis=1)
    per_position = matrix.reshape(cols, q, s).transpose(0, 2, 1).reshape(cols * s, q)
    if per_position.dtype == object:
        per_position = per_position.tolist()
    partials = engine.lincomb(public_key, list(ciphertexts), per_position)
    n2 = public_key.nsquare
    shift = gmpy2.mpz(1) << w
    out = []
    for c in range(cols):
        acc = partials[c * s]
        for j in range(1, s):
            acc = gmpy2.powmod(acc, shift, n2) * partials[c * s + j] % n2
        out.append(acc)
    return out


def position_masks(count: int, layout: SlotLayout, keep: int | None = None) -> tuple[list, list]:
    """Fresh masks for ``count`` products: per position ``2^value_bits + r`` (``keep``: that position unmasked).

    Returns the per-product plaintexts to add and the masks ``r`` at position
    ``s - 1`` (what the owner subtracts from the value it gets back).
    """
    offset, mask_bits = layout.offset, layout.mask_bits
    rows, kept = [], []
    for _ in range(count):
        row = [0 if p == keep else offset + secrets.randbits(mask_bits) for p in range(positions(layout))]
        rows.append(row)
        kept.append(row[layout.slots - 1] - offset if keep != layout.slots - 1 else 0)
    return pack_positions(rows, layout), kept


def guarded_position_value(residue, layout: SlotLayout, position: int, guard_bits: int = 1) -> int:
    """The masked value at ``position`` of a decrypted product whose every position is masked and guarded.

    Every position ``p`` of the product holds ``V_p + 2^value_bits + r_p`` below
    ``2^(w - guard_bits)`` when ``|V_p| < 2^value_bits``; a position that left that range
    (a value beyond its slot, or a borrow or carry from the position below) shows in
    its guard bits or in the residue's range, and the lowest such position always does
    while every ``|V_p| < 2^(w - 2)``.

    Raises
    ------
    FixedPointOverflowError
        When the residue is negative or beyond the product's positions, or a guard bit is set.
    """
    p = gmpy2.mpz(residue)
    w, count = layout.slot_bits, positions(layout)
    if not 0 <= p < gmpy2.mpz(1) << (w * count):
        raise FixedPointOverflowError(f"a packed product is outside its {count} positions of {w} bits")
    guarded = gmpy2.mpz(1) << (w - guard_bits)
    digit = (gmpy2.mpz(1) << w) - 1
    values = []
    for p_index in range(count):
        value = p & digit
        if value >= guarded:
            raise FixedPointOverflowError(f"position {p_index} of a packed product overflowed its slot")
        values.append(value)
        p >>= w
    return int(values[position])


def position_value(residue, n, layout: SlotLayout, position: int, signed: bool = False) -> int:
    """The value at ``position`` of a decrypted product whose lower positions are non-negative and below ``2^w``.

    ``signed``: the position holds an unmasked signed value (balanced digit,
    ``|v| < 2^(w-1)``); otherwise a masked non-negative one.  The residue is read
    as a signed integer in ``(-n/2, n/2)``.
    """
    p = gmpy2.mpz(residue)
    n = gmpy2.mpz(n)
    if p > n // 2:
        p -= n
    w = layout.slot_bits
    digit = (p >> (w * position)) & ((gmpy2.mpz(1) << w) - 1)
    if signed and digit >= (gmpy2.mpz(1) << (w - 1)):
        digit -= gmpy2.mpz(1) << w
    return int(digit)
