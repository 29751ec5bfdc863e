"""Consents: signed with the party's federation key, checked once for every face; every refusal names the party and
what is wrong, and writes nothing."""

import copy
import json

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from sklearn.base import clone

from tree_data import make_tree_data, opted_in
from vfl import ConfigurationError, DataError
from vfl.ensemble import VerticalGradientBoostingClassifier
from vfl.export import EXPORTERS, exporter, formats
from vfl.export.consent import shard_digest
from vfl.transport.tls import (load_ca, load_certificate, sign_request, write_certificate, write_federation_certs,
                               write_private_key)

PARTIES = ("A", "B", "C")
FAST = dict(key_bits=1024, insecure=True, early_stopping=False, min_samples_leaf=5)


@pytest.fixture(scope="module")
def fitted():
    data, _ = make_tree_data(200, parties=PARTIES, seed=7)
    return VerticalGradientBoostingClassifier(max_iter=3, **FAST, **opted_in(data)).fit(data), data


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return write_federation_certs(tmp_path_factory.mktemp("certs"), PARTIES)


def _consent(model, certs, party, fmt="xgboost-json", **kw):
    return model.consent(party, key=certs[party].key, certificate=certs[party].certificate, format=fmt, **kw)


def _refused(model, certs, tmp_path, consents, error, match, fmt="xgboost-json", **kw):
    out = tmp_path / "out" / "model.json"
    with pytest.raises(error, match=match):
        model.export(out, format=fmt, consents=consents, ca=kw.pop("ca", certs["C"].ca), **kw)
    assert not out.exists() and not (out.parent.exists() and any(out.parent.iterdir()))   # nothing, no temp file


def test_every_party_consents_and_the_model_is_written(fitted, certs, tmp_path):
    model, _ = fitted
    out = model.export(tmp_path / "model.json", "xgboost-json", [_consent(model, certs, p) for p in ("A", "B")],
                       ca=certs["C"].ca)
    assert json.loads(out.read_text())["learner"]["objective"]["name"] == "binary:logistic"
    assert formats("trees") == ["xgboost-json", "onnx", "split"]


def test_a_whole_model_consent_carries_the_shard_and_a_split_one_does_not(fitted, certs):
    model, _ = fitted
    whole, split = _consent(model, certs, "A"), _consent(model, certs, "A", "split")
    assert whole["shard"] == model._shards()["A"] and "shard" not in split
    body = whole["consent"]
    assert body["format"] == "vfl-export-consent/1" and body["party"] == "A" and body["recipient"] == "C"
    assert body["shard_sha256"] == shard_digest(model._shards()["A"]) and body["family"] == "trees"
    assert body["fingerprint"].endswith("/" + body["run"])


def test_a_missing_consent_is_refused(fitted, certs, tmp_path):
    model, _ = fitted
    _refused(model, certs, tmp_path, [_consent(model, certs, "A")], DataError, "party B has not signed")


def test_a_consent_signed_by_another_partys_certificate_is_refused(fitted, certs, tmp_path):
    model, _ = fitted
    forged = _consent(model, certs, "A")
    other = _consent(model, certs, "B")
    forged["signature"], forged["certificate"] = other["signature"], other["certificate"]
    _refused(model, certs, tmp_path, [forged, other], DataError, "signed by a certificate not issued for A")


def test_a_key_that_is_not_the_certificates_cannot_sign(fitted, certs):
    model, _ = fitted
    with pytest.raises(ConfigurationError, match="party A: the private key is not the one of its certificate"):
        model.consent("A", key=certs["B"].key, certificate=certs["A"].certificate, format="onnx")


def test_a_certificate_of_another_ca_is_refused(fitted, certs, tmp_path):
    model, _ = fitted
    strangers = write_federation_certs(tmp_path / "strangers", PARTIES)
    consents = [_consent(model, strangers, "A"), _consent(model, certs, "B")]
    _refused(model, certs, tmp_path, consents, DataError, r"signed by a certificate not issued for A: .*not by the "
             "federation's CA")


def test_an_altered_consent_does_not_hold(fitted, certs, tmp_path):
    model, _ = fitted
    altered = _consent(model, certs, "A")
    altered["consent"]["signed_at"] = "2030-01-01T00:00:00Z"
    _refused(model, certs, tmp_path, [altered, _consent(model, certs, "B")], DataError,
             "party A's consent does not hold: its signature is not A's")


def test_a_consent_for_another_run_is_refused(fitted, certs, tmp_path):
    model, data = fitted
    again = clone(model).fit(data)                   # the same settings and rows: another run
    _refused(model, certs, tmp_path, [_consent(again, certs, "A"), _consent(model, certs, "B")], DataError,
             "party A's consent is a consent for another run")


def test_a_consent_for_another_format_is_refused(fitted, certs, tmp_path):
    model, _ = fitted
    _refused(model, certs, tmp_path, [_consent(model, certs, "A", "onnx"), _consent(model, certs, "B")], DataError,
             "A's consent is for format onnx, not xgboost-json")


def test_a_consent_for_another_recipient_is_refused(fitted, certs, tmp_path):
    model, _ = fitted
    _refused(model, certs, tmp_path, [_consent(model, certs, "A", to="B"), _consent(model, certs, "B")], DataError,
             "A's consent is for recipient B, not C")


def test_a_tampered_shard_is_refused(fitted, certs, tmp_path):
    model, _ = fitted
    tampered = _consent(model, certs, "A")
    tampered["shard"] = copy.deepcopy(tampered["shard"])
    tampered["shard"]["binning"]["thresholds"][0][0] += 0.5
    _refused(model, certs, tmp_path, [tampered, _consent(model, certs, "B")], DataError,
             "party A: the shard its consent carries is not the shard it signed")


def test_an_unsupported_format_or_family_is_refused(fitted, certs, tmp_path, monkeypatch):
    model, _ = fitted
    consents = [_consent(model, certs, p) for p in ("A", "B")]
    _refused(model, certs, tmp_path, consents, ConfigurationError,
             r"does not export to 'pmml'; it exports to \['xgboost-json', 'onnx', 'split'\]", fmt="pmml")
    with pytest.raises(ConfigurationError, match="does not export to 'pmml'"):
        _consent(model, certs, "A", "pmml")
    monkeypatch.delitem(EXPORTERS, "trees")
    _refused(model, certs, tmp_path, consents, ConfigurationError, "the trees family has no export yet")
    with pytest.raises(ConfigurationError, match="the nonesuch family has no export yet; the families that export"):
        exporter("nonesuch")


def test_consents_by_strangers_or_twice_are_refused(fitted, certs, tmp_path):
    model, _ = fitted
    a, b = _consent(model, certs, "A"), _consent(model, certs, "B")
    stranger = copy.deepcopy(a)
    stranger["consent"]["party"] = "D"
    _refused(model, certs, tmp_path, [a, b, stranger], DataError, "a consent by 'D', which is not a data party")
    _refused(model, certs, tmp_path, [a, b, a], DataError, "two consents by party A")


def test_an_rsa_key_signs_with_pss(fitted, certs, tmp_path):
    """A party whose organisation issued it an RSA key (accepted by vfl certs sign) signs with RSA-PSS."""
    model, _ = fitted
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    request = (x509.CertificateSigningRequestBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "A")]))
               .add_extension(x509.SubjectAlternativeName([x509.DNSName("A")]), critical=False)
               .sign(key, hashes.SHA256()))
    ca_key, ca_cert = load_ca(certs["C"].ca.parent)
    cert = sign_request(ca_key, ca_cert, request, "A")
    consent = model.consent("A", key=write_private_key(tmp_path / "a.key", key),
                            certificate=write_certificate(tmp_path / "a.pem", cert), format="xgboost-json")
    assert load_certificate(tmp_path / "a.pem").public_key().key_size == 2048
    out = model.export(tmp_path / "model.json", "xgboost-json", [consent, _consent(model, certs, "B")],
                       ca=certs["C"].ca)
    assert out.exists()


def test_the_split_export_needs_the_feature_parties_consents_and_its_parts_their_shards(fitted, certs, tmp_path):
    from vfl.export import trees as exported

    model, data = fitted
    _refused(model, certs, tmp_path, [_consent(model, certs, "A", "split")], DataError, "party B has not signed",
             fmt="split")
    _refused(model, certs, tmp_path, [_consent(model, certs, "A"), _consent(model, certs, "B", "split")], DataError,
             "A's consent is for format xgboost-json, not split", fmt="split")
    folder = model.export(tmp_path / "split", format="split", ca=certs["C"].ca,
                          consents=[_consent(model, certs, p, "split") for p in ("A", "B")])
    parts = {p: json.loads((folder / f"{p}.json").read_text()) for p in PARTIES}
    combiner = json.loads((folder / "combiner.json").read_text())
    assert set(combiner["consented"]) == {"A", "B"}
    answers = {p: exported.part_leaves(parts[p], data.features(p)) for p in PARTIES}
    parts["A"]["shard_sha256"] = "0" * 64                     # a part made from another shard
    with pytest.raises(DataError, match="party A's part was not made from the shard the combiner was made with"):
        exported.combine(combiner, parts, answers)
    with pytest.raises(ConfigurationError, match="the split export's combiner goes to the label party"):
        _consent(model, certs, "A", "split", to="B")


def test_export_before_a_fit_is_refused(certs, tmp_path):
    from vfl import NotFittedError

    with pytest.raises(NotFittedError):
        VerticalGradientBoostingClassifier().export(tmp_path / "m.json", "onnx", ca=certs["C"].ca)
    assert not (tmp_path / "m.json").exists()


def test_a_feature_party_may_receive_the_whole_model_with_the_label_partys_consent(fitted, certs, tmp_path):
    """To party A: B and the label party C consent; C's consent carries its leaf values and baseline."""
    model, _ = fitted
    consents = [_consent(model, certs, p, to="A") for p in ("B", "C")]
    assert consents[1]["shard"]["role"] == "label" and consents[1]["shard"]["baseline"]
    _refused(model, certs, tmp_path, consents[:1], DataError, "party C has not signed", to="A")
    out = model.export(tmp_path / "to-a.json", "xgboost-json", consents, ca=certs["A"].ca, to="A")
    assert json.loads(out.read_text())["learner"]["gradient_booster"]["model"]["trees"]
