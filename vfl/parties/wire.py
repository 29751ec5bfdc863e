"""Encrypted vectors and masked residues as message fields.

:func:`pack_vector` refuses a vector that is not *fresh*: a ciphertext computed
from a peer's ciphertexts carries randomness that peer knows, so it must be
re-randomized before it leaves the party (see ``EncryptedVector.rerandomize``).
"""

from __future__ import annotations

from vfl.crypto import Context, EncryptedVector
from vfl.errors import ProtocolError
from vfl.transport import BigInts, Message


def pack_vector(vector: EncryptedVector, prefix: str = "") -> dict:
    """Message fields for an encrypted vector: ``{prefix}ciphertexts`` (fixed width) and ``{prefix}exponent``."""
    if not vector.fresh:
        raise ProtocolError("refusing to send a ciphertext that was not re-randomized")
    width = vector.context.public_key.ciphertext_bytes
    return {f"{prefix}ciphertexts": BigInts(width, vector.to_bytes()), f"{prefix}exponent": vector.exponent}


def unpack_vector(context: Context, message: Message, length: int | None = None,
                  prefix: str = "") -> EncryptedVector:
    """The encrypted vector in ``message``, checked against the expected ``length``."""
    data = message[f"{prefix}ciphertexts"]
    if not isinstance(data, BigInts) or data.width != context.public_key.ciphertext_bytes:
        raise ProtocolError(f"message {message.name!r}: ciphertexts are not {context.public_key.ciphertext_bytes}-byte integers")
    if length is not None and len(data) != length:
        raise ProtocolError(f"message {message.name!r}: expected {length} ciphertexts, got {len(data)}")
    exponent = message[f"{prefix}exponent"]
    if not isinstance(exponent, int) or not 0 <= exponent <= 1024:
        raise ProtocolError(f"message {message.name!r}: bad exponent {exponent!r}")
    return context.from_bytes(data.data, exponent)


def pack_residues(residues, context: Context) -> dict:
    """Message fields for decrypted (masked) residues in Z_n."""
    return {"residues": BigInts.from_ints(residues, context.public_key.plaintext_bytes)}


def unpack_residues(context: Context, message: Message, length: int) -> list[int]:
    data = message["residues"]
    if not isinstance(data, BigInts) or len(data) != length:
        raise ProtocolError(f"message {message.name!r}: expected {length} residues")
    values = data.to_ints()
    if any(v >= context.public_key.n for v in values):
        raise ProtocolError(f"message {message.name!r}: a residue is outside Z_n")
    return values
