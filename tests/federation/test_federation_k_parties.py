"""Three feature parties, a label party and a coordinator, all named, as five processes on 127.0.0.1.

Train then predict; a feature party killed mid-training, then ``--resume``.
Small data and 1024-bit keys (insecure, for speed).
"""

import json
import re

import numpy as np
import pandas as pd
import pytest

from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import (_free_ports, kill_one_midway, same_model, start_parties, write_federation_file,
                             write_k_party_data)

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

FEATURES = ("shop", "telco", "web-2")  # the roster's order: by name
LABEL, COORDINATOR = "bank", "hub"
ROLES = {**{name: "feature" for name in FEATURES}, LABEL: "label", COORDINATOR: "coordinator"}
COLUMNS = {"telco": 2, "shop": 1, "web-2": 2, LABEL: 2}
NAMES = tuple(ROLES)


def run(command, config, data, work, extra=(), timeout=90):
    parties = start_parties(command, config, data, work, roles=NAMES, extra=extra, coordinator=COORDINATOR)
    try:
        return {name: p.finish(timeout) for name, p in parties.items()}
    finally:
        for p in parties.values():
            p.kill()


def shard(work, name):
    return json.loads((work / name / f"model_{name}.json").read_text())


@pytest.fixture(scope="module")
def k_parties(tmp_path_factory):
    """Certificates for the five names, the data, and one uninterrupted run of 8 epochs."""
    folder = tmp_path_factory.mktemp("k_parties")
    tls = write_federation_certs(folder / "certs", NAMES)
    data = write_k_party_data(folder, COLUMNS, LABEL)
    # Every party starts from zero, so the resumed run below can be compared with this separate uninterrupted
    # one (a secret random start differs between runs; tests/linear/test_estimator_api.py resumes from one).
    training = {"iterations": 8, "init": "zeros"}

    def config(name):
        # shop's one column and the model's one score per row: bank could recover shop's column; shop accepts it
        return write_federation_file(folder / name, tls, _free_ports(len(NAMES)), training, roles=ROLES,
                                     party_options={"shop": {"allow_score_span": True}})

    whole = config("federation.toml")
    return {"config": config, "whole": whole, "data": data, "folder": folder,
            "results": run("party", whole, data, folder / "run")}


def test_training_then_prediction_with_three_feature_parties(k_parties):
    data, work = k_parties["data"], k_parties["folder"] / "run"
    for name, (code, out, err) in k_parties["results"].items():
        assert code == 0, f"{name}: {err}"
    shard_path = work / "telco" / "model_telco.json"
    assert f"party telco: model shard written to {shard_path}" in k_parties["results"]["telco"][1].splitlines()
    assert re.fullmatch(r"party hub: trained 8 epochs, final loss \d\.\d{6}\n", k_parties["results"]["hub"][1])
    shards = {name: shard(work, name) for name in (*FEATURES, LABEL)}
    assert {name: (s["party"], s["role"], len(s["columns"])) for name, s in shards.items()} == \
        {name: (name, ROLES[name], COLUMNS[name]) for name in shards}
    assert shards[LABEL]["classes"] == ["no", "yes"] and "intercept" not in shards["telco"]
    # Feature parties talk only to the label party and the coordinator.
    for name in FEATURES:
        sent = pd.read_csv(work / name / "transcript_train.csv")
        assert set(sent["receiver"]) == {LABEL, COORDINATOR} and set(sent["sender"]) == {name}
        assert "loss_part" in set(sent["name"])
    assert set(pd.read_csv(work / LABEL / "transcript_train.csv")["receiver"]) == {*FEATURES, COORDINATOR}

    results = run("predict", k_parties["whole"], data, work)
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"
    assert results["web-2"][1].splitlines()[-1] == "party web-2: sent encrypted partial scores for 25 rows to bank"
    assert results["hub"][1] == "party hub: decrypted 25 masked scores for bank\n"
    assert results[LABEL][1].splitlines()[-1].startswith("party bank: scores of 25 rows written to ")
    # bank's scores are the sum of every shard's partial scores (and the intercept), row by row
    scores = pd.read_csv(work / LABEL / "scores.csv").set_index("id")
    expected = shards[LABEL]["intercept"]
    for name, s in shards.items():
        x = pd.read_csv(data[(name, "test")]).set_index("id").loc[scores.index, s["columns"]]
        expected = expected + x.to_numpy() @ s["coef"]
    np.testing.assert_allclose(scores["score"], expected, atol=1e-6)


def test_a_feature_party_killed_then_resume_gives_the_uninterrupted_model(k_parties):
    data, folder, whole = k_parties["data"], k_parties["folder"], k_parties["folder"] / "run"
    config, cut = k_parties["config"]("cut.toml"), folder / "cut"
    stopped = kill_one_midway(config, data, cut, "telco", "epoch 4/8 done", roles=NAMES, coordinator=COORDINATOR)
    for name, (code, out, err) in stopped.items():
        assert code == 1, f"{name}: {err}"
        # The label party and the coordinator lose their link to telco; the other feature parties
        # learn of it from the abort of whichever of the two stopped first.
        assert "telco" in err, f"{name}: {err}"
    assert list((cut / LABEL / "checkpoints").glob("epoch-*.json"))

    results = run("party", config, data, cut, extra=["--resume", "--narrate"])
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"
    assert "resume: has checkpoints" in results[COORDINATOR][1]
    epochs = pd.read_csv(cut / COORDINATOR / "transcript_train.csv")["iteration"]
    assert epochs.max() == 7 and epochs[epochs >= 0].min() >= 3  # started after epoch 4 (or 3), not from 0
    for name in (*FEATURES, LABEL):
        assert same_model(shard(cut, name), shard(whole, name))
    curve = json.loads((cut / COORDINATOR / "training_hub.json").read_text())["loss_curve"]
    assert curve == json.loads((whole / COORDINATOR / "training_hub.json").read_text())["loss_curve"]


def test_demo_with_two_feature_parties(capsys):
    from vfl.cli import main as vfl_main
    from vfl.federation.demo import run_demo

    result = run_demo(iterations=4, key_bits=1024, quiet=True, feature_parties=2)   # one step from a random start is not always a good model
    out = capsys.readouterr().out
    assert "vfl demo: four parties as four processes" in out
    assert "A1 holds 10 columns, A2 holds 10 columns, B holds 10 columns and the diagnosis" in out
    assert "federated (A1, A2, B, C over TLS)" in out
    # the centralized run starts where the parties did, from every shard: the same weights
    assert result["auc"] > 0.9 and result["weight_gap"] < 1e-6
    assert result["bytes"]["train A1->B"] > 0 and result["bytes"]["train A2->C"] > 0
    assert not any("A1->A2" in link or "A2->A1" in link for link in result["bytes"])
    with pytest.raises(SystemExit) as refused:
        vfl_main(["demo", "--feature-parties", "6"])
    assert refused.value.code == 2 and "invalid choice: 6" in capsys.readouterr().err


def test_certs_for_named_parties_and_a_role_not_in_the_file(tmp_path, capsys):
    from vfl.cli import main as vfl_main
    from vfl.transport.tls import certificate_role, load_certificate

    assert vfl_main(["certs", str(tmp_path / "c"), "--parties", "bank", "telco-2", "shop", "C",
                     "--hosts", "telco-2=10.0.0.2"]) == 0
    out = capsys.readouterr().out
    assert f"party telco-2: {tmp_path / 'c' / 'telco-2.pem'} and {tmp_path / 'c' / 'telco-2.key'}" in out
    cert = load_certificate(tmp_path / "c" / "telco-2.pem")
    assert certificate_role(cert) == "telco-2"
    assert vfl_main(["certs", str(tmp_path / "d"), "--parties", "bank", "Bank", "C"]) == 2
    assert "distinct, even ignoring case" in capsys.readouterr().err
    assert vfl_main(["certs", str(tmp_path / "e"), "--parties", "bank_1", "C"]) == 2
    assert "invalid role name 'bank_1'" in capsys.readouterr().err

    tls = write_federation_certs(tmp_path / "k", NAMES)
    config = write_federation_file(tmp_path / "f.toml", tls, _free_ports(len(NAMES)), roles=ROLES)
    assert vfl_main(["party", "--config", str(config), "--role", "A", "--data", "a.csv"]) == 2
    assert f"vfl party A: error: {config}: no party 'A'; the file names ['bank', 'hub', 'shop', 'telco', 'web-2']" \
        in capsys.readouterr().err
    assert vfl_main(["predict", "--config", str(config), "--role", "hub", "--data", "x.csv",
                     "--workdir", str(tmp_path / "hub")]) == 2
    assert "party hub holds no data (it is the coordinator): leave out --data" in capsys.readouterr().err
