"""Gradient boosting as one process per party over mutual TLS: ``vfl party`` and ``vfl predict``.

Two feature parties and a label party (no coordinator in the file, then one
that takes no part), CSVs with empty cells.  The trees written to the shards
equal the pooled reference's split for split; prediction scores equal the
pooled model's; a feature party killed mid-training and every party restarted
with ``--resume`` end with the shards of the uninterrupted run.
"""

import json
import signal

import numpy as np
import pandas as pd
import pytest

from vfl.centralized.trees import fit_boosting, tree_leaves
from vfl.parties.binning import Binner
from vfl.protocols.trees import TreeSettings
from vfl.deploy.config import write_config
from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports, start_parties

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

FEATURES = ("shop", "telco")
LABEL = "bank"
ROLES = {"shop": "feature", "telco": "feature", LABEL: "label"}
NAMES = tuple(ROLES)
TRAINING = {"model": "gradient_boosting", "loss": "log_loss", "iterations": 6, "learning_rate": 0.4, "max_depth": 3,
            "max_bins": 16, "min_samples_leaf": 5, "early_stopping": True, "validation_fraction": 0.2,
            "n_iter_no_change": 20, "random_state": 3, "key_bits": 1024, "insecure": True}


def write_data(folder, n_rows=240, seed=0):
    """Each party's train and test CSVs (same ids, own row order), gaps in every party's first column."""
    rng = np.random.default_rng(seed)
    paths = {}
    for split, n in (("train", n_rows), ("test", 40)):
        x = rng.normal(size=(n, 6))
        y = ((x[:, 0] > 0.2) + x[:, 2] * (x[:, 4] > 0) + 0.5 * x[:, 5] + rng.normal(scale=0.3, size=n) > 0.6)
        ids = [f"c{split}{i:04d}" for i in range(n)]
        for p, name in enumerate(NAMES):
            block = x[:, 2 * p:2 * p + 2].copy()
            block[rng.random(n) < 0.1, 0] = np.nan
            frame = pd.DataFrame(block, columns=[f"{name}_{j}" for j in range(2)])
            frame.insert(0, "id", ids)
            if name == LABEL:
                frame["label"] = np.where(y, "default", "repaid")
            path = folder / f"{name}_{split}.csv"
            frame.iloc[rng.permutation(n)].to_csv(path, index=False)
            paths[(name, split)] = path
    return paths


def run(command, config, data, work, names=NAMES, extra=(), timeout=120, coordinator=None):
    parties = start_parties(command, config, data, work, roles=names, extra=extra, coordinator=coordinator)
    try:
        return {name: p.finish(timeout) for name, p in parties.items()}
    finally:
        for p in parties.values():
            p.kill()


def shard(work, name):
    return json.loads((work / name / f"model_{name}.json").read_text())


def pooled_reference(data, split="train"):
    """The reference on the CSVs sorted by id (the order of ``align = "same-ids"``), each party's own bins."""
    frames = {name: pd.read_csv(data[(name, split)], dtype={"id": str}).sort_values("id").reset_index(drop=True)
              for name in (*FEATURES, LABEL)}
    features = [frames[n].drop(columns=[c for c in ("id", "label") if c in frames[n]]).to_numpy(float)
                for n in (*FEATURES, LABEL)]
    return frames, features


@pytest.fixture(scope="module")
def boosted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("boosting")
    tls = write_federation_certs(folder / "certs", (*NAMES, "hub"))
    data = write_data(folder)

    def config(name, training=None, coordinator=False):
        roles = dict(ROLES, **({"hub": "coordinator"} if coordinator else {}))
        parties = {n: {"role": role, "address": f"127.0.0.1:{port}", "certificate": tls[n].certificate,
                       "key": tls[n].key} for (n, role), port in zip(roles.items(), _free_ports(len(roles)))}
        return write_config(folder / name, tls[LABEL].ca, parties, dict(TRAINING, **(training or {})),
                            {"connect_timeout": 30, "timeout": 30}, align="same-ids")

    whole = config("federation.toml")
    return {"config": config, "whole": whole, "data": data, "folder": folder,
            "results": run("party", whole, data, folder / "run")}


def test_trained_shards_hold_the_trees_of_the_pooled_reference(boosted):
    for name, (code, out, err) in boosted["results"].items():
        assert code == 0, f"{name}: {err}"
    out = boosted["results"][LABEL][1]
    assert "party bank: 6 boosting iterations, 6 trees" in out
    assert "party bank: positive class 'repaid'" in out and "party bank: training metrics on 192 rows: AUC" in out
    assert "party bank: validation metrics on 48 rows: AUC" in out
    work = boosted["folder"] / "run"
    label = shard(work, LABEL)
    assert label["data_parties"] == ["shop", "telco", "bank"] and label["classes"] == ["default", "repaid"]
    frames, features = pooled_reference(boosted["data"])
    binners = [Binner(16).fit(x) for x in features]
    for name, binner in zip((*FEATURES, LABEL), binners):
        assert shard(work, name)["binning"]["thresholds"] == [t.tolist() for t in binner.thresholds_]
    y = (frames[LABEL]["label"] == "repaid").to_numpy().astype(int)
    settings = TreeSettings(**{k: v for k, v in TRAINING.items() if k not in ("model", "iterations")},
                                max_iter=6)
    reference = fit_boosting([b.transform(x) for b, x in zip(binners, features)], binners, y, settings, 2,
                             seed=TRAINING["random_state"])
    assert label["validation_scores"] == pytest.approx(reference.validation_scores)
    for index, (entry, tree, splits) in enumerate(zip(label["trees"], [t[0] for t in reference.trees],
                                                       [s[0] for s in reference.splits])):
        assert entry["tree"]["left"] == tree.left.tolist() and entry["tree"]["owner"] == tree.owner.tolist()
        assert entry["tree"]["value"] == tree.value.tolist()
        for node, (party, feature, bin_, missing_left) in splits.items():
            name = (*FEATURES, LABEL)[party]
            own = entry["splits"] if name == LABEL else next(
                t["splits"] for t in shard(work, name)["trees"] if t["index"] == index)
            assert [node, feature, bin_, missing_left] in own


def test_prediction_scores_equal_the_pooled_models(boosted):
    config, data = boosted["whole"], boosted["data"]
    work = boosted["folder"] / "run"
    results = run("predict", config, data, work)
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"
    assert "party shop: sent the leaves its splits allow for 40 rows to bank" in results["shop"][1]
    scores = pd.read_csv(work / LABEL / "scores.csv", dtype={"id": str}).sort_values("id")
    assert list(scores.columns) == ["id", "score", "probability", "prediction"]      # as a logistic model's
    frames, features = pooled_reference(data, "test")
    label = shard(work, LABEL)
    shards = {n: shard(work, n) for n in (*FEATURES, LABEL)}
    codes = [Binner.from_dict(shards[n]["binning"]).transform(x) for n, x in zip((*FEATURES, LABEL), features)]
    binners = [Binner.from_dict(shards[n]["binning"]) for n in (*FEATURES, LABEL)]
    from vfl.parties.trees import Tree

    raw = np.full(len(frames[LABEL]), label["baseline"][0])
    for index, entry in enumerate(label["trees"]):
        tree = Tree.from_dict(entry["tree"])
        splits = {s[0]: (2, *s[1:]) for s in entry["splits"]}
        for p, name in enumerate(FEATURES):
            for t in shards[name]["trees"]:
                if t["index"] == index:
                    splits.update({s[0]: (p, *s[1:]) for s in t["splits"]})
        raw += tree.value[tree.leaves][tree_leaves(tree, splits, codes, binners)]
    np.testing.assert_allclose(scores["score"].to_numpy(), raw, rtol=0, atol=1e-12)


def test_a_feature_party_killed_mid_training_then_resume_gives_the_same_shards(boosted):
    folder, data = boosted["folder"], boosted["data"]
    config = boosted["config"]("federation_resume.toml")
    work = folder / "resumed"
    parties = start_parties("party", config, data, work, roles=NAMES, extra=["--narrate"], coordinator=None)
    try:
        parties["telco"].wait_for_line("iteration 3/6", timeout=90)
        parties["telco"].signal(signal.SIGKILL)
        for name in ("shop", LABEL):
            code, out, err = parties[name].finish(90)
            assert code == 1 and "telco" in err, f"{name}: {err}"
    finally:
        for p in parties.values():
            p.kill()
    assert any((work / LABEL / "checkpoints").glob("epoch-*.json"))
    results = run("party", config, data, work, extra=["--resume"])
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"
    whole = folder / "run"
    for name in NAMES:
        a, b = shard(whole, name), shard(work, name)
        assert a["trees"] == b["trees"] and a["binning"] == b["binning"], name


def test_hidden_membership_and_a_coordinator_that_takes_no_part(boosted):
    folder, data = boosted["folder"], boosted["data"]
    config = boosted["config"]("federation_hidden.toml", {"hide_membership": True, "iterations": 2},
                               coordinator=True)
    results = run("party", config, data, folder / "hidden", names=(*NAMES, "hub"), coordinator="hub")
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"
    assert "party hub: gradient boosting has no coordinator" in results["hub"][1]
    whole, hidden = shard(folder / "run", LABEL), shard(folder / "hidden", LABEL)
    assert hidden["trees"] == whole["trees"][:2]          # the same first two trees as the standard mode


def test_the_boards_draw_the_trees_each_party_knows(boosted):
    """The label party's board: every party's split by owner, its own thresholds, gain importances, the loss per
    tree; a feature party's: its own splits with its thresholds, no leaf value, no metric."""
    import re

    from fastapi.testclient import TestClient

    from vfl.board.app import create_app
    from vfl.board.runs import Workdir

    work = boosted["folder"] / "run"

    def pages(name):
        board = Workdir(work / name)
        run_id = next(i for i in board.run_ids() if "-train-" in i)
        client = TestClient(create_app(board))
        return [client.get(f"/runs/{run_id}?tree={k}").text for k in range(6)]

    label = pages(LABEL)
    assert 'id="importances"' in label[0] and 'id="roc-training"' in label[0]
    scores = shard(work, LABEL)["validation_scores"]                              # early_stopping = true
    assert 'id="early-stopping"' in label[0] and f'data-points="{len(scores)}"' in label[0]
    assert 'id="loss-live-0"' in label[0] and 'data-points="6"' in label[0]       # the loss of every tree
    assert any(re.search(r">party (shop|telco)</text>", page) for page in label)
    for name in FEATURES:
        own = shard(work, name)
        theirs = pages(name)
        for k, page in enumerate(theirs):
            assert "AUC" not in page and "importances" not in page and "loss-" not in page
            assert not re.search(r"leaf</text><text[^>]*>-?\d", page)               # no leaf value
        if own["trees"]:
            first = own["trees"][0]
            assert "another party&#39;s" in theirs[0] or first["splits"]
            if first["splits"]:
                column = own["columns"][first["splits"][0][1]]
                assert f">{column} ≤" in theirs[0]
