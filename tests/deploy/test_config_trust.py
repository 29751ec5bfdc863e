"""federation.toml's trust: each party's own CA, pinned fingerprints, revocation lists (and the single CA as before)."""

import pytest

from vfl.deploy.config import load_config, write_config
from vfl.deploy.session import check_own_certificate
from vfl.errors import ConfigurationError
from vfl.transport.tls import (PeerPin, TLSFiles, fingerprint, load_ca, load_certificate, make_request, revoke,
                               sign_request, write_ca, write_certificate, write_federation_certs, write_private_key)

NAMES = {"bank": "label", "telco": "feature", "C": "coordinator"}
TRAINING = {"model": "logistic", "key_bits": 1024, "insecure": True}


def parties(**extra):
    table = {name: {"role": role, "address": f"127.0.0.1:{7300 + i}", "certificate": f"certs/{name}.pem",
                    "key": f"certs/{name}.key"} for i, (name, role) in enumerate(NAMES.items())}
    for name, options in extra.items():
        table[name].update(options)
    return table


def test_the_single_federation_ca_as_before(tmp_path):
    config = load_config(write_config(tmp_path / "f.toml", "certs/ca.pem", parties(), TRAINING))
    assert config.tls("bank") == TLSFiles(tmp_path / "certs/ca.pem", tmp_path / "certs/bank.pem",
                                          tmp_path / "certs/bank.key")
    assert config.tls("bank").pins == {} and config.crls == ()


def test_each_party_its_own_ca_and_pins(tmp_path):
    fp = "SHA256:" + ":".join(["AB"] * 32)
    config = load_config(write_config(
        tmp_path / "f.toml", None, parties(bank={"ca": "cas/bank.pem", "crl": "cas/bank-crl.pem"},
                                           telco={"ca": "cas/telco.pem", "fingerprint": fp}, C={"ca": "cas/C.pem"}),
        TRAINING, crl=["a.pem", "b.pem"]))
    assert config.ca is None
    tls = config.tls("telco")
    assert tls.ca == tmp_path / "cas/telco.pem"          # its own CA
    assert tls.pins == {"bank": PeerPin(tmp_path / "cas/bank.pem"),
                        "telco": PeerPin(tmp_path / "cas/telco.pem", "sha256:" + "ab" * 32),
                        "C": PeerPin(tmp_path / "cas/C.pem")}
    assert tls.crls == (tmp_path / "a.pem", tmp_path / "b.pem", tmp_path / "cas/bank-crl.pem")
    assert tls.ca_for("bank") == tmp_path / "cas/bank.pem"
    # what a party trusts is local: it is not part of the settings fingerprint
    plain = load_config(write_config(tmp_path / "g.toml", "ca.pem", parties(), TRAINING))
    assert config.fingerprint("train") == plain.fingerprint("train")


@pytest.mark.parametrize("federation_ca, extra, crl, expected", [
    (None, {"bank": {"ca": "b.pem"}}, None, r"no CA for \[parties.C\], \[parties.telco\]: give \[federation\] ca"),
    ("ca.pem", {"telco": {"fingerprint": "sha1:12"}}, None,
     r"\[parties.telco\]: fingerprint must be 'sha256:' and the certificate's 64 hex digits"),
    ("ca.pem", {"telco": {"ca": ""}}, None, r"\[parties.telco\]: ca must be a file path, got ''"),
    ("ca.pem", {"telco": {"pin": "x"}}, None, r"unknown key\(s\) \['pin'\]"),
    ("ca.pem", {}, 5, r"\[federation\]: crl must be a file path, got 5"),
])
def test_bad_trust_keys(tmp_path, federation_ca, extra, crl, expected):
    with pytest.raises(ConfigurationError, match=expected):
        load_config(write_config(tmp_path / "f.toml", federation_ca, parties(**extra), TRAINING, crl=crl))


def test_a_party_learns_before_connecting_that_its_own_certificate_is_revoked_or_not_the_pinned_one(tmp_path):
    files = write_federation_certs(tmp_path / "certs", list(NAMES))
    ok = load_config(write_config(tmp_path / "ok.toml", "certs/ca.pem", parties(), TRAINING))
    check_own_certificate(ok, "telco")
    other = fingerprint(load_certificate(files["bank"].certificate))
    pinned = load_config(write_config(tmp_path / "p.toml", "certs/ca.pem", parties(telco={"fingerprint": other}),
                                      TRAINING))
    with pytest.raises(ConfigurationError, match=f"party telco: the certificate .*telco.pem: party telco's "
                                                 f"certificate is not the one pinned for telco: expected {other}"):
        check_own_certificate(pinned, "telco")
    revoke(*load_ca(tmp_path / "certs"), load_certificate(files["telco"].certificate), tmp_path / "certs" / "crl.pem")
    revoked = load_config(write_config(tmp_path / "r.toml", "certs/ca.pem", parties(), TRAINING, crl="certs/crl.pem"))
    with pytest.raises(ConfigurationError, match="party telco's certificate .* is revoked: .*crl.pem lists it"):
        check_own_certificate(revoked, "telco")
    check_own_certificate(revoked, "bank")


def test_own_ca_checked_before_connecting(tmp_path):
    write_ca(tmp_path / "bank-ca", "bank CA")
    write_ca(tmp_path / "telco-ca", "telco CA")
    (tmp_path / "certs").mkdir()
    key, request = make_request("telco")
    write_private_key(tmp_path / "certs" / "telco.key", key)
    write_certificate(tmp_path / "certs" / "telco.pem", sign_request(*load_ca(tmp_path / "bank-ca"), request, "telco"))
    config = load_config(write_config(tmp_path / "f.toml", None, parties(
        bank={"ca": "bank-ca/ca.pem"}, telco={"ca": "telco-ca/ca.pem"}, C={"ca": "bank-ca/ca.pem"}), TRAINING))
    with pytest.raises(ConfigurationError, match="is signed by the CA 'bank CA'.*not by the CA pinned for telco "
                                                 ".*telco-ca/ca.pem, 'telco CA'"):
        check_own_certificate(config, "telco")
