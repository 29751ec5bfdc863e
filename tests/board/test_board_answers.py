"""The board goes on past an event line too long to read, shows a feature party's trees and an empty result as
such, and shows the label party's metrics of a prediction run; ``save_run`` records the fit's real duration."""

import json
from types import SimpleNamespace

import pytest

from vfl.board import runs as board_runs
from vfl.board.runs import Workdir
from vfl.deploy.record import RunRecord

PARTIES = {"A": "feature", "B": "label", "C": "coordinator"}


def _record(workdir, task="train", role="label", party="B", family="linear"):
    return RunRecord(workdir, task, family, party, role, PARTIES, {"training": {"max_iter": 3}})


@pytest.mark.parametrize("size", [300, 600, 5000])
def test_the_live_panel_goes_on_after_an_event_line_longer_than_a_read(tmp_path, monkeypatch, size):
    """READ_BYTES (16 MiB) made small: a line of ``size`` bytes, longer than a read, is counted and skipped, and the
    epochs after it still advance the panel (it stopped at that line for good)."""
    monkeypatch.setattr(board_runs, "READ_BYTES", 256)
    record = _record(tmp_path)
    record.event("model", index=0, models=1, epochs=3, what="")
    workdir = Workdir(tmp_path)
    for _ in range(3):
        workdir.live(record.id)
    record.event("epoch", model=0, epoch=0, loss=0.69)
    with open(record.folder / "events.jsonl", "a") as f:
        f.write('{"t": 1, "event": "note", "text": "' + "x" * size + '"}\n')
    record.event("epoch", model=0, epoch=1, loss=0.5)
    record.event("epoch", model=0, epoch=2, loss=0.4)
    for _ in range(size // 100 + 10):                   # a read at a time, as the page polls
        live = workdir.live(record.id)
    assert live.models[0]["done"] == 3 and [loss for _, loss in live.models[0]["loss"]] == [0.69, 0.5, 0.4]
    assert live.damaged == 1


def _client(workdir):
    from fastapi.testclient import TestClient

    from vfl.board.app import create_app

    return TestClient(create_app(Workdir(workdir)))


def test_an_empty_result_shows_an_explicit_empty_state(tmp_path):
    record = _record(tmp_path, role="feature", party="A")
    record.finish({})
    page = _client(tmp_path).get(f"/runs/{record.id}").text
    assert "this run recorded no results" in page


@pytest.fixture(scope="module")
def trees_fit():
    import time

    import numpy as np
    import pandas as pd

    from vfl import VerticalDataset
    from vfl.ensemble import VerticalGradientBoostingClassifier

    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 4))
    y = (x[:, 0] + x[:, 2] > 0).astype(int)
    a = pd.DataFrame({"id": range(120), "a0": x[:, 0], "a1": x[:, 1]})
    b = pd.DataFrame({"id": range(120), "b0": x[:, 2], "b1": x[:, 3], "y": y})
    data = VerticalDataset({"A": a, "B": b}, label="y", id_column="id")
    model = VerticalGradientBoostingClassifier(max_iter=3, max_depth=2, key_bits=1024, insecure=True,
                                               early_stopping=False)
    started = time.monotonic()
    model.fit(data)
    return model, data, time.monotonic() - started


def test_a_feature_party_s_saved_trees_run_shows_its_trees(tmp_path, trees_fit):
    model, data, _ = trees_fit
    folder = model.save_run(tmp_path / "run-a", data, party="A")
    assert json.loads((folder / "model.json").read_text())["trees"]
    page = _client(tmp_path / "run-a").get(f"/runs/{folder.name}").text
    assert 'id="trees"' in page or ">Trees<" in page, page[:2000]
    assert "recorded no results" not in page


def test_save_run_records_the_fit_s_real_duration(tmp_path, trees_fit):
    from datetime import datetime

    model, data, seconds = trees_fit
    info = json.loads((model.save_run(tmp_path / "run-b", data) / "run.json").read_text())
    recorded = (datetime.fromisoformat(info["ended"]) - datetime.fromisoformat(info["started"])).total_seconds()
    assert recorded > 0.5 * seconds and recorded <= seconds + 1, (recorded, seconds)
