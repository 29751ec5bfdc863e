"""Packed ciphertexts at the parties: slot layouts from public values, packing, masking, unmasking.

A layout (:class:`vfl.crypto.packing.SlotLayout`) follows from public values
only: the key size, the fixed-point precision, the number ``m`` of parties
holding rows, and the *declared* bounds every party checks its own values
against before encrypting (``score_bound`` on each party's share of a score,
``feature_bound`` on ``|x|``).  Nobody needs to know, or trust, anyone else's
magnitudes: a value beyond its declared bound is a
:class:`~vfl.errors.FixedPointOverflowError` naming the party, never a silent
corruption of a neighbouring slot.
"""

from __future__ import annotations

import math

import numpy as np

from vfl.crypto import Context, EncryptedVector
from vfl.crypto import packing
from vfl.crypto.packing import SlotLayout
from vfl.errors import FixedPointOverflowError, ProtocolError

#: Default declared bound on ``|x|`` for every feature (packed training).
DEFAULT_FEATURE_BOUND = 2.0 ** 8
#: Default declared bound on each party's share of a score (B's includes ``kappa y`` and the DP noise).
DEFAULT_SCORE_BOUND = 2.0 ** 12


def bound_bits(bound: float) -> int:
    """The least ``b`` with ``bound <= 2^b``."""
    if not (isinstance(bound, (int, float, np.integer, np.floating)) and math.isfinite(bound) and bound > 0):
        raise ValueError(f"a declared bound must be a positive finite number, got {bound!r}")
    bits = math.ceil(math.log2(bound))
    return bits + 1 if math.ldexp(1.0, bits) < bound else bits


def prediction_layout(context: Context, score_bound: float, n_parties: int) -> SlotLayout:
    """Slots for the sum of ``m`` partial scores, each ``|u| <= score_bound``, at ``frac_bits``.

    ``|z| <= m S 2^f < 2^(f + ceil(log2 S) + ceil(log2 m) + 1)``.
    """
    value_bits = context.frac_bits + bound_bits(score_bound) + math.ceil(math.log2(max(1, n_parties))) + 1
    return packing.layout_for(int(context.public_key.n).bit_length(), value_bits)


def check_declared(role: str, values, bound: float, what: str, setting: str = "score_bound",
                   advice: str = "scale the column down") -> None:
    """Refuse a value beyond its declared bound, naming the party, the value and the bound."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return
    worst = float(np.max(np.abs(values)))
    if math.isfinite(worst) and worst <= bound:
        return
    where = int(np.argmax(np.abs(values))) if math.isfinite(worst) else int(np.flatnonzero(~np.isfinite(values))[0])
    raise FixedPointOverflowError(
        f"party {role}: {what} {float(values.flat[where]):.6g} at position {where} is beyond the declared "
        f"{setting} {bound:g} that the packed slots are sized for; raise {setting} or {advice}")


def encrypt_packed(context: Context, values, layout: SlotLayout, what: str = "value") -> EncryptedVector:
    """``[[P]]`` for the values at ``frac_bits``, ``layout.slots`` per ciphertext: a fresh encryption."""
    encoded = context.encode(values, what=what)
    packing.check_values(encoded, layout, what)
    plaintexts = packing.pack(encoded, layout)
    return EncryptedVector(context, context.engine.encrypt(context.public_key, plaintexts), context.frac_bits,
                           fresh=True)


def mask_packed(context: Context, total: EncryptedVector | None, values, layout: SlotLayout,
                what: str = "value") -> tuple[EncryptedVector, list]:
    """``[[total + pack(v + 2^value_bits + r)]]`` with fresh per-slot masks ``r``; returns it and the masks.

    ``values`` are this party's own plaintext share (floats at ``frac_bits``); the
    offset and the mask are added to them before they are packed and encrypted
    afresh, so the result is re-randomized too.
    """
    encoded = context.encode(values, what=what)
    packing.check_values(encoded, layout, what)
    masks = packing.slot_masks(len(encoded), layout)
    shares = packing.pack_unsigned(packing.masked_slots(encoded, masks, layout), layout)
    fresh = EncryptedVector(context, context.engine.encrypt(context.public_key, shares), context.frac_bits,
                            fresh=True)
    if total is None:
        return fresh, masks
    if len(total) != len(fresh):
        raise ProtocolError(f"{what}: {len(total)} packed ciphertexts for {len(fresh)} of this party's")
    out = total + fresh
    out.fresh = True            # the fresh encryption re-randomizes the sum
    return out, masks


def unmask_packed(context: Context, residues, masks, layout: SlotLayout, what: str = "value") -> np.ndarray:
    """Floats from the decrypted packed residues and the masks."""
    digits = packing.unpack(residues, layout, len(masks))
    values = packing.unmask(digits, masks, layout, what)
    f = context.frac_bits
    return np.array([math.ldexp(float(v), -f) for v in values], dtype=np.float64)
