"""The shared protocol through ``vfl party`` and ``vfl predict``: two feature parties, a label party, a coordinator.

Each party its own process on 127.0.0.1; small data and 1024-bit keys (insecure, for speed).  The shards
equal centralized gradient descent on the pooled rows; a feature party killed mid-training and every
party resumed ends with the uninterrupted run's model; a model that stays shared (``reveal = "never"``)
is written as shares, the coordinator's included, and predicts the same scores.
"""

import json
import os
import stat

import numpy as np
import pandas as pd
import pytest

from vfl.centralized import fit_gradient_descent
from vfl.deploy.config import load_config
from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports, kill_one_midway, start_parties, write_federation_file, write_k_party_data

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

FEATURES = ("shop", "telco")
LABEL, COORDINATOR = "bank", "hub"
ROLES = {**{name: "feature" for name in FEATURES}, LABEL: "label", COORDINATOR: "coordinator"}
COLUMNS = {"shop": 2, "telco": 3, LABEL: 2}
NAMES = tuple(ROLES)
# zeros: two separate runs start alike, so they can be compared (the secret random start differs per run)
TRAINING = {"iterations": 6, "init": "zeros", "protocol": "shared", "optimizer": "momentum", "batch_size": 20}
# Two runs' shares round differently (each step's rounding depends on that run's masks): within 2^-32 a step
ATOL = 1e-7


def run(command, config, data, work, extra=(), timeout=120):
    parties = start_parties(command, config, data, work, roles=NAMES, extra=extra, coordinator=COORDINATOR)
    try:
        results = {name: p.finish(timeout) for name, p in parties.items()}
    finally:
        for p in parties.values():
            p.kill()
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"
    return results


def shard(work, name):
    return json.loads((work / name / f"model_{name}.json").read_text())


def pooled(data, split="train"):
    """Every party's rows of ``split``, by id, in the parties' common order (the ids sorted)."""
    frames = [pd.read_csv(data[(name, split)]).set_index("id").sort_index() for name in (*FEATURES, LABEL)]
    y = frames[-1].pop("label") if "label" in frames[-1] else None
    return np.hstack([f.to_numpy(dtype=float) for f in frames]), y, frames[0].index


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shared")
    tls = write_federation_certs(folder / "certs", NAMES)
    data = write_k_party_data(folder, COLUMNS, LABEL)

    def config(name, **training):
        return write_federation_file(folder / name, tls, _free_ports(len(NAMES)), {**TRAINING, **training},
                                     roles=ROLES)

    whole = config("federation.toml")
    return {"config": config, "whole": whole, "data": data, "folder": folder,
            "results": run("party", whole, data, folder / "run", extra=["--narrate"])}


def test_vfl_party_trains_the_centralized_model_and_no_party_receives_a_gradient(shared_run):
    data, work = shared_run["data"], shared_run["folder"] / "run"
    x, y, _ = pooled(data)
    settings = load_config(shared_run["whole"]).training
    ref = fit_gradient_descent(x, np.where(y == "yes", 1.0, -1.0), settings, start=(np.zeros(x.shape[1]), 0.0))
    shards = {name: shard(work, name) for name in (*FEATURES, LABEL)}
    coef = np.concatenate([shards[name]["coef"] for name in (*FEATURES, LABEL)])
    np.testing.assert_allclose(coef, ref["coef"], atol=ATOL, rtol=0)
    assert shards[LABEL]["intercept"] == pytest.approx(ref["intercept"], abs=ATOL)
    curve = json.loads((work / COORDINATOR / f"training_{COORDINATOR}.json").read_text())["loss_curve"]
    np.testing.assert_allclose(curve, ref["loss_curve"], atol=ATOL, rtol=0)
    # what C sent: shares of the weights under its key, and at the end its share of each party's weights
    sent = pd.read_csv(work / COORDINATOR / "transcript_train.csv")
    assert "gradient" not in set(sent["name"]) and {"weight_share", "model_share"} <= set(sent["name"])
    assert set(sent.loc[sent["name"] == "model_share", "kind"]) == {"masked"}
    narrated = shared_run["results"]["telco"][1]
    assert "gradient_share: encrypted gradient plus its own mask" in narrated

    results = run("predict", shared_run["whole"], data, work)
    x_test, _, ids = pooled(data, "test")
    scores = pd.read_csv(work / LABEL / "scores.csv").set_index("id").loc[ids, "score"]
    np.testing.assert_allclose(scores, x_test @ coef + shards[LABEL]["intercept"], atol=1e-6)
    assert results[COORDINATOR][1] == f"party {COORDINATOR}: decrypted 25 masked scores for {LABEL}\n"


def test_a_feature_party_killed_then_resume_gives_the_uninterrupted_model(shared_run):
    data, folder = shared_run["data"], shared_run["folder"]
    config, cut = shared_run["config"]("cut.toml"), folder / "cut"
    stopped = kill_one_midway(config, data, cut, "telco", "epoch 3/6 done", roles=NAMES, coordinator=COORDINATOR)
    assert all(code == 1 and "telco" in err for code, _, err in stopped.values()), stopped
    results = run("party", config, data, cut, extra=["--resume", "--narrate"])
    assert "resume: has checkpoints" in results[COORDINATOR][1]
    epochs = pd.read_csv(cut / COORDINATOR / "transcript_train.csv")["iteration"]
    assert epochs.max() == 5 and epochs[epochs >= 0].min() >= 2          # not from the start
    whole = folder / "run"
    for name in (*FEATURES, LABEL):
        np.testing.assert_allclose(shard(cut, name)["coef"], shard(whole, name)["coef"], atol=ATOL, rtol=0)
    curves = [json.loads((w / COORDINATOR / f"training_{COORDINATOR}.json").read_text())["loss_curve"]
              for w in (cut, whole)]
    np.testing.assert_allclose(*curves, atol=ATOL, rtol=0)


def test_a_model_that_stays_shared_is_written_as_shares_and_predicts_the_same_scores(shared_run):
    data, folder = shared_run["data"], shared_run["folder"]
    config, work = shared_run["config"]("never.toml", reveal="never"), folder / "never"
    results = run("party", config, data, work)
    assert "training metrics" in results[LABEL][1]             # scored with every party's share
    for name in (*FEATURES, LABEL):
        kept = shard(work, name)
        assert "share" in kept and "coef" not in kept and "intercept" not in kept
        assert len(kept["share"]["values"]) == COLUMNS[name] + (name == LABEL)
    mine = work / COORDINATOR / f"model_{COORDINATOR}.json"
    assert stat.S_IMODE(os.stat(mine).st_mode) == 0o600
    assert set(json.loads(mine.read_text())["shares"][0]) == {*FEATURES, LABEL}
    sent = pd.read_csv(work / COORDINATOR / "transcript_train.csv")
    assert "model_share" not in set(sent["name"])

    run("predict", config, data, work)
    x_test, _, ids = pooled(data, "test")                  # the scores of the first run's revealed model
    revealed = {name: shard(folder / "run", name) for name in (*FEATURES, LABEL)}
    expected = x_test @ np.concatenate([revealed[n]["coef"] for n in (*FEATURES, LABEL)]) + revealed[LABEL]["intercept"]
    scores = pd.read_csv(work / LABEL / "scores.csv").set_index("id").loc[ids, "score"]
    np.testing.assert_allclose(scores, expected, atol=1e-6)
