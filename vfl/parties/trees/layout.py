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
  every other slot zero.
"""

from __future__ import annotations

from vfl.crypto.slots import Group
from vfl.errors import FixedPointOverflowError
from vfl.parties.trees.loss import BOUNDS


def widths(n_rows: int, frac_bits: int, loss: str) -> tuple[int, int, int]:
    """Signed slot widths of a gradient sum, a hessian sum and a row count over at most ``n_rows`` rows."""
    bits = max(1, int(n_rows).bit_length())
    g, h = BOUNDS[loss]
    return frac_bits + g + bits + 1, frac_bits + h + bits + 1, bits + 1


def _fit(count: int, slot_width: int, key_bits: int, what: str) -> list[range]:
    per = (key_bits - 2) // slot_width
    if per < 1:
        raise FixedPointOverflowError(f"the slots of one {what} ({slot_width} bits) do not fit a {key_bits}-bit key; "
                                      "lower frac_bits or use a larger key")
    return [range(start, min(start + per, count)) for start in range(0, count, per)]


def class_chunks(n_classes: int, n_rows: int, frac_bits: int, loss: str, key_bits: int) -> list[range]:
    """The classes each per-row ciphertext holds (standard mode): consecutive ranges, as many as fit."""
    g, h, _ = widths(n_rows, frac_bits, loss)
    return _fit(n_classes, g + h, key_bits, "class")


def class_group(classes: range, n_rows: int, frac_bits: int, loss: str) -> Group:
    g, h, _ = widths(n_rows, frac_bits, loss)
    return Group((g, h) * len(classes))


def node_chunks(n_nodes: int, n_rows: int, frac_bits: int, loss: str, key_bits: int) -> list[range]:
    """The nodes each per-row ciphertext of a round holds (hidden membership): consecutive ranges."""
    return _fit(n_nodes, sum(widths(n_rows, frac_bits, loss)), key_bits, "node")


def node_group(nodes: range, n_rows: int, frac_bits: int, loss: str) -> Group:
    return Group(widths(n_rows, frac_bits, loss) * len(nodes))
