"""Fuzzing the frame decoder: whatever the bytes, only ProtocolError comes out, and memory stays bounded.

Inputs are real frames mutated by a seeded numpy Generator (test inputs only: nothing here is a
secret), plus random bytes.  Every frame is decoded under tracemalloc, and the peak memory of a
decode must stay within 4 times the frame's size plus a constant.
"""

import json
import struct
import tracemalloc

import numpy as np
import pytest

from vfl.errors import ProtocolError
from vfl.transport import BigInts, Message, decode, encode
from vfl.transport.message import MAGIC, MAX_DEPTH, MAX_FIELDS, MAX_HEADER_BYTES, MAX_HEADER_ITEMS

SEED = 20240917
#: Peak memory of one decode may be 4 times the frame plus this (parsed header, small objects).
CONSTANT_BYTES = 256 * 1024


def real_frames():
    """Frames like the protocols send: every field type, empty and 2-D arrays, ciphertext-like integers."""
    rng = np.random.default_rng(1)
    return [
        encode(Message("scores", "ciphertext", 3, {
            "ciphertexts": BigInts(256, rng.bytes(256 * 20)), "exponent": 32,
            "loss_ciphertexts": BigInts(256, rng.bytes(256 * 20)), "loss_exponent": 64})),
        encode(Message("gradient", "masked", 7, {"residues": BigInts(128, rng.bytes(128 * 5))})),
        encode(Message("hello", "public", -1, {"fingerprint": "ab" * 32, "shared": json.dumps({"a": [1, 2.5]}),
                                                "ids_digest": "cd" * 32, "n_rows": 60})),
        encode(Message("mixed", "plaintext", 0, {
            "none": None, "flag": False, "count": -4, "rate": 0.25, "text": "h\u00e9llo \U0001F600",
            "matrix": rng.normal(size=(3, 4)), "ints": np.arange(5), "empty": np.zeros((0, 3)),
            "raw": b"\x00\x01\x02", "nothing": b""})),
        encode(Message("control", "public", 2, {"stop": True})),
    ]


def frame_of(header, body=b"", header_len=None):
    """A frame around ``header`` (a dict, or raw JSON bytes), with a correct or a chosen header length."""
    raw = header if isinstance(header, bytes) else json.dumps(header, allow_nan=True).encode()
    return MAGIC + struct.pack(">I", len(raw) if header_len is None else header_len) + raw + body


def split(frame):
    (h,) = struct.unpack(">I", frame[4:8])
    return json.loads(frame[8:8 + h]), frame[8 + h:]


BAD_VALUES = [float("nan"), float("inf"), -float("inf"), 10 ** 30, 2 ** 63, -1, -(2 ** 70), True, False, 1.5,
              2.0, "7", None, [], [3], {}, 1e308, 10 ** 400]


def rewrite_header(rng, frame):
    """Change one thing in the header of a real frame: the kinds of lies a hostile peer can tell."""
    header, body = split(frame)
    fields = header["fields"]
    keys = list(fields)
    choice = rng.integers(12)
    if choice == 0 and keys:  # one descriptor value replaced by something of the wrong kind or size
        d = fields[keys[rng.integers(len(keys))]]
        slot = list(d)[rng.integers(len(d))]
        d[slot] = BAD_VALUES[rng.integers(len(BAD_VALUES))]
    elif choice == 1:  # the iteration, name or kind
        slot = ["iteration", "name", "kind"][rng.integers(3)]
        header[slot] = BAD_VALUES[rng.integers(len(BAD_VALUES))]
    elif choice == 2 and len(keys) > 1:  # two binary fields point at the same bytes
        binary = [k for k in keys if "offset" in fields[k]]
        if len(binary) > 1:
            a, b = rng.choice(binary, 2, replace=False)
            fields[b]["offset"] = fields[a]["offset"] + int(rng.integers(0, 3))
    elif choice == 3:  # huge counts and shapes
        for d in fields.values():
            if "count" in d:
                d["count"] = int(rng.choice([2 ** 40, 2 ** 62, 10 ** 25]))
            if "shape" in d:
                d["shape"] = [0, 2 ** 62] if rng.integers(2) else [2 ** 31, 2 ** 31, 2 ** 31]
                d["length"] = 0 if d["shape"][0] == 0 else d["length"]
    elif choice == 4:  # nesting deeper than the format allows
        depth = int(rng.integers(MAX_DEPTH, 5000))
        return frame_of(b'{"name":"m","kind":"public","iteration":0,"fields":{"x":' + b"[" * depth + b"]" * depth
                        + b"}}", body)
    elif choice == 5:  # too many fields
        header["fields"] = {f"f{i}": {"type": "null"} for i in range(MAX_FIELDS + int(rng.integers(1, 500)))}
    elif choice == 6:  # too many values
        header["extra"] = [0] * (MAX_HEADER_ITEMS + 1)
    elif choice == 7:  # a header length that lies
        raw = json.dumps(header).encode()
        return frame_of(raw, body, header_len=int(rng.integers(0, len(raw) + len(body) + 10)))
    elif choice == 8:  # a repeated key, or NaN written by hand
        raw = json.dumps(header).encode()
        hand = [b'"iteration":NaN,', b'"iteration":-Infinity,', b'"name":"x",', b'"iteration":1e999,']
        return frame_of(raw[:1] + hand[rng.integers(len(hand))] + raw[1:], body)
    elif choice == 9 and keys:  # a field of another type, or no type
        d = fields[keys[rng.integers(len(keys))]]
        d["type"] = ["f64", "i64", "uint", "bytes", "str", "int", "float", "bool", "pickle", None][rng.integers(10)]
    elif choice == 10:  # the body grows or shrinks under an honest header
        body = body + rng.bytes(int(rng.integers(1, 64))) if rng.integers(2) else body[:-1]
    else:  # a long string with characters outside the Basic Multilingual Plane
        header["fields"]["long"] = {"type": "str", "value": "\U0001F600" + "x" * int(rng.integers(100, 60_000))}
    return frame_of(header, body)


def mutate(rng, frame):
    choice = rng.integers(6)
    if choice == 0:  # bit flips anywhere
        data = bytearray(frame)
        for _ in range(rng.integers(1, 9)):
            position = int(rng.integers(len(data)))
            data[position] ^= 1 << int(rng.integers(8))
        return bytes(data)
    if choice == 1:  # truncated
        return frame[:rng.integers(len(frame))]
    if choice == 2:  # bytes overwritten inside the header
        (h,) = struct.unpack(">I", frame[4:8])
        data = bytearray(frame)
        at = int(rng.integers(8, 8 + h))
        data[at:at + 4] = rng.bytes(4)
        return bytes(data)
    if choice == 3:  # random bytes behind a valid magic and a random header length
        return MAGIC + rng.bytes(4) + rng.bytes(int(rng.integers(0, 2000)))
    if choice == 4:
        return rng.bytes(int(rng.integers(0, 300)))
    return rewrite_header(rng, frame)


def fuzz_frames(count):
    rng = np.random.default_rng(SEED)
    seeds = real_frames()
    for _ in range(count):
        yield mutate(rng, seeds[rng.integers(len(seeds))])


def test_real_frames_decode():
    for frame in real_frames():
        assert encode(decode(frame)) == frame


def _peak(frame) -> int:
    """Bytes allocated at the peak while decoding ``frame`` (tracemalloc running), errors ignored."""
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        decode(frame)
    except ProtocolError:
        pass
    return tracemalloc.get_traced_memory()[1] - before


def _least_peak(frame, tries: int = 3) -> int:
    """The smallest of a few measurements: tracemalloc also counts other threads' allocations (a Dask
    scheduler's, say, started by another test), which come and go; the decoder's own allocations do not."""
    return min(_peak(frame) for _ in range(tries))


def test_fuzzed_frames_raise_only_protocol_errors_within_bounded_memory():
    escaped, greedy, refused, n = [], [], 0, 0
    tracemalloc.start()
    try:
        for frame in fuzz_frames(3000):
            n += 1
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            try:
                decode(frame)
            except ProtocolError:
                refused += 1
            except BaseException as exc:  # noqa: BLE001 - the point of the test
                escaped.append((type(exc).__name__, str(exc)[:200], frame[:200]))
            peak = tracemalloc.get_traced_memory()[1] - before
            if peak > 4 * len(frame) + CONSTANT_BYTES:
                peak = _least_peak(frame)
            if peak > 4 * len(frame) + CONSTANT_BYTES:
                greedy.append((peak, len(frame), frame[:120]))
    finally:
        tracemalloc.stop()
    assert not escaped, f"{len(escaped)} frames raised something else than ProtocolError: {escaped[:5]}"
    assert not greedy, f"decoding took more than 4x the frame plus {CONSTANT_BYTES} bytes: {greedy[:3]}"
    assert refused > n * 0.8  # most mutations are caught: the generator really produces bad frames


def test_large_frames_take_memory_in_proportion():
    """A frame of several MB: the peak is the decoded arrays, not copies of copies."""
    frames = [encode(Message("big", "ciphertext", 0, {"x": np.arange(500_000, dtype=float),
                                                       "c": BigInts(512, bytes(512 * 2000))})),
              frame_of({"name": "s", "kind": "public", "iteration": 0,
                        "fields": {"t": {"type": "str", "value": "\U0001F600" + "x" * (MAX_HEADER_BYTES - 200)}}})]
    tracemalloc.start()
    try:
        for frame in frames:
            peak = _least_peak(frame)
            assert peak <= 4 * len(frame) + CONSTANT_BYTES, (peak, len(frame))
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("header, body, message", [
    (b'{"name":"m","kind":"public","iteration":NaN,"fields":{}}', b"", "NaN"),
    (b'{"name":"m","kind":"public","iteration":0,"fields":{"x":{"type":"float","value":-Infinity}}}', b"",
     "-Infinity"),
    (b'{"name":"m","kind":"public","iteration":0,"fields":{"x":{"type":"float","value":1e999}}}', b"",
     "overflows a double"),
    (b'{"name":"m","kind":"public","iteration":0,"fields":{"x":{"type":"f64","shape":[[2]],"offset":0,'
     b'"length":16}}}', bytes(16), "nested deeper than 4"),
    (b'{"name":"m","kind":"public","kind":"public","iteration":0,"fields":{}}', b"", "repeats a key"),
    (b'{"name":"m","kind":"public","iteration":0,"fields":{"a":{"type":"bytes","offset":0,"length":4},'
     b'"b":{"type":"bytes","offset":2,"length":2}}}', bytes(4), "fields 'a' and 'b' overlap"),
    (b'{"name":"m","kind":"public","iteration":0,"fields":{"a":{"type":"bytes","offset":0,"length":4}}}',
     bytes(6), "bytes 4 to 6 of the body belong to no field"),
    (b'{"name":"m","kind":"public","iteration":0,"fields":{"a":{"type":"bytes","offset":2,"length":2}}}',
     bytes(4), "bytes 0 to 2 of the body belong to no field"),
    (b'{"name":"m","kind":"public","iteration":0,"fields":{"a":{"type":"f64","shape":[0,1e30],"offset":0,'
     b'"length":0}}}', b"", "a dimension must be an integer"),
    (b'{"name":"m","kind":"public","iteration":0,"fields":{"a":{"type":"f64","shape":[0,4611686018427387904],'
     b'"offset":0,"length":0}}}', b"", "does not match"),
    (b'{"name":"m","kind":"public","iteration":0,"fields":{"a":{"type":"uint","width":true,"count":4,'
     b'"offset":0,"length":4}}}', bytes(4), "width must be an integer"),
    (b'{"name":"m","kind":"public","iteration":0,"fields":{"a":{"type":"float","value":' + b"9" * 400 + b"}}}",
     b"", "float field holds a value of type int"),
    (b'{"name":"m","kind":"public","iteration":true,"fields":{}}', b"", "iteration must be a 64-bit integer"),
    (b'{"name":"m","kind":"public","iteration":0,"fields":{},"more":1}', b"", "exactly the keys"),
    ('{"name":"m\u00e9","kind":"public","iteration":0,"fields":{}}'.encode(), b"", "not ASCII JSON"),
])
def test_each_rule_is_enforced(header, body, message):
    with pytest.raises(ProtocolError, match=message):
        decode(frame_of(header, body))


def test_frames_the_encoder_would_not_make_are_refused_at_encoding():
    with pytest.raises(ProtocolError, match="fields, above the maximum"):
        encode(Message("m", "public", 0, {f"f{i}": i for i in range(MAX_FIELDS + 1)}))
    with pytest.raises(ProtocolError, match="header of .* bytes is above the maximum"):
        encode(Message("m", "public", 0, {"text": "x" * MAX_HEADER_BYTES}))


@pytest.mark.parametrize("text", ["\n" * 30000, "\u0001" * 10000, "\"" * 30000], ids=["newlines", "controls", "quotes"])
def test_a_header_of_many_short_escapes_stays_within_the_memory_bound(text):
    """A string of escapes (json.dumps writes "\\n", "\\u0001", '\\"') is skipped escape by escape, not by a
    regular expression whose repetition stack took 64 bytes per escape (68 times the frame, found in audit)."""
    frame = encode(Message("m", "public", 0, {"text": text}))
    assert len(frame) > MAX_HEADER_BYTES // 2
    assert decode(frame).fields["text"] == text
    tracemalloc.start()
    try:
        peak = _least_peak(frame)
    finally:
        tracemalloc.stop()
    assert peak <= 4 * len(frame) + CONSTANT_BYTES, f"peak {peak} for a frame of {len(frame)} bytes"
