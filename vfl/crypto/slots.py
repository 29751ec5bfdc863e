"""Signed values side by side in one plaintext, and ciphertexts combined into one for a single decryption.

A *group* is a row of signed integer slots of given widths ``w_0, w_1, ...``;
value ``v_j`` must satisfy ``|v_j| < 2^(w_j - 1)``, and the group's integer is
``sum_j v_j 2^(w_0 + ... + w_(j-1))``.  Sums of groups stay groups as long as
every slot's sum keeps that bound: slot widths come from public bounds (the
value bound and the most rows a sum can take).  Decoding reads the residue as a
signed integer and takes balanced digits from the lowest slot up, so negative
slots borrow from their neighbours and come back exactly.

Several groups fit one Paillier plaintext; ciphertexts of groups are combined
into one by Horner's rule, ``c_0 (c_1 (c_2 ...)^(2^W))^(2^W)`` with ``W`` the
group width: ``W`` squarings per group, after which one decryption reveals
every group at once (:func:`combine`).  The combined ciphertexts are
re-randomized, so that the key holder cannot relate them to any ciphertext it
made.  Unlike :mod:`vfl.crypto.packing` there is no mask: these are values the
key holder is allowed to learn (sums it decrypts itself).
"""

from __future__ import annotations

from dataclasses import dataclass

import gmpy2
import numpy as np

from vfl.crypto import workers
from vfl.crypto.fast import task_ranges
from vfl.errors import FixedPointOverflowError

#: Groups per task at most when combining ciphertexts.
MAX_GROUPS_PER_TASK = 4_096


def _fitting(values, widths, layout: str) -> np.ndarray:
    """``values`` (rows by slots) as an array, after checking that it has one column per slot of ``widths`` (a
    ``ValueError`` naming the ``layout`` otherwise) and that each value fits its signed slot (a
    :class:`FixedPointOverflowError` naming the slot's width otherwise)."""
    values = np.asarray(values)
    if values.ndim != 2 or values.shape[1] != len(widths):
        raise ValueError(f"{layout} and values of shape {values.shape}")
    if values.size:                 # every slot's largest in one pass over the values, not one per slot
        for w, largest in zip(widths, np.abs(values).max(axis=0).tolist()):
            if int(largest) >= 1 << (w - 1):
                raise FixedPointOverflowError(f"a value does not fit its {w}-bit signed slot")
    return values


@dataclass(frozen=True)
class Group:
    """Slot widths (bits, sign included) of one group of signed values."""

    widths: tuple[int, ...]

    @property
    def width(self) -> int:
        return sum(self.widths)

    def per_plaintext(self, key_bits: int) -> int:
        """Groups one plaintext of a ``key_bits`` modulus holds (signed: the total stays below ``n / 2``)."""
        return max(0, (key_bits - 2) // self.width)

    def pack(self, values: np.ndarray) -> list:
        """One integer per row of ``values`` (rows by slots); a value out of its slot's range is refused."""
        values = _fitting(values, self.widths, f"a group of {len(self.widths)} slots")
        out = []
        shifts = np.concatenate([[0], np.cumsum(self.widths)[:-1]]).tolist()
        for row in values.tolist():
            out.append(gmpy2.mpz(sum(int(v) << s for v, s in zip(row, shifts))))
        return out

    def unpack(self, residues, n, count: int, per: int) -> np.ndarray:
        """``count`` groups (rows by slots, int64 where they fit, else objects) from decrypted residues.

        ``per`` groups sit in each residue, the first group in the lowest bits.
        """
        n = gmpy2.mpz(n)
        half = n // 2
        out = []
        for r in residues:
            r = gmpy2.mpz(r)
            r = r - n if r > half else r
            for _ in range(min(per, count - len(out))):
                row = []
                for w in self.widths:
                    digit = r & ((gmpy2.mpz(1) << w) - 1)
                    if digit >= gmpy2.mpz(1) << (w - 1):
                        digit -= gmpy2.mpz(1) << w
                    row.append(int(digit))
                    r = (r - digit) >> w
                out.append(row)
            if r != 0:
                raise FixedPointOverflowError("a decrypted plaintext holds more than its groups: a slot overflowed")
        if len(out) != count:
            raise ValueError(f"{len(residues)} residues of {per} groups hold {len(out)} groups, not {count}")
        array = np.asarray(out, dtype=object).reshape(len(out), len(self.widths))
        try:
            return array.astype(np.int64)
        except OverflowError:
            return array


@dataclass(frozen=True)
class Lanes:
    """Items of signed values, each value in its own *lane* of the plaintext: one shift moves them all.

    A plaintext of a ``key_bits`` modulus is cut into ``T = len(widths)`` lanes of
    ``L = (key_bits - 2) // T`` bits; value ``t`` of an item sits in lane ``t``
    (``|v_t| < 2^(widths[t] - 1)``), so one item packs as ``sum_t v_t 2^(t L)`` and
    sums of items are items.  Combining items ``per`` to a plaintext shifts each
    by ``w = max(widths)`` bits (:func:`combine`: ``w`` squarings per item), which
    puts item ``j``'s value ``t`` at bit ``t L + j w``: lane ``t`` holds the
    ``per = L // w`` items' values ``t`` side by side.  A :class:`Group` of the same
    widths shifts each item by ``sum(widths)`` bits instead: lanes cost a little
    room (each lane's values take ``w`` bits, not their own width) and save
    ``sum(widths) - w`` squarings per item.  The same interface as :class:`Group`.

    Parameters
    ----------
    widths : tuple of int
        Signed bits of each value of an item (sign included), the bound of every sum.
    key_bits : int
        The modulus the lanes are laid out for.
    """

    widths: tuple[int, ...]
    key_bits: int

    def __post_init__(self):
        if not self.widths or min(self.widths) < 2:
            raise ValueError(f"lanes need values of 2 bits at least, got widths {self.widths}")
        if self.lane_bits < self.width:
            raise FixedPointOverflowError(f"{len(self.widths)} lanes of {self.width}-bit values do not fit a "
                                          f"{self.key_bits}-bit key")

    @property
    def width(self) -> int:
        """The shift between two items of a combined plaintext: the widest value's bits."""
        return max(self.widths)

    @property
    def lane_bits(self) -> int:
        return (self.key_bits - 2) // len(self.widths)

    def per_plaintext(self, key_bits: int) -> int:
        """Items one combined plaintext holds: ``L // w`` (each lane's values side by side)."""
        if key_bits != self.key_bits:
            raise ValueError(f"lanes laid out for a {self.key_bits}-bit key, asked about a {key_bits}-bit one")
        return self.lane_bits // self.width

    def pack(self, values: np.ndarray) -> list:
        """One integer per row of ``values`` (items by values); a value out of its width is refused."""
        values = _fitting(values, self.widths, f"lanes of {len(self.widths)} values")
        lane = self.lane_bits
        return [gmpy2.mpz(sum(int(v) << (t * lane) for t, v in enumerate(row))) for row in values.tolist()]

    def unpack(self, residues, n, count: int, per: int) -> np.ndarray:
        """``count`` items (rows by values, int64 where they fit, else objects) from decrypted residues.

        ``per`` items sit in each residue, the first in the lowest bits of every
        lane.  Digits are balanced (a negative value borrows from the next); the bits
        between a lane's last item and the next lane, and everything above the last
        lane, must come out zero, else a slot overflowed and this says so.
        """
        n = gmpy2.mpz(n)
        half = n // 2
        w, lane, values = self.width, self.lane_bits, len(self.widths)
        digit_mask, sign = (gmpy2.mpz(1) << w) - 1, gmpy2.mpz(1) << (w - 1)
        out = []
        for r in residues:
            r = gmpy2.mpz(r)
            r = r - n if r > half else r
            here = min(per, count - len(out))
            block = [[0] * values for _ in range(here)]
            for t in range(values):
                for j in range(here):
                    digit = r & digit_mask
                    if digit >= sign:
                        digit -= digit_mask + 1
                    block[j][t] = int(digit)
                    r = (r - digit) >> w
                gap = lane - here * w
                if r & ((gmpy2.mpz(1) << gap) - 1):
                    raise FixedPointOverflowError("a decrypted plaintext holds more than its lanes: a slot overflowed")
                r >>= gap
            if r != 0:
                raise FixedPointOverflowError("a decrypted plaintext holds more than its lanes: a slot overflowed")
            out += block
        if len(out) != count:
            raise ValueError(f"{len(residues)} residues of {per} items hold {len(out)} items, not {count}")
        array = np.asarray(out, dtype=object).reshape(len(out), values)
        try:
            return array.astype(np.int64)
        except OverflowError:
            return array


def _task_combine(n2: int, ciphertexts: list, shift: int, per: int) -> list:
    n2 = gmpy2.mpz(n2)
    power = gmpy2.mpz(1) << shift
    out = []
    for start in range(0, len(ciphertexts), per):
        chunk = ciphertexts[start:start + per]
        acc = chunk[-1]
        for c in reversed(chunk[:-1]):
            acc = gmpy2.powmod(acc, power, n2) * c % n2
        out.append(acc)
    return out


def combine(public_key, engine, ciphertexts: list, group: Group | Lanes) -> list:
    """Ciphertexts of single groups (or items of :class:`Lanes`) combined ``per`` to a ciphertext, then re-randomized.

    Ciphertext ``i`` of the result holds groups ``i per ... (i + 1) per - 1`` (the
    first in the lowest bits), ``per = group.per_plaintext(key_bits)``.
    """
    per = group.per_plaintext(public_key.key_bits)
    if per < 1:
        raise FixedPointOverflowError(f"a group of {group.width} bits does not fit a {public_key.key_bits}-bit key")
    if not ciphertexts:
        return []
    blocks = -(-len(ciphertexts) // per)
    ranges = task_ranges(blocks, group.width * (per - 1), MAX_GROUPS_PER_TASK)
    tasks = [(int(public_key.nsquare), ciphertexts[lo * per:hi * per], group.width, per) for lo, hi in ranges]
    combined = [c for part in workers.run(_task_combine, tasks) for c in part]
    return engine.rerandomize(public_key, combined)
