"""Each peer checked against what is pinned for its name: its own organisation's CA, its certificate's fingerprint,
the revocation lists.  Real mutual-TLS links on 127.0.0.1 between two endpoints, and the refusals."""

import threading

import pytest

from vfl.errors import HandshakeError
from vfl.transport import Endpoint, Transcript
from vfl.transport.network import NetworkSettings
from vfl.transport.tls import (PeerPin, TLSFiles, fingerprint, load_ca, load_certificate, make_request, revoke,
                               sign_request, write_ca, write_certificate, write_private_key)
from vfl_net_helpers import connect_all, free_ports  # noqa: F401 - pytest fixtures

pytestmark = pytest.mark.slow    # TLS links

QUICK = NetworkSettings(connect_timeout=2.0, send_timeout=5.0)
PAIR = ("bank", "telco")         # bank dials telco (names in order: the smaller dials)


def issue(folder, name, ca_dir, days=30):
    """``name`` makes its own key and request in ``folder``; the CA in ``ca_dir`` signs it: ``(cert path, key path)``."""
    folder.mkdir(parents=True, exist_ok=True)
    key, request = make_request(name)
    cert = sign_request(*load_ca(ca_dir), request, name, days)
    stem = f"{name}-{cert.serial_number:x}"[:24]
    return write_certificate(folder / f"{stem}.pem", cert), write_private_key(folder / f"{stem}.key", key)


@pytest.fixture(scope="module")
def orgs(tmp_path_factory):
    """Each organisation its own CA and its own certificate; a federation CA that signed both; a stranger CA."""
    base = tmp_path_factory.mktemp("orgs")
    made = {}
    for name in (*PAIR, "federation", "stranger"):
        write_ca(base / f"{name}-ca", f"{name} CA")
    for name in PAIR:
        made[name] = issue(base / name, name, base / f"{name}-ca")             # signed by its own CA
        made[f"{name}@federation"] = issue(base / name, name, base / "federation-ca")
        made[f"{name}@stranger"] = issue(base / name, name, base / "stranger-ca")
    made["telco@bank"] = issue(base / "telco", "telco", base / "bank-ca")   # the bank's CA vouching for telco
    made["base"] = base
    return made


def own_cas(orgs, certs=None, **pins):
    """Every party trusts each organisation's own CA for that organisation (``[parties.X] ca``)."""
    base = orgs["base"]
    pinned = {name: PeerPin(ca=base / f"{name}-ca" / "ca.pem") for name in PAIR}
    pinned.update(pins)
    certs = certs or {}
    return {name: TLSFiles(base / f"{name}-ca" / "ca.pem", *orgs[certs.get(name, name)], pinned) for name in PAIR}


def talk(transports):
    """One message each way: the link carries data."""
    transcript = Transcript()
    eps = {r: Endpoint(t, [p for p in PAIR if p != r], transcript, timeout=5) for r, t in transports.items()}
    got = {}

    def run(role):
        peer = eps[role].peers[0]
        eps[role].send(peer, "hello", "public", text=f"{role}->{peer}")
        got[role] = eps[role].recv(peer, "hello")["text"]

    threads = [threading.Thread(target=run, args=(r,)) for r in eps]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return got


def close_all(transports):
    for t in transports.values():
        t.close()


def test_each_organisation_its_own_ca(orgs, connect_all):
    transports, errors = connect_all(own_cas(orgs), roles=PAIR, settings=QUICK)
    try:
        assert not errors
        assert talk(transports) == {"bank": "telco->bank", "telco": "bank->telco"}
    finally:
        close_all(transports)


def test_pinned_fingerprints(orgs, connect_all):
    base = orgs["base"]
    fps = {name: fingerprint(load_certificate(orgs[f"{name}@federation"][0])) for name in PAIR}
    tls = {name: TLSFiles(base / "federation-ca" / "ca.pem", *orgs[f"{name}@federation"],
                          {peer: PeerPin(fingerprint=fps[peer]) for peer in PAIR}) for name in PAIR}
    transports, errors = connect_all(tls, roles=PAIR, settings=QUICK)
    try:
        assert not errors
        assert talk(transports) == {"bank": "telco->bank", "telco": "bank->telco"}
    finally:
        close_all(transports)


def test_a_listener_whose_certificate_another_trusted_ca_signed_is_refused(orgs, connect_all):
    """telco presents a certificate of the bank's CA (trusted, but for the bank only): bank refuses it, naming telco
    and the CA it expected for telco."""
    transports, errors = connect_all(own_cas(orgs, {"telco": "telco@bank"}), roles=PAIR, settings=QUICK)
    close_all(transports)
    text = str(errors["bank"])
    assert isinstance(errors["bank"], HandshakeError)
    assert "bank: connecting to telco: refused at the TLS handshake: party telco's certificate is signed by " \
           "'bank CA'" in text
    assert "not by the CA pinned for telco, 'telco CA'" in text and "telco-ca/ca.pem" in text


def test_a_dialler_whose_certificate_another_trusted_ca_signed_is_refused(orgs, connect_all):
    """bank presents a certificate of the federation's CA, but telco pins the bank's own CA: telco refuses it, and
    tells bank why."""
    base = orgs["base"]
    tls = own_cas(orgs, {"bank": "bank@federation"})
    tls = {name: TLSFiles(files.ca, files.certificate, files.key,
                          {**files.pins, "x": PeerPin(ca=base / "federation-ca" / "ca.pem")})
           for name, files in tls.items()}           # the federation's CA is trusted too (for some other party)
    transports, errors = connect_all(tls, roles=PAIR, settings=QUICK)
    close_all(transports)
    assert "bank: telco refused the connection: party bank's certificate is signed by 'federation CA'" \
           in str(errors["bank"])
    assert "not by the CA pinned for bank, 'bank CA'" in str(errors["bank"])
    assert "bank never connected to telco" in str(errors["telco"])
    assert "party bank's certificate is signed by 'federation CA'" in str(errors["telco"])


def test_a_certificate_of_a_ca_trusted_for_nobody_names_the_ca_pinned_for_the_peer(orgs, connect_all):
    transports, errors = connect_all(own_cas(orgs, {"telco": "telco@stranger"}), roles=PAIR, settings=QUICK)
    close_all(transports)
    text = str(errors["bank"])
    assert "bank: connecting to telco at" in text and "its certificate is signed by another CA, 'stranger CA'" in text
    assert "this party trusts for telco only the CA pinned for it" in text and "'telco CA'" in text


def test_a_replaced_certificate_is_refused_and_the_renewed_one_accepted(orgs, connect_all):
    """Pinning by fingerprint: telco renews (a new key and request, signed by its CA); until bank pins the new
    fingerprint the new certificate is refused; once it does, the old one is."""
    base = orgs["base"]
    old = orgs["telco"]
    new = issue(base / "telco", "telco", base / "telco-ca")
    orgs["telco-renewed"] = new
    old_fp, new_fp = (fingerprint(load_certificate(c)) for c, _ in (old, new))

    def run(presented, pinned):
        pins = {"telco": PeerPin(ca=base / "telco-ca" / "ca.pem", fingerprint=pinned)}
        transports, errors = connect_all(own_cas(orgs, {"telco": presented}, **pins), roles=PAIR, settings=QUICK)
        close_all(transports)
        return errors

    errors = run("telco-renewed", old_fp)       # telco renewed; bank's federation.toml still pins the old one
    assert f"party telco's certificate is not the one pinned for telco: expected {old_fp}, found {new_fp}" \
           in str(errors["bank"])
    assert not run("telco-renewed", new_fp)     # bank updates the pin: accepted
    errors = run("telco", new_fp)               # the old certificate (a stolen key, say) is now refused
    assert f"party telco's certificate is not the one pinned for telco: expected {new_fp}, found {old_fp}" \
           in str(errors["bank"])


def test_a_revoked_certificate_is_refused_at_the_handshake(orgs, connect_all, tmp_path):
    """A revocation list (vfl certs revoke) of the federation's CA names bank's certificate: telco refuses bank, and
    bank's new certificate is accepted."""
    base = orgs["base"]
    ca_dir = tmp_path / "federation-ca"           # a copy: the revocation stays in this test
    ca_dir.mkdir()
    for name in ("ca.pem", "ca.key"):
        (ca_dir / name).write_bytes((base / "federation-ca" / name).read_bytes())
        (ca_dir / name).chmod(0o600)
    revoked = load_certificate(orgs["bank@federation"][0])
    revoke(*load_ca(ca_dir), revoked, tmp_path / "crl.pem")
    renewed = issue(tmp_path / "bank", "bank", ca_dir)

    def run(bank):
        certs = {"bank": bank, "telco": orgs["telco@federation"]}
        tls = {name: TLSFiles(ca_dir / "ca.pem", *certs[name], crls=(tmp_path / "crl.pem",)) for name in PAIR}
        transports, errors = connect_all(tls, roles=PAIR, settings=QUICK)
        close_all(transports)
        return errors

    errors = run(orgs["bank@federation"])
    expected = f"party bank's certificate (serial {revoked.serial_number:#x}, {fingerprint(revoked)}) is revoked: " \
               f"{tmp_path / 'crl.pem'} lists it"
    assert expected in str(errors["bank"]) and "telco refused the connection" in str(errors["bank"])
    assert expected in str(errors["telco"])
    assert not run(renewed)


def test_a_listener_s_revoked_certificate_is_refused_by_the_dialler(orgs, connect_all, tmp_path):
    base = orgs["base"]
    ca_dir = tmp_path / "telco-ca"
    ca_dir.mkdir()
    for name in ("ca.pem", "ca.key"):
        (ca_dir / name).write_bytes((base / "telco-ca" / name).read_bytes())
    revoke(*load_ca(ca_dir), load_certificate(orgs["telco"][0]), tmp_path / "telco-crl.pem")
    tls = own_cas(orgs)
    tls = {name: TLSFiles(f.ca, f.certificate, f.key, f.pins, (tmp_path / "telco-crl.pem",)) for name, f in tls.items()}
    transports, errors = connect_all(tls, roles=PAIR, settings=QUICK)
    close_all(transports)
    assert "bank: connecting to telco: refused at the TLS handshake: party telco's certificate (serial" \
           in str(errors["bank"])
    assert "is revoked" in str(errors["bank"])


def test_a_revocation_list_no_trusted_ca_signed_is_refused_before_connecting(orgs, tmp_path):
    from vfl.errors import ConfigurationError
    from vfl.transport.tls import client_context

    base = orgs["base"]
    revoke(*load_ca(base / "stranger-ca"), load_certificate(orgs["bank@stranger"][0]), tmp_path / "crl.pem")
    files = own_cas(orgs)["bank"]
    with pytest.raises(ConfigurationError, match="crl.pem is not signed by a CA this party trusts"):
        client_context(TLSFiles(files.ca, files.certificate, files.key, files.pins, (tmp_path / "crl.pem",)))
    with pytest.raises(ConfigurationError, match="the CA certificate of telco file .* does not exist"):
        client_context(TLSFiles(files.ca, files.certificate, files.key, {"telco": PeerPin(ca=tmp_path / "no.pem")}))
