"""The credit-scoring pipeline as one process per party over mutual TLS: ``vfl party`` and ``vfl predict``.

A telco (feature party, a planted column), a bank (label party) and a hub
(the coordinator), each with its own CSV of its own customers (aligned by
private set intersection), gaps in the telco's planted column.  One command per
party runs PSI, statistics, binning, WOE/IV, selection, the model and the
scorecard; the IVs equal the pooled aligned table's, the shards hold each
party's own, and the scores ``vfl predict`` writes are the sums of the parties'
points.  A feature party killed after selection, every party restarted with
``--resume``, skips WOE/IV and selection and ends with the same plan.
"""

import json
import re
import signal

import numpy as np
import pandas as pd
import pytest

from credit_data import credit_frames
from vfl.deploy.config import write_config
from vfl.parties.binning import Binner
from vfl.parties.credit.scorecard import flat_codes
from vfl.parties.credit.woe import class_tables
from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports, start_parties

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

ROLES = {"telco": "feature", "bank": "label", "hub": "coordinator"}
TRAINING = {"model": "logistic", "iterations": 30, "alpha": 0.01, "key_bits": 1024, "insecure": True,
            "frac_bits": 32}
PIPELINE = {"max_bins": 6, "iv_threshold": 0.02, "max_correlation": 0.9, "base_score": 600, "base_odds": 50,
            "pdo": 20}


def write_data(folder):
    """Each party's train and test CSVs: its own customers (a few the other lacks), in its own order."""
    rng = np.random.default_rng(5)
    paths = {}
    for split, n in (("train", 900), ("test", 120)):
        telco, bank = credit_frames(n=n, seed=11 if split == "train" else 12)
        ids = [f"c-{split}-{i:05d}" for i in range(n)]
        for name, frame in (("telco", telco), ("bank", bank.rename(columns={"default": "label"}))):
            frame = frame.assign(id=ids)
            keep = rng.random(n) > 0.03                        # each party misses a few of the other's customers
            path = folder / f"{name}_{split}.csv"
            frame[keep].iloc[rng.permutation(int(keep.sum()))].to_csv(path, index=False)
            paths[(name, split)] = path
    return paths


def run(command, config, data, work, extra=(), timeout=180):
    parties = start_parties(command, config, data, work, roles=tuple(ROLES), extra=extra, coordinator="hub")
    try:
        return {name: p.finish(timeout) for name, p in parties.items()}
    finally:
        for p in parties.values():
            p.kill()


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pipeline")
    tls = write_federation_certs(folder / "certs", tuple(ROLES))
    data = write_data(folder)
    parties = {n: {"role": role, "address": f"127.0.0.1:{port}", "certificate": tls[n].certificate,
                   "key": tls[n].key} for (n, role), port in zip(ROLES.items(), _free_ports(len(ROLES)))}
    # telco's part of a score is one value per cell of its bins, which its release check refuses by default (the
    # test of one selected column below): these tests are about the pipeline's run, so telco opts in
    parties["telco"]["allow_reconstruction"] = True
    config = write_config(folder / "federation.toml", tls["bank"].ca, parties, TRAINING,
                          {"connect_timeout": 30, "timeout": 60}, pipeline=PIPELINE)
    return {"config": config, "data": data, "folder": folder, "results": run("party", config, data, folder / "run")}


def shard(work, name):
    return json.loads((work / name / f"model_{name}.json").read_text())


def aligned(data, split="train"):
    """Both parties' rows of the intersection, sorted by id (the order the intersection gives none: compare sets)."""
    telco = pd.read_csv(data[("telco", split)], dtype={"id": str}).set_index("id")
    bank = pd.read_csv(data[("bank", split)], dtype={"id": str}).set_index("id")
    shared = sorted(set(telco.index) & set(bank.index))
    return telco.loc[shared], bank.loc[shared]


def test_one_command_per_party_runs_the_pipeline_and_iv_equals_the_pooled_aligned_table(federation):
    for name, (code, out, err) in federation["results"].items():
        assert code == 0, f"{name}: {err}"
    out = federation["results"]["bank"][1]
    assert "party bank: information value, highest first (party[column]): telco[0]" in out
    assert "party bank: training metrics on" in out and "AUC" in out
    assert "party telco: selected" in federation["results"]["telco"][1]
    work = federation["folder"] / "run"
    telco, bank = aligned(federation["data"])
    label = shard(work, "bank")
    y = (bank["label"] == "yes").to_numpy().astype(int)
    x = telco[["calls", "tenure", "noise"]].to_numpy(float)
    binner = Binner(6).fit(x)
    assert shard(work, "telco")["binning"]["thresholds"] == [t.tolist() for t in binner.thresholds_]
    codes = flat_codes(binner.transform(x), binner.n_bins_, binner.missing_code)
    for j in range(3):
        counts = np.zeros((binner.n_bins_[j] + 1, 2), dtype=np.int64)
        np.add.at(counts, (codes[:, j], y), 1)
        assert label["iv"]["telco"][j] == class_tables(counts)["iv"][0]
    assert (work / "telco" / "statistics_telco.csv").exists()


def test_each_shard_holds_its_own_party_s_bins_and_points_only(federation):
    work = federation["folder"] / "run"
    telco, bank = shard(work, "telco"), shard(work, "bank")
    assert telco["coding"]["coding"] == "bins" and "iv" not in telco and "scorecard" not in telco
    assert bank["coding"]["coding"] == "woe" and bank["scorecard"]["pdo"] == 20
    text = json.dumps(bank)
    assert not any(repr(t) in text for column in telco["binning"]["thresholds"] for t in column[1:])
    assert (work / "telco" / "model_telco.json").stat().st_mode & 0o077 == 0


def test_predict_writes_scores_that_are_the_sums_of_the_parties_points_and_each_party_s_psi(federation):
    config, data, work = federation["config"], federation["data"], federation["folder"] / "run"
    results = run("predict", config, data, work)
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"
    assert "party bank: scorecard scores of" in results["bank"][1]
    assert "population stability" in results["telco"][1]
    scores = pd.read_csv(work / "bank" / "scores.csv", dtype={"id": str}).set_index("id")
    assert list(scores.columns) == ["score", "log_odds", "probability", "prediction"]
    telco, bank = aligned(data, "test")
    total = np.zeros(len(telco)) + shard(work, "bank")["scorecard"]["base_points"]
    for name, frame in (("telco", telco), ("bank", bank)):
        own = shard(work, name)
        binner = Binner.from_dict(own["binning"])
        codes = flat_codes(binner.transform(frame[own["columns"]].to_numpy(float)), binner.n_bins_,
                           binner.missing_code)
        for j, points in zip(own["selected"], own["points"]):
            total += np.asarray(points)[codes[:, j]]
    assert np.abs(scores.loc[telco.index, "score"].to_numpy() - total).max() < 1e-6
    psi = pd.read_csv(work / "telco" / "psi_telco.csv", index_col=0)
    assert list(psi.index) == ["calls", "tenure", "noise"] and (psi["psi"] < 0.25).all()


def test_a_killed_feature_party_resumes_after_selection(federation):
    config, data, folder = federation["config"], federation["data"], federation["folder"]
    work = folder / "resume"
    parties = start_parties("party", config, data, work, roles=tuple(ROLES), extra=("--narrate",),
                            coordinator="hub")
    try:
        parties["telco"].wait_for_line("model_columns", timeout=120)
        parties["telco"].signal(signal.SIGKILL)
        for p in parties.values():
            p.finish(120)
    finally:
        for p in parties.values():
            p.kill()
    results = run("party", config, data, work, extra=("--resume", "--narrate"))
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"
    assert "resume: WOE/IV and selection from its checkpoint" in results["bank"][1]
    first = shard(folder / "run", "bank")
    again = shard(work, "bank")
    assert again["iv"] == first["iv"] and again["selected"] == first["selected"]
    assert shard(work, "telco")["selected"] == shard(folder / "run", "telco")["selected"]


def test_a_feature_party_refuses_its_part_of_the_scorecard_unless_it_opts_in(federation):
    """The release check in ``vfl party``: telco's part of every score (here of its one selected column) names each
    row's bin of ``calls``; the label party's training metrics would release it for the training rows, so training
    stops there unless telco accepts it (``allow_reconstruction = true``; ``allow_score_span``, its earlier name)."""
    folder, tls = federation["folder"], write_federation_certs(federation["folder"] / "certs1", tuple(ROLES))
    for allow in (False, True):
        parties = {n: {"role": role, "address": f"127.0.0.1:{port}", "certificate": tls[n].certificate,
                       "key": tls[n].key} for (n, role), port in zip(ROLES.items(), _free_ports(len(ROLES)))}
        parties["telco"]["allow_score_span"] = allow
        config = write_config(folder / f"one-{allow}.toml", tls["bank"].ca, parties, TRAINING,
                              {"connect_timeout": 30, "timeout": 60}, pipeline=dict(PIPELINE, top_k_per_party=1))
        results = run("party", config, federation["data"], folder / f"one-{allow}")
        code, _, err = results["telco"]
        if allow:
            assert all(c == 0 for c, _, _ in results.values()), results
            assert shard(folder / f"one-{allow}", "telco")["coding"]["selected"] == [0]
            ledger = json.loads((folder / f"one-{allow}" / "telco" / "release_ledger.json").read_text())
            assert [e["columns"] for e in ledger["releases"]] == [["calls", "tenure", "noise", "calls (bin)",
                                                                   "tenure (bin)", "noise (bin)"]]
        else:
            assert code != 0 and "party telco: releasing its part of each score of its training rows (the label " \
                "party's training metrics) would let the label party bank rebuild column 'calls (bin)' for" in err, err
            assert "allow_reconstruction = true in its own [parties.telco] table" in err
            assert all(c != 0 for c, _, _ in results.values())


def _board_page(workdir, task="train") -> str:
    """The page of party ``workdir``'s latest ``task`` run on its board (``vfl board``, without a browser)."""
    from fastapi.testclient import TestClient

    from vfl.board.app import create_app
    from vfl.board.runs import Workdir

    board = Workdir(workdir)
    run_id = next(i for i in board.run_ids() if f"-{task}-" in i)
    assert board.info(run_id)["status"] == "finished"
    return TestClient(create_app(board)).get(f"/runs/{run_id}").text


def test_each_party_s_board_shows_its_own_iv_bins_and_points_and_no_more(federation):
    work = federation["folder"] / "run"
    bank = _board_page(work / "bank")
    assert 'id="iv-all"' in bank and 'id="scorecard"' in bank and "base points" in bank
    assert 'id="roc-training"' in bank and 'id="statistics"' in bank
    assert all(f"<h4>{c}</h4>" in bank for c in shard(work, "bank")["columns"]
               if shard(work, "bank")["columns"].index(c) in shard(work, "bank")["selected"])
    telco = _board_page(work / "telco")
    own = shard(work, "telco")
    assert 'id="iv"' in telco and 'id="scorecard"' in telco
    assert all(f"<td>{c}</td>" in telco for c in own["columns"])          # its columns, by name, with its plan
    for column in ("income", "utilization", "age"):                      # none of the bank's
        assert not re.search(rf"\b{column}\b", telco.split("</head>")[1]), column
    assert "AUC" not in telco and "base points" not in telco and "iv-all" not in telco
    coordinator = _board_page(work / "hub")
    assert 'id="loss-final"' in coordinator and "AUC" not in coordinator
