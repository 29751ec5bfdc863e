"""The Pearson correlations between two parties' columns, under the key holder's encryption; both learn them.

::

    Step  Peer (the other party)                           Key holder
    1     <- public key, rows, columns, bits of its values standardizes its columns, rounds them
    2     its columns' count and bits -> holder
    3     <- [[its rounded values]], packed: its columns    encrypts each row's values side by side
          side by side in signed slots, in chunks of rows
          per column of its own: the product over rows of
          the ciphertexts raised to its rounded values
          (one multi-exponentiation), re-randomized -> holder
    4     <- the correlation matrix                          decrypts: n 2^(2f) times each correlation

Neither sees the other's columns; the holder decrypts only the sums over all
rows of products (one per pair of columns), which is the matrix both learn.
Standardization and rounding: :mod:`vfl.parties.credit.statistics` (a
missing value counts as the column's mean).
"""

from __future__ import annotations

import numpy as np

from vfl.crypto import Context, FixedPoint, PublicKey
from vfl.crypto.slots import Group
from vfl.errors import DataError, FixedPointOverflowError, ProtocolError
from vfl.parties.credit.statistics import PEARSON_FRAC_BITS, product_group, rounded, standardized, value_bits
from vfl.protocols.credit.woe import CHUNK_ROWS
from vfl.protocols.fields import ciphertexts, count, received
from vfl.transport import Endpoint

#: The most columns a peer may announce, and the largest value bits.
MAX_COLUMNS = 1 << 16
MAX_VALUE_BITS = 64


class _Holder:
    def __init__(self, context: Context):
        self.context = context


def _chunks(n_columns: int, group_width: int, key_bits: int) -> list[range]:
    per = (key_bits - 2) // group_width
    if per < 1:
        raise FixedPointOverflowError(f"a {group_width}-bit product slot does not fit a {key_bits}-bit key")
    return [range(s, min(s + per, n_columns)) for s in range(0, n_columns, per)]


def pearson_holder(ep: Endpoint, peer: str, context: Context, x: np.ndarray, frac_bits: int = PEARSON_FRAC_BITS,
                   chunk_rows: int = CHUNK_ROWS) -> np.ndarray:
    """The key holder's side (``context`` holds its private key): returns (its columns, the peer's) correlations."""
    z = rounded(standardized(x), frac_bits)
    n_rows, mine = z.shape
    ep.send(peer, "pearson_start", "public", key=context.public_key.to_bytes(), n_rows=n_rows, n_columns=mine,
            value_bits=value_bits(z), frac_bits=frac_bits, chunk_rows=chunk_rows)
    reply = ep.recv(peer, "pearson_columns")
    theirs, their_bits = count(reply, "n_columns", MAX_COLUMNS), count(reply, "value_bits", MAX_VALUE_BITS + 1)
    width = product_group(1, n_rows, value_bits(z), their_bits).width
    holder = _Holder(context)
    out = np.zeros((mine, theirs))
    key_bits = context.public_key.key_bits
    for columns in _chunks(mine, width, key_bits):
        group = Group((width,) * len(columns))
        for lo in range(0, n_rows, chunk_rows):
            packed = group.pack(z[lo:lo + chunk_rows, columns.start:columns.stop])
            ep.send(peer, "pearson_rows", "ciphertext",
                    **ciphertexts(holder, context.engine.encrypt(context.public_key, packed)))
        products = received(holder, ep.recv(peer, "pearson_products"), theirs)
        residues = context.engine.decrypt(context.private_key, products)
        sums = group.unpack(residues, context.public_key.n, theirs, 1)        # (theirs, len(columns))
        out[columns.start:columns.stop] = np.asarray(sums, dtype=np.float64).T
    out /= n_rows * 2.0 ** (2 * frac_bits)
    ep.send(peer, "pearson", "plaintext", matrix=out)
    return out


def pearson_peer(ep: Endpoint, holder: str, x: np.ndarray, role: str = "peer", engine=None) -> np.ndarray:
    """The other party's side: returns the same matrix (the holder's columns by its own)."""
    start = ep.recv(holder, "pearson_start")
    context = Context(PublicKey.from_bytes(start["key"]), FixedPoint(), engine=engine)
    n_rows, theirs = count(start, "n_rows"), count(start, "n_columns", MAX_COLUMNS)
    their_bits, frac_bits = count(start, "value_bits", MAX_VALUE_BITS + 1), count(start, "frac_bits", 64)
    chunk_rows = count(start, "chunk_rows")
    if n_rows != len(x):
        raise DataError(f"party {role} has {len(x)} rows but party {holder} has {n_rows}; the parties' rows must "
                        "be aligned")
    if chunk_rows < 1 or frac_bits < 1:
        raise ProtocolError(f"{role}: a malformed 'pearson_start' from {holder}")
    z = rounded(standardized(x), frac_bits)
    mine = z.shape[1]
    ep.send(holder, "pearson_columns", "public", n_columns=mine, value_bits=value_bits(z))
    width = product_group(1, n_rows, their_bits, value_bits(z)).width
    party = _Holder(context)
    pk, n2 = context.public_key, context.public_key.nsquare
    for _ in _chunks(theirs, width, pk.key_bits):
        acc = None
        for lo in range(0, n_rows, chunk_rows):
            rows = received(party, ep.recv(holder, "pearson_rows"), min(chunk_rows, n_rows - lo))
            exponents = np.ascontiguousarray(z[lo:lo + len(rows)].T)
            part = context.engine.lincomb(pk, rows, exponents)
            acc = part if acc is None else [a * b % n2 for a, b in zip(acc, part)]
        ep.send(holder, "pearson_products", "ciphertext", **ciphertexts(party, context.engine.rerandomize(pk, acc)))
    matrix = ep.recv(holder, "pearson")["matrix"]
    if not isinstance(matrix, np.ndarray) or matrix.shape != (theirs, mine) or not np.all(np.isfinite(matrix)):
        raise ProtocolError(f"{role}: a malformed 'pearson' from {holder}")
    return matrix
