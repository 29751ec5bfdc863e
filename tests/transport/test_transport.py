"""The message format and the in-process transport."""

import struct

import numpy as np
import pytest

from vfl.errors import PeerError, ProtocolError
from vfl.transport import BigInts, Endpoint, InProcessNetwork, Message, Transcript, decode, encode, run_roles


def test_round_trip_every_field_type():
    fields = {
        "none": None, "flag": True, "count": 7, "rate": 0.1, "text": "héllo",
        "matrix": np.arange(6.0).reshape(2, 3), "ints": np.arange(4), "raw": b"\x00\x01",
        "big": BigInts.from_ints([0, 5, 2 ** 200], 32),
    }
    back = decode(encode(Message("m", "public", 3, fields)))
    assert (back.name, back.kind, back.iteration) == ("m", "public", 3)
    for key in ("none", "flag", "count", "rate", "text", "raw"):
        assert back[key] == fields[key]
    np.testing.assert_array_equal(back["matrix"], fields["matrix"])
    np.testing.assert_array_equal(back["ints"], fields["ints"])
    assert back["big"].to_ints() == [0, 5, 2 ** 200]
    with pytest.raises(ProtocolError, match="no field 'missing'"):
        back["missing"]


def test_frames_are_not_pickles():
    frame = encode(Message("m", "ciphertext", 0, {"x": np.ones(3)}))
    assert frame[:4] == b"VFL1" and not frame.startswith(b"\x80")


@pytest.mark.parametrize("frame", [
    b"", b"XXXX\x00\x00\x00\x02{}", b"VFL1\xff\xff\xff\xff",
    b"VFL1" + struct.pack(">I", 5) + b"{nope",
])
def test_malformed_frames_refused(frame):
    with pytest.raises(ProtocolError):
        decode(frame)


def test_field_past_end_refused():
    frame = encode(Message("m", "public", 0, {"x": np.ones(3)}))
    with pytest.raises(ProtocolError, match="field 'x'"):
        decode(frame[:-1])


def test_unsendable_values_refused():
    with pytest.raises(ProtocolError):
        encode(Message("m", "public", 0, {"x": float("nan")}))
    with pytest.raises(ProtocolError):
        encode(Message("m", "public", 0, {"x": object()}))
    with pytest.raises(ProtocolError):
        encode(Message("m", "secret", 0, {}))


def test_endpoints_exchange_and_record():
    net = InProcessNetwork(["A", "B"])
    transcript = Transcript(keep_payloads=True)
    a = Endpoint(net.transport("A"), ["B"], transcript)
    b = Endpoint(net.transport("B"), ["A"], transcript)

    def program_a():
        a.iteration = 1
        a.send("B", "ping", "public", value=1.5)
        return a.recv("B", "pong")["value"]

    def program_b():
        got = b.recv("A", "ping")["value"]
        b.send("A", "pong", "public", value=got * 2)
        return got

    assert run_roles(net, {"A": program_a, "B": program_b}) == {"A": 3.0, "B": 1.5}
    frame = transcript.to_frame()
    assert list(frame.columns) == ["iteration", "sender", "receiver", "name", "kind", "bytes"]
    assert frame["name"].tolist() == ["ping", "pong"]
    assert frame["iteration"].tolist()[0] == 1
    assert [m.name for _, _, m in transcript.messages()] == ["ping", "pong"]


def test_failure_of_one_role_stops_the_others():
    net = InProcessNetwork(["A", "B"])
    b = Endpoint(net.transport("B"), ["A"])

    def program_a():
        raise ValueError("A broke")

    def program_b():
        b.recv("A", "never")

    with pytest.raises(ValueError, match="A broke"):
        run_roles(net, {"A": program_a, "B": program_b})


def test_unexpected_message_and_timeout():
    net = InProcessNetwork(["A", "B"])
    a = Endpoint(net.transport("A"), ["B"])
    b = Endpoint(net.transport("B"), ["A"], timeout=0.2)
    a.send("B", "other", "public")
    with pytest.raises(ProtocolError, match="expected 'wanted' from A, got 'other'"):
        b.recv("A", "wanted")
    with pytest.raises(PeerError, match="waiting for 'wanted' from A"):
        b.recv("A", "wanted")
    a.abort("disk full")
    with pytest.raises(PeerError, match="disk full"):
        b.recv("A", "wanted")


def test_a_send_that_fails_after_the_peer_aborted_reports_the_peer_s_reason():
    """The peer's abort arrived, then its link closed: the failed send says why the peer stopped."""
    net = InProcessNetwork(["A", "B"])
    a, b = Endpoint(net.transport("A"), ["B"]), Endpoint(net.transport("B"), ["A"])
    b.send("A", "residual", "public")   # unread, before the abort
    b.abort("party B: PeerError: B: waiting for 'scores' from telco: telco closed the connection")

    class Closed:
        role = "A"

        def send(self, receiver, frame):
            raise PeerError(f"{receiver} closed the connection (stopped, or was killed)")

        def recv(self, sender, timeout):
            return net.transport("A").recv(sender, timeout)

    a.transport = Closed()
    with pytest.raises(PeerError, match="^A: B stopped while A was sending 'scores': party B: PeerError: B: waiting "
                                        "for 'scores' from telco"):
        a.send("B", "scores", "public")
    with pytest.raises(PeerError, match="^A: sending 'scores' to B: B closed the connection"):
        a.send("B", "scores", "public")  # no abort waiting: the transport's error, at its step


def test_timings_count_each_sender_s_work_since_its_previous_event():
    """With a fake clock: each send is timed from the sender's last send or receipt, never from a peer's event."""
    ticks = iter([0.0, 1.0, 5.0, 7.0, 8.0, 11.0])
    transcript = Transcript(clock=lambda: next(ticks))          # 0.0: the transcript starts
    net = InProcessNetwork(["A", "B"])
    a = Endpoint(net.transport("A"), ["B"], transcript)
    b = Endpoint(net.transport("B"), ["A"], transcript)
    a.send("B", "ping", "public")        # 1.0: A worked 1 s since the start
    b.recv("A", "ping")                  # 5.0: B takes it (B's wait is not B's work)
    b.send("A", "pong", "public")        # 7.0: B worked 2 s on its reply
    a.recv("B", "pong")                  # 8.0
    a.send("B", "ping", "public")        # 11.0: A worked 3 s since it took the reply
    frame = transcript.timings()
    assert list(frame.columns) == [*Transcript.COLUMNS, "seconds"]
    assert frame["name"].tolist() == ["ping", "pong", "ping"]
    assert frame["seconds"].tolist() == [1.0, 2.0, 3.0]
