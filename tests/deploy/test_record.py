"""A party's record of a run (vfl.deploy.record): run.json, its events as they happen, how it ended, owner-only."""

import json
import stat

import numpy as np
import pytest

from vfl.deploy.record import RECORD_ID, RunRecord
from vfl.errors import DataError
from vfl.transport import Message


def _record(tmp_path, **kwargs):
    return RunRecord(tmp_path / "work", "train", "linear", "bank", "label", {"bank": "label", "telco": "feature"},
                     {"iterations": np.int64(5)}, **kwargs)


def test_a_finished_run_keeps_its_events_its_result_and_a_copy_of_its_shard(tmp_path):
    shard = tmp_path / "model_bank.json"
    shard.write_text('{"weights": [1.0]}')
    with _record(tmp_path) as record:
        record.event("epoch", model=0, epoch=1, loss=np.float64(0.5))
        record.message("->", "telco", Message("gradients", "encrypted", iteration=1), 2048)
        record.update(http="http://127.0.0.1:8080")
        record.finish({"model": str(shard), "auc": 0.75})
    assert RECORD_ID.match(record.id) and record.folder == tmp_path / "work" / "runs" / record.id
    info = json.loads((record.folder / "run.json").read_text())
    assert (info["status"], info["error"], info["settings"], info["http"]) == ("finished", "", {"iterations": 5},
                                                                              "http://127.0.0.1:8080")
    events = [json.loads(line) for line in (record.folder / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["epoch", "message"] and events[0]["loss"] == 0.5
    assert {k: events[1][k] for k in ("direction", "peer", "name", "kind", "bytes", "iteration")} == {
        "direction": "sent", "peer": "telco", "name": "gradients", "kind": "encrypted", "bytes": 2048, "iteration": 1}
    assert json.loads((record.folder / "result.json").read_text())["auc"] == 0.75
    assert (record.folder / "model.json").read_text() == shard.read_text()
    assert stat.S_IMODE(record.folder.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in record.folder.iterdir())


def test_a_failed_or_interrupted_run_says_so_in_the_words_of_its_command(tmp_path):
    with pytest.raises(DataError):
        with _record(tmp_path, describe_failure=lambda exc: f"one line: {exc}") as failed:
            raise DataError("party bank: column 'x': infinity at row 7")
    info = json.loads((failed.folder / "run.json").read_text())
    assert (info["status"], info["error"]) == ("failed", "one line: party bank: column 'x': infinity at row 7")
    assert info["ended"] is not None
    with pytest.raises(KeyboardInterrupt):
        with _record(tmp_path) as stopped:
            raise KeyboardInterrupt
    assert json.loads((stopped.folder / "run.json").read_text())["error"] == "interrupted"
