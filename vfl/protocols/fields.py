"""Message fields every protocol of the label-party-keyed family reads and writes, checked on arrival.

Bit vectors (:func:`bits`, :func:`unbits`), bounded integer vectors
(:func:`ints`), booleans (:func:`flag`), and Paillier ciphertexts of integer
plaintexts (:func:`ciphertexts`, :func:`received`: fixed-width bytes, fresh or
re-randomized before they leave, see :mod:`vfl.parties.wire`).  A malformed
field raises :class:`~vfl.errors.ProtocolError` naming the message.
Gradient boosting (:mod:`vfl.protocols.trees`) and the credit-scoring
steps (:mod:`vfl.protocols.credit`) share them.
"""

from __future__ import annotations

import numpy as np

from vfl.crypto import EncryptedVector
from vfl.errors import ProtocolError
from vfl.parties.wire import pack_vector, unpack_vector

#: The largest count a peer's message may announce (rows, iterations, nodes, bins).
MAX_ROWS = 1 << 31


def bits(values) -> dict:
    """A bool vector as message fields (packed bytes and the count)."""
    values = np.asarray(values, dtype=bool)
    return {"bits": np.packbits(values).tobytes(), "count": int(values.size)}


def unbits(message, count: int | None = None) -> np.ndarray:
    data, n = message["bits"], message["count"]
    if not isinstance(data, bytes) or not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 8 * len(data) \
            or len(data) != -(-n // 8) or (count is not None and n != count):
        raise ProtocolError(f"message {message.name!r}: malformed bit vector"
                            + (f" (expected {count} values)" if count is not None else ""))
    return np.unpackbits(np.frombuffer(data, dtype=np.uint8), count=n).astype(bool)


def ints(message, field: str, low: int = 0, high: int = MAX_ROWS) -> np.ndarray:
    """An int64 array field whose values lie in ``[low, high)``."""
    value = message[field]
    if not isinstance(value, np.ndarray) or value.dtype != np.int64 or value.ndim != 1 or \
            (value.size and (value.min() < low or value.max() >= high)):
        raise ProtocolError(f"message {message.name!r}: field {field!r} is not a vector of integers in "
                            f"[{low}, {high})")
    return value


def flag(message, field: str) -> bool:
    value = message[field]
    if not isinstance(value, bool):
        raise ProtocolError(f"message {message.name!r}: field {field!r} is not true or false")
    return value


def count(message, field: str, high: int = MAX_ROWS) -> int:
    """A non-negative integer field below ``high``."""
    value = message[field]
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < high:
        raise ProtocolError(f"message {message.name!r}: field {field!r} is not an integer in [0, {high})")
    return value


def ciphertexts(party, values: list, prefix: str = "") -> dict:
    """Fresh (or re-randomized) ciphertexts of integer plaintexts as message fields."""
    return pack_vector(EncryptedVector(party.context, values, 0, fresh=True), prefix)


def received(party, message, count: int | None = None, prefix: str = "") -> list:
    """The ciphertexts of a message (``count`` of them, if given), under ``party``'s context's key."""
    return unpack_vector(party.context, message, count, prefix).ciphertexts
