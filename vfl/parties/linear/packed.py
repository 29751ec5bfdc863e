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
from vfl.crypto.randomness import uniform_below
from vfl.crypto.slots import Group
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


def _score_bits(context: Context, score_bound: float, n_parties: int) -> int:
    """``|z| <= m S 2^f < 2^(f + ceil(log2 S) + ceil(log2 m) + 1)``: the bits of a sum of ``m`` partial scores."""
    return context.frac_bits + bound_bits(score_bound) + math.ceil(math.log2(max(1, n_parties))) + 1


# -- prediction (batch and online): whole plaintexts under one mask uniform over Z_n ---------------

def prediction_slots(context: Context, score_bound: float, n_parties: int) -> Group:
    """The scores' slots in private prediction and online scoring: one balanced signed digit of ``V + 1`` bits
    per score.

    ``|z| < 2^V`` (``V`` from :func:`_score_bits`: a sum of ``m`` partial scores); a plaintext holds
    ``(key bits - 2) // (V + 1)`` of them.  There is no room for per-slot masks
    and none is needed: the label party, who learns every slot, hides the whole
    plaintext from the coordinator under one mask uniform over Z_n
    (:func:`mask_scores`), as unpacked prediction hides each score.
    """
    width = _score_bits(context, score_bound, n_parties) + 1
    per = (int(context.public_key.n).bit_length() - 2) // width
    if per < 1:
        raise FixedPointOverflowError(f"a {width}-bit score does not fit a {context.public_key.key_bits}-bit key")
    return Group((width,) * per)


def _pack_scores(context: Context, values, group: Group, what: str) -> list:
    """The scores at ``frac_bits``, ``len(group.widths)`` per plaintext (the last padded with zeros)."""
    encoded = context.encode(values, what=what)
    per = len(group.widths)
    padded = np.array(encoded + [0] * (-len(encoded) % per), dtype=object)
    return group.pack(padded.reshape(-1, per))


def encrypt_scores(context: Context, values, group: Group, what: str = "score") -> EncryptedVector:
    """``[[Z]]``: the scores packed by :func:`prediction_slots`, a fresh encryption."""
    plaintexts = _pack_scores(context, values, group, what)
    return EncryptedVector(context, context.engine.encrypt(context.public_key, plaintexts), context.frac_bits,
                           fresh=True)


def mask_scores(context: Context, values, group: Group, what: str = "score") -> tuple[EncryptedVector, list]:
    """``[[Z + R]]`` for this party's own scores, ``R`` fresh and uniform over Z_n per ciphertext (CSPRNG).

    One fresh encryption carries both; adding the other parties' ``[[Z_k]]`` to it
    leaves the sum re-randomized and uniformly masked.  Returns it and ``R``.
    """
    n = int(context.public_key.n)
    plaintexts = _pack_scores(context, values, group, what)
    masks = uniform_below(n, len(plaintexts))
    masked = context.engine.encrypt(context.public_key, [(int(p) + r) % n for p, r in zip(plaintexts, masks)])
    return EncryptedVector(context, masked, context.frac_bits, fresh=True), masks


def unmask_scores(context: Context, residues, masks, group: Group, count: int, what: str = "score") -> np.ndarray:
    """The ``count`` scores (floats) from the decrypted ``Z + R`` and the masks ``R``.

    Raises
    ------
    FixedPointOverflowError
        When a plaintext holds more than its slots, or a padding slot is not zero.
    """
    if len(residues) != len(masks):
        raise ProtocolError(f"{what}: got {len(residues)} masked values for {len(masks)} masks")
    n = int(context.public_key.n)
    plaintexts = [(int(r) - int(m)) % n for r, m in zip(residues, masks)]
    values = np.asarray(group.unpack(plaintexts, n, len(plaintexts), 1), dtype=object).ravel()
    if len(values) < count or any(int(v) for v in values[count:]):
        raise FixedPointOverflowError(f"{what}: the packed scores do not hold {count} values and zero padding")
    f = context.frac_bits
    return np.array([math.ldexp(float(v), -f) for v in values[:count]], dtype=np.float64)


def check_declared(role: str, values, bound: float, what: str, setting: str = "score_bound",
                   advice: str = "scale the column down") -> None:
    """Refuse a value beyond its declared bound, naming the party, the value and the bound."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return
    worst = float(np.max(np.abs(values)))
    if math.isfinite(worst) and worst <= bound:
        return
    if not math.isfinite(worst):
        where = int(np.flatnonzero(~np.isfinite(values.ravel()))[0])
        raise FixedPointOverflowError(f"party {role}: {what} at position {where} is not a finite number; {advice}")
    where = int(np.argmax(np.abs(values)))
    raise FixedPointOverflowError(
        f"party {role}: {what} {float(values.flat[where]):.6g} at position {where} is beyond the declared "
        f"{setting} {bound:g} that the packed slots are sized for; raise {setting} or {advice}")


def encrypt_packed(context: Context, values, layout: SlotLayout, what: str = "value") -> EncryptedVector:
    """``[[P]]`` for the values at ``frac_bits``, ``layout.slots`` per ciphertext: a fresh encryption (training)."""
    encoded = context.encode(values, what=what)
    packing.check_values(encoded, layout, what)
    plaintexts = packing.pack(encoded, layout)
    return EncryptedVector(context, context.engine.encrypt(context.public_key, plaintexts), context.frac_bits,
                           fresh=True)


# -- training ------------------------------------------------------------------------------------

def training_layout(context: Context, n: int, feature_bound: float, score_bound: float, n_parties: int) -> SlotLayout:
    """Slots for a batch of ``n`` rows: ``[[u]]``, ``[[d]]`` and every product ``X^T [[d]]`` (``2s - 1`` positions).

    With ``F = 2^fb >= feature_bound``, ``S = 2^sb >= score_bound``, ``m`` parties and
    ``f`` fractional bits, each position of a product sums at most ``n`` terms:
    a gradient ``|x d| <= F m S 2^(2f)``, a loss part ``|a u_k d| <= m S^2 2^(2f) / 2``,
    B's ``|a (r - e) U| <= 3/2 K S^2 2^(2f)``; all the loss's products together stay
    below ``n m^2 S^2 2^(2f)``.  So ``value_bits = 2f + ceil(log2 n) + max(fb, sb) + sb
    + 2 ceil(log2 m) + 2`` leaves a quarter of the slot for these sums and a quarter
    for the parties' own loss terms (:func:`own_loss_bound`).
    """
    m_bits = math.ceil(math.log2(max(1, n_parties)))
    fb, sb = bound_bits(feature_bound), bound_bits(score_bound)
    value_bits = 2 * context.frac_bits + math.ceil(math.log2(max(1, n))) + max(fb, sb) + sb + 2 * m_bits + 2
    return packing.layout_for(int(context.public_key.n).bit_length(), value_bits, product=True)


def own_loss_bound(context: Context, layout: SlotLayout, n_parties: int) -> float:
    """The largest own term (penalty, B's plaintext loss terms) one party may add to the packed loss."""
    return math.ldexp(1.0, layout.value_bits - 2 - 2 * context.frac_bits) / n_parties


class SlotMasks:
    """What a party keeps to unmask the values C returns from position ``s - 1`` of its masked products."""

    def __init__(self, masks: list, layout: SlotLayout, exponent: int):
        self.masks, self.layout, self.exponent = masks, layout, exponent

    def unmask(self, context: Context, digits, what: str) -> np.ndarray:
        values = packing.unmask(digits, self.masks, self.layout, what)
        return np.array([math.ldexp(float(v), -self.exponent) for v in values], dtype=np.float64)


def products(context: Context, packed: EncryptedVector, columns, layout: SlotLayout) -> EncryptedVector:
    """``[[columns @ v]]`` in slot ``s - 1`` of each result, from ``v`` packed (see :func:`packing.slot_products`)."""
    exponents = context.encode_matrix(np.atleast_2d(np.asarray(columns, dtype=np.float64)), what="matrix entry")
    out = packing.slot_products(context.public_key, context.engine, packed.ciphertexts, exponents, layout)
    return EncryptedVector(context, out, packed.exponent + context.frac_bits)


def mask_products(context: Context, vector: EncryptedVector, layout: SlotLayout,
                  keep_result: bool = False) -> tuple[EncryptedVector, SlotMasks]:
    """Every position of every product masked (``keep_result``: all but ``s - 1``), by a fresh encryption."""
    keep = layout.slots - 1 if keep_result else None
    plaintexts, kept = packing.position_masks(len(vector), layout, keep)
    fresh = context.engine.encrypt(context.public_key, plaintexts)
    out = EncryptedVector(context, context.engine.add(context.public_key, vector.ciphertexts, fresh),
                          vector.exponent, fresh=True)
    return out, SlotMasks(kept, layout, vector.exponent)


def add_in_result_slot(context: Context, vector: EncryptedVector, value: float, layout: SlotLayout) -> EncryptedVector:
    """``[[P + v 2^(w (s-1))]]``: a plaintext value added in position ``s - 1`` (at the vector's exponent)."""
    encoded = context.encode([value], vector.exponent, what="loss term")[0]
    shifted = encoded << (layout.slot_bits * (layout.slots - 1))
    return EncryptedVector(context, context.engine.add_plain(context.public_key, vector.ciphertexts,
                                                             [shifted] * len(vector)), vector.exponent)


def add_packed_plain(context: Context, vector: EncryptedVector, values, layout: SlotLayout,
                     what: str = "value") -> EncryptedVector:
    """``[[P]] + pack(values)`` at ``frac_bits`` (not re-randomized)."""
    encoded = context.encode(values, what=what)
    packing.check_values(encoded, layout, what)
    plain = packing.pack(encoded, layout)
    if len(plain) != len(vector):
        raise ProtocolError(f"{what}: {len(vector)} packed ciphertexts for {len(plain)} plaintexts")
    return EncryptedVector(context, context.engine.add_plain(context.public_key, vector.ciphertexts, plain),
                           vector.exponent)
