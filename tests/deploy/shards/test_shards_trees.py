"""Boosted trees' shards (vfl.deploy.shards.trees): what the reader refuses."""

import json
import re

import pytest

from vfl.errors import DataError


def test_a_boosting_shard_with_a_huge_leaf_value_is_refused_when_read(tmp_path):
    from vfl.deploy.shards.trees import FORMAT as BOOSTING_FORMAT, read_shard as read_boosting_shard

    tree = {"left": [-1], "right": [-1], "owner": [-1], "value": [0.5], "gain": [0.0]}
    shard = {"format": BOOSTING_FORMAT, "party": "B", "role": "label", "columns": ["x"], "trained_with": "fp",
             "binning": {"max_bins": 32, "thresholds": [[0.5]], "has_missing": [False]},
             "loss": {"name": "binary_log_loss"}, "data_parties": ["A", "B"], "trees": [{"tree": tree, "splits": []}]}
    path = tmp_path / "model_B.json"
    path.write_text(json.dumps(shard))
    assert read_boosting_shard(path, "B", "label")["trees"]
    tree["value"] = [1e300]
    path.write_text(json.dumps(shard))
    with pytest.raises(DataError, match=re.escape(str(path)) + r": .*tree 0: leaf values must be finite numbers"):
        read_boosting_shard(path, "B", "label")
