"""One training run's shards go together, and a resumed run continues on its own rows only.

Every shard carries the run's id (chosen by the label party, kept with its
checkpoints so that a resumed run keeps it): prediction refuses shards of two
runs, even of the same settings and rows. Every checkpoint carries a digest of
the party's aligned rows: a resume on other rows is refused by name.
"""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from vfl.deploy.checkpoint import CheckpointStore, data_digest, run_id
from vfl.deploy.data import PartyData
from vfl.errors import DataError
from vfl_net_helpers import (assert_succeeded, federation, federation_certs, kill_one_midway,  # noqa: F401 - fixtures
                             run_parties)


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


@pytest.mark.slow
def test_prediction_refuses_shards_of_two_training_runs_with_the_same_settings(federation):
    config = federation["make"](training={"iterations": 2, "batch_size": 0})
    work = federation["dir"]
    for run in ("one", "two"):
        assert_succeeded(run_parties("party", config, federation["data"], work / run))
    ids = {run: json.loads((work / run / "B" / "model_B.json").read_text())["trained_with"] for run in ("one", "two")}
    assert ids["one"] != ids["two"] and ids["one"].split("/")[0] == ids["two"].split("/")[0]   # same settings
    shutil.copy(work / "two" / "A" / "model_A.json", work / "one" / "A" / "model_A.json")
    results = run_parties("predict", config, federation["data"], work / "one")
    for role in ("A", "B"):
        code, _, err = results[role]
        assert code != 0 and "come from different training runs" in err, (role, err)


@pytest.mark.slow
def test_a_resume_on_other_rows_is_refused_and_on_the_same_rows_keeps_the_run_id(federation):
    config = federation["make"](training={"iterations": 30, "batch_size": 0})
    work, data = federation["dir"] / "work", dict(federation["data"])
    stopped = kill_one_midway(config, data, work, "A", "epoch 3/30 done", roles=("A", "B", "C"), coordinator="C")
    assert all(code != 0 for code, _, _ in stopped.values())
    kept = json.loads((work / "B" / "checkpoints" / "run_id.json").read_text())["run"]
    cut = federation["dir"] / "B_cut.csv"
    pd.read_csv(data[("B", "train")]).iloc[:-3].to_csv(cut, index=False)
    results = run_parties("party", config, {**data, ("B", "train"): cut}, work, extra=["--resume"])
    code, _, err = results["B"]
    assert code != 0 and "party B: its aligned rows differ from those of the run" in err, err
    assert_succeeded(run_parties("party", config, data, work, extra=["--resume"]))
    assert json.loads((work / "A" / "model_A.json").read_text())["trained_with"].endswith("/" + kept)
