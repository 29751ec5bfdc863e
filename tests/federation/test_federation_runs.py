"""One training run's shards go together, and a resumed run continues on its own rows only.

Every shard carries the run's id (chosen by the label party, kept with its
checkpoints so that a resumed run keeps it): prediction refuses shards of two
runs, even of the same settings and rows. Every checkpoint carries a digest of
the party's aligned rows: a resume on other rows is refused by name.
"""

import json
import shutil

import pandas as pd
import pytest

from vfl.deploy.checkpoint import run_id
from vfl_net_helpers import (assert_succeeded, federation, federation_certs, kill_one_midway,  # noqa: F401 - fixtures
                             run_parties)


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
