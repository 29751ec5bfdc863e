"""``vfl board`` without a browser: run records, reading them safely, the pages, the charts, bad input."""

import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn.metrics import auc as area, roc_auc_score

from vfl.board import runs as board_runs
from vfl.board.app import create_app
from vfl.board.runs import NotFound, Workdir
from vfl.board.serving import Scraper, quantile
from vfl.cli import main as vfl_main
from vfl.deploy.record import RunRecord
from vfl.deploy.report import CURVE_POINTS, rows_report
from vfl.errors import ConfigurationError

PARTIES = {"A": "feature", "B": "label", "C": "coordinator"}


def _message(name, kind="ciphertext", iteration=0):
    return SimpleNamespace(name=name, kind=kind, iteration=iteration)


def _record(workdir, task="train", role="label", party="B", family="linear"):
    return RunRecord(workdir, task, family, party, role, PARTIES, {"training": {"max_iter": 3}})


def _client(workdir):
    return TestClient(create_app(Workdir(workdir)))


def test_a_record_is_read_as_it_is_written(tmp_path):
    record = _record(tmp_path)
    record.event("waiting", peers=["A", "C"])
    record.event("model", index=0, models=1, epochs=3, what="")
    record.message("<-", "C", _message("public_key", "public", None), 520)
    workdir = Workdir(tmp_path)
    live = workdir.live(record.id)
    assert live.step == "setup" and live.models[0]["epochs"] == 3 and live.messages == 1
    client = _client(tmp_path)
    assert "<code>public_key</code>" in client.get(f"/runs/{record.id}/received").text      # received so far
    record.message("<-", "A", _message("residual"), 4096)
    later = client.get(f"/runs/{record.id}/received")
    assert "<code>residual</code>" in later.text and later.headers["x-run-status"] == "running"
    record.event("epoch", model=0, epoch=0, loss=0.69)
    with open(record.folder / "events.jsonl", "a") as f:      # a line still being written: not read yet
        f.write('{"t": 1, "event": "epoch", "model": 0, "ep')
    live = workdir.live(record.id)
    assert live.models[0]["done"] == 1 and live.models[0]["loss"] == [(0, 0.69)]
    with open(record.folder / "events.jsonl", "a") as f:
        f.write('och": 1, "loss": 0.5}\nnot json\n')
    live = workdir.live(record.id)
    assert live.models[0]["done"] == 2 and live.damaged == 1
    assert workdir.info(record.id)["status"] == "running"
    record.finish({"loss_curve": [0.69, 0.5]})
    info = workdir.info(record.id)
    assert info["status"] == "finished" and info["ended"] and workdir.result(record.id)["loss_curve"] == [0.69, 0.5]
    assert oct(os.stat(record.folder / "run.json").st_mode & 0o777) == "0o600"


def test_a_failed_run_says_the_error_every_party_got(tmp_path):
    from vfl.deploy.commands import failure_line
    from vfl.errors import PeerError

    with pytest.raises(PeerError):
        with RunRecord(tmp_path, "train", "linear", "A", "feature", PARTIES, {}, failure_line) as record:
            raise PeerError("party B stopped: party B: column 'b1' row 7 holds 'x', not a number")
    info = Workdir(tmp_path).info(record.id)
    assert info["status"] == "failed" and "column 'b1' row 7" in info["error"]
    page = _client(tmp_path).get("/").text
    assert "failed" in page and "column &#39;b1&#39; row 7" in page


def test_the_label_party_page_draws_its_metrics_and_curves(tmp_path):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 2_000)
    scores = y + rng.normal(0, 1.2, 2_000)
    report = rows_report("logistic", scores, y)
    assert len(report["curves"]["roc"]["fpr"]) <= CURVE_POINTS
    roc = report["curves"]["roc"]
    assert area(roc["fpr"], roc["tpr"]) == pytest.approx(roc_auc_score(y, scores), abs=0.01)
    assert report["curves"]["gains"][-1] == pytest.approx(1.0)
    assert np.sum(report["curves"]["confusion"]) == 2_000
    record = _record(tmp_path)
    record.message("<-", "A", _message("scores"), 100_000)
    record.message("->", "C", _message("masked_gradient"), 900)
    record.finish({"metrics": {"training": report}})
    page = _client(tmp_path).get(f"/runs/{record.id}").text
    for chart in ("roc-training", "pr-training", "ks-training", "gains-training", "lift-training"):
        assert f'id="{chart}"' in page
    assert f"{report['metrics']['AUC']:.4f}" in page
    assert "<code>scores</code>" in page and "masked_gradient" not in page.split('id="received"')[1].split("</table>")[0]
    regression = rows_report("linear", scores, y.astype(float))
    assert len(regression["curves"]["residuals"]["predicted"]) == CURVE_POINTS


def test_the_runs_page_reads_one_page_of_ten_thousand_runs(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    template = {"format": "vfl-run/1", "task": "train", "family": "linear", "party": "B", "role": "label",
                "parties": PARTIES, "settings": {}, "started": "2026-11-27T08:00:00+00:00", "ended": None,
                "status": "finished", "error": ""}
    for k in range(10_000):
        run_id = f"20261127T08{k // 6000:02d}{(k // 100) % 60:02d}.{k:06d}Z-train-1"
        (runs / run_id).mkdir(parents=True)
        (runs / run_id / "run.json").write_text(json.dumps(dict(template, id=run_id)))
    read = []
    original = Workdir.info
    monkeypatch.setattr(Workdir, "info", lambda self, run_id: read.append(run_id) or original(self, run_id))
    client = _client(tmp_path)
    started = time.perf_counter()
    page = client.get("/")
    took = time.perf_counter() - started
    assert page.status_code == 200 and "10,000" in page.text and 'id="older"' in page.text
    assert len(read) == board_runs.PAGE
    assert read[0] == max(p.name for p in runs.iterdir())          # newest first
    second = client.get("/?page=200").text
    assert "newer" in second and 'id="older"' not in second
    print(f"runs page of 10,000 runs: {took * 1000:.0f} ms")


def test_paths_outside_the_work_directory_are_refused(tmp_path):
    record = _record(tmp_path / "party")
    record.finish({})
    (tmp_path / "secret.txt").write_text("not the board's")
    client = _client(tmp_path / "party")
    for path in ("/runs/..%2F..%2Fsecret.txt", "/runs/../secret.txt", "/runs/%2e%2e", "/runs/runs",
                 "/runs/20261127T000000.000000Z-train-1", "/static/..%2F..%2F..%2Fsecret.txt"):
        answer = client.get(path)
        assert answer.status_code == 404 and "not the board" not in answer.text, path
    assert client.get("/api/runs/nope").json()["error"].startswith("no run")
    workdir = Workdir(tmp_path / "party")
    with pytest.raises(NotFound):
        workdir.folder("../party")
    assert client.post("/").status_code == 405          # read-only
    # links are not followed: a linked run folder is no run; a linked file in a run is not opened
    outside = tmp_path / "elsewhere"
    (outside / "runs").mkdir(parents=True)
    elsewhere = _record(outside)
    elsewhere.finish({})
    (tmp_path / "party" / "runs" / elsewhere.id).symlink_to(elsewhere.folder)
    (record.folder / "psi.csv").symlink_to(tmp_path / "secret.csv")
    (tmp_path / "secret.csv").write_text("column,psi\nthe-secret-column,0.5\n")
    listing = client.get("/")
    assert listing.status_code == 200 and elsewhere.id not in listing.text
    assert client.get(f"/runs/{elsewhere.id}").status_code == 404
    assert "the-secret-column" not in client.get(f"/runs/{record.id}").text


def test_odd_records_give_pages_never_errors(tmp_path):
    """Event lines the reader cannot fold, fields of the wrong type, a tree whose children loop: shown as damaged."""
    record = _record(tmp_path, family="trees")
    with open(record.folder / "events.jsonl", "a") as f:
        f.write('{"t": 1, "event": "epoch", "epoch": Infinity}\n' + "[" * 100_000 + "\n"
                '{"t": 1, "event": "model", "index": "x"}\n')
    record.message("<-", "A", _message("candidates"), 10)
    shard = tmp_path / "model_B.json"          # kept by the record, with its views (view.json), at the run's end
    json.dump({"format": "vfl-boosting-shard/1", "role": "label", "party": "B", "data_parties": ["A", "B"],
               "trees": [{"tree": {"left": [0, -1], "right": [1, -1], "owner": [0, -1], "value": [0, 1],
                                   "gain": [1, 0]}}]}, open(shard, "w"))
    record.finish({"metrics": [1, 2], "loss_curve": {"a": 1}, "alignment": "none", "model": str(shard)})
    assert json.loads((record.folder / "view.json").read_text())["views"][0]["kind"] == "trees"
    odd = _record(tmp_path, task="predict")
    info = json.loads((odd.folder / "run.json").read_text())
    (odd.folder / "run.json").write_text(json.dumps(dict(info, status=7, parties=["A"], error=None)))
    client = _client(tmp_path)
    for _ in range(2):
        page = client.get(f"/runs/{record.id}")
        assert page.status_code == 200 and "could not be read" in page.text
        assert page.text.count("<code>candidates</code>") == 1 and ">1</td>" in page.text   # folded once
    assert "3 event lines could not be read" in client.get(f"/runs/{record.id}/live").text
    listing = client.get("/")
    assert listing.status_code == 200 and "unreadable" in listing.text
    assert client.get(f"/runs/{odd.id}").status_code == 200
    assert client.get(f"/api/runs/{odd.id}").json()["info"]["status"] == "unreadable"


def test_a_shard_its_family_cannot_view_is_a_damaged_part_of_the_page_and_the_run_ends_well(tmp_path):
    """The record keeps the views of its model that the family's shard module gives (view.json); a shard the views
    cannot be made of is kept as damaged: the board says so where the views would be, the rest is shown."""
    record = _record(tmp_path, family="trees")
    shard = tmp_path / "model_B.json"
    shard.write_text(json.dumps({"role": "label", "trees": [{"tree": {"left": "not a list"}}]}))
    record.finish({"model": str(shard)})
    assert Workdir(tmp_path).info(record.id)["status"] == "finished"
    assert "damaged" in json.loads((record.folder / "view.json").read_text())
    page = _client(tmp_path).get(f"/runs/{record.id}")
    assert page.status_code == 200 and "this part of the record could not be read" in page.text
    linear = _record(tmp_path)                  # a family whose shard module gives no views: no view.json
    linear.finish({"model": str(shard)})
    assert not (linear.folder / "view.json").exists()


def test_a_record_is_owner_only_and_never_stops_its_run(tmp_path, monkeypatch):
    record = _record(tmp_path)
    assert oct((tmp_path / "runs").stat().st_mode & 0o777) == "0o700"
    assert oct(record.folder.stat().st_mode & 0o777) == "0o700"
    assert oct((record.folder / "events.jsonl").stat().st_mode & 0o777) == "0o600"
    model = tmp_path / "model_B.json"
    model.write_text("{}")
    os.chmod(model, 0o644)

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(record._events, "write", full)
    record.event("epoch", model=0, epoch=0, loss=0.5)             # no exception: the run goes on
    record.finish({"model": str(model)})
    info = Workdir(tmp_path).info(record.id)
    assert info["status"] == "finished" and "No space left on device" in info["record_error"]
    assert oct((record.folder / "model.json").stat().st_mode & 0o777) == "0o600"


def test_damaged_records_are_shown_as_damaged(tmp_path):
    truncated = _record(tmp_path)
    truncated.finish({"metrics": {}})
    (truncated.folder / "result.json").write_text('{"metrics": {"training": {"rows": 3')
    (truncated.folder / "model.json").write_text('{"trees": [')
    unreadable = _record(tmp_path, task="predict")
    (unreadable.folder / "run.json").write_text("{")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "B_epoch_3.json").write_text('{"weights": [0.1, ')      # the board never reads it
    killed = _record(tmp_path, task="align")
    info = json.loads((killed.folder / "run.json").read_text())
    (killed.folder / "run.json").write_text(json.dumps(dict(info, pid=2 ** 22 + 12345)))    # no such process
    client = _client(tmp_path)
    listing = client.get("/").text
    assert "unreadable" in listing and "damaged" in listing
    assert "result.json is damaged" in client.get(f"/runs/{truncated.id}").text
    assert client.get(f"/runs/{unreadable.id}").status_code == 200
    assert "ended without recording an end" in client.get(f"/runs/{killed.id}").text


def test_a_directory_that_is_not_a_party_s_is_refused_clearly(tmp_path, capsys):
    with pytest.raises(ConfigurationError, match="holds no vfl runs"):
        Workdir(tmp_path)
    assert vfl_main(["board", "--workdir", str(tmp_path), "--port", "0"]) == 2
    assert "holds no vfl runs (no runs/ folder)" in capsys.readouterr().err
    assert vfl_main(["board", "--workdir", str(tmp_path / "missing"), "--port", "0"]) == 2
    assert "is not a directory" in capsys.readouterr().err


def serve_metrics(metrics):
    """``vfl serve``'s own :class:`~vfl.serving.metrics.Metrics` answering ``GET /metrics`` on a free port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = metrics.text() if self.path == "/metrics" else b""
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_the_serving_panel_draws_a_services_metrics(tmp_path):
    from vfl.serving.metrics import Metrics

    metrics = Metrics()
    server = serve_metrics(metrics)
    try:
        record = _record(tmp_path, task="serve", family="serving")
        record.update(http=f"http://127.0.0.1:{server.server_address[1]}")
        scraper = Scraper()
        info = Workdir(tmp_path).info(record.id)
        scraper.html(record.id, info)
        for k in range(100):
            metrics.answered(200, 0.004 if k < 90 else 0.2, [{"id": "x"}])
        metrics.answered(200, 0.01, [{"id": "y", "error": {"code": "missing_row", "party": "A", "message": ""}}])
        time.sleep(0.05)
        html = scraper.html(record.id, info)
        assert 'id="serving-rate"' in html and 'id="serving-latency"' in html
        assert "<td>A</td><td>missing_row</td><td>1</td>" in html
        page = _client(tmp_path).get(f"/runs/{record.id}")
        assert 'id="serving"' in page.text
    finally:
        server.shutdown()
    assert "cannot reach" in Scraper().html("x", {"http": "http://127.0.0.1:9", "status": "running"})


def test_latency_quantiles_from_histogram_buckets():
    def sample(counts):
        edges = [0.005, 0.01, 0.05, float("inf")]
        total, out = 0, {}
        for le, n in zip(edges, counts):
            total += n
            out[("vfl_serve_request_seconds_bucket", (("le", str(le)),))] = total
        return out

    before, after = sample([0, 0, 0, 0]), sample([50, 40, 10, 0])
    assert quantile(before, after, 0.5) == pytest.approx(5.0)
    assert 10.0 < quantile(before, after, 0.99) <= 50.0
    assert quantile(after, after, 0.5) is None


def _two_parties(n=200):
    import pandas as pd

    from vfl import VerticalDataset

    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 5))
    y = (x @ np.array([1.0, -1.0, 0.5, 2.0, -0.5]) > 0).astype(int)
    a = pd.DataFrame(x[:, :3], columns=["a0", "a1", "a2"]).assign(id=range(n))
    b = pd.DataFrame(x[:, 3:], columns=["b0", "b1"]).assign(id=range(n), y=y)
    return VerticalDataset({"A": a, "B": b}, label="y", id_column="id")


def test_an_estimator_saves_its_run_for_the_board(tmp_path, vertical_data):
    from vfl import VerticalGradientBoostingClassifier, VerticalLogisticRegression

    lr = VerticalLogisticRegression(max_iter=4, key_bits=1024, insecure=True, random_state=1).fit(vertical_data)
    folder = lr.save_run(tmp_path / "lr", vertical_data)
    client = _client(tmp_path / "lr")
    page = client.get(f"/runs/{folder.name}").text
    assert 'id="roc-training"' in page and 'id="loss-final"' not in page      # the label party learns no loss
    coordinator = next(name for name, role in json.loads((folder / "run.json").read_text())["parties"].items()
                       if role == "coordinator")
    seen_by_c = lr.save_run(tmp_path / "lr-c", party=coordinator)
    page = _client(tmp_path / "lr-c").get(f"/runs/{seen_by_c.name}").text
    assert 'id="loss-final"' in page and 'data-points="4"' in page and "roc-training" not in page
    with pytest.raises(ConfigurationError, match="no party 'nobody'"):
        lr.save_run(tmp_path / "x", party="nobody")

    strong_a = _two_parties()          # A's columns matter: its splits show at the label party's board
    trees = VerticalGradientBoostingClassifier(max_iter=3, max_depth=2, key_bits=1024, insecure=True,
                                               random_state=0).fit(strong_a)
    folder = trees.save_run(tmp_path / "trees", strong_a)
    page = _client(tmp_path / "trees").get(f"/runs/{folder.name}").text
    assert 'id="tree"' in page and 'id="importances"' in page
    feature = trees.feature_parties_[0]
    assert "≤" in page                                   # the label party's own thresholds (the first tree: its own)
    shard = json.loads((folder / "model.json").read_text())
    index, total = shard["data_parties"].index(feature), 0
    for k, tree in enumerate(shard["trees"]):
        page = _client(tmp_path / "trees").get(f"/runs/{folder.name}?tree={k}").text
        theirs = tree["tree"]["owner"].count(index)     # another party's split: its name and a number, no more
        assert page.count(f">party {feature}</text>") == theirs and (f">split {theirs}</text>" in page) == (theirs > 0)
        total += theirs
    assert total > 0
    seen_by_a = trees.save_run(tmp_path / "trees-a", strong_a, party=feature)
    page = _client(tmp_path / "trees-a").get(f"/runs/{seen_by_a.name}").text
    assert "AUC" not in page and 'id="importances"' not in page
    if 'id="tree"' in page:                               # the trees it took part in: its thresholds, no leaf value
        assert "another party&#39;s" in page and "leaf</text>" in page and not re.search(r"leaf</text><text[^>]*>-?\d", page)


def test_the_credit_pipeline_saves_each_party_s_view_of_its_run(tmp_path):
    """A fitted VerticalPipeline's record per party: the bank's IVs of every party, its bins, points and metrics;
    the telco's own columns and plan only; the coordinator's loss; a pipeline without a scorecard is refused."""
    from credit_data import credit_data
    from vfl import VerticalLogisticRegression
    from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE

    keys = {"key_bits": 1024, "insecure": True}
    data = credit_data(n=600)
    pipe = VerticalPipeline([("woe", VerticalWOE(VerticalBinning(max_bins=6), **keys)),
                             ("selection", VerticalSelection(iv_threshold=0.01)),
                             # telco's part of a score names its bins (its release check refuses): it opts in
                             ("scorecard", VerticalScorecard(VerticalLogisticRegression(
                                 max_iter=5, allow_reconstruction=["telco"], **keys)))]).fit(data)
    bank = pipe.save_run(tmp_path / "bank", data)
    page = _client(tmp_path / "bank").get(f"/runs/{bank.name}").text
    assert 'id="iv"' in page and 'id="iv-all"' in page and 'id="scorecard"' in page and 'id="roc-training"' in page
    assert "base points" in page and "income" in page and ">telco<" in page
    shard = json.loads((bank / "model.json").read_text())
    assert shard == json.loads(json.dumps(pipe.shards()["bank"]))
    result = json.loads((bank / "result.json").read_text())
    assert result["plan"]["telco"] == pipe.named_steps["selection"].support_["telco"].tolist()
    assert abs(result["base_points"] - pipe.named_steps["scorecard"].base_points_) < 1e-9
    received = {json.loads(line)["name"] for line in (bank / "events.jsonl").read_text().splitlines()
                if json.loads(line).get("direction") == "received"}
    assert received                                              # the WOE step's counts and the model's messages

    telco = pipe.save_run(tmp_path / "telco", data, party="telco")
    page = _client(tmp_path / "telco").get(f"/runs/{telco.name}").text
    assert 'id="iv"' in page and "calls" in page and 'id="scorecard"' in page
    for hidden in ("income", "utilization", "iv-all", "roc-training", "AUC", "loss-final"):
        assert hidden not in page
    assert "iv" not in json.loads((telco / "result.json").read_text())     # no IV without share_woe

    coordinator = next(name for name, role in json.loads((bank / "run.json").read_text())["parties"].items()
                       if role == "coordinator")
    seen_by_c = pipe.save_run(tmp_path / "c", party=coordinator)
    page = _client(tmp_path / "c").get(f"/runs/{seen_by_c.name}").text
    assert 'id="loss-final"' in page and 'id="scorecard"' not in page and "income" not in page
    assert not (seen_by_c / "model.json").exists()

    no_card = VerticalPipeline([("woe", VerticalWOE(VerticalBinning(max_bins=6), **keys))]).fit(data)
    with pytest.raises(ConfigurationError, match="VerticalScorecard"):
        no_card.save_run(tmp_path / "x")


@pytest.mark.slow
def test_the_demo_prints_each_party_s_board_and_b_s_shows_the_run_s_curves():
    """``vfl demo --board``: the addresses it prints answer while it holds them open, with no standard input at all
    (background, IDE, CI); B's shows the ROC; a SIGTERM stops it."""
    import signal
    import subprocess
    import sys

    import httpx

    demo = subprocess.Popen([sys.executable, "-m", "vfl", "demo", "--board", "--key-bits", "1024", "--iterations",
                             "2", "--quiet"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in demo.stdout:
            lines.append(line)
            if "the boards stay open" in line:
                break
        text = "".join(lines)
        addresses = dict(re.findall(r"^  (\w+): (http://127\.0\.0\.1:\d+/)$", text, re.M))
        assert set(addresses) == {"A", "B", "C"}, text
        runs = httpx.get(addresses["B"]).text
        train = re.search(r'href="/runs/([^"]+-train-\d+)"', runs).group(1)
        page = httpx.get(addresses["B"] + f"runs/{train}").text
        assert 'id="roc-training"' in page and "AUC" in page
        predicted = re.search(r'href="/runs/([^"]+-predict-\d+)"', runs).group(1)
        page = httpx.get(addresses["B"] + f"runs/{predicted}").text
        assert "prediction rows" in page and "AUC" in page       # the held-out rows' labels are B's: it scores them
        theirs = re.search(r'href="/runs/([^"]+-train-\d+)"', httpx.get(addresses["A"]).text).group(1)
        page = httpx.get(addresses["A"] + f"runs/{theirs}").text
        assert "party A (feature)" in page and "AUC" not in page and "roc-training" not in page
        time.sleep(2)
        assert httpx.get(addresses["B"]).status_code == 200      # still open after the demo's own work is done
    finally:
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(60) == 0
    with pytest.raises(httpx.HTTPError):
        httpx.get(addresses["B"], timeout=2)           # the boards stopped with the demo


def test_a_record_from_before_records_kept_views_still_shows_its_model(tmp_path):
    """A finished training record without view.json (written before records kept views) has its views made from
    the model.json it kept when the board reads it, and nothing is written into it; a running one shows none."""
    record = _record(tmp_path, family="trees")
    shard = tmp_path / "model_B.json"
    json.dump({"format": "vfl-boosting-shard/1", "role": "label", "party": "B", "data_parties": ["A", "B"],
               "trees": [{"tree": {"left": [1, -1, -1], "right": [2, -1, -1], "owner": [0, -1, -1],
                                   "value": [0, 1, 2], "gain": [1, 0, 0]}}]}, open(shard, "w"))
    record.finish({"model": str(shard)})
    (record.folder / "view.json").unlink()
    page = _client(tmp_path).get(f"/runs/{record.id}")
    assert page.status_code == 200 and 'id="trees"' in page.text and "could not be read" not in page.text
    assert not (record.folder / "view.json").exists()
    running = _record(tmp_path, family="trees")
    assert 'id="trees"' not in _client(tmp_path).get(f"/runs/{running.id}").text
