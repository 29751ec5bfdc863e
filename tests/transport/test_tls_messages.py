"""The transport's words for two first-day faults: a certificate whose names do not match is a name mismatch
(the name expected, the name it holds), and a peer not there yet is one that may be slow to start, with how long
this party waited and the option to raise — not a peer that "never appeared"."""

import datetime as dt
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from vfl.errors import HandshakeError, PeerError
from vfl.transport.network import NetworkSettings, NetworkTransport
from vfl.transport.tls import TLSFiles, certificate_problem, load_certificate, load_private_key
from vfl_net_helpers import _connect_all, _free_ports, federation_certs  # noqa: F401 - fixture


def mismatched(folder, files: TLSFiles, cn: str, dns: str) -> TLSFiles:
    """A certificate signed by the federation's CA whose subject name is ``cn`` and whose one DNS name is ``dns``."""
    ca_key = load_private_key(files.ca.parent / "ca.key")
    ca = load_certificate(files.ca)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns)]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{cn}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / f"{cn}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    return TLSFiles(files.ca, folder / f"{cn}.pem", folder / f"{cn}.key")


def test_a_certificate_name_mismatch_is_named_as_such_at_the_feature_party_and_its_peer(tmp_path, federation_certs):
    ours, _ = federation_certs
    odd = mismatched(tmp_path, ours["A"], "A", "telco")
    assert "a certificate name mismatch: its subject name (CN) is 'A' but its DNS names are ['telco']" in \
        certificate_problem(load_certificate(odd.certificate), load_certificate(odd.ca), "A")
    transports, errors = _connect_all({"A": odd, "B": ours["B"]}, roles=("A", "B"),
                                      settings=NetworkSettings(connect_timeout=1.5, send_timeout=5))
    for t in transports.values():
        t.close(linger=0)
    a, b = str(errors["A"]), str(errors["B"])
    assert isinstance(errors["A"], HandshakeError)
    assert "name mismatch: its subject name (CN) is 'A' but its DNS names are ['telco']" in a, a
    assert "not for this party's certificate" not in a and "without a TLS alert" not in a, a
    assert "name mismatch" in b, b


def test_a_peer_not_listening_yet_is_one_that_may_be_slow_to_start_with_the_time_waited(federation_certs):
    ours, _ = federation_certs
    addresses = dict(zip("AB", (("127.0.0.1", p) for p in _free_ports(2))))
    started = time.monotonic()
    with pytest.raises(PeerError) as told:                  # A dials B, which is not there
        NetworkTransport.connect("A", addresses, ours["A"], NetworkSettings(connect_timeout=1.5))
    assert time.monotonic() - started >= 1.5                # the whole timeout, not less
    text = str(told.value)
    assert f"A: connecting: could not reach B at 127.0.0.1:{addresses['B'][1]} within 1.5 s (connect_timeout; A " \
           "waited 1.5 s" in text, text
    assert "slow to start" in text and "raise [network] connect_timeout" in text and "never appeared" not in text
    with pytest.raises(PeerError) as listened:               # B listens for A, which never dials
        NetworkTransport.connect("B", addresses, ours["B"], NetworkSettings(connect_timeout=1.0))
    text = str(listened.value)
    assert "B: connecting: A never connected to B within 1 s (connect_timeout; B waited 1.0 s)" in text, text
    assert "slow to start" in text and "raise [network] connect_timeout" in text
