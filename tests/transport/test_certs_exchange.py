"""Certificates as organisations exchange them: each makes its own key and a request, a CA signs the request."""

import datetime as dt
import stat

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from vfl.cli import main as vfl_main
from vfl.errors import ConfigurationError
from vfl.transport.tls import (certificate_role, fingerprint, load_ca, load_certificate, load_crl, load_request,
                               make_request, parse_fingerprint, request_problem, revoke, sign_request, signed_by,
                               validity, write_ca, write_federation_certs)


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def test_request_holds_no_private_key_and_the_key_is_private(tmp_path, capsys):
    assert vfl_main(["certs", "request", "--party", "telco", "--host", "telco.example.org", "10.0.0.2",
                     "--out", str(tmp_path / "telco")]) == 0
    key_path, csr_path = tmp_path / "telco" / "telco.key", tmp_path / "telco" / "telco.csr"
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    text = csr_path.read_bytes()
    assert text.startswith(b"-----BEGIN CERTIFICATE REQUEST-----") and b"PRIVATE" not in text
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    secret = key.private_numbers().private_value.to_bytes(32, "big")
    request = load_request(csr_path)
    assert secret not in request.public_bytes(serialization.Encoding.DER) and secret not in text
    assert request.public_key() == key.public_key() and request.is_signature_valid
    names = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["telco", "telco.example.org"]
    assert "telco.key (mode 0600): it stays on this machine" in capsys.readouterr().out
    # a second request would replace the key in use: only with --force
    assert vfl_main(["certs", "request", "--party", "telco", "--out", str(tmp_path / "telco")]) == 2
    assert "telco.key exists; pass --force" in _one_line_error(capsys)
    assert vfl_main(["certs", "request", "--party", "telco", "--out", str(tmp_path / "telco"), "--force"]) == 0
    assert serialization.load_pem_private_key(key_path.read_bytes(), None).public_key() != key.public_key()


def test_signed_certificate_chains_to_the_ca(tmp_path, capsys):
    assert vfl_main(["certs", "ca", "--out", str(tmp_path / "ca"), "--name", "federation CA"]) == 0
    assert stat.S_IMODE((tmp_path / "ca" / "ca.key").stat().st_mode) == 0o600
    assert vfl_main(["certs", "request", "--party", "bank", "--out", str(tmp_path / "bank")]) == 0
    assert vfl_main(["certs", "sign", "--ca-dir", str(tmp_path / "ca"), "--party", "bank", "--days", "30",
                     "--request", str(tmp_path / "bank" / "bank.csr"), "--out", str(tmp_path / "bank" / "bank.pem")]) == 0
    out = capsys.readouterr().out
    cert, ca = load_certificate(tmp_path / "bank" / "bank.pem"), load_certificate(tmp_path / "ca" / "ca.pem")
    assert signed_by(cert, ca) and certificate_role(cert) == "bank"
    key = serialization.load_pem_private_key((tmp_path / "bank" / "bank.key").read_bytes(), None)
    assert cert.public_key() == key.public_key()
    start, end = validity(cert)
    assert dt.timedelta(days=29) < end - start < dt.timedelta(days=31)
    assert x509.DNSName("bank") in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert fingerprint(cert) in out and "party bank: certificate" in out
    # the CA refuses to replace it silently, and a CA that exists is not made afresh
    assert vfl_main(["certs", "ca", "--out", str(tmp_path / "ca")]) == 2
    assert "ca.pem exists; pass --force" in _one_line_error(capsys)


def test_the_all_in_one_command_and_the_signed_certificates_look_alike(tmp_path):
    files = write_federation_certs(tmp_path / "all", ["A"])
    ca_key, ca_cert = load_ca(tmp_path / "all")
    _, request = make_request("A")
    signed, made = sign_request(ca_key, ca_cert, request, "A"), load_certificate(files["A"].certificate)
    assert [e.oid for e in signed.extensions] == [e.oid for e in made.extensions]


@pytest.mark.parametrize("case, expected", [
    ("another name", "is for another party: it names 'telco' as its common name, not 'bank'"),
    ("a key", "is a private key, not a certificate signing request"),
    ("a certificate", "is a certificate, not a certificate signing request"),
    ("text", "is not a certificate signing request"),
    ("missing request", "cannot read the request"),
    ("missing CA", "no CA folder"),
    ("CA without key", "does not exist (make a CA with vfl certs ca"),
    ("small RSA key", "its RSA key has 1024 bits; at least 2048 are needed"),
    ("another curve", "its key is on the curve secp256k1"),
    ("a DNS name short of the party", "does not name 'bank' among its DNS names"),
    ("bad signature", "has an invalid signature"),
])
def test_bad_input_is_one_clear_line(tmp_path, capsys, case, expected):
    write_ca(tmp_path / "ca")
    write_federation_certs(tmp_path / "other", ["bank"])
    request = tmp_path / "bank.csr"
    name, key = "bank", ec.generate_private_key(ec.SECP256R1())
    alt = ["bank"]
    if case == "another name":
        name, alt = "telco", ["telco"]
    elif case == "small RSA key":
        key = rsa.generate_private_key(65537, 1024)
    elif case == "another curve":
        key = ec.generate_private_key(ec.SECP256K1())
    elif case == "a DNS name short of the party":
        alt = ["bank.example.org"]
    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
           .add_extension(x509.SubjectAlternativeName([x509.DNSName(a) for a in alt]), critical=False)
           .sign(key, hashes.SHA256()))
    data = csr.public_bytes(serialization.Encoding.PEM)
    if case == "bad signature":   # damaged in transit: the last bytes of the signature changed
        der = bytearray(csr.public_bytes(serialization.Encoding.DER))
        der[-3:] = bytes(b ^ 0x5A for b in der[-3:])
        data = x509.load_der_x509_csr(bytes(der)).public_bytes(serialization.Encoding.PEM)
    request.write_bytes(data)
    ca_dir = tmp_path / "ca"
    if case == "a key":
        request.write_bytes((tmp_path / "other" / "bank.key").read_bytes())
    elif case == "a certificate":
        request.write_bytes((tmp_path / "other" / "bank.pem").read_bytes())
    elif case == "text":
        request.write_text("hello\n")
    elif case == "missing request":
        request.unlink()
    elif case == "missing CA":
        ca_dir = tmp_path / "no-ca"
    elif case == "CA without key":
        (ca_dir / "ca.key").unlink()
    code = vfl_main(["certs", "sign", "--ca-dir", str(ca_dir), "--request", str(request), "--party", "bank",
                     "--out", str(tmp_path / "bank.pem")])
    err = _one_line_error(capsys)
    assert code == 2 and expected in err and err.startswith("vfl certs sign: error: "), err
    assert not (tmp_path / "bank.pem").exists()


def test_request_problem_accepts_requests_without_alternative_names_and_rsa():
    key = rsa.generate_private_key(65537, 2048)
    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shop")])).sign(key, hashes.SHA256()))
    assert request_problem(csr, "shop") is None


def test_revoke_keeps_earlier_entries_and_refuses_another_cas_certificate(tmp_path, capsys):
    ours = write_federation_certs(tmp_path / "ours", ["A", "B"])
    theirs = write_federation_certs(tmp_path / "theirs", ["A"])
    ca_key, ca_cert = load_ca(tmp_path / "ours")
    crl_path = tmp_path / "ours" / "crl.pem"
    for role in ("A", "B"):
        assert vfl_main(["certs", "revoke", "--ca-dir", str(tmp_path / "ours"),
                         "--certificate", str(ours[role].certificate)]) == 0
    crl = load_crl(crl_path)
    assert crl.is_signature_valid(ca_cert.public_key())
    assert {entry.serial_number for entry in crl} == {load_certificate(ours[r].certificate).serial_number
                                                     for r in "AB"}
    assert vfl_main(["certs", "revoke", "--ca-dir", str(tmp_path / "ours"),
                     "--certificate", str(theirs["A"].certificate)]) == 2
    assert "was not signed by this CA" in _one_line_error(capsys)
    with pytest.raises(ConfigurationError, match="not this CA's revocation list"):
        revoke(*load_ca(tmp_path / "theirs"), load_certificate(theirs["A"].certificate), crl_path)


def test_fingerprints(tmp_path, capsys):
    files = write_federation_certs(tmp_path, ["A"])
    cert = load_certificate(files["A"].certificate)
    printed = fingerprint(cert)
    assert printed == "sha256:" + cert.fingerprint(hashes.SHA256()).hex()
    openssl_style = "SHA256:" + ":".join(printed[7:][i:i + 2] for i in range(0, 64, 2)).upper()
    assert parse_fingerprint(openssl_style) == printed
    for bad in ("sha1:abcd", printed[:-1], 42):
        with pytest.raises(ConfigurationError, match="fingerprint must be 'sha256:'"):
            parse_fingerprint(bad)
    assert vfl_main(["certs", "fingerprint", str(files["A"].certificate)]) == 0
    assert f"party A, {printed}" in capsys.readouterr().out


def test_steps_have_their_own_help(capsys):
    for step in ("request", "ca", "sign", "revoke", "fingerprint"):
        with pytest.raises(SystemExit) as exit_:
            vfl_main(["certs", step, "--help"])
        assert exit_.value.code == 0
        assert f"usage: vfl certs {step}" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        vfl_main(["certs", "sign", "--ca-dir", "x"])
    assert exit_.value.code == 2 and "--request" in capsys.readouterr().err
