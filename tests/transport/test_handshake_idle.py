"""Connections that never finish TLS must not hold up a party's listener, nor be blamed on certificates."""

import socket
import threading
import time

import pytest

from vfl.errors import PeerError
from vfl.transport import Endpoint
from vfl.transport.network import NetworkSettings, NetworkTransport
from vfl_net_helpers import federation_certs, free_ports  # noqa: F401 - pytest fixtures

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

IDLE = 5


def idle_connections(address, count, timeout=10.0):
    """``count`` TCP connections to ``address`` that send nothing, once something listens there."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            first = socket.create_connection(address, timeout=1)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    return [first] + [socket.create_connection(address, timeout=1) for _ in range(count - 1)]


def connecting(tls, addresses, settings):
    """A thread per role that connects it: ``(threads, transports, errors)``, the threads not started."""
    transports, errors = {}, {}

    def run(role):
        try:
            transports[role] = NetworkTransport.connect(role, addresses, tls[role], settings)
        except Exception as exc:  # noqa: BLE001 - inspected by the test
            errors[role] = exc

    return {role: threading.Thread(target=run, args=(role,), daemon=True) for role in addresses}, transports, errors


def listener_error(tls, addresses, settings, silent):
    """B listens for A, which never comes, while ``silent`` connections that send nothing reach it: B's error."""
    outcome, idle = {}, []

    def listen():
        try:
            NetworkTransport.connect("B", addresses, tls, settings)
        except PeerError as exc:
            outcome["B"] = exc

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    try:
        idle += idle_connections(addresses["B"], silent)
        thread.join(10)
    finally:
        for sock in idle:
            sock.close()
    return str(outcome["B"])


def test_idle_connections_do_not_hold_up_the_federation(federation_certs, free_ports):
    ours, _ = federation_certs
    addresses = dict(zip("ABC", (("127.0.0.1", p) for p in free_ports(3))))
    # connect_timeout 8 s: before, each idle connection held the listener for up to 10 s, one after the other.
    settings = NetworkSettings(connect_timeout=8, send_timeout=5, handshake_timeout=1.0)
    threads, transports, errors = connecting(ours, addresses, settings)
    idle = []
    try:
        # C listens first, and IDLE silent connections reach it before B dials; then the same at B before A.
        threads["C"].start()
        idle += idle_connections(addresses["C"], IDLE)
        threads["B"].start()
        idle += idle_connections(addresses["B"], IDLE)
        threads["A"].start()
        for t in threads.values():
            t.join(30)
        assert not errors, errors
        assert set(transports) == set("ABC")
        endpoints = {r: Endpoint(t, [p for p in "ABC" if p != r], timeout=5) for r, t in transports.items()}
        for sender, receiver in (("A", "B"), ("A", "C"), ("B", "C")):
            endpoints[sender].send(receiver, "ping", "public", text=f"{sender}->{receiver}")
            assert endpoints[receiver].recv(sender, "ping")["text"] == f"{sender}->{receiver}"
        # The silent connections were dropped by the listener (not kept open, not linked).
        for sock in idle:
            sock.settimeout(10)
            try:
                assert sock.recv(1) == b""
            except ConnectionResetError:
                pass
        assert {r: sorted(t.links) for r, t in transports.items()} == {"A": ["B", "C"], "B": ["A", "C"],
                                                                        "C": ["A", "B"]}
    finally:
        for sock in idle:
            sock.close()
        for t in transports.values():
            t.close()


def test_a_silent_connection_is_reported_as_such_not_as_a_certificate_problem(federation_certs, free_ports):
    ours, _ = federation_certs
    addresses = dict(zip("AB", (("127.0.0.1", p) for p in free_ports(2))))
    message = listener_error(ours["B"], addresses, NetworkSettings(connect_timeout=2.0, handshake_timeout=0.3), 1)
    assert message.startswith("B: connecting: A never connected to B within 2 s; refused: ")
    assert "did not complete the TLS handshake within 0.3 s" in message
    assert "certificate" not in message


def test_a_malformed_hello_is_refused_and_named(federation_certs, free_ports):
    """A peer with a valid certificate whose hello is not a vfl hello: refused, and the listener says why."""
    import ssl

    from vfl.transport.network import _LENGTH

    ours, _ = federation_certs
    addresses = dict(zip("AB", (("127.0.0.1", p) for p in free_ports(2))))
    outcome = {}

    def listen():
        try:
            NetworkTransport.connect("B", addresses, ours["B"], NetworkSettings(connect_timeout=2.0))
        except PeerError as exc:
            outcome["B"] = exc

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(ours["A"].ca)
    ctx.load_cert_chain(ours["A"].certificate, ours["A"].key)
    answers = []
    for hello in (b'{"vfl": 1, "role": "A", "to": NaN}', b'[[[[["deep"]]]]]', b'{"vfl": 1, "role": "A"}'):
        raw = idle_connections(addresses["B"], 1)[0]
        with ctx.wrap_socket(raw) as sock:
            sock.sendall(_LENGTH.pack(len(hello)) + hello)
            answers.append(sock.recv(4096))
    thread.join(10)
    message = str(outcome["B"])
    assert ": it sent a malformed hello: NaN is not a number JSON allows" in message
    assert ": it sent a malformed hello: more than 1 arrays and objects" in message
    assert "its hello is not a vfl hello" in message
    assert b"not a vfl hello" in answers[2]


def test_handshake_timeout_must_be_positive():
    with pytest.raises(ValueError, match="timeouts must be positive"):
        NetworkSettings(handshake_timeout=0)


def test_two_hundred_silent_connections_neither_stop_nor_delay_formation(federation_certs, free_ports):
    """200 silent connections from one address, open before the peers dial: they wait in a bounded pool
    (the oldest dropped), never in a handshake slot, so the peers' handshakes start at once."""
    ours, _ = federation_certs
    addresses = dict(zip("ABC", (("127.0.0.1", p) for p in free_ports(3))))
    settings = NetworkSettings(connect_timeout=20, send_timeout=5, handshake_timeout=5.0)
    threads, transports, errors = connecting(ours, addresses, settings)
    idle = []
    try:
        threads["C"].start()
        idle += idle_connections(addresses["C"], 200)
        began = time.monotonic()
        threads["B"].start()
        threads["A"].start()
        for t in threads.values():
            t.join(30)
        took = time.monotonic() - began
        assert not errors, errors
        assert set(transports) == set("ABC")
        assert took < 4.0, f"formation took {took:.1f} s behind 200 silent connections"
        dropped = 0
        for sock in idle:       # the pool kept at most _IDLE_PER_SOURCE of them: the others were closed
            sock.settimeout(0.5)
            try:
                dropped += sock.recv(1) == b""
            except ConnectionResetError:
                dropped += 1
            except socket.timeout:
                pass
        assert dropped >= 200 - 16
    finally:
        for sock in idle:
            sock.close()
        for t in transports.values():
            t.close()


def test_dropped_connections_are_named_with_the_reason(federation_certs, free_ports):
    ours, _ = federation_certs
    addresses = dict(zip("AB", (("127.0.0.1", p) for p in free_ports(2))))
    message = listener_error(ours["B"], addresses, NetworkSettings(connect_timeout=2.0, handshake_timeout=1.5), 20)
    assert "A never connected to B within 2 s" in message
    assert "dropped: it had sent nothing while 16 silent connections from 127.0.0.1 waited" in message
    assert "certificate" not in message


def test_a_connection_closed_mid_handshake_is_not_blamed_on_a_certificate():
    import ssl

    from vfl.transport.network import _ssl_reason

    reason = _ssl_reason(ssl.SSLEOFError(8, "EOF occurred in violation of protocol"))
    assert "without a TLS alert or an answer" in reason and "certificate" not in reason
    assert "its listener dropped the connection" in reason
