"""Linear models' shards (vfl.deploy.shards.linear): written, read back, and refused when tampered with."""

import json
import re
import stat

import pytest

from vfl.deploy.shards.linear import (read_coordinator_shard, read_shard, shard_models, shard_shares,
                                      write_coordinator_shard, write_shard)
from vfl.errors import DataError


def test_shards(tmp_path):
    path = write_shard(tmp_path / "b.json", "B", "label", "logistic", ["x", "y"], [0.5, -1.0, 0.25], True, "fp",
                       classes=["no", "yes"], label="label")
    shard = read_shard(path, "B", "label")
    assert shard["coef"] == [0.5, -1.0] and shard["intercept"] == 0.25 and shard["party"] == "B"
    assert shard_models(shard) == [[0.5, -1.0, 0.25]]
    with pytest.raises(DataError, match="not party A's model shard"):
        read_shard(path, "A", "feature")
    with pytest.raises(DataError, match="the model shard of a 'label' party; party B is the feature party"):
        read_shard(path, "B", "feature")


@pytest.mark.parametrize("role, edit, message", [
    ("A", lambda s: s.update(coef=[0.5, float("nan")]), r"coef\[1\] must be a finite number, got nan"),
    ("A", lambda s: s.update(coef=[0.5, "1.0"]), r"coef\[1\] must be a finite number, got '1.0'"),
    ("A", lambda s: s.update(coef=[True, 1.0]), r"coef\[0\] must be a finite number"),
    ("A", lambda s: s.update(coef="0.5,1.0"), "'coef' must be a list of weights"),
    ("A", lambda s: s.update(columns="x,y"), "'columns' must be a list of column names"),
    ("A", lambda s: s.update(columns=["x", 2]), "'columns' must be a list of column names"),
    ("A", lambda s: s.pop("columns"), "'columns' must be a list of column names, got None"),
    ("A", lambda s: s.pop("trained_with"), "'trained_with'"),
    ("A", lambda s: s.update(objective="poisson"), "'objective' must be 'linear' or 'logistic'"),
    ("B", lambda s: s.update(intercept=float("inf")), "intercept must be a finite number, got inf"),
    ("A", lambda s: s.update(coef=[0.5, 1e300]), r"coef\[1\] = 1e\+300 is beyond the range of a model parameter"),
    ("B", lambda s: s.update(intercept=-1e80), r"intercept = -1e\+80 is beyond the range of a model parameter"),
    ("B", lambda s: s.update(fit_intercept="false"), "'fit_intercept' must be true or false, got 'false'"),
    ("B", lambda s: s.update(classes=["yes"]), "'classes' must be a list of the two label values"),
])
def test_shards_with_bad_values_are_refused_naming_the_file(tmp_path, role, edit, message):
    """A shard edited by hand or damaged gives a DataError naming the file, never a traceback later."""
    kind = {"A": "feature", "B": "label"}[role]
    path = write_shard(tmp_path / f"model_{role}.json", role, kind, "logistic", ["x", "y"], [0.5, -1.0, 0.25], True,
                       "fp", classes=["no", "yes"], label="label")
    shard = json.loads(path.read_text())
    edit(shard)
    path.write_text(json.dumps(shard))      # json writes NaN and Infinity as the literals it also reads
    with pytest.raises(DataError, match=re.escape(str(path)) + ".*" + message):
        read_shard(path, role, kind)


def test_two_party_shards_are_still_read(tmp_path):
    path = tmp_path / "model_A.json"
    path.write_text(json.dumps({"format": "vfl-model-shard/1", "role": "A", "objective": "logistic", "columns": ["x"],
                                "coef": [0.5], "initial_coef": [0.0], "trained_with": "fp"}))
    shard = read_shard(path, "A", "feature")
    assert shard["party"] == "A" and shard["role"] == "feature" and shard["coef"] == [0.5]
    with pytest.raises(DataError, match="not party B's model shard"):
        read_shard(path, "B", "label")


def test_shards_of_a_model_that_stays_shared(tmp_path):
    """A data party's shard holds its share (whole numbers as text) instead of weights; the coordinator's, its own."""
    share = {"values": [str(2 ** 130 + 7), "-12", "5"]}
    path = write_shard(tmp_path / "b.json", "B", "label", "logistic", ["x", "y"], None, True, "fp",
                       classes=["no", "yes"], label="label", shares=[share])
    shard = read_shard(path, "B", "label")
    assert "coef" not in shard and "intercept" not in shard and shard_shares(shard) == [[2 ** 130 + 7, -12, 5]]
    broken = dict(shard, share={"values": ["1", "2.5", "3"]})
    path.write_text(json.dumps(broken))
    with pytest.raises(DataError, match="share 0 must hold 3 whole numbers, written as text"):
        read_shard(path, "B", "label")
    mine = write_coordinator_shard(tmp_path / "c.json", "C", "fp", [{"A": share, "B": share}])
    assert stat.S_IMODE(mine.stat().st_mode) == 0o600
    assert read_coordinator_shard(mine, "C")["shares"][0]["A"]["values"] == share["values"]
    with pytest.raises(DataError, match="not coordinator D's shard"):
        read_coordinator_shard(mine, "D")


def test_a_shard_stores_its_positive_class_and_one_that_is_not_its_second_class_is_refused(tmp_path):
    path = write_shard(tmp_path / "model_B.json", "B", "label", "logistic", ["b0"], [0.5, 0.1], True, "f" * 64,
                       ["bad", "good"], "label")
    assert read_shard(path, "B", "label")["positive_class"] == "good"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), positive_class="bad")))
    with pytest.raises(DataError, match="'positive_class' must be the second of the two 'classes'"):
        read_shard(path, "B", "label")
