"""A party's signed consent to one export of one model, and its checks.

A consent is a JSON object::

    {"consent": {"format": "vfl-export-consent/1", "party", "run", "family", "fingerprint", "shard_sha256",
                 "export_format", "recipient", "signed_at"},
     "signature": base64, "certificate": PEM, "shard": {...} (whole-model formats only)}

``consent`` is what the party signs, as canonical JSON (keys sorted, no spaces), with the private key of its
``[parties.NAME]`` table: ECDSA P-256 with SHA-256 for an EC key (``vfl certs`` makes those), RSA-PSS with
SHA-256 for an RSA key.  ``fingerprint`` is the shards' ``trained_with`` (the training settings' fingerprint,
then ``/`` and the run's id, which is ``run``); ``shard_sha256`` is :func:`shard_digest` of the party's own
shard.  A consent to a whole-model format carries that shard: handing the consent over hands over the party's
part of the model (its thresholds, its weights).  A consent to the split export carries no shard.

:func:`verify` is the one check of a consent, for the estimators and ``vfl export`` alike.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from vfl.errors import ConfigurationError, DataError
from vfl.transport.tls import TLSFiles, certificate_role, pin_problem, validity

#: The format tag of a consent.
FORMAT = "vfl-export-consent/1"
#: The fields a consent signs, in the order the docs give them.
FIELDS = ("format", "party", "run", "family", "fingerprint", "shard_sha256", "export_format", "recipient",
          "signed_at")

#: RSA keys sign with PSS: MGF1 and SHA-256, a salt as long as the digest.
_PSS = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.DIGEST_LENGTH)


def canonical(obj) -> bytes:
    """``obj`` as canonical JSON bytes: keys sorted, no spaces, no NaN (a shard's arrays as the lists its file
    holds: a split network's reader gives its layers as arrays)."""
    return json.dumps(plain(obj), sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def plain(obj):
    """``obj`` as JSON's types: numpy arrays and numbers as lists and numbers, an object its reader made (a
    network's scaler) as its ``to_dict()`` (a shard as its file holds it, give or take what the reader adds)."""
    if hasattr(obj, "to_dict") and not isinstance(obj, dict):
        return plain(obj.to_dict())
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if hasattr(obj, "tolist"):
        return plain(obj.tolist())
    return obj


def shard_digest(shard: dict) -> str:
    """The SHA-256 (hex) of a shard's canonical JSON: what a consent binds."""
    return hashlib.sha256(canonical(shard)).hexdigest()


def run_of(fingerprint: str) -> str:
    """The run's id in a shard's ``trained_with`` (what follows its last ``/``)."""
    return fingerprint.rpartition("/")[2]


def sign(shard: dict, *, family: str, export_format: str, recipient: str, key, certificate,
         carry_shard: bool, now: _dt.datetime | None = None) -> dict:
    """Party ``shard["party"]``'s consent to export the model of ``shard`` as ``export_format`` to ``recipient``.

    Parameters
    ----------
    shard : dict
        The party's own checked shard (``read_shard``'s result).
    family, export_format, recipient : str
    key : private key
        The party's federation key (EC or RSA, ``cryptography``'s object).
    certificate : x509.Certificate
        Its certificate, naming the party.
    carry_shard : bool
        Put the shard in the consent (whole-model formats).

    Raises
    ------
    ConfigurationError
        A key that is not the certificate's, or of another kind than EC or RSA.
    """
    party = shard["party"]
    if certificate.public_key().public_bytes(serialization.Encoding.DER,
                                             serialization.PublicFormat.SubjectPublicKeyInfo) != \
            key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo):
        raise ConfigurationError(f"party {party}: the private key is not the one of its certificate; sign with the "
                                 f"key of [parties.{party}]")
    when = (now or _dt.datetime.now(_dt.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {"format": FORMAT, "party": party, "run": run_of(shard["trained_with"]), "family": family,
            "fingerprint": shard["trained_with"], "shard_sha256": shard_digest(shard),
            "export_format": export_format, "recipient": recipient, "signed_at": when}
    consent = {"consent": body, "signature": base64.b64encode(_sign(key, canonical(body), party)).decode(),
               "certificate": certificate.public_bytes(serialization.Encoding.PEM).decode()}
    if carry_shard:
        consent["shard"] = plain(shard)
    return consent


def _sign(key, data: bytes, party: str) -> bytes:
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.sign(data, ec.ECDSA(hashes.SHA256()))
    if isinstance(key, rsa.RSAPrivateKey):
        return key.sign(data, _PSS, hashes.SHA256())
    raise ConfigurationError(f"party {party}: a consent is signed with an EC or RSA key, not a "
                             f"{type(key).__name__}")


def verify(consent, *, party: str, family: str, fingerprint: str, export_format: str, recipient: str,
           trust: TLSFiles, shard: dict | None = None) -> dict | None:
    """Check party ``party``'s consent to this export; return the shard it carries (None for the split export).

    In order: its form, the party it names, its certificate (issued for ``party`` by the CA ``trust`` holds for
    ``party``: its pinned CA or the federation's; its pinned fingerprint; not revoked), the signature, the
    certificate valid when the consent was signed (it may have expired since), then the run, the model's
    fingerprint, the family, the format and the recipient, and the shard: the one it carries (whole-model
    formats) and ``shard`` (the party's shard, when the verifier holds it) must hash to the signed digest.

    Raises
    ------
    DataError
        Naming the party and what does not hold.
    """
    body = _body(consent, party)
    cert = _certificate(consent, party)
    found = certificate_role(cert)
    if found != party:
        raise DataError(f"party {party}'s consent is signed by a certificate not issued for {party} (it names "
                        f"{found!r})")
    problem = pin_problem(cert, party, trust)
    if problem:
        raise DataError(f"party {party}'s consent is signed by a certificate not issued for {party}: {problem}")
    try:
        signature = base64.b64decode(consent.get("signature") or "", validate=True)
        public = cert.public_key()
        if isinstance(public, ec.EllipticCurvePublicKey):
            public.verify(signature, canonical(body), ec.ECDSA(hashes.SHA256()))
        elif isinstance(public, rsa.RSAPublicKey):
            public.verify(signature, canonical(body), _PSS, hashes.SHA256())
        else:
            raise InvalidSignature
    except (InvalidSignature, ValueError, TypeError):
        raise DataError(f"party {party}'s consent does not hold: its signature is not {party}'s signature of what "
                        "it says (altered after signing, or signed with another key)") from None
    start, end = validity(cert)
    signed_at = _signed_at(body, party)
    if not start <= signed_at <= end:
        raise DataError(f"party {party}'s consent was signed at {body['signed_at']}, when its certificate was not "
                        f"valid (from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC)")
    if body["run"] != run_of(fingerprint):
        raise DataError(f"party {party}'s consent is a consent for another run ({body['run']}), not for this "
                        f"model's run ({run_of(fingerprint)})")
    if body["fingerprint"] != fingerprint:
        raise DataError(f"party {party}'s consent is for another model ({body['fingerprint']}), not this one "
                        f"({fingerprint})")
    for field, wanted, what in (("family", family, "family"), ("export_format", export_format, "format"),
                                ("recipient", recipient, "recipient")):
        if body[field] != wanted:
            raise DataError(f"{party}'s consent is for {what} {body[field]}, not {wanted}")
    carried = consent.get("shard")
    if export_format == "split" and carried is not None:
        raise DataError(f"party {party}'s consent to the split export carries a shard; it must not")
    for held, whose in ((carried, "the shard its consent carries"), (shard, "the shard handed over")):
        if held is not None and shard_digest(held) != body["shard_sha256"]:
            raise DataError(f"party {party}: {whose} is not the shard it signed (its SHA-256 differs: tampered, or "
                            "another shard)")
    if export_format != "split" and carried is None and shard is None:
        raise DataError(f"party {party}'s consent to {export_format} carries no shard; sign it again (vfl export "
                        "consent) for a whole-model format")
    return carried


def _body(consent, party: str) -> dict:
    if not isinstance(consent, dict) or not isinstance(consent.get("consent"), dict):
        raise DataError(f"party {party}'s consent is not a consent (no 'consent' object)")
    body = consent["consent"]
    if body.get("format") != FORMAT:
        raise DataError(f"party {party}'s consent has the format {body.get('format')!r}, not {FORMAT}")
    if set(body) != set(FIELDS) or not all(isinstance(body[f], str) for f in FIELDS):
        raise DataError(f"party {party}'s consent must hold exactly the fields {list(FIELDS)}, as strings")
    if body["party"] != party:
        raise DataError(f"the consent given for party {party} is party {body['party']}'s")
    return body


def _certificate(consent: dict, party: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(str(consent.get("certificate") or "").encode())
    except ValueError:
        raise DataError(f"party {party}'s consent holds no readable certificate") from None


def _signed_at(body: dict, party: str) -> _dt.datetime:
    try:
        return _dt.datetime.strptime(body["signed_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.timezone.utc)
    except ValueError:
        raise DataError(f"party {party}'s consent: signed_at {body['signed_at']!r} is not a UTC time "
                        "(YYYY-MM-DDTHH:MM:SSZ)") from None


def party_of(consent) -> str | None:
    """The party a consent names (unchecked: :func:`verify` checks it), or None."""
    body = consent.get("consent") if isinstance(consent, dict) else None
    return body.get("party") if isinstance(body, dict) and isinstance(body.get("party"), str) else None
