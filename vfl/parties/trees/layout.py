"""How gradient sums sit in plaintext slots: widths from public values only, and how many fit one plaintext.

Every party computes the same layout from the training row count ``n``, the
fixed point ``f``, the loss's public bounds ``|g| <= 2^a``, ``h <= 2^b``
(:data:`~vfl.parties.trees.loss.BOUNDS`) and the key size, so none needs to
be told it.  A sum over at most ``n < 2^bits(n)`` rows of ``|G| <= 2^(f+a)``
needs ``f + a + bits(n) + 1`` signed bits, of ``0 <= H <= 2^(f+b)`` needs
``f + b + bits(n) + 1``, a row count ``bits(n) + 1``.

* Standard mode: one ciphertext per row holds ``(G_k, H_k)`` of as many classes
  as fit (:func:`class_chunks`); a binary or regression model needs one.
* Hidden membership: one ciphertext per row and round holds ``(G, H, N)`` of as
  many nodes as fit (:func:`node_chunks`), the row's own node's slots filled and
  every other slot zero.  The row count ``N`` travels only when the split rules
  need it (:func:`counts_travel`): when ``min_child_weight`` already asks more rows
  of a child than ``min_samples_leaf`` does, ``(G, H)`` suffice.

Each value has a lane of its own in the plaintext (:class:`~vfl.crypto.slots.Lanes`):
when a feature party combines candidate sums many to a ciphertext, one shift of
``max(widths)`` bits moves a candidate's ``G`` and ``H`` (and ``N``) at once,
where side by side slots would cost the sum of the widths in squarings.
"""

from __future__ import annotations

import math

from vfl.crypto.slots import Lanes
from vfl.errors import FixedPointOverflowError
from vfl.parties.trees.loss import BOUNDS


def widths(n_rows: int, frac_bits: int, loss: str) -> tuple[int, int, int]:
    """Signed slot widths of a gradient sum, a hessian sum and a row count over at most ``n_rows`` rows."""
    bits = max(1, int(n_rows).bit_length())
    g, h = BOUNDS[loss]
    return frac_bits + g + bits + 1, frac_bits + h + bits + 1, bits + 1


def max_hessian(loss: str) -> float:
    """The loss's public bound on one row's hessian, ``2^b``."""
    return 2.0 ** BOUNDS[loss][1]


def counts_travel(rules, loss: str) -> bool:
    """Hidden membership: whether the row count of each candidate's left child must travel.

    A child of ``k`` rows holds a hessian sum of at most ``k 2^b``, so one with the
    ``min_child_weight`` that :func:`~vfl.parties.trees.splits.gains` asks has at least
    ``ceil(min_child_weight / 2^b)`` rows; when that is ``min_samples_leaf`` or more,
    the count rule never refuses a split the hessian rule accepts, and the count is
    not needed (the gains are the same, split for split).
    """
    return math.ceil(float(rules.min_child_weight) / max_hessian(loss)) < rules.min_samples_leaf


def _fit(count: int, slot_width: int, key_bits: int, what: str) -> list[range]:
    per = (key_bits - 2) // slot_width
    if per < 1:
        raise FixedPointOverflowError(f"the slots of one {what} ({slot_width} bits) do not fit a {key_bits}-bit key; "
                                      "lower frac_bits or use a larger key")
    return [range(start, min(start + per, count)) for start in range(0, count, per)]


def class_chunks(n_classes: int, n_rows: int, frac_bits: int, loss: str, key_bits: int) -> list[range]:
    """The classes each per-row ciphertext holds (standard mode): consecutive ranges, as many as fit."""
    g, h, _ = widths(n_rows, frac_bits, loss)
    return _fit(n_classes, 2 * max(g, h), key_bits, "class")


def class_group(classes: range, n_rows: int, frac_bits: int, loss: str, key_bits: int) -> Lanes:
    """The lanes of one per-row ciphertext (standard mode): ``(G_k, H_k)`` of each class of ``classes``."""
    g, h, _ = widths(n_rows, frac_bits, loss)
    return Lanes((g, h) * len(classes), key_bits)


def node_widths(n_rows: int, frac_bits: int, loss: str, counts: bool = True) -> tuple[int, ...]:
    """The slots of one node (hidden membership): ``(G, H, N)``, or ``(G, H)`` without ``counts``."""
    return widths(n_rows, frac_bits, loss)[:3 if counts else 2]


def node_chunks(n_nodes: int, n_rows: int, frac_bits: int, loss: str, key_bits: int,
                counts: bool = True) -> list[range]:
    """The nodes each per-row ciphertext of a round holds (hidden membership): consecutive ranges."""
    slots = node_widths(n_rows, frac_bits, loss, counts)
    return _fit(n_nodes, len(slots) * max(slots), key_bits, "node")


def node_group(nodes: range, n_rows: int, frac_bits: int, loss: str, key_bits: int, counts: bool = True) -> Lanes:
    """The lanes of one per-row ciphertext of a round (hidden membership): ``(G, H[, N])`` of each of ``nodes``."""
    return Lanes(node_widths(n_rows, frac_bits, loss, counts) * len(nodes), key_bits)
