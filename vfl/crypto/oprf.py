"""An oblivious pseudorandom function and sealed table entries: the numbers of private-query scoring.

Numbers only.  The holder of a key ``k`` (a feature party) and a querier (the label party) compute
``F_k(x) = H2(x, k H1(x))`` for the querier's ids ``x`` without the holder learning ``x`` and without the
querier learning ``k`` (RFC 9497's OPRF mode, on the prime-order subgroup of Edwards25519 — Curve25519,
the curve of vfl's PSI, in its Edwards form, whose scalars can be inverted where X25519's clamped ones
cannot):

    querier:  r uniform in Z_L,  B = r H1(x)                 -> holder   (:func:`blind`)
    holder:   E = k B                                         -> querier  (:func:`evaluate`)
    querier:  k H1(x) = r^-1 E,  F_k(x) = H2(x, k H1(x))                  (:func:`unblind`, :func:`finalize`)

``B`` is a uniform point of the group whatever ``x`` is (``r`` is uniform and the group has prime order),
so the holder's view of two query streams with the same count is the same.  ``H1`` hashes onto the group
(two Elligator 2 maps of a SHA-512 digest, added: libsodium's ``from_uniform`` clears the cofactor);
``H2`` is SHA-512 of the id and the point, cut to 32 bytes.  Every point received is checked (on the curve,
in the prime-order subgroup, not the identity) by libsodium's ``noclamp`` multiplication.

**Sealed entries** (:func:`seal`, :func:`open_sealed`).  From ``F_k(x)`` the holder derives a 16-byte tag
and a 32-byte key; it publishes ``tag -> ChaCha20-Poly1305(key, payload)`` for every row it holds.  A
querier that computed ``F_k(x)`` for its ids finds and opens exactly their entries; the others' tags and
boxes are pseudorandom to it (a labeled, unbalanced PSI).  Each key seals one payload, so the nonce is fixed.
"""

from __future__ import annotations

import hashlib
import os

from nacl import bindings as sodium

from vfl.errors import ProtocolError

#: Bytes of a point and of a scalar.
POINT_BYTES = 32
SCALAR_BYTES = 32
#: Bytes of an entry's tag and of the PRF's output.
TAG_BYTES = 16
OUTPUT_BYTES = 32
_NONCE = bytes(12)


def new_key() -> bytes:
    """A secret scalar, uniform in ``[1, L)``, from the operating system's CSPRNG."""
    while True:
        scalar = sodium.crypto_core_ed25519_scalar_reduce(os.urandom(64))
        if any(scalar):
            return scalar


def hash_to_group(message: bytes, domain: bytes) -> bytes:
    """``H1``: a point of the prime-order subgroup, from SHA-512 of the domain and the message (two maps added)."""
    digest = hashlib.sha512(_framed(domain, b"H1", message)).digest()
    return sodium.crypto_core_ed25519_add(sodium.crypto_core_ed25519_from_uniform(digest[:32]),
                                          sodium.crypto_core_ed25519_from_uniform(digest[32:]))


def blind(messages, domain: bytes) -> tuple[list[bytes], list[bytes]]:
    """The querier's first step: ``r H1(x)`` per message, and the blinds ``r`` it keeps."""
    points, blinds = [], []
    for message in messages:
        r = new_key()
        points.append(sodium.crypto_scalarmult_ed25519_noclamp(r, hash_to_group(message, domain)))
        blinds.append(r)
    return points, blinds


def evaluate(key: bytes, points) -> list[bytes]:
    """The holder's step: ``k B`` for each blinded point; a point that is not in the group is refused by position.

    Raises
    ------
    ProtocolError
        A point of the wrong size, off the curve, of small order, or the identity.
    """
    out = []
    for position, point in enumerate(points):
        out.append(_multiply(key, point, f"blinded point {position}"))
    return out


def unblind(points, blinds) -> list[bytes]:
    """The querier's last group step: ``r^-1 E`` for each evaluated point (refused as :func:`evaluate` refuses)."""
    if len(points) != len(blinds):
        raise ProtocolError(f"{len(points)} evaluated points for {len(blinds)} queries")
    return [_multiply(sodium.crypto_core_ed25519_scalar_invert(r), point, f"evaluated point {position}")
            for position, (point, r) in enumerate(zip(points, blinds))]


def finalize(message: bytes, point: bytes, domain: bytes) -> bytes:
    """``H2(x, k H1(x))``: the PRF's output for one message."""
    return hashlib.sha512(_framed(domain, b"H2", message, point)).digest()[:OUTPUT_BYTES]


def prf(key: bytes, message: bytes, domain: bytes) -> bytes:
    """The holder's own ``F_k(x)``, with no querier (what it seals its table with)."""
    return finalize(message, _multiply(key, hash_to_group(message, domain), "hashed point"), domain)


def tag(output: bytes) -> bytes:
    """The table's key for one PRF output: 16 bytes, pseudorandom without the output."""
    return hashlib.sha512(b"vfl-oprf-tag" + output).digest()[:TAG_BYTES]


def seal(output: bytes, payload: bytes, context: bytes) -> tuple[bytes, bytes]:
    """One table entry: ``(tag, box)``, the payload sealed under a key derived from the PRF output.

    ``context`` (the model version, the party) is authenticated with the payload, so an entry moved to
    another table does not open there.
    """
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    return tag(output), ChaCha20Poly1305(_box_key(output)).encrypt(_NONCE, payload, context)


def open_sealed(output: bytes, box: bytes, context: bytes) -> bytes:
    """The payload of an entry found by its tag.

    Raises
    ------
    ProtocolError
        The box does not open under this output and context (tampered, or another table's).
    """
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    try:
        return ChaCha20Poly1305(_box_key(output)).decrypt(_NONCE, box, context)
    except InvalidTag:
        raise ProtocolError("a sealed table entry does not open: tampered, or from another table") from None


def _box_key(output: bytes) -> bytes:
    return hashlib.sha512(b"vfl-oprf-key" + output).digest()[:32]


def _multiply(scalar: bytes, point: bytes, what: str) -> bytes:
    if not isinstance(point, (bytes, bytearray)) or len(point) != POINT_BYTES:
        raise ProtocolError(f"{what}: {POINT_BYTES} bytes expected")
    if not sodium.crypto_core_ed25519_is_valid_point(bytes(point)):
        raise ProtocolError(f"{what} is not a point of the prime-order group (off the curve, or of small order)")
    try:
        return sodium.crypto_scalarmult_ed25519_noclamp(scalar, bytes(point))
    except Exception:   # libsodium refuses a product that is the identity
        raise ProtocolError(f"{what}: the product is the identity") from None


def _framed(*parts: bytes) -> bytes:
    """Parts with their lengths, so that no two different tuples hash alike."""
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


def seal_table(key: bytes, rows, domain: bytes, context: bytes) -> dict[bytes, bytes]:
    """The holder's table: ``{tag: box}`` for each ``(id, payload)`` of ``rows`` (ids as bytes, payloads as bytes).

    Raises
    ------
    ProtocolError
        Two rows with one id (their tags would collide).
    """
    table = {}
    for message, payload in rows:
        entry_tag, box = seal(prf(key, message, domain), payload, context)
        if entry_tag in table:
            raise ProtocolError("two rows of the table have the same id")
        table[entry_tag] = box
    return table


def open_found(outputs, table, context: bytes) -> list[bytes | None]:
    """The querier's last step: per PRF output, the payload of its entry, or None where the table has none."""
    found = []
    for output in outputs:
        box = table.get(tag(output))
        found.append(None if box is None else open_sealed(output, box, context))
    return found
