"""The credit pipeline's shards (vfl.deploy.shards.credit): rows scored without the label; a tampered shard refused."""

import json

import pytest

from credit_data import KEYS, credit_data, credit_frames
from vfl import VerticalDataset, VerticalLogisticRegression
from vfl.deploy.shards.credit import read_shard
from vfl.errors import DataError
from vfl.preprocessing import VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE


def test_scoring_rows_without_the_label_and_a_tampered_shard(tmp_path):
    data = credit_data(n=800)
    # telco's part of a score names its bins (its release check refuses by default): it opts in
    pipe = VerticalPipeline([("woe", VerticalWOE(**KEYS)), ("selection", VerticalSelection()),
                             ("scorecard", VerticalScorecard(VerticalLogisticRegression(
                                 allow_reconstruction=["telco"], **KEYS)))]).fit(data)
    telco, bank = credit_frames(n=50, seed=9)
    new = VerticalDataset({"telco": telco, "bank": bank.drop(columns="default")}, label="default", id_column="id")
    assert pipe.predict_score(new).shape == (50,)
    shard = pipe.shards()["telco"]
    shard["points"][0][0] = float("nan")
    path = tmp_path / "model_telco.json"
    path.write_text(json.dumps(shard))
    with pytest.raises(DataError, match="not a valid pipeline shard: 'points'"):
        read_shard(path, "telco", "feature")
    with pytest.raises(DataError, match="is not party bank's pipeline shard"):
        read_shard(path, "bank", "label")
    shard = pipe.shards()["telco"]
    for field, value in (("coef", 1e300), ("scale", float("inf"))):
        edited = json.loads(json.dumps(shard))
        edited["model"][field][0] = value
        path.write_text(json.dumps(edited))
        with pytest.raises(DataError, match="not a valid pipeline shard: 'model' must hold a finite weight"):
            read_shard(path, "telco", "feature")
