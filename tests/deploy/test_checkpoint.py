"""Checkpoints (vfl.deploy.checkpoint): the last few kept, refused under other settings or other rows."""

import json
import stat

import numpy as np
import pytest

from vfl.deploy.checkpoint import KEEP, CheckpointStore, data_digest, run_id
from vfl.deploy.data import PartyData
from vfl.errors import ConfigurationError, DataError


def test_checkpoints_keep_the_last_few_and_refuse_other_settings(tmp_path):
    store = CheckpointStore(tmp_path / "ck", "A", "fingerprint-1")
    for epoch in range(6):
        store.save(epoch, {"params": [float(epoch)]})
    assert store.epochs() == list(range(6 - KEEP, 6))
    assert store.load()[5] == {"params": [5.0]}
    assert stat.S_IMODE((tmp_path / "ck" / "epoch-000005.json").stat().st_mode) == 0o600
    with pytest.raises(ConfigurationError, match="made with other settings"):
        CheckpointStore(tmp_path / "ck", "A", "fingerprint-2").load()
    with pytest.raises(DataError, match="not party B's"):
        CheckpointStore(tmp_path / "ck", "B", "fingerprint-1").load()
    store.clear()
    assert store.load() == {}


def _rows(n=6, value=1.0):
    return PartyData(ids=[f"c{i}" for i in range(n)], columns=["x"], features=np.full((n, 1), value),
                     labels=np.arange(n) % 2)


def test_a_checkpoint_of_other_rows_is_refused_and_the_run_id_is_kept_for_a_resume(tmp_path):
    store = CheckpointStore(tmp_path, "B", "settings", data_digest(_rows()))
    store.save(0, {"w": [0.0]})
    assert CheckpointStore(tmp_path, "B", "settings", data_digest(_rows())).load() == {0: {"w": [0.0]}}
    for other in (_rows(n=5), _rows(value=2.0), PartyData(**{**_rows().__dict__, "labels": np.ones(6)})):
        with pytest.raises(DataError, match="party B: its aligned rows differ from those of the run"):
            CheckpointStore(tmp_path, "B", "settings", data_digest(other)).load()
    first = run_id(tmp_path, resume=False)
    assert run_id(tmp_path, resume=True) == first and run_id(tmp_path, resume=False) != first
