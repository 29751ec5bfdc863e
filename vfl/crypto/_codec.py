"""A small explicit binary codec for the worker pipes: no pickle, only the types the tasks use.

Values are ``None``, ``bool``, ``int`` (any size), ``str``, ``float``, ``gmpy2.mpz``,
lists and tuples of values, and numpy arrays of fixed-width integer dtypes.
Lists whose items are all ``mpz`` are packed as one block.  Anything else is
refused when encoding, and decoding builds nothing but these types.
"""

from __future__ import annotations

import struct

import gmpy2
import numpy as np

_U32 = struct.Struct("!I")
_U64 = struct.Struct("!Q")
_F64 = struct.Struct("!d")
_MPZ = type(gmpy2.mpz(0))
_DTYPES = {"i8": np.int64, "u8": np.uint64, "u2": np.uint16, "i4": np.int32, "u4": np.uint32}


def encode(value) -> bytes:
    return b"".join(encode_parts(value))


def encode_parts(value) -> list:
    """The encoding as a list of byte strings (written one after another, never joined)."""
    out: list[bytes] = []
    _encode(value, out)
    return out


def _int_bytes(x: int) -> bytes:
    x = int(x)
    return x.to_bytes((x.bit_length() + 8) // 8 or 1, "big", signed=True)


def _encode(value, out: list) -> None:
    if value is None:
        out.append(b"N")
    elif value is True or value is False:
        out.append(b"T" if value else b"F")
    elif isinstance(value, _MPZ):
        raw = gmpy2.to_binary(value)
        out += [b"M", _U32.pack(len(raw)), raw]
    elif isinstance(value, int):
        raw = _int_bytes(value)
        out += [b"I", _U32.pack(len(raw)), raw]
    elif isinstance(value, float):
        out += [b"D", _F64.pack(value)]
    elif isinstance(value, str):
        raw = value.encode("utf-8")
        out += [b"S", _U32.pack(len(raw)), raw]
    elif isinstance(value, np.ndarray):
        code = next((k for k, t in _DTYPES.items() if value.dtype == t), None)
        if code is None or value.ndim > 8:
            raise TypeError(f"cannot send an array of dtype {value.dtype}")
        data = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
        out += [b"A", code.encode(), bytes([value.ndim])]
        out += [_U64.pack(d) for d in value.shape]
        out += [_U64.pack(len(data)), data]
    elif isinstance(value, (list, tuple)):
        if isinstance(value, list) and value and all(isinstance(v, _MPZ) for v in value):
            raws = [gmpy2.to_binary(v) for v in value]
            out += [b"Z", _U32.pack(len(raws))]
            out += [_U32.pack(len(r)) + r for r in raws]
            return
        out += [b"L" if isinstance(value, list) else b"U", _U32.pack(len(value))]
        for v in value:
            _encode(v, out)
    else:
        raise TypeError(f"cannot send a {type(value).__name__} to or from a worker")


def decode(data: bytes):
    value, end = _decode(memoryview(data), 0)
    if end != len(data):
        raise ValueError("trailing bytes in a worker message")
    return value


def _decode(buf: memoryview, at: int):
    tag = bytes(buf[at:at + 1])
    at += 1
    if tag == b"N":
        return None, at
    if tag in (b"T", b"F"):
        return tag == b"T", at
    if tag == b"D":
        return _F64.unpack_from(buf, at)[0], at + 8
    if tag in (b"M", b"I", b"S"):
        (size,) = _U32.unpack_from(buf, at)
        at += 4
        raw = bytes(buf[at:at + size])
        if len(raw) != size:
            raise ValueError("truncated worker message")
        at += size
        if tag == b"M":
            return gmpy2.from_binary(raw), at
        if tag == b"I":
            return int.from_bytes(raw, "big", signed=True), at
        return raw.decode("utf-8"), at
    if tag == b"Z":
        (count,) = _U32.unpack_from(buf, at)
        at += 4
        items = []
        for _ in range(count):
            (size,) = _U32.unpack_from(buf, at)
            at += 4
            items.append(gmpy2.from_binary(bytes(buf[at:at + size])))
            at += size
        return items, at
    if tag in (b"L", b"U"):
        (count,) = _U32.unpack_from(buf, at)
        at += 4
        items = []
        for _ in range(count):
            item, at = _decode(buf, at)
            items.append(item)
        return (items if tag == b"L" else tuple(items)), at
    if tag == b"A":
        code = bytes(buf[at:at + 2]).decode()
        ndim = buf[at + 2]
        at += 3
        shape = []
        for _ in range(ndim):
            shape.append(_U64.unpack_from(buf, at)[0])
            at += 8
        (size,) = _U64.unpack_from(buf, at)
        at += 8
        dtype = np.dtype(_DTYPES[code]).newbyteorder("<")
        array = np.frombuffer(bytes(buf[at:at + size]), dtype=dtype).reshape(shape).astype(_DTYPES[code])
        return array, at + size
    raise ValueError(f"unknown tag {tag!r} in a worker message")
