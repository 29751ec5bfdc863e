"""The wire format of every message between roles: no pickle, sizes countable.

A message is a *name*, a *kind* (``public``, ``ciphertext``, ``masked`` or
``plaintext``), the training *iteration* it belongs to, and named *fields*.
It is framed as::

    magic      4 bytes   b"VFL1"
    H          4 bytes   length of the header, unsigned big-endian
    header     H bytes   JSON object in ASCII (see below)
    body       the rest  the binary fields, back to back

The header is ``{"name": str, "kind": str, "iteration": int, "fields": {...}}``
and each field is described by one JSON object:

=============  ==========================================================  ===================
``type``       value                                                       Python value
=============  ==========================================================  ===================
``null``       none                                                        ``None``
``bool``       ``"value": true|false``                                     ``bool``
``int``        ``"value": <integer>``                                      ``int``
``float``      ``"value": <number>`` (finite; JSON keeps doubles exactly)  ``float``
``str``        ``"value": <string>``                                       ``str``
``f64``        ``"shape": [...]``, ``"offset"``, ``"length"``: big-endian   ``numpy.ndarray``
               IEEE-754 doubles in the body, C order                       (float64)
``i64``        as ``f64``, big-endian signed 64-bit integers               ``numpy.ndarray``
``uint``       ``"width": w``, ``"count": c``, ``"offset"``, ``"length"``:   :class:`BigInts`
               ``c`` unsigned integers of ``w`` bytes each, big-endian
               (ciphertexts, masked residues, public keys)
``bytes``      ``"offset"``, ``"length"``                                  ``bytes``
=============  ==========================================================  ===================

Decoding parses only JSON and raw numbers, and refuses (with a
:class:`~vfl.errors.ProtocolError`, and nothing else, whatever the bytes) a frame
that breaks any of these rules:

* the magic is ``VFL1`` and the header fits the frame, with at most
  :data:`MAX_HEADER_BYTES` bytes;
* the header is strict ASCII JSON (:func:`parse_json`; ``json.dumps`` escapes
  other characters as ``\\uXXXX``): no ``NaN``/``Infinity``, no
  repeated keys, at most :data:`MAX_HEADER_ITEMS` values and ``2 + 2 *
  MAX_FIELDS`` objects and arrays, nested at most :data:`MAX_DEPTH` deep
  (header, ``fields``, a descriptor, a ``shape`` list);
* the header has exactly the keys above; the name is a string of 1 to
  :data:`MAX_NAME_CHARS` characters, the iteration a 64-bit integer, and there
  are at most :data:`MAX_FIELDS` fields;
* each descriptor has exactly the keys of its type; scalar values have their
  type (a bool is not an int; a float is finite); ``offset``, ``length``,
  ``width``, ``count`` and shape dimensions are JSON integers in ``[0, 2**63)``
  (not bools, not floats); a shape has at most :data:`MAX_NDIM` dimensions;
  sizes agree (``width * count == length``, ``8 * prod(shape) == length``);
* the byte ranges of the binary fields lie within the body, do not overlap,
  and cover the body exactly (no byte of a frame belongs to no field or to two).

Every range is checked before any data is copied, so decoding a frame takes
memory within a small multiple of its size.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vfl.errors import ProtocolError

MAGIC = b"VFL1"
#: Largest header accepted (the header only describes fields; bodies carry the data).
MAX_HEADER_BYTES = 1 << 16
#: Most fields in one message.
MAX_FIELDS = 64
#: Longest message name.
MAX_NAME_CHARS = 128
#: Deepest nesting of a header: the header object, its fields, a descriptor, a shape list.
MAX_DEPTH = 4
#: Most JSON values in a header (a field takes about a dozen).
MAX_HEADER_ITEMS = 2048
#: Most dimensions of an array field.
MAX_NDIM = 32
KINDS = ("public", "ciphertext", "masked", "plaintext")


@dataclass(frozen=True)
class BigInts:
    """A vector of non-negative integers, each sent as ``width`` big-endian bytes."""

    width: int
    data: bytes

    def __post_init__(self):
        if self.width <= 0 or len(self.data) % self.width:
            raise ProtocolError(f"{len(self.data)} bytes do not hold whole {self.width}-byte integers")

    @classmethod
    def from_ints(cls, values, width: int) -> "BigInts":
        try:
            return cls(width, b"".join(int(v).to_bytes(width, "big") for v in values))
        except OverflowError:
            raise ProtocolError(f"an integer does not fit in {width} bytes") from None

    def to_ints(self) -> list[int]:
        w = self.width
        return [int.from_bytes(self.data[i:i + w], "big") for i in range(0, len(self.data), w)]

    def __len__(self) -> int:
        return len(self.data) // self.width


@dataclass
class Message:
    """A decoded message; ``message["field"]`` reads a field."""

    name: str
    kind: str
    iteration: int = -1
    fields: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        try:
            return self.fields[key]
        except KeyError:
            raise ProtocolError(f"message {self.name!r} has no field {key!r}") from None


def encode(message: Message) -> bytes:
    """The framed bytes of ``message``."""
    if message.kind not in KINDS:
        raise ProtocolError(f"message {message.name!r}: unknown kind {message.kind!r}")
    if not isinstance(message.name, str) or not 0 < len(message.name) <= MAX_NAME_CHARS:
        raise ProtocolError(f"message name {message.name!r}: expected a string of 1 to {MAX_NAME_CHARS} characters")
    if len(message.fields) > MAX_FIELDS:
        raise ProtocolError(f"message {message.name!r}: {len(message.fields)} fields, above the maximum "
                            f"of {MAX_FIELDS}")
    descriptors: dict[str, dict] = {}
    body = bytearray()
    for key, value in message.fields.items():
        descriptors[key] = _describe(key, value, body)
    header = json.dumps(
        {"name": message.name, "kind": message.kind, "iteration": int(message.iteration), "fields": descriptors},
        allow_nan=False, separators=(",", ":"),
    ).encode("utf-8")
    if len(header) > MAX_HEADER_BYTES:
        raise ProtocolError(f"message {message.name!r}: a header of {len(header)} bytes is above the maximum of "
                            f"{MAX_HEADER_BYTES} (send long text as bytes)")
    return MAGIC + struct.pack(">I", len(header)) + header + bytes(body)


def _describe(key: str, value: Any, body: bytearray) -> dict:
    if value is None:
        return {"type": "null"}
    if isinstance(value, (bool, np.bool_)):
        return {"type": "bool", "value": bool(value)}
    if isinstance(value, (int, np.integer)):
        return {"type": "int", "value": int(value)}
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise ProtocolError(f"field {key!r}: {value} cannot be sent")
        return {"type": "float", "value": float(value)}
    if isinstance(value, str):
        return {"type": "str", "value": value}
    if isinstance(value, BigInts):
        return _blob(body, value.data, type="uint", width=value.width, count=len(value))
    if isinstance(value, (bytes, bytearray)):
        return _blob(body, bytes(value), type="bytes")
    if isinstance(value, np.ndarray) and value.ndim <= MAX_NDIM:
        if value.dtype.kind == "f":
            return _blob(body, value.astype(">f8").tobytes(), type="f64", shape=list(value.shape))
        if value.dtype.kind in "iu":
            return _blob(body, value.astype(">i8").tobytes(), type="i64", shape=list(value.shape))
    raise ProtocolError(f"field {key!r}: cannot send a value of type {type(value).__name__}")


def _blob(body: bytearray, data: bytes, **descriptor) -> dict:
    descriptor.update(offset=len(body), length=len(data))
    body.extend(data)
    return descriptor


def decode(frame: bytes) -> Message:
    """The message in ``frame``; raises :class:`ProtocolError` if it is malformed.

    Nothing else escapes: whatever goes wrong while reading a peer's bytes (an
    overflow, a recursion, a numpy error) is reported as a :class:`ProtocolError`
    saying what was wrong, never the peer's data.
    """
    try:
        return _decode(memoryview(frame))
    except ProtocolError:
        raise
    except Exception as exc:  # noqa: BLE001 - a peer's bytes must never raise anything else
        raise ProtocolError(f"malformed message ({type(exc).__name__})") from None


def _decode(frame: memoryview) -> Message:
    if len(frame) < 8 or frame[:4] != MAGIC:
        raise ProtocolError("not a vfl message (bad magic)")
    (header_len,) = struct.unpack_from(">I", frame, 4)
    if header_len > MAX_HEADER_BYTES:
        raise ProtocolError(f"message header of {header_len} bytes is above the maximum of {MAX_HEADER_BYTES}")
    if 8 + header_len > len(frame):
        raise ProtocolError(f"message header of {header_len} bytes does not fit the frame")
    header = parse_json(frame[8:8 + header_len], "message header", MAX_DEPTH, MAX_HEADER_ITEMS,
                        _MAX_HEADER_CONTAINERS)
    name, kind, iteration, described = _header(header)
    body = frame[8 + header_len:]
    # Every descriptor is checked, and the byte ranges together, before any data is copied.
    specs = {key: _field_spec(name, key, d, len(body)) for key, d in described.items()}
    _check_ranges(name, specs, len(body))
    return Message(name, kind, iteration, {key: _field_value(spec, body) for key, spec in specs.items()})


def _header(header: Any) -> tuple[str, str, int, dict]:
    if not isinstance(header, dict) or set(header) != _HEADER_KEYS:
        raise ProtocolError(f"malformed message header: expected exactly the keys {sorted(_HEADER_KEYS)}")
    name, kind, iteration, described = (header[k] for k in ("name", "kind", "iteration", "fields"))
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_CHARS:
        raise ProtocolError(f"malformed message header: the name must be a string of 1 to {MAX_NAME_CHARS} "
                            "characters")
    if kind not in KINDS:
        raise ProtocolError(f"message {quote(name)}: unknown kind {quote(kind)}")
    if not _is_int(iteration) or not -_INT64 <= iteration < _INT64:
        raise ProtocolError(f"message {quote(name)}: the iteration must be a 64-bit integer")
    if not isinstance(described, dict):
        raise ProtocolError(f"message {quote(name)}: 'fields' must be an object")
    if len(described) > MAX_FIELDS:
        raise ProtocolError(f"message {quote(name)}: {len(described)} fields, above the maximum of {MAX_FIELDS}")
    return name, kind, iteration, described


@dataclass(frozen=True)
class _Spec:
    """One checked field descriptor: a scalar ``value``, or the byte range of a binary field."""

    kind: str
    value: Any = None
    offset: int = 0
    length: int = 0
    width: int = 0
    shape: tuple = ()


def _field_spec(name: str, key: str, d: Any, body_len: int) -> _Spec:
    where = f"message {quote(name)}, field {quote(key)}"
    if not isinstance(d, dict) or d.get("type") not in _DESCRIPTOR_KEYS:
        raise ProtocolError(f"{where}: not a field descriptor with a known type")
    kind = d["type"]
    if set(d) != _DESCRIPTOR_KEYS[kind]:
        raise ProtocolError(f"{where}: a {kind} field has exactly the keys {sorted(_DESCRIPTOR_KEYS[kind])}")
    if kind == "null":
        return _Spec(kind)
    if kind in _SCALARS:
        value = d["value"]
        if kind == "float" and _is_int(value) and abs(value) < 2 ** 1023:
            value = float(value)
        if not isinstance(value, _SCALARS[kind]) or (kind != "bool" and isinstance(value, bool)):
            raise ProtocolError(f"{where}: a {kind} field holds a value of type {type(value).__name__}")
        return _Spec(kind, value)
    offset, length = _count(where, "offset", d["offset"]), _count(where, "length", d["length"])
    if offset + length > body_len:
        raise ProtocolError(f"{where}: bytes {offset} to {offset + length} are past the end of the body "
                            f"({body_len} bytes)")
    if kind == "bytes":
        return _Spec(kind, offset=offset, length=length)
    if kind == "uint":
        width, count = _count(where, "width", d["width"]), _count(where, "count", d["count"])
        if width == 0 or width * count != length:
            raise ProtocolError(f"{where}: {count} integers of {width} bytes do not make {length} bytes")
        return _Spec(kind, offset=offset, length=length, width=width)
    shape = d["shape"]
    if not isinstance(shape, list) or len(shape) > MAX_NDIM:
        raise ProtocolError(f"{where}: the shape must be a list of at most {MAX_NDIM} dimensions")
    shape = tuple(_count(where, "a dimension", s) for s in shape)
    if math.prod(s for s in shape if s) > _MAX_ARRAY_VALUES or math.prod(shape) * 8 != length:
        raise ProtocolError(f"{where}: shape {list(shape)} does not match its {length} bytes")
    return _Spec(kind, offset=offset, length=length, shape=shape)


def _count(where: str, what: str, value: Any) -> int:
    """``value`` if it is a JSON integer (not a bool, not a float) in ``[0, 2**63)``."""
    if not _is_int(value) or not 0 <= value < _INT64:
        raise ProtocolError(f"{where}: {what} must be an integer in [0, 2**63)")
    return value


def _check_ranges(name: str, specs: dict[str, _Spec], body_len: int) -> None:
    """The binary fields' byte ranges do not overlap and cover the body exactly."""
    ranges = sorted((s.offset, s.offset + s.length, key) for key, s in specs.items()
                    if s.kind in _BINARY and s.length)
    end, previous = 0, None
    for start, stop, key in ranges:
        if start < end:
            raise ProtocolError(f"message {quote(name)}: the bytes of fields {quote(previous)} and "
                                f"{quote(key)} overlap")
        if start > end:
            raise ProtocolError(f"message {quote(name)}: bytes {end} to {start} of the body belong to no field")
        end, previous = stop, key
    if end != body_len:
        raise ProtocolError(f"message {quote(name)}: bytes {end} to {body_len} of the body belong to no field")


def _field_value(spec: _Spec, body: memoryview) -> Any:
    if spec.kind not in _BINARY:
        return spec.value
    data = body[spec.offset:spec.offset + spec.length]
    if spec.kind == "bytes":
        return bytes(data)
    if spec.kind == "uint":
        return BigInts(spec.width, bytes(data))
    dtype = ">f8" if spec.kind == "f64" else ">i8"
    # astype copies: the array owns its memory and does not keep the frame alive.
    return np.frombuffer(data, dtype=dtype).reshape(spec.shape).astype(dtype[1:])


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def quote(value: Any, limit: int = 60) -> str:
    """``repr(value)``, at most ``limit`` characters: a peer chooses these strings, errors quote their start."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return text[:limit - 3] + "..."


# --------------------------------------------------------------------------- strict JSON

def parse_json(data, what: str, max_depth: int, max_items: int, max_containers: int) -> Any:
    """Parse a peer's JSON ``data`` strictly, or raise :class:`ProtocolError` naming ``what``.

    Refused: bytes that are not ASCII (``json.dumps`` escapes every other
    character, so ASCII is all a vfl peer sends, and it keeps the text no
    larger than ``data``), ``NaN``, ``Infinity`` and ``-Infinity``, numbers that overflow a
    double, repeated keys in an object, nesting deeper than ``max_depth``,
    more than ``max_containers`` arrays and objects, and more than
    ``max_items`` values (counted as the commas and colons outside strings).
    All but the first are checked before parsing, without recursion: together
    with the size of ``data`` they bound the memory the parsed value takes.

    Parameters
    ----------
    data : bytes-like
        ASCII JSON.
    what : str
        What the JSON is, for the error message (e.g. ``"message header"``).
    max_depth, max_items, max_containers : int

    Returns
    -------
    object
        The parsed value: dicts, lists, str, int, float, bool, None.
    """
    try:
        data = bytes(data)
        _check_json_structure(data, what, max_depth, max_items, max_containers)
        if not data.isascii():
            raise ProtocolError(f"malformed {what}: not ASCII JSON (other characters are sent as \\u escapes)")
        return json.loads(data.decode("ascii"), parse_constant=_refuse_constant, parse_float=_finite_float,
                          object_pairs_hook=_unique_keys)
    except ProtocolError:
        raise
    except ValueError as exc:  # json.JSONDecodeError, int literals of too many digits, the hooks
        raise ProtocolError(f"malformed {what}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - RecursionError, MemoryError...: still the peer's bad JSON
        raise ProtocolError(f"malformed {what} ({type(exc).__name__})") from None


def _check_json_structure(data: bytes, what: str, max_depth: int, max_items: int, max_containers: int) -> None:
    """Count depth, containers and values in one pass over the tokens, skipping strings; no recursion.

    Strings are skipped escape by escape (:func:`_string_end`), never by one regular
    expression over the whole string, whose repetition stack would take tens of
    bytes per escape.
    """
    items = containers = depth = 0
    pos = 0
    while True:
        token = _JSON_TOKEN.search(data, pos)
        if token is None:
            return
        byte, pos = data[token.start()], token.end()
        if byte == _QUOTE:
            pos = _string_end(data, pos)
            continue
        if byte in _SEPARATORS:
            items += 1
            if items > max_items:
                raise ProtocolError(f"malformed {what}: more than {max_items} values")
        elif byte in _OPENING:
            containers, depth = containers + 1, depth + 1
            if containers > max_containers:
                raise ProtocolError(f"malformed {what}: more than {max_containers} arrays and objects")
            if depth > max_depth:
                raise ProtocolError(f"malformed {what}: nested deeper than {max_depth} levels")
        else:
            depth -= 1


def _string_end(data: bytes, pos: int) -> int:
    """Where the JSON string whose text starts at ``pos`` ends (after its closing quote); memory O(1)."""
    while True:
        stop = _STRING_STOP.search(data, pos)
        if stop is None:
            return len(data)          # unterminated: json.loads refuses it
        if data[stop.start()] == _QUOTE:
            return stop.end()
        pos = stop.end() + 1          # a backslash: the next byte is escaped


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:30]} overflows a double")
    return value


def _unique_keys(pairs: list) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("an object repeats a key")
    return obj


_HEADER_KEYS = {"name", "kind", "iteration", "fields"}
_SCALARS = {"bool": bool, "int": int, "float": float, "str": str}
_BINARY = ("bytes", "uint", "f64", "i64")
_DESCRIPTOR_KEYS = {
    "null": {"type"}, "bool": {"type", "value"}, "int": {"type", "value"}, "float": {"type", "value"},
    "str": {"type", "value"}, "bytes": {"type", "offset", "length"},
    "uint": {"type", "width", "count", "offset", "length"},
    "f64": {"type", "shape", "offset", "length"}, "i64": {"type", "shape", "offset", "length"},
}
#: The header, its fields, and for each field a descriptor and a shape list.
_MAX_HEADER_CONTAINERS = 2 + 2 * MAX_FIELDS
_INT64 = 2 ** 63
#: No frame holds 2**32 bytes, so no array has more than 2**29 eight-byte values (zero dimensions left out).
_MAX_ARRAY_VALUES = 2 ** 29
#: The start of a JSON string (skipped: what it holds is not structure), or one structural character.
_JSON_TOKEN = re.compile(rb'[][{},:"]')
#: Inside a string: its closing quote, or a backslash (whose next byte is escaped).
_STRING_STOP = re.compile(rb'["\\]')
_QUOTE = ord('"')
_SEPARATORS = b",:"
_OPENING = b"[{"
