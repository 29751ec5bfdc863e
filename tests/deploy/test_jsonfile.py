"""Everything a party writes that holds its data is readable by its owner only, whatever the umask; a JSON file
nested too deeply is refused by name at every reader (vfl.deploy.jsonfile)."""

import json
import os
import re

import numpy as np
import pandas as pd
import pytest

from vfl.deploy.checkpoint import CheckpointStore
from vfl.deploy.shards.linear import read_coordinator_shard, read_shard
from vfl.errors import DataError
from vfl_net_helpers import loose_files as _loose


def test_the_serving_store_and_the_csv_writers_are_owner_only(tmp_path, umask_022):
    from vfl.deploy.jsonfile import private_file, write_private_csv
    from vfl.serving.store import load_csv_into

    frame = pd.DataFrame({"id": [f"r{i}" for i in range(50)], "x": np.arange(50.0)})
    frame.to_csv(tmp_path / "in.csv", index=False)
    store = private_file(tmp_path / "work" / "store_A.db")
    load_csv_into(f"sqlite:///{store}", "features", tmp_path / "in.csv", "A", "id", None)
    write_private_csv(frame, tmp_path / "work" / "aligned_A.csv", index=False)
    assert _loose(tmp_path / "work") == []
    os.chmod(store, 0o644)                       # a store left readable by an older vfl: made owner-only again
    private_file(store)
    assert _loose(tmp_path / "work") == []


def _deep(path, levels=100_000):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[" * levels + "]" * levels)
    return path


def test_every_shard_and_checkpoint_reader_refuses_deep_nesting_naming_the_file(tmp_path):
    """A 100,000-level JSON file is a DataError naming it, at every reader: never a RecursionError."""
    from vfl.federation import credit as pipeline
    from vfl.deploy.shards.trees import read_shard as read_boosting_shard
    from vfl.serving.models import load_share

    path = _deep(tmp_path / "model_A.json")
    readers = [lambda: read_shard(path, "A", "feature"), lambda: read_boosting_shard(path, "A", "feature"),
               lambda: read_coordinator_shard(path, "C"), lambda: pipeline.read_shard(path, "A", "feature")]
    for read in readers:
        with pytest.raises(DataError, match=re.escape(str(path)) + ": its JSON nests too deeply"):
            read()
    _deep(tmp_path / "models" / "1" / "model_A.json")
    for family in ("linear", "trees", "credit", "mlp"):      # what the feature party's serving link loads
        with pytest.raises(DataError, match="its JSON nests too deeply"):
            load_share(tmp_path / "models", "1", "A", "feature", family)
    store = CheckpointStore(tmp_path / "checkpoints", "A", "fp")
    store.save(0, {"weights": [1.0]})
    _deep(tmp_path / "checkpoints" / "epoch-000000.json")
    with pytest.raises(DataError, match="its JSON nests too deeply"):
        store.load()


def test_a_fifo_or_a_directory_given_as_a_file_is_named_as_such(tmp_path):
    import os

    from vfl.deploy.data import load_csv
    from vfl.deploy.jsonfile import read_json

    fifo = tmp_path / "shard.json"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match=r"shard.json is not a regular file \(a FIFO"):      # not a hang
        read_json(fifo, "model shard")
    with pytest.raises(DataError, match=r"party A: data file .* is a directory"):
        load_csv(tmp_path, "A", "id")
