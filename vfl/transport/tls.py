"""Certificates and TLS contexts for a federation: one CA, one certificate per role.

A federation has a certificate authority (CA) that signs one certificate per
role.  The role is the certificate's subject common name (CN) and also one of
its subject alternative names (``DNS:<role>``); host names and IP addresses the
party is reached at may be added beside it.  Every connection is TLS 1.3 with
certificates required on both sides, and after the handshake each side reads
the role from the peer's verified certificate (:func:`peer_role`) and compares
it with the role the peer claims.

Keys are ECDSA P-256.  Private keys are written unencrypted with permissions
``0600``: protect the folder they live in.  Roles are plain strings here; this
module knows nothing of parties or protocols.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from vfl.errors import ConfigurationError, HandshakeError, file_problem

#: Role names: a DNS label, so the role can also be a subject alternative name.
ROLE_PATTERN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z")
CA_FILE = "ca.pem"
CA_KEY_FILE = "ca.key"
DEFAULT_HOSTS = ("localhost", "127.0.0.1")


def check_role(role: str) -> str:
    """Return ``role`` if it is a valid role name, else raise :class:`ConfigurationError`."""
    if not isinstance(role, str) or not ROLE_PATTERN.match(role):
        raise ConfigurationError(f"invalid role name {role!r}: use letters, digits and '-' (a DNS label)")
    return role


@dataclass(frozen=True)
class PeerPin:
    """What one peer's certificate must be, beyond naming the peer (``[parties.NAME]`` of federation.toml).

    Parameters
    ----------
    ca : path, optional
        The CA that must have signed the peer's certificate (the peer organisation's own CA);
        ``None``: the federation CA, :attr:`TLSFiles.ca`.
    fingerprint : str, optional
        The SHA-256 fingerprint of the one certificate the peer may present (:func:`fingerprint`'s
        form); it must still be signed by the CA above.
    """

    ca: Path | None = None
    fingerprint: str | None = None


@dataclass(frozen=True)
class TLSFiles:
    """Where one party's TLS material lives, and what it expects of each peer.

    Parameters
    ----------
    ca : path
        The federation CA certificate (PEM), trusted to sign every party that no pin says otherwise of,
        this one included.
    certificate : path
        This party's certificate (PEM), signed by the CA.
    key : path
        This party's private key (PEM, unencrypted, mode 0600).
    pins : dict, optional
        ``{peer name: PeerPin}``: a peer's own CA, or its certificate's fingerprint.  A peer's certificate
        is checked, after the handshake, against what is pinned for the name it bears.
    crls : tuple of paths, optional
        Certificate revocation lists (PEM, :func:`revoke`): a peer's certificate that its CA's list names
        is refused.
    """

    ca: Path
    certificate: Path
    key: Path
    pins: dict = field(default_factory=dict, hash=False)
    crls: tuple = ()

    @classmethod
    def in_folder(cls, folder, role: str) -> "TLSFiles":
        """The file names :func:`write_federation_certs` uses for ``role``."""
        folder = Path(folder)
        return cls(folder / CA_FILE, folder / f"{role}.pem", folder / f"{role}.key")

    def ca_for(self, peer: str | None) -> Path:
        """The CA that must have signed ``peer``'s certificate: its pinned CA, else the federation's."""
        pin = self.pins.get(peer) if peer is not None else None
        return pin.ca if pin is not None and pin.ca is not None else self.ca

    def trusted(self) -> list[Path]:
        """Every CA this party's TLS contexts trust: the federation's and each pinned one, once each."""
        cas = [Path(self.ca)]
        for pin in self.pins.values():
            if pin.ca is not None and Path(pin.ca) not in cas:
                cas.append(Path(pin.ca))
        return cas


# --------------------------------------------------------------------------- certificates

def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def make_ca(name: str = "vfl federation CA", days: int = 365):
    """A new self-signed CA: ``(private_key, certificate)``."""
    key = _new_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _alt_names(role: str, hosts) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [x509.DNSName(role)]
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    unique = []
    for name in names:
        if name not in unique:
            unique.append(name)
    return unique


def make_party_cert(ca_key, ca_cert, role: str, hosts=DEFAULT_HOSTS, days: int = 365):
    """A key and certificate for ``role``, signed by the CA: ``(private_key, certificate)``.

    The role is the subject CN and a ``DNS:`` alternative name; ``hosts`` (names
    or IP addresses) are added as further alternative names.  The certificate
    may serve both ends of a connection (server and client authentication).
    """
    check_role(role)
    key = _new_key()
    return key, _party_certificate(ca_key, ca_cert, role, key.public_key(), _alt_names(role, hosts), days)


def _party_certificate(ca_key, ca_cert, role: str, public_key, alt_names, days: int) -> x509.Certificate:
    """The CA's certificate for ``role``'s ``public_key``: the extensions every party certificate carries."""
    now = _now()
    end = now + _dt.timedelta(days=days)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, role)]))
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(min(end, validity(ca_cert)[1]))     # never beyond the CA's own end
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                     key_encipherment=isinstance(public_key, rsa.RSAPublicKey),
                                     data_encipherment=False, key_agreement=isinstance(public_key, ec.EllipticCurvePublicKey),
                                     key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False),
                       critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


# ---- certificates between organisations: each makes its own key and a request; a CA signs the request

#: Elliptic curves a request's key may use (``vfl certs request`` makes P-256 keys).
ACCEPTED_CURVES = ("secp256r1", "secp384r1", "secp521r1")
#: The smallest RSA key a request may carry.
MIN_RSA_BITS = 2048
#: A pinned certificate fingerprint, as :func:`fingerprint` writes it.
FINGERPRINT_PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")
CRL_FILE = "crl.pem"


def make_request(role: str, hosts=DEFAULT_HOSTS):
    """A new private key for ``role`` and a certificate signing request for it: ``(private_key, request)``.

    The request (CSR) carries the public key, the role as CN and ``DNS:`` name, and
    ``hosts`` as further alternative names, signed with the private key; never the key itself.
    """
    check_role(role)
    key = _new_key()
    request = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, role)]))
        .add_extension(x509.SubjectAlternativeName(_alt_names(role, hosts)), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, request


def write_request(path, request: x509.CertificateSigningRequest) -> Path:
    path = Path(path)
    path.write_bytes(request.public_bytes(serialization.Encoding.PEM))
    return path


def load_request(path) -> x509.CertificateSigningRequest:
    """A certificate signing request (PEM); a :class:`ConfigurationError` saying what the file is instead."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"cannot read the request {path}: {exc.strerror or exc}") from None
    try:
        return x509.load_pem_x509_csr(data)
    except ValueError:
        pass
    if b"PRIVATE KEY-----" in data:
        what = "a private key, not a certificate signing request (a key never leaves its owner: send NAME.csr)"
    elif b"-----BEGIN CERTIFICATE-----" in data:
        what = "a certificate, not a certificate signing request (make one with vfl certs request)"
    else:
        what = "not a certificate signing request (expected PEM from vfl certs request)"
    raise ConfigurationError(f"the request {path} is {what}")


def _key_problem(public_key) -> str | None:
    """Why a request's public key is not accepted, or ``None``."""
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        if public_key.curve.name in ACCEPTED_CURVES:
            return None
        return f"its key is on the curve {public_key.curve.name}; accepted: {', '.join(ACCEPTED_CURVES)}"
    if isinstance(public_key, rsa.RSAPublicKey):
        if public_key.key_size >= MIN_RSA_BITS:
            return None
        return f"its RSA key has {public_key.key_size} bits; at least {MIN_RSA_BITS} are needed"
    return (f"its key is of a type not accepted ({type(public_key).__name__.lstrip('_')}): use ECDSA "
            f"({', '.join(ACCEPTED_CURVES)}) or RSA of {MIN_RSA_BITS} bits or more")


def request_problem(request: x509.CertificateSigningRequest, role: str) -> str | None:
    """What is wrong with ``request`` as a request for party ``role``, or ``None``: the words follow "the request ...".

    In order: its signature (made by the key it carries), its name (one CN, ``role``), its
    alternative names (DNS names and IP addresses only, ``DNS:<role>`` among them if any), its key.
    """
    if not request.is_signature_valid:
        return "has an invalid signature: it was not signed by the key it carries (altered, or damaged in transit)"
    names = [str(a.value) for a in request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if names != [role]:
        found = repr(names[0]) if len(names) == 1 else f"{len(names)} names {names}"
        return f"is for another party: it names {found} as its common name, not {role!r}"
    try:
        alt = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        alt = None
    if alt is not None:
        odd = [name for name in alt if not isinstance(name, (x509.DNSName, x509.IPAddress))]
        if odd:
            return f"asks for alternative names other than DNS names and IP addresses: {odd}"
        if role not in alt.get_values_for_type(x509.DNSName):
            return (f"does not name {role!r} among its DNS names ({alt.get_values_for_type(x509.DNSName)}): "
                    "make it with vfl certs request --party " + role)
    return _key_problem(request.public_key())


def request_alt_names(request: x509.CertificateSigningRequest, role: str) -> list[x509.GeneralName]:
    """The alternative names a checked request asks for (``DNS:<role>`` first)."""
    try:
        alt = list(request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        alt = []
    return [x509.DNSName(role), *(name for name in alt if name != x509.DNSName(role))]


def sign_request(ca_key, ca_cert, request: x509.CertificateSigningRequest, role: str,
                 days: int = 365) -> x509.Certificate:
    """The CA's certificate for ``role`` from its ``request``; a :class:`ConfigurationError` if the request is not one.

    The certificate carries the request's public key and alternative names, and the
    extensions of every party certificate (the CA decides them, not the request);
    it ends ``days`` from now, or when the CA does if sooner.
    """
    check_role(role)
    problem = request_problem(request, role)
    if problem:
        raise ConfigurationError(f"the request {problem}")
    return _party_certificate(ca_key, ca_cert, role, request.public_key(), request_alt_names(request, role), days)


def write_ca(folder, name: str = "vfl federation CA", days: int = 3650) -> tuple[Path, Path]:
    """Make a CA in ``folder``: ``ca.pem`` (its certificate) and ``ca.key`` (mode 0600); return their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key, cert = make_ca(name, days)
    return write_certificate(folder / CA_FILE, cert), write_private_key(folder / CA_KEY_FILE, key)


def load_ca(folder):
    """The CA in ``folder`` (``ca.pem`` and ``ca.key``): ``(private_key, certificate)``, or a one-line error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigurationError(f"no CA folder {folder}: make a CA with vfl certs ca --out {folder}")
    for path in (folder / CA_FILE, folder / CA_KEY_FILE):
        if not path.is_file():
            raise ConfigurationError(f"no CA in {folder}: {path} does not exist (make a CA with vfl certs ca "
                                     f"--out {folder})")
    cert, key = load_certificate(folder / CA_FILE), load_private_key(folder / CA_KEY_FILE)
    if key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) != \
            cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo):
        raise ConfigurationError(f"{folder / CA_KEY_FILE} is not the key of {folder / CA_FILE}")
    try:
        basic = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        basic = None
    if basic is None or not basic.ca:
        raise ConfigurationError(f"{folder / CA_FILE} is not a CA certificate (a party's?): make a CA with "
                                 f"vfl certs ca --out DIR")
    return key, cert


def fingerprint(cert: x509.Certificate) -> str:
    """The certificate's SHA-256 fingerprint, as federation.toml pins it: ``sha256:`` and 64 hex digits."""
    return "sha256:" + cert.fingerprint(hashes.SHA256()).hex()


def parse_fingerprint(text) -> str:
    """A pinned fingerprint in :func:`fingerprint`'s form (``sha256:``, hex, colons and case ignored), or an error."""
    value = text.strip().lower() if isinstance(text, str) else ""
    if value.startswith("sha256:"):
        value = "sha256:" + value[len("sha256:"):].replace(":", "")
    if not FINGERPRINT_PATTERN.match(value):
        raise ConfigurationError(f"fingerprint must be 'sha256:' and the certificate's 64 hex digits (vfl certs "
                                 f"fingerprint FILE.pem prints it), got {text!r}")
    return value


def load_crl(path) -> x509.CertificateRevocationList:
    try:
        return x509.load_pem_x509_crl(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the certificate revocation list {path}: "
                                 f"{getattr(exc, 'strerror', None) or exc}") from None


def revoke(ca_key, ca_cert, cert: x509.Certificate, crl_path, days: int = 365) -> x509.CertificateRevocationList:
    """Add ``cert`` to the CA's revocation list at ``crl_path`` (made if missing; earlier entries kept) and write it.

    The list is signed by the CA; its next update is ``days`` from now (vfl reads a list
    whatever its dates: an old list still names what it revoked).
    """
    if not signed_by(cert, ca_cert):
        raise ConfigurationError(f"the certificate of {certificate_role(cert)!r} was not signed by this CA, "
                                 f"{ca_name(ca_cert)}, but by {issuer_name(cert)}: only its own CA can revoke it")
    crl_path = Path(crl_path)
    entries = []
    if crl_path.exists():
        old = load_crl(crl_path)
        if old.issuer != ca_cert.subject or not old.is_signature_valid(ca_cert.public_key()):
            raise ConfigurationError(f"{crl_path} is not this CA's revocation list ({ca_name(ca_cert)})")
        entries = list(old)
    now = _now()
    builder = (x509.CertificateRevocationListBuilder().issuer_name(ca_cert.subject)
               .last_update(now - _dt.timedelta(minutes=5)).next_update(now + _dt.timedelta(days=days)))
    for entry in entries:
        if entry.serial_number != cert.serial_number:
            builder = builder.add_revoked_certificate(entry)
    builder = builder.add_revoked_certificate(
        x509.RevokedCertificateBuilder().serial_number(cert.serial_number).revocation_date(now).build())
    crl = builder.sign(ca_key, hashes.SHA256())
    crl_path.write_bytes(crl.public_bytes(serialization.Encoding.PEM))
    return crl


def write_private_key(path, key) -> Path:
    """Write ``key`` as unencrypted PEM, readable by its owner only (mode 0600)."""
    path = Path(path)
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode under O_CREAT; force it
        os.write(fd, data)
    finally:
        os.close(fd)
    return path


def write_certificate(path, cert) -> Path:
    path = Path(path)
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def load_certificate(path) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the certificate {path}: {exc}") from None


def load_private_key(path):
    try:
        return serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"cannot read the private key {path}: {exc}") from None


def write_federation_certs(folder, roles, hosts=DEFAULT_HOSTS, days: int = 365,
                           ca_name: str = "vfl federation CA") -> dict[str, TLSFiles]:
    """Make a CA and one key + certificate per role in ``folder``.

    Writes ``ca.pem``, ``ca.key`` (keep it offline: it can sign new parties),
    and ``<role>.pem`` / ``<role>.key`` per role; keys get mode 0600.  Returns
    each role's :class:`TLSFiles`.  ``hosts`` is either a list applied to every
    role or a dict ``{role: [hosts]}``.
    """
    roles = [check_role(r) for r in roles]
    if len({r.lower() for r in roles}) != len(roles):
        raise ConfigurationError(f"roles must be distinct, even ignoring case (DNS names and some file systems "
                                 f"ignore it), got {roles}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = make_ca(ca_name, days)
    write_private_key(folder / CA_KEY_FILE, ca_key)
    write_certificate(folder / CA_FILE, ca_cert)
    files = {}
    for role in roles:
        role_hosts = hosts.get(role, DEFAULT_HOSTS) if isinstance(hosts, dict) else hosts
        key, cert = make_party_cert(ca_key, ca_cert, role, role_hosts, days)
        tls = TLSFiles.in_folder(folder, role)
        write_private_key(tls.key, key)
        write_certificate(tls.certificate, cert)
        files[role] = tls
    return files


def certificate_role(cert: x509.Certificate) -> str | None:
    """The role a certificate names (its CN), or ``None``."""
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else None


def certificate_dns_names(cert: x509.Certificate) -> list[str]:
    """The ``DNS:`` alternative names a certificate holds (a vfl certificate: its role, and host names)."""
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(n) for n in names.get_values_for_type(x509.DNSName)]


def name_mismatch(cn, dns_names) -> str:
    """A certificate whose subject name (CN) is not among its DNS names, in words: a name mismatch."""
    return (f"a certificate name mismatch: its subject name (CN) is {cn!r} but its DNS names are "
            f"{sorted(dns_names)}; a vfl certificate holds its party's name in both (vfl certs makes such)")


def _key_id(cert: x509.Certificate, extension, attribute: str) -> str | None:
    try:
        value = getattr(cert.extensions.get_extension_for_class(extension).value, attribute)
    except x509.ExtensionNotFound:
        return None
    return value.hex()[:16] if value else None


def ca_name(cert: x509.Certificate) -> str:
    """A CA certificate in words: its name (subject CN) and key id, e.g. ``'vfl federation CA' (key id 3f2a...)``."""
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    key = _key_id(cert, x509.SubjectKeyIdentifier, "digest")
    return f"{str(names[0].value) if names else cert.subject.rfc4514_string()!r}" + (f" (key id {key})" if key else "")


def issuer_name(cert: x509.Certificate) -> str:
    """The CA a certificate names as its signer, in the words of :func:`ca_name`."""
    names = cert.issuer.get_attributes_for_oid(NameOID.COMMON_NAME)
    key = _key_id(cert, x509.AuthorityKeyIdentifier, "key_identifier")
    return f"{str(names[0].value) if names else cert.issuer.rfc4514_string()!r}" + (f" (key id {key})" if key else "")


def der_issuer_name(der: bytes) -> str | None:
    """The CA a DER certificate (as a peer sent it) names as its signer, or ``None`` if it does not parse."""
    try:
        return issuer_name(x509.load_der_x509_certificate(der))
    except ValueError:
        return None


def der_certificate(der: bytes) -> x509.Certificate | None:
    """A DER certificate (as a peer sent it), or ``None`` if it does not parse."""
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError:
        return None


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether ``ca`` signed ``cert`` (names and signature; dates and extensions are TLS's business)."""
    try:
        cert.verify_directly_issued_by(ca)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def validity(cert: x509.Certificate) -> tuple[_dt.datetime, _dt.datetime]:
    """When a certificate starts and stops being valid (UTC)."""
    start = getattr(cert, "not_valid_before_utc", None) or cert.not_valid_before.replace(tzinfo=_dt.timezone.utc)
    end = getattr(cert, "not_valid_after_utc", None) or cert.not_valid_after.replace(tzinfo=_dt.timezone.utc)
    return start, end


def _when(moment: _dt.datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def certificate_problem(cert: x509.Certificate, ca: x509.Certificate | None = None, role: str | None = None,
                        now: _dt.datetime | None = None) -> str | None:
    """What is wrong with a certificate, read from it, or ``None``: the words follow "the certificate ...".

    In order: not yet valid or expired (with its dates and this machine's time),
    naming another role than ``role`` (expected and found), signed by another CA
    than ``ca``.  Used to say why a TLS handshake failed, instead of guessing.
    """
    now = now or _now()
    start, end = validity(cert)
    if now < start:
        return (f"is not yet valid: it is valid from {_when(start)} to {_when(end)}, and it is {_when(now)} on "
                "this machine's clock")
    if now > end:
        return f"expired on {_when(end)} (valid from {_when(start)}; it is {_when(now)} on this machine's clock)"
    found = certificate_role(cert)
    if role is not None and found != role:
        return f"names the wrong party, a name mismatch: expected the name {role!r}, the certificate holds {found!r}"
    if found is not None and found not in certificate_dns_names(cert):
        return f"has {name_mismatch(found, certificate_dns_names(cert))}"
    if ca is not None and not signed_by(cert, ca):
        return f"is signed by another CA, {issuer_name(cert)}, not by {ca_name(ca)}"
    return None


def foreign_ca_advice(files: "TLSFiles", peer: str | None = None) -> str:
    """What to do about certificates of two CAs: the same ``ca.pem`` everywhere, and certificates it signed.

    With ``peer`` pinned to its own CA, the advice names that CA instead.
    """
    ca = files.ca_for(peer)
    if ca != files.ca:
        return (f"this party trusts for {peer} only the CA pinned for it, {ca} ({ca_name(load_certificate(ca))}): "
                f"{peer} needs a certificate signed by it, or [parties.{peer}] ca names another CA file")
    return (f"this party trusts only the CA of {files.ca}, {ca_name(load_certificate(files.ca))}; give every party "
            "the same ca.pem and certificates signed by it (vfl certs makes a new CA at each run)")


# --------------------------------------------------------------------------- pins and revocations

def check_crls(files: "TLSFiles") -> list[tuple[Path, x509.CertificateRevocationList, x509.Certificate]]:
    """Every revocation list of ``files``, each with the trusted CA that signed it; a one-line error otherwise."""
    cas = [load_certificate(path) for path in files.trusted()]
    checked = []
    for path in files.crls:
        crl = load_crl(path)
        signer = next((ca for ca in cas if crl.issuer == ca.subject and crl.is_signature_valid(ca.public_key())),
                      None)
        if signer is None:
            raise ConfigurationError(f"the certificate revocation list {path} is not signed by a CA this party "
                                     f"trusts ({', '.join(ca_name(ca) for ca in cas)}): it names "
                                     f"{crl.issuer.rfc4514_string()}")
        checked.append((Path(path), crl, signer))
    return checked


def revocation(cert: x509.Certificate, files: "TLSFiles", ca: x509.Certificate) -> str | None:
    """Whether a revocation list of ``files`` signed by ``ca`` (the certificate's CA) names ``cert``: where and when."""
    for path, crl, signer in check_crls(files):
        if signer.public_key() != ca.public_key():
            continue
        entry = crl.get_revoked_certificate_by_serial_number(cert.serial_number)
        if entry is not None:
            when = getattr(entry, "revocation_date_utc", None) or entry.revocation_date
            return f"{path} lists it, revoked on {when:%Y-%m-%d %H:%M} UTC"
    return None


def pin_problem(cert: x509.Certificate, role: str, files: "TLSFiles") -> str | None:
    """What is wrong with ``cert``, checked as party ``role``'s against what ``files`` pins for it, or ``None``.

    In order: signed by the CA expected for ``role`` (its pinned CA, else the federation's: a
    context trusts every pinned CA, so one party's CA must not vouch for another party), the
    pinned fingerprint, and the revocation lists.  The words name the party and what was expected.
    """
    path = files.ca_for(role)
    ca = load_certificate(path)
    pin = files.pins.get(role) or PeerPin()
    whose = f"the CA pinned for {role}" if pin.ca is not None else "the federation's CA"
    if not signed_by(cert, ca):
        return (f"party {role}'s certificate is signed by {issuer_name(cert)}, not by {whose}, {ca_name(ca)} "
                f"({path})")
    found = fingerprint(cert)
    if pin.fingerprint is not None and found != pin.fingerprint:
        return (f"party {role}'s certificate is not the one pinned for {role}: expected {pin.fingerprint}, found "
                f"{found} (a replaced certificate, or another one of {role}'s; if {role} renewed it, put the new "
                f"fingerprint in [parties.{role}])")
    revoked = revocation(cert, files, ca)
    if revoked:
        return f"party {role}'s certificate (serial {cert.serial_number:#x}, {found}) is revoked: {revoked}"
    return None


def peer_pin_problem(sock: ssl.SSLSocket, role: str, files: "TLSFiles") -> str | None:
    """:func:`pin_problem` of the verified certificate ``sock``'s peer presented, as party ``role``'s."""
    cert = der_certificate(sock.getpeercert(binary_form=True) or b"")
    if cert is None:
        return f"party {role}'s certificate does not parse"
    return pin_problem(cert, role, files)


# --------------------------------------------------------------------------- TLS contexts

def _context(purpose: int, files: TLSFiles) -> ssl.SSLContext:
    ctx = ssl.SSLContext(purpose)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if purpose == ssl.PROTOCOL_TLS_CLIENT:
        # The role, not the host name, identifies a peer: checked by peer_role() after the handshake.
        ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    for what, path in (("CA certificate", files.ca), ("certificate", files.certificate), ("key", files.key),
                       *((f"CA certificate of {peer}", pin.ca) for peer, pin in files.pins.items()
                         if pin.ca is not None),
                       *(("certificate revocation list", crl) for crl in files.crls)):
        if path is None:
            continue
        problem = file_problem(path)
        if problem:
            raise ConfigurationError(f"the {what} file {path} {problem}")
    check_crls(files)
    try:
        for ca in files.trusted():     # the peers' own CAs too; which CA may sign whom: check_peer after
            ctx.load_verify_locations(cafile=str(ca))
        ctx.load_cert_chain(certfile=str(files.certificate), keyfile=str(files.key))
    except (ssl.SSLError, OSError) as exc:
        raise ConfigurationError(f"cannot load the TLS files {files}: {exc}") from None
    return ctx


def server_context(files: TLSFiles) -> ssl.SSLContext:
    """Context for the listening end: TLS 1.3, a CA-signed client certificate required."""
    return _context(ssl.PROTOCOL_TLS_SERVER, files)


def probe_context(files: TLSFiles) -> ssl.SSLContext:
    """A context that reads a peer's certificate without trusting it: only to say which CA signed it.

    Used after a handshake failed verification, to name the peer's CA in the error;
    nothing is ever sent on such a connection.
    """
    ctx = client_context(files)
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def client_context(files: TLSFiles) -> ssl.SSLContext:
    """Context for the dialling end: TLS 1.3, a CA-signed server certificate required."""
    return _context(ssl.PROTOCOL_TLS_CLIENT, files)


def peer_role(sock: ssl.SSLSocket) -> str:
    """The role named by the peer's verified certificate (CN, also a ``DNS:`` alt name).

    Raises
    ------
    HandshakeError
        If the peer sent no certificate or it does not name a role consistently.
    """
    cert = sock.getpeercert()
    if not cert:
        raise HandshakeError("the peer presented no verified certificate")
    cns = [value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"]
    dns = {value for key, value in cert.get("subjectAltName", ()) if key == "DNS"}
    if len(cns) == 1 and ROLE_PATTERN.match(cns[0]) and cns[0] not in dns:
        raise HandshakeError(f"the peer's certificate has {name_mismatch(cns[0], dns)}")
    if len(cns) != 1 or not ROLE_PATTERN.match(cns[0]):
        raise HandshakeError(f"the peer's certificate does not name a party (CN {cns}, DNS names {sorted(dns)})")
    return cns[0]
