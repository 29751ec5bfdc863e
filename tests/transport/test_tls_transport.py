"""The TLS network transport on 127.0.0.1: links, frames, refusals, failures."""

import socket
import ssl
import stat
import threading
import time

import numpy as np
import pytest

from vfl.errors import ConfigurationError, HandshakeError, PeerError, ProtocolError
from vfl.transport import Endpoint, Transcript
from vfl.transport.network import NetworkSettings, NetworkTransport, parse_address
from vfl.transport.tls import TLSFiles, ca_name, certificate_role, load_certificate, write_federation_certs
from vfl_net_helpers import connect_all, federation_certs, free_ports  # noqa: F401 - pytest fixtures

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels


def close_all(transports):
    for t in transports.values():
        t.close()


def test_certificates_name_roles_and_keys_are_private(federation_certs):
    ours, _ = federation_certs
    for role, files in ours.items():
        cert = load_certificate(files.certificate)
        assert certificate_role(cert) == role
        assert stat.S_IMODE(files.key.stat().st_mode) == 0o600
    assert stat.S_IMODE((ours["A"].ca.parent / "ca.key").stat().st_mode) == 0o600


def test_three_roles_exchange_messages(federation_certs, connect_all):
    ours, _ = federation_certs
    transports, errors = connect_all(ours)
    assert not errors
    try:
        transcript = Transcript()
        eps = {r: Endpoint(t, [p for p in "ABC" if p != r], transcript, timeout=5) for r, t in transports.items()}
        big = np.arange(200_000, dtype=float)  # 1.6 MB: several TLS records, sent both ways at once
        results = {}

        def program(role):
            for peer in eps[role].peers:
                eps[role].send(peer, "hello", "public", text=f"{role}->{peer}", data=big)
            results[role] = [eps[role].recv(peer, "hello") for peer in eps[role].peers]

        threads = [threading.Thread(target=program, args=(r,)) for r in eps]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        for role, messages in results.items():
            peers = eps[role].peers
            assert [m["text"] for m in messages] == [f"{p}->{role}" for p in peers]
            np.testing.assert_array_equal(messages[0]["data"], big)
        assert len(transcript.records) == 6
        assert all(nbytes > 1_600_000 for *_, nbytes in transcript.records)
    finally:
        close_all(transports)


def test_named_parties_link_only_with_their_peers(tmp_path, free_ports):
    """Any DNS-label name is a role; feature parties link only to the label party and the coordinator."""
    names = ["telco-2", "42", "bank", "C"]
    tls = write_federation_certs(tmp_path, names)
    assert {certificate_role(load_certificate(f.certificate)) for f in tls.values()} == set(names)
    peers = {"telco-2": ["bank", "C"], "42": ["bank", "C"], "bank": ["telco-2", "42", "C"],
             "C": ["telco-2", "42", "bank"]}
    addresses = dict(zip(names, (("127.0.0.1", p) for p in free_ports(4))))
    settings = NetworkSettings(connect_timeout=10, send_timeout=5)
    transports, errors = {}, {}

    def run(name):
        try:
            transports[name] = NetworkTransport.connect(name, addresses, tls[name], settings, peers=peers[name])
        except Exception as exc:  # noqa: BLE001 - inspected below
            errors[name] = exc

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    try:
        assert not errors, errors
        assert {n: sorted(t.links) for n, t in transports.items()} == {n: sorted(p) for n, p in peers.items()}
        for name in ("telco-2", "42"):
            Endpoint(transports[name], peers[name], timeout=5).send("bank", "hi", "public", me=name)
            assert Endpoint(transports["bank"], peers["bank"], timeout=5).recv(name, "hi")["me"] == name
            with pytest.raises(PeerError, match="no link to 'telco-2'" if name == "42" else "no link to '42'"):
                transports[name].send("telco-2" if name == "42" else "42", b"x")
    finally:
        close_all(transports)


def test_a_role_that_is_not_a_peer_is_refused(tmp_path, free_ports):
    """"web" expects only "a"; "shop", with a valid certificate of the same CA, is refused at the hello."""
    tls = write_federation_certs(tmp_path, ["a", "shop", "web"])
    addresses = dict(zip(["a", "shop", "web"], (("127.0.0.1", p) for p in free_ports(3))))
    settings = NetworkSettings(connect_timeout=2, send_timeout=2)
    with pytest.raises(ConfigurationError, match=r"peers \['bank'\] are not other roles with an address"):
        NetworkTransport("shop", addresses, tls["shop"], settings, peers=["bank"])
    errors = {}

    def listen():
        try:
            NetworkTransport.connect("web", addresses, tls["web"], settings, peers=["a"])
        except Exception as exc:  # noqa: BLE001 - inspected below
            errors["web"] = exc

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    with pytest.raises(HandshakeError, match="web refused the connection: shop is not a role that dials web"):
        NetworkTransport.connect("shop", addresses, tls["shop"], settings, peers=["web"])
    t.join(10)
    assert "a never connected to web" in str(errors["web"]) and "shop is not a role that dials web" in str(errors["web"])


def test_dialler_retries_until_the_listener_starts(federation_certs, free_ports):
    ours, _ = federation_certs
    addresses = dict(zip("AB", (("127.0.0.1", p) for p in free_ports(2))))
    settings = NetworkSettings(connect_timeout=10)
    got = {}
    dialler = threading.Thread(target=lambda: got.setdefault("A", NetworkTransport.connect("A", addresses, ours["A"],
                                                                                          settings)))
    dialler.start()
    time.sleep(0.8)  # A is already retrying
    b = NetworkTransport.connect("B", addresses, ours["B"], settings)
    dialler.join(10)
    try:
        got["A"].send("B", b"ping")
        assert b.recv("A", 5) == b"ping"
    finally:
        b.close()
        got["A"].close()


def test_peer_that_never_starts(federation_certs, connect_all):
    ours, _ = federation_certs
    settings = NetworkSettings(connect_timeout=1.0)
    start = time.monotonic()
    transports, errors = connect_all({"A": ours["A"], "B": ours["B"]}, settings=settings)
    assert time.monotonic() - start < 5
    assert not transports
    said = str(errors["A"]) + str(errors["B"])
    assert "could not reach C at" in said and "within 1 s (connect_timeout; A waited" in said
    assert "slow to start" in said and "raise [network] connect_timeout" in said
    assert "connecting" in str(errors["A"])


def test_listener_reports_a_missing_dialler(federation_certs, free_ports):
    ours, _ = federation_certs
    addresses = dict(zip("AB", (("127.0.0.1", p) for p in free_ports(2))))
    with pytest.raises(PeerError, match="B: connecting: A never connected to B within 0.5 s"):
        NetworkTransport.connect("B", addresses, ours["B"], NetworkSettings(connect_timeout=0.5))


def test_certificate_from_another_ca_is_refused(federation_certs, connect_all):
    ours, theirs = federation_certs
    # A knows the federation's CA (it is public) but its own certificate was signed by another CA.
    rogue = TLSFiles(ours["B"].ca, theirs["A"].certificate, theirs["A"].key)
    transports, errors = connect_all({"A": rogue, "B": ours["B"]}, roles=("A", "B"),
                                     settings=NetworkSettings(connect_timeout=1.0))
    close_all(transports)
    assert isinstance(errors["A"], HandshakeError)
    assert "refused at the TLS handshake" in str(errors["A"]) and "certificate" in str(errors["A"])
    assert "A never connected to B" in str(errors["B"]) and "TLS handshake" in str(errors["B"])


def test_peer_trusting_another_ca_refuses_us(federation_certs, connect_all):
    ours, theirs = federation_certs
    transports, errors = connect_all({"A": theirs["A"], "B": ours["B"]}, roles=("A", "B"),
                                     settings=NetworkSettings(connect_timeout=1.0))
    close_all(transports)
    # A names the CA B's certificate names (read on a second connection), and its own.
    assert f"its certificate is signed by another CA, {ca_name(load_certificate(ours['B'].ca))}" in str(errors["A"])
    assert f"trusts only the CA of {theirs['A'].ca}, {ca_name(load_certificate(theirs['A'].ca))}" in str(errors["A"])


def test_certificate_for_another_role_is_refused(federation_certs, connect_all):
    ours, _ = federation_certs
    # The party running as A holds C's certificate: B sees a peer claiming A with a certificate naming C.
    transports, errors = connect_all({"A": ours["C"], "B": ours["B"]}, roles=("A", "B"),
                                     settings=NetworkSettings(connect_timeout=1.0))
    close_all(transports)
    assert isinstance(errors["A"], HandshakeError)
    assert "claims role 'A' but its certificate names 'C'" in str(errors["A"])
    assert "claims role 'A'" in str(errors["B"])


def test_listener_with_another_roles_certificate_is_refused(federation_certs, connect_all):
    ours, _ = federation_certs
    transports, errors = connect_all({"A": ours["A"], "B": ours["C"]}, roles=("A", "B"),
                                     settings=NetworkSettings(connect_timeout=1.0))
    close_all(transports)
    assert "holds a certificate for 'C', not 'B'" in str(errors["A"])


def test_client_without_certificate_is_refused(federation_certs, free_ports):
    ours, _ = federation_certs
    (port_a, port_b) = free_ports(2)
    addresses = {"A": ("127.0.0.1", port_a), "B": ("127.0.0.1", port_b)}
    outcome = {}

    def listen():
        try:
            NetworkTransport.connect("B", addresses, ours["B"], NetworkSettings(connect_timeout=1.0))
        except PeerError as exc:
            outcome["B"] = exc

    thread = threading.Thread(target=listen)
    thread.start()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(ours["B"].ca)
    time.sleep(0.3)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        with socket.create_connection(("127.0.0.1", port_b), timeout=2) as raw:
            with ctx.wrap_socket(raw) as sock:
                sock.sendall(b"\x00\x00\x00\x02{}")
                assert sock.recv(10)  # the server's alert arrives here, under TLS 1.3
    thread.join(5)
    assert "certificate" in str(outcome["B"]).lower()


def test_oversized_frame_is_refused(federation_certs, connect_all, free_ports):
    ours, _ = federation_certs
    addresses = dict(zip("AB", (("127.0.0.1", p) for p in free_ports(2))))
    got = {}

    def run(role, max_frame):
        got[role] = NetworkTransport.connect(role, addresses, ours[role],
                                             NetworkSettings(connect_timeout=5, max_frame_bytes=max_frame))

    threads = [threading.Thread(target=run, args=("A", 10_000_000)), threading.Thread(target=run, args=("B", 1000))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    try:
        b = Endpoint(got["B"], ["A"], timeout=5)
        got["A"].send("B", b"x" * 5000)
        with pytest.raises(ProtocolError, match="^B: waiting for 'u' from A: A sent a frame of 5000 bytes, "
                                                "above the maximum of 1000"):
            b.recv("A", "u")
        with pytest.raises(ProtocolError, match="^B: sending 'big' to A: a frame of 1[0-9]{3} bytes for A is "
                                                "above the maximum of 1000"):
            b.send("A", "big", "public", data=b"y" * 1001)
        with pytest.raises(PeerError, match="B closed the connection"):
            got["A"].recv("B", 5)
    finally:
        close_all(got)


def test_malformed_frame_and_silence_and_departure(federation_certs, connect_all):
    ours, _ = federation_certs
    transports, errors = connect_all({"A": ours["A"], "B": ours["B"]}, roles=("A", "B"))
    assert not errors
    try:
        b = Endpoint(transports["B"], ["A"], timeout=0.5)
        transports["A"].send("B", b"not a vfl message")
        with pytest.raises(ProtocolError, match=r"^B: waiting for 'u' from A: A sent a malformed message: "
                                                r"not a vfl message \(bad magic\)$"):
            b.recv("A", "u")
        with pytest.raises(PeerError, match="B: waiting for 'u' from A: no message from A within 0.5 s"):
            b.recv("A", "u")
        transports["A"].close()
        with pytest.raises(PeerError, match="waiting for 'u' from A: A closed the connection"):
            b.recv("A", "u")
        with pytest.raises(PeerError, match=r"^B: sending 'late' to A: A closed the connection"):
            b.send("A", "late", "public")
        assert not b.transcript.records  # a message that did not go is not in the transcript
    finally:
        close_all(transports)


def test_a_send_that_times_out_fails_the_link(federation_certs, connect_all):
    ours, _ = federation_certs
    settings = NetworkSettings(connect_timeout=5, send_timeout=0.5)
    transports, errors = connect_all({"A": ours["A"], "B": ours["B"]}, roles=("A", "B"), settings=settings)
    assert not errors
    try:
        reader = transports["B"].links["A"]
        reader.closing = True  # B stops reading, as a stopped process would
        reader.thread.join(5)
        a = Endpoint(transports["A"], ["B"])
        with pytest.raises(PeerError, match=r"^A: sending 'big' to B: B did not take a \d+-byte frame within 0.5 s"):
            a.send("B", "big", "public", data=np.zeros(4_000_000))  # 32 MB: more than the socket buffers hold
        start = time.monotonic()
        a.abort("stopping")  # part of a frame went: the link is broken, and the abort gives up at once
        assert time.monotonic() - start < 0.3
        with pytest.raises(PeerError, match="^A: sending 'next' to B: B did not take"):
            a.send("B", "next", "public")
    finally:
        close_all(transports)


def test_parse_address():
    assert parse_address("example.org:7001") == ("example.org", 7001)
    assert parse_address("[::1]:80") == ("::1", 80)
    with pytest.raises(ValueError):
        parse_address("nohost")


def test_federation_certs_with_hosts(tmp_path):
    files = write_federation_certs(tmp_path, ["A", "B"], hosts={"A": ["10.0.0.1", "a.example"]})
    from cryptography import x509

    san = load_certificate(files["A"].certificate).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert "a.example" in san.value.get_values_for_type(x509.DNSName)
    assert isinstance(files["B"], TLSFiles)


def _reissued(tmp_path, files, role, start, end):
    """``role``'s certificate again, signed by the same CA, valid from ``start`` to ``end`` only."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    from vfl.transport.tls import load_private_key, make_party_cert, write_certificate, write_private_key

    ca_key, ca = load_private_key(files.ca.parent / "ca.key"), load_certificate(files.ca)
    key, cert = make_party_cert(ca_key, ca, role)
    builder = (x509.CertificateBuilder().subject_name(cert.subject).issuer_name(cert.issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end))
    for extension in cert.extensions:
        builder = builder.add_extension(extension.value, extension.critical)
    folder = tmp_path / f"{role}-{start:%Y%m%d}"
    folder.mkdir()
    return TLSFiles(files.ca, write_certificate(folder / f"{role}.pem", builder.sign(ca_key, hashes.SHA256())),
                    write_private_key(folder / f"{role}.key", key))


@pytest.mark.parametrize("who", ["A", "B"])
@pytest.mark.parametrize("when", ["expired", "not yet valid"])
def test_a_certificate_outside_its_dates_is_diagnosed_from_the_certificate(tmp_path, federation_certs, connect_all,
                                                                        who, when):
    """Expired or not yet valid: said with the dates by the party that holds it, and by its peer; never the CA."""
    import datetime as dt

    ours, _ = federation_certs
    now = dt.datetime.now(dt.timezone.utc)
    start, end = ((now - dt.timedelta(days=30), now - dt.timedelta(days=1)) if when == "expired" else
                  (now + dt.timedelta(days=1), now + dt.timedelta(days=30)))
    files = {"A": ours["A"], "B": ours["B"]}
    files[who] = _reissued(tmp_path, ours[who], who, start, end)
    # the refusal comes at once; 5 s only bounds a handshake slowed by a loaded machine (1 s was flaky at load 12)
    transports, errors = connect_all(files, roles=("A", "B"), settings=NetworkSettings(connect_timeout=5.0))
    close_all(transports)
    holder, peer = str(errors[who]), str(errors["B" if who == "A" else "A"])
    dates = (f"expired on {end:%Y-%m-%d %H:%M} UTC" if when == "expired" else
             f"is not yet valid: it is valid from {start:%Y-%m-%d %H:%M} UTC")
    assert f"this party's certificate {files[who].certificate} {dates}" in holder
    seen = f"its certificate {dates}" if who == "B" else \
        f"its certificate {'has expired' if when == 'expired' else 'is not yet valid'} on this machine's clock"
    assert seen in peer
    for text in (holder, peer):
        for wrong in ("another CA", "does not trust the CA", "not signed by this party's CA",
                      "not for this party's certificate"):
            assert wrong not in text


def test_a_listener_holding_another_role_s_certificate_says_so_itself(federation_certs, connect_all):
    ours, _ = federation_certs
    transports, errors = connect_all({"A": ours["A"], "B": ours["C"]}, roles=("A", "B"),
                                     settings=NetworkSettings(connect_timeout=1.0))
    close_all(transports)
    assert "holds a certificate for 'C', not 'B'" in str(errors["A"])
    assert f"this party's certificate {ours['C'].certificate} names the wrong party, a name mismatch: expected the " \
        "name 'B', the certificate holds 'C'" in str(errors["B"])
