"""`vfl party` with the defaults a data team meets first: raw columns, per-party standardization, conjugate gradient.

Three processes on 127.0.0.1, 1024-bit keys (insecure, for speed): the shards equal centralized
conjugate gradient on the standardized columns from the same start; a run cut mid-way and resumed
equals it too (an uninterrupted run from the resumed run's own secret start); `vfl predict` scores
raw columns with the training scaling.
"""

import json
import signal

import numpy as np
import pandas as pd
import pytest

from vfl.centralized import fit_gradient_descent
from vfl.protocols.linear import TrainingSettings
from vfl_net_helpers import (_free_ports, assert_succeeded, federation_certs,  # noqa: F401 - fixtures
                             finish_all, kill_all, run_parties, start_parties, write_federation_file,
                             write_party_data)

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

# full batches: solver "auto" is conjugate gradient; every one of 5 steps runs (tol = 0; 6 weights, so the
# directions are not exhausted).  The learning rate is the default one: FAST_TRAINING's would ask for gradient steps.
TRAINING = {"batch_size": 0, "iterations": 5, "tol": 0, "frac_bits": 48, "standardize": True, "packing": "auto",
            "learning_rate": 0.15}
UNITS = {"a0": 250_000.0, "a1": 0.01, "a2": 7.0, "b0": 1_000.0, "b1": 3.0}


def in_units(paths):
    """The generated CSVs with columns in very different units (amounts, rates, codes)."""
    for path in paths.values():
        frame = pd.read_csv(path)
        for column, unit in UNITS.items():
            if column in frame:
                frame[column] = frame[column] * unit + unit
        frame.to_csv(path, index=False)
    return paths


def shard(folder, role):
    return json.loads((folder / role / f"model_{role}.json").read_text())


@pytest.fixture(scope="module")
def cg_run(tmp_path_factory, federation_certs):
    folder = tmp_path_factory.mktemp("cg")
    data = in_units(write_party_data(folder))
    config = write_federation_file(folder / "federation.toml", federation_certs[0], _free_ports(3), TRAINING)
    results = assert_succeeded(run_parties("party", config, data, folder / "run"))
    return {"folder": folder, "data": data, "config": config, "results": results}


def pooled(data, split):
    a = pd.read_csv(data[("A", split)]).set_index("id")
    b = pd.read_csv(data[("B", split)]).set_index("id").loc[a.index]
    return a, b


def check_against_centralized(cg_run, work):
    """The shards of the run in ``work`` equal centralized CG on the standardized columns from their start."""
    a_shard, b_shard = shard(work, "A"), shard(work, "B")
    a, b = pooled(cg_run["data"], "train")
    x = np.hstack([a[a_shard["columns"]].to_numpy(), b[b_shard["columns"]].to_numpy()])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    np.testing.assert_allclose(a_shard["standardize"]["mean"] + b_shard["standardize"]["mean"], mean)
    np.testing.assert_allclose(a_shard["standardize"]["scale"] + b_shard["standardize"]["scale"], scale)
    settings = TrainingSettings(**{"max_iter": 5, "tol": None, "frac_bits": 48, "alpha": 0.01, "key_bits": 1024,
                                   "insecure": True})
    start = np.array(a_shard["initial_coef"] + b_shard["initial_coef"]), b_shard["initial_intercept"]
    assert np.count_nonzero(start[0]) == 5          # a secret random start, recorded in the shards
    ref = fit_gradient_descent((x - mean) / scale, np.where(b["label"] == "yes", 1.0, -1.0), settings, start=start)
    np.testing.assert_allclose(a_shard["coef"] + b_shard["coef"], ref["coef"], atol=1e-7)
    assert b_shard["intercept"] == pytest.approx(ref["intercept"], abs=1e-7)
    loss = json.loads((work / "C" / "training_C.json").read_text())["loss_curve"]
    np.testing.assert_allclose(loss, ref["loss_curve"], atol=1e-9)
    np.testing.assert_allclose(a_shard["unscaled_coef"], np.array(a_shard["coef"]) / np.array(
        a_shard["standardize"]["scale"]))


def test_shards_equal_centralized_cg_on_standardized_columns(cg_run):
    check_against_centralized(cg_run, cg_run["folder"] / "run")


def test_prediction_of_raw_columns_uses_the_training_scaling(cg_run):
    folder, work = cg_run["folder"], cg_run["folder"] / "run"
    assert_succeeded(run_parties("predict", cg_run["config"], cg_run["data"], work))
    a_shard, b_shard = shard(work, "A"), shard(work, "B")
    a, b = pooled(cg_run["data"], "test")
    by_hand = (a[a_shard["columns"]].to_numpy() @ a_shard["unscaled_coef"] + a_shard["unscaled_offset"]
               + b[b_shard["columns"]].to_numpy() @ b_shard["unscaled_coef"] + b_shard["unscaled_offset"]
               + b_shard["intercept"])
    scores = pd.read_csv(work / "B" / "scores.csv").set_index("id").loc[a.index, "score"]
    np.testing.assert_allclose(scores, by_hand, atol=1e-6)


def test_a_resumed_cg_run_equals_the_uninterrupted_one(cg_run, federation_certs):
    folder = cg_run["folder"]
    config = write_federation_file(folder / "cut.toml", federation_certs[0], _free_ports(3), TRAINING)
    interrupted = start_parties("party", config, cg_run["data"], folder / "cut", extra=["--narrate"])
    try:
        interrupted["C"].wait_for_line("epoch 3/5 done")
        interrupted["A"].signal(signal.SIGKILL)
        finish_all(interrupted)
    finally:
        kill_all(interrupted)
    assert list((folder / "cut" / "B" / "checkpoints").glob("epoch-*.json"))
    results = assert_succeeded(run_parties("party", config, cg_run["data"], folder / "cut",
                                           extra=["--resume", "--narrate"]))
    assert "resume: has checkpoints" in results["C"][1]
    # the resumed run kept its own secret start: it equals the whole run from that start, step for step
    check_against_centralized(cg_run, folder / "cut")
