"""Every family exports through the same consents as the trees: a linear model, the credit pipeline and a split
network, each party signing with its federation key; the whole model at the label party gives the model's own
predictions in onnxruntime, and a missing consent is refused with nothing written."""

import json
import warnings

import numpy as np
import pytest

from credit_data import credit_frames
from export_helpers import onnx_run
from test_export_credit import dataset as credit_dataset
from test_export_mlp import frames as network_frames
from vfl import DataError, VerticalLogisticRegression, VerticalMLPClassifier
from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE
from vfl.transport.tls import write_federation_certs

pytest.importorskip("onnxruntime")
KEYS = {"key_bits": 1024, "insecure": True}


def _consents(model, certs, parties, fmt):
    return [model.consent(p, key=certs[p].key, certificate=certs[p].certificate, format=fmt) for p in parties]


def _positive(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, -1] if p.ndim == 2 else p


def _linear():
    data, every, table = network_frames("binary", n=90)
    model = VerticalLogisticRegression(max_iter=8, allow_reconstruction=["A", "C"], **KEYS).fit(data)
    return model, data, table, _positive(model.predict_proba(every)), ("A", "C")


def _pipeline():
    telco, bank = credit_frames(n=300)
    table = telco.merge(bank, on="id")
    data = credit_dataset(table)
    pipe = VerticalPipeline([
        ("woe", VerticalWOE(VerticalBinning(max_bins=5), **KEYS)),
        ("selection", VerticalSelection(iv_threshold=0.0)),
        ("scorecard", VerticalScorecard(VerticalLogisticRegression(max_iter=8, allow_reconstruction=["telco"],
                                                                   **KEYS)))])
    pipe.fit(data)
    return pipe, data, table, _positive(pipe.predict_proba(data)), ("telco",)


def _network():
    data, every, table = network_frames("binary", n=90)
    model = VerticalMLPClassifier(hidden_layer_sizes=(3,), max_iter=3, allow_reconstruction=["A", "C"],
                                  random_state=0, verbose=False).fit(data)
    return model, data, table, _positive(model.predict_proba(every)), ("A", "C")


@pytest.mark.parametrize("make", [_linear, _pipeline, _network], ids=["linear", "credit", "mlp"])
def test_a_family_s_model_goes_whole_to_the_label_party_once_every_other_party_consents(make, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, data, table, expected, others = make()
    label = data.label_party
    certs = write_federation_certs(tmp_path / "certs", (*others, label))
    ca = certs[label].ca
    with pytest.raises(DataError, match=rf"party {others[0]} has not signed"):
        model.export(tmp_path / "refused.onnx", "onnx", _consents(model, certs, others[1:], "onnx"), ca=ca)
    assert not (tmp_path / "refused.onnx").exists()
    path = model.export(tmp_path / "model.onnx", "onnx", _consents(model, certs, others, "onnx"), ca=ca)
    np.testing.assert_allclose(_positive(onnx_run(path, table)["probability"]), expected, atol=1e-6)


@pytest.mark.parametrize("make", [_linear, _pipeline, _network], ids=["linear", "credit", "mlp"])
def test_a_family_s_split_export_gives_each_party_its_part_and_the_label_party_the_combiner(make, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, data, _, _, others = make()
    label = data.label_party
    certs = write_federation_certs(tmp_path / "certs", (*others, label))
    folder = model.export(tmp_path / "split", "split", _consents(model, certs, others, "split"), ca=certs[label].ca)
    names = sorted(p.name for p in folder.iterdir())
    assert "combiner.json" in names and all(any(n.startswith(p) for n in names) for p in others), names


@pytest.mark.parametrize("make", [_linear, _pipeline, _network], ids=["linear", "credit", "mlp"])
def test_each_party_exports_its_split_part_from_its_own_shard_and_the_parts_combine_to_the_model(make, tmp_path):
    """As ``vfl export --format split`` does in a federation: each party holds its own shard only and the
    roster; the label party's folder has its part and the combiner; the parts combined give the model's
    prediction."""
    from vfl.export import assemble, exporter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, data, table, expected, others = make()
    label = data.label_party
    certs = write_federation_certs(tmp_path / "certs", (*others, label))
    shards = model._shards()
    roles = assemble.roles_of(shards)
    family = model._family
    trust = assemble.trust_of(certs[label].ca)
    folders = {}
    for party in shards:
        consents = _consents(model, certs, others, "split") if party == label else []
        folders[party] = assemble.export(tmp_path / party, family=family, fmt="split", recipient=party,
                                         roles=roles, shards={party: shards[party]}, consents=consents, trust=trust)
    module = exporter(family)
    combiner = json.loads((folders[label] / "combiner.json").read_text())
    assert set(combiner["consented"]) == set(others) and list(combiner["parts"]) == [*others, label]
    outputs = {}
    for party, entry in combiner["parts"].items():
        assert sorted(p.name for p in folders[party].iterdir()) == sorted(
            [entry["file"]] + (["combiner.json"] if party == label else []))
        outputs[party] = onnx_run(folders[party] / entry["file"], table)[entry["output"]]
    combined = module.combine(combiner, outputs)
    np.testing.assert_allclose(_positive(combined["probability"]), expected, atol=1e-6)
    whole = model.export(tmp_path / "whole", "split", _consents(model, certs, others, "split"), ca=certs[label].ca)
    same = {k: v for k, v in json.loads((whole / "combiner.json").read_text()).items() if k != "consented"}
    assert same == {k: v for k, v in combiner.items() if k != "consented"}     # the estimator's combiner, the same
    # a feature party's shard given as the label party's is refused, naming it, and nothing is written
    with pytest.raises(DataError, match=rf"party {others[0]}: the shard given is a feature party's, but "
                                        rf"{others[0]} is the label party"):
        module.split({others[0]: shards[others[0]]}, tmp_path / "wrong",
                     {others[0]: "label", label: "feature"})
    assert not (tmp_path / "wrong").exists()
