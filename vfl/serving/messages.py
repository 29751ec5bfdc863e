"""The messages between serving parties, and the checks every received field goes through.

Every message a service sends carries a ``round`` (the label party's counter) so
that answers find their request whatever the order they come in.  After a link
comes up both ends send ``serve_hello``; then the label party asks and the
others answer:

=================  ===================  ==========  ===================================================
name               from -> to           kind        fields
=================  ===================  ==========  ===================================================
``serve_hello``    every linked pair    public      ``fingerprint``, ``shared`` (the model settings and
                                                    :data:`PROTOCOL`); the coordinator adds ``key``
                                                    (its public key)
``load``           label -> feature     public      ``round``, ``version``, ``keep`` (versions to keep),
                                                    ``tables`` (private queries), ``reasons`` (the adverse
                                                    side, +1 or -1; 0: no reasons asked)
``loaded``         feature -> label     public      ``round``, ``trained_with``, ``width`` (values per row);
                                                    the pipeline's ``best_points``; a linear model's, reasons
                                                    asked: ``constant`` (its partial score at its training
                                                    mean, one number) and ``reason_names`` (JSON: the codes
                                                    it may name, none under private queries or noise);
                                                    a split network's, reasons asked: ``part_at_mean`` (its
                                                    part at its training mean, one vector)
``score``          label -> feature     public      ``round``, ``version``, ``key`` (the key's fingerprint),
                                                    ``ids``
``scores``         feature -> label     ciphertext  ``round``, ``status`` (one code per id),
                                                    ``ciphertexts``, ``exponent``; where it names reasons,
                                                    ``codes`` (per id an index into ``reason_names``, -1:
                                                    none; a release checked at ``load``)
``leaves``         label -> feature     public      ``round``, ``version``, ``ids``, ``trees`` (those
                                                    holding its splits; tree models)
``leaf_masks``     feature -> label     plaintext   ``round``, ``status``, ``bits``, ``count`` (trees)
``decrypt``        label -> coordinator ciphertext  ``round``, ``ciphertexts``, ``exponent``,
                                                    ``n_values`` and, packed, ``slot_bits``, ``slots``
``decrypted``      coordinator -> label masked      ``round``, ``residues``
``part``           label -> feature     public      ``round``, ``version``, ``ids`` and, with two feature
                                                    parties or more, ``token`` (split networks)
``part``           feature -> label     masked or   ``round``, ``status``, ``values`` (its part of the
                                        plaintext   interactive layer per id, ring elements, plus its mask)
``deal``           label -> coordinator public      ``round``, ``rows``, ``units``, ``token``
``part_mask``      coordinator ->       masked      ``token``, ``values`` (ring elements; the feature
                   feature                          parties' masks sum to zero)
``dealt``          coordinator -> label public      ``round``
``failed``         any answer           public      ``round``, ``reason`` (one line, no values)
=================  ===================  ==========  ===================================================

Ids travel as one ``bytes`` field: each id's UTF-8 text after its 2-byte length.
Whoever receives them checks each is the canonical text of an id
(:func:`vfl.datachecks.canonical_id`), at most :data:`MAX_ID_BYTES` bytes, and
that there are at most as many as the receiver allows; any other field is checked
for its type and range before use (:func:`integer`, :func:`text`, :func:`statuses`).
A check that fails is a :class:`~vfl.errors.ProtocolError` naming the peer.
"""

from __future__ import annotations

import struct

import numpy as np

from vfl.datachecks import canonical_id
from vfl.errors import ProtocolError
from vfl.deploy.serving_settings import VERSION
from vfl.transport.message import Message

#: The serving wire protocol, in every ``serve_hello``: a peer speaking another is refused by name.
#: ``vfl-serve/5``: reasons (``load``'s ``reasons``; ``loaded``'s ``constant``, ``reason_names``, ``part_at_mean``;
#: ``scores``'s ``codes``: :mod:`vfl.serving.reasons`).  ``vfl-serve/4``: private queries (``load``'s ``tables``;
#: ``table``, ``table_pending``, ``table_part``, ``evaluate``, ``evaluated``: :mod:`vfl.serving.private`).
#: ``vfl-serve/3``: split networks (``part``, ``deal``, ``part_mask``, ``dealt``).  ``vfl-serve/2``: packed
#: scores as batch prediction packs them (signed slots, one mask uniform over Z_n per ciphertext);
#: ``vfl-serve/1`` (hellos without the field) gave each slot its own 80-bit mask.
PROTOCOL = "vfl-serve/5"
#: What a hello without a ``protocol`` speaks.
FIRST_PROTOCOL = "vfl-serve/1"
#: Longest id, in UTF-8 bytes.
MAX_ID_BYTES = 256
#: Longest ``reason`` of a ``failed`` answer, in characters.
MAX_REASON = 400
#: Bytes of a round's ``token`` (split networks: it names the round's masks).
TOKEN_BYTES = 16
_LENGTH = struct.Struct(">H")

#: Per-id answers of a data party, and what they say to the application.
OK, UNKNOWN, INCOMPLETE, OUT_OF_RANGE = 0, 1, 2, 3
STATUS_CODES = {UNKNOWN: "unknown_id", INCOMPLETE: "incomplete_row", OUT_OF_RANGE: "out_of_range"}
STATUS_TEXT = {UNKNOWN: "holds no row for this id",
               INCOMPLETE: "holds a row with a missing or non-numeric value for this id, which a linear model "
                           "or a split network cannot score",
               OUT_OF_RANGE: "holds a row whose partial score is beyond the declared score_bound (the packed "
                             "slots' size; a split network: not finite, or its part beyond 2^40); its columns "
                             "need scaling, or score_bound raising"}


def pack_ids(ids: list[str]) -> bytes:
    out = bytearray()
    for key in ids:
        data = key.encode("utf-8")
        out += _LENGTH.pack(len(data)) + data
    return bytes(out)


def unpack_ids(message: Message, peer: str, most: int) -> list[str]:
    """The ids of ``message`` (field ``ids``): at most ``most``, each canonical and short."""
    data = message.fields.get("ids")
    if not isinstance(data, bytes):
        raise _bad(message, peer, "field 'ids' is not bytes")
    ids, at = [], 0
    while at < len(data):
        if len(ids) >= most:
            raise _bad(message, peer, f"more than {most} ids")
        if at + _LENGTH.size > len(data):
            raise _bad(message, peer, "the ids are cut short")
        (length,) = _LENGTH.unpack_from(data, at)
        at += _LENGTH.size
        if not 0 < length <= MAX_ID_BYTES or at + length > len(data):
            raise _bad(message, peer, f"an id of {length} bytes (1 to {MAX_ID_BYTES})")
        try:
            key = data[at:at + length].decode("utf-8")
            valid = canonical_id(key) == key
        except (UnicodeDecodeError, ValueError):
            valid = False
        if not valid:
            raise _bad(message, peer, f"id number {len(ids)} is not the canonical text of an id")
        ids.append(key)
        at += length
    if not ids:
        raise _bad(message, peer, "no ids")
    return ids


def integer(message: Message, field: str, peer: str, low: int = 0, high: int = 2 ** 62) -> int:
    value = message.fields.get(field)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise _bad(message, peer, f"field {field!r} is not a whole number from {low} to {high}")
    return value


def text(message: Message, field: str, peer: str, most: int = 4096) -> str:
    value = message.fields.get(field)
    if not isinstance(value, str) or len(value) > most:
        raise _bad(message, peer, f"field {field!r} is not text of at most {most} characters")
    return value


def version(message: Message, field: str, peer: str) -> str:
    value = text(message, field, peer, 64)
    if not VERSION.match(value) or ".." in value:
        raise _bad(message, peer, f"field {field!r} is not a model version name")
    return value


def token(message: Message, peer: str) -> bytes:
    """A round's ``token``: :data:`TOKEN_BYTES` random bytes."""
    value = message.fields.get("token")
    if not isinstance(value, bytes) or len(value) != TOKEN_BYTES:
        raise _bad(message, peer, f"field 'token' is not {TOKEN_BYTES} bytes")
    return value


def statuses(message: Message, peer: str, count: int) -> np.ndarray:
    """One status code per id (:data:`OK` ... :data:`OUT_OF_RANGE`)."""
    value = message.fields.get("status")
    if not isinstance(value, np.ndarray) or value.dtype != np.int64 or value.shape != (count,) or \
            (count and (value.min() < OK or value.max() > OUT_OF_RANGE)):
        raise _bad(message, peer, f"field 'status' is not {count} status codes")
    return value


def reason(message: Message, peer: str) -> str:
    """A ``failed`` answer's reason, on one printable line."""
    value = message.fields.get("reason")
    value = value if isinstance(value, str) and value.strip() else "no reason given"
    value = " ".join(value.split())[:MAX_REASON]
    return "".join(c if c.isprintable() else "?" for c in value)


def _bad(message: Message, peer: str, problem: str) -> ProtocolError:
    error = ProtocolError(f"{peer} sent a malformed {message.name!r} message: {problem}")
    error.party = peer                  # the label party names it in its answer
    return error
