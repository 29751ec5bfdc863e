"""The wire format of every message between roles: no pickle, sizes countable.

A message is a *name*, a *kind* (``public``, ``ciphertext``, ``masked`` or
``plaintext``), the training *iteration* it belongs to, and named *fields*.
It is framed as::

    magic      4 bytes   b"VFL1"
    H          4 bytes   length of the header, unsigned big-endian
    header     H bytes   UTF-8 JSON object (see below)
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

Decoding checks the magic, the sizes and every offset, and parses only JSON and
raw numbers; a malformed frame raises :class:`~vfl.errors.ProtocolError`.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vfl.errors import ProtocolError

MAGIC = b"VFL1"
#: Largest header accepted (the header only describes fields; bodies carry the data).
MAX_HEADER_BYTES = 1 << 20
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
    descriptors: dict[str, dict] = {}
    body = bytearray()
    for key, value in message.fields.items():
        descriptors[key] = _describe(key, value, body)
    header = json.dumps(
        {"name": message.name, "kind": message.kind, "iteration": int(message.iteration), "fields": descriptors},
        allow_nan=False, separators=(",", ":"),
    ).encode("utf-8")
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
    if isinstance(value, np.ndarray):
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
    """The message in ``frame``; raises :class:`ProtocolError` if it is malformed."""
    frame = memoryview(frame)
    if len(frame) < 8 or bytes(frame[:4]) != MAGIC:
        raise ProtocolError("not a vfl message (bad magic)")
    (header_len,) = struct.unpack(">I", frame[4:8])
    if header_len > MAX_HEADER_BYTES or 8 + header_len > len(frame):
        raise ProtocolError(f"message header of {header_len} bytes does not fit the frame")
    try:
        header = json.loads(bytes(frame[8:8 + header_len]).decode("utf-8"))
        name, kind, iteration = header["name"], header["kind"], int(header["iteration"])
        described = header["fields"]
        if not isinstance(name, str) or kind not in KINDS or not isinstance(described, dict):
            raise ValueError("bad header")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed message header: {exc}") from None
    body = frame[8 + header_len:]
    fields = {key: _read(name, key, d, body) for key, d in described.items()}
    return Message(name, kind, iteration, fields)


def _read(name: str, key: str, d: Any, body: memoryview) -> Any:
    where = f"message {name!r}, field {key!r}"
    try:
        kind = d["type"]
        if kind == "null":
            return None
        if kind in ("bool", "int", "float", "str"):
            value = d["value"]
            expected = {"bool": bool, "int": int, "float": (int, float), "str": str}[kind]
            if not isinstance(value, expected) or (kind == "int" and isinstance(value, bool)):
                raise ValueError(f"{kind} field holds {type(value).__name__}")
            return float(value) if kind == "float" else value
        offset, length = int(d["offset"]), int(d["length"])
        if offset < 0 or length < 0 or offset + length > len(body):
            raise ValueError("field extends past the end of the frame")
        data = bytes(body[offset:offset + length])
        if kind == "bytes":
            return data
        if kind == "uint":
            value = BigInts(int(d["width"]), data)
            if len(value) != int(d["count"]):
                raise ValueError("count does not match the data")
            return value
        if kind in ("f64", "i64"):
            shape = tuple(int(s) for s in d["shape"])
            if any(s < 0 for s in shape) or math.prod(shape) * 8 != length:
                raise ValueError("shape does not match the data")
            dtype = ">f8" if kind == "f64" else ">i8"
            return np.frombuffer(data, dtype=dtype).reshape(shape).astype(dtype[1:])
        raise ValueError(f"unknown field type {kind!r}")
    except ProtocolError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise ProtocolError(f"{where}: {exc}") from None
