"""One-vs-rest logistic regression through ``vfl party`` and ``vfl predict``: three classes, three processes.

The label party's label has three classes (and its CSV a column of row weights,
``[data] sample_weight``, combined with balanced class weights), so one
federation run trains one
binary model per class (one key, one alignment); the shards hold one row of
weights per class and equal centralized training from the starts they record;
prediction writes every class's score and probability; a run cut in the middle
of the second model and resumed equals the uninterrupted run.
"""

import json
import signal

import numpy as np
import pandas as pd
import pytest

from vfl.centralized import fit_gradient_descent
from vfl.errors import DataError, ProtocolError
from vfl.deploy.config import load_config
from vfl.federation.linear import agree_on_models
from vfl.parties import class_weights
from vfl.protocols import TWO_PARTY
from vfl.transport import Endpoint, InProcessNetwork, run_roles
from vfl_net_helpers import (_free_ports, assert_succeeded, federation_certs, finish_all,  # noqa: F401 - fixture
                             kill_all, run_parties, same_model, start_parties, write_federation_file)

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

CLASSES = ["high", "low", "mid"]      # sorted: the order of the shard's rows
TRAINING = {"iterations": 6, "batch_size": 0, "learning_rate": 0.5, "class_weight": "balanced", "init": "zeros",
            "solver": "gd"}


def write_three_class_data(folder, n_rows=72, seed=3):
    """A: 3 columns; B: 2 columns and a label with three classes; each file in its own row order."""
    rng = np.random.default_rng(seed)
    paths = {}
    for split, n in (("train", n_rows), ("test", 20)):
        x = rng.normal(size=(n, 5))
        z = x @ rng.normal(size=(5, 3))
        label = np.array(CLASSES)[np.argmax(z + rng.normal(scale=0.3, size=z.shape), axis=1)]
        ids = [f"r{split}{i:03d}" for i in range(n)]
        a = pd.DataFrame(x[:, :3], columns=["a0", "a1", "a2"]).assign(id=ids)
        b = pd.DataFrame(x[:, 3:], columns=["b0", "b1"]).assign(id=ids)
        if split == "train":
            b["label"] = label
            b["w"] = rng.uniform(0.5, 2.0, size=n)
        for role, frame in (("A", a), ("B", b)):
            paths[(role, split)] = folder / f"{role}_{split}.csv"
            frame.iloc[rng.permutation(n)].to_csv(paths[(role, split)], index=False)
    return paths


def shard(work, role):
    return json.loads((work / role / f"model_{role}.json").read_text())


@pytest.fixture(scope="module")
def ovr_run(tmp_path_factory, federation_certs):  # noqa: F811 - the fixture of vfl_net_helpers
    folder = tmp_path_factory.mktemp("ovr")
    data = write_three_class_data(folder)

    def config(name, allow_span=True, **training):
        # A has 3 columns and the model 3 scores per row: A must accept that B could recover its rows
        return write_federation_file(folder / name, federation_certs[0], _free_ports(3), {**TRAINING, **training},
                                     data={"sample_weight": "w"},
                                     party_options={"A": {"allow_reconstruction": True}} if allow_span else None)

    whole = config("federation.toml")
    results = assert_succeeded(run_parties("party", whole, data, folder / "run", extra=["--narrate"]))
    return {"config": config, "whole": whole, "data": data, "folder": folder, "work": folder / "run",
            "results": results}


def sorted_frame(path):
    return pd.read_csv(path, dtype={"id": str}).sort_values("id").reset_index(drop=True)


def test_one_model_per_class_equal_to_centralized(ovr_run):
    work, data, results = ovr_run["work"], ovr_run["data"], ovr_run["results"]
    a, b = shard(work, "A"), shard(work, "B")
    assert b["classes"] == CLASSES and len(a["coef"]) == len(b["coef"]) == len(b["intercept"]) == 3
    assert "trained 3 one-vs-rest models (6, 6, 6 epochs)" in results["C"][1]
    assert "one-vs-rest: model 2 of 3 (class 'low' against the rest)" in results["B"][1]
    frame_a, frame_b = sorted_frame(data[("A", "train")]), sorted_frame(data[("B", "train")])
    x = np.hstack([frame_a[a["columns"]].to_numpy(), frame_b[b["columns"]].to_numpy()])
    # balanced class weights from all three classes (as B computes them), times the CSV's row weights
    weights = class_weights(frame_b["label"], "balanced") * frame_b["w"].to_numpy()
    assert "w" not in b["columns"]
    settings = load_config(ovr_run["whole"]).training
    for k, positive in enumerate(CLASSES):
        y = np.where(frame_b["label"] == positive, 1.0, -1.0)
        start = np.array(a["initial_coef"][k] + b["initial_coef"][k]), b["initial_intercept"][k]
        ref = fit_gradient_descent(x, y, settings, start=start, sample_weight=weights)
        np.testing.assert_allclose(a["coef"][k] + b["coef"][k], ref["coef"], atol=1e-7)
        assert b["intercept"][k] == pytest.approx(ref["intercept"], abs=1e-7)
    # one key for all three models: C sent its public key once per model, always the same
    sent = pd.read_csv(work / "C" / "transcript_train.csv")
    assert sorted(sent.loc[sent["name"] == "public_key", "model"].unique().tolist()) == [0, 1, 2]
    told = pd.read_csv(work / "B" / "transcript_train.csv")
    assert told.loc[told["name"] == "models", "receiver"].tolist() == ["A", "C"]


def test_prediction_scores_every_class(ovr_run):
    work, data = ovr_run["work"], ovr_run["data"]
    results = assert_succeeded(run_parties("predict", ovr_run["whole"], data, work))
    assert results["C"][1] == "party C: decrypted 20 masked scores for each of 3 one-vs-rest models for B\n"
    a, b = shard(work, "A"), shard(work, "B")
    scores = pd.read_csv(work / "B" / "scores.csv", dtype={"id": str}).set_index("id")
    x_a = pd.read_csv(data[("A", "test")], dtype={"id": str}).set_index("id").loc[scores.index, a["columns"]]
    x_b = pd.read_csv(data[("B", "test")], dtype={"id": str}).set_index("id").loc[scores.index, b["columns"]]
    expected = x_a.to_numpy() @ np.array(a["coef"]).T + x_b.to_numpy() @ np.array(b["coef"]).T + b["intercept"]
    np.testing.assert_allclose(scores[[f"score_{c}" for c in CLASSES]], expected, atol=1e-6)
    probability = scores[[f"probability_{c}" for c in CLASSES]].to_numpy()
    np.testing.assert_allclose(probability.sum(axis=1), 1.0)
    assert (scores["prediction"].to_numpy() == np.array(CLASSES)[np.argmax(expected, axis=1)]).all()


def test_cut_in_the_second_model_then_resume_equals_uninterrupted(ovr_run):
    data, folder = ovr_run["data"], ovr_run["folder"]
    config, cut = ovr_run["config"]("cut.toml"), folder / "cut"
    parties = start_parties("party", config, data, cut, extra=["--narrate"])
    try:
        parties["C"].wait_for_line("one-vs-rest: model 2 of 3")
        parties["C"].wait_for_line("epoch 3/6 done")
        parties["A"].signal(signal.SIGKILL)
        stopped = {role: p.finish(30) for role, p in parties.items() if role != "A"}
    finally:
        kill_all(parties)
    assert all(code == 1 for code, _, _ in stopped.values()), stopped
    assert list((cut / "B" / "checkpoints" / "model-000").glob("epoch-*.json"))
    results = assert_succeeded(run_parties("party", config, data, cut, extra=["--resume", "--narrate"]))
    assert "resume: has checkpoints" in results["C"][1]
    for role in ("A", "B"):
        assert same_model(shard(cut, role), shard(ovr_run["work"], role))
    assert not list((cut / "B" / "checkpoints").rglob("epoch-*.json"))       # finished: the shard is the result
    curves = json.loads((cut / "C" / "training_C.json").read_text())["loss_curve"]
    assert curves == json.loads((ovr_run["work"] / "C" / "training_C.json").read_text())["loss_curve"]


def test_model_counts_that_differ_are_refused():
    """A feature party's shard with another number of models than the label party's: a clear error."""
    network = InProcessNetwork(["A", "B", "C"])
    ends = {role: Endpoint(network.transport(role), [p for p in "ABC" if p != role], timeout=5) for role in "ABC"}
    programs = {"B": lambda: agree_on_models(ends["B"], "B", "label", TWO_PARTY, 3),
                "A": lambda: agree_on_models(ends["A"], "A", "feature", TWO_PARTY, 1),
                "C": lambda: agree_on_models(ends["C"], "C", "coordinator", TWO_PARTY, None)}
    with pytest.raises(DataError, match="party A: its model shard holds 1 model.*party B's holds 3"):
        run_roles(network, programs)
    network = InProcessNetwork(["A", "B", "C"])
    ends = {role: Endpoint(network.transport(role), [p for p in "ABC" if p != role], timeout=5) for role in "ABC"}
    ends["B"].send("C", "models", "public", count=0)
    with pytest.raises(ProtocolError, match="C: waiting for 'models' from B: .*from 1 to 1000"):
        agree_on_models(ends["C"], "C", "coordinator", TWO_PARTY, None)


def test_warm_start_continues_every_class_model(ovr_run):
    """[training] warm_start = true: each data party continues from the shard in its work folder."""
    import shutil

    data, folder = ovr_run["data"], ovr_run["folder"]
    warm = folder / "warm"
    shutil.copytree(ovr_run["work"], warm)
    config = ovr_run["config"]("warm.toml", warm_start=True, iterations=3)
    assert_succeeded(run_parties("party", config, data, warm))
    before, after = {r: shard(ovr_run["work"], r) for r in "AB"}, {r: shard(warm, r) for r in "AB"}
    for role in "AB":
        assert after[role]["initial_coef"] == before[role]["coef"]
    assert after["B"]["initial_intercept"] == before["B"]["intercept"]
    frame_a, frame_b = sorted_frame(data[("A", "train")]), sorted_frame(data[("B", "train")])
    x = np.hstack([frame_a[before["A"]["columns"]].to_numpy(), frame_b[before["B"]["columns"]].to_numpy()])
    weights = class_weights(frame_b["label"], "balanced") * frame_b["w"].to_numpy()
    settings = load_config(config).training
    for k, positive in enumerate(CLASSES):
        y = np.where(frame_b["label"] == positive, 1.0, -1.0)
        start = np.array(before["A"]["coef"][k] + before["B"]["coef"][k]), before["B"]["intercept"][k]
        ref = fit_gradient_descent(x, y, settings, start=start, sample_weight=weights)
        np.testing.assert_allclose(after["A"]["coef"][k] + after["B"]["coef"][k], ref["coef"], atol=1e-7)
    # a shard of another shape is refused by the party holding it, with the reason
    (warm / "B" / "model_B.json").write_text(json.dumps(dict(after["B"], classes=["high", "low", "other"])))
    results = run_parties("party", config, data, warm, timeout=60)
    assert results["B"][0] == 2 and "warm_start continues 3 model(s) (classes ['high', 'low', " \
        "'other']); this run trains 3 (classes ['high', 'low', 'mid'])" in results["B"][2], results["B"][2]


def test_a_feature_party_refuses_as_many_scores_as_columns_unless_it_opts_in(ovr_run):
    """Without ``allow_reconstruction = true`` in [parties.A], A (3 columns, 3 classes) trains, but its release check
    refuses its 3 partial scores per row at prediction (a linear image of its rows); every party stops."""
    config = ovr_run["config"]("no-span.toml", allow_span=False)
    work = ovr_run["folder"] / "no-span"
    assert_succeeded(run_parties("party", config, ovr_run["data"], work))
    results = run_parties("predict", config, ovr_run["data"], work, split="train")
    code, _, err = results["A"]
    assert code != 0 and "party A: releasing its partial scores at prediction would let the label party B rebuild" \
        in err and "known-row linear regression" in err, err
    assert "allow_reconstruction = true in its own [parties.A] table" in err
    assert all(code != 0 for code, _, _ in results.values())
