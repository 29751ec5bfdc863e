"""``[pipeline]`` in federation.toml and bad input, through the API and the file alike: clear errors, by name."""

import json

import numpy as np
import pytest

from credit_data import credit_data, credit_frames
from vfl import VerticalDataset, VerticalLogisticRegression
from vfl.errors import ConfigurationError, DataError
from vfl.deploy.config import load_config, write_config
from vfl.deploy.shards.credit import read_shard
from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE

KEYS = {"key_bits": 1024, "insecure": True}


def config(tmp_path, pipeline, training=None):
    parties = {name: {"role": role, "address": f"127.0.0.1:{7100 + i}", "certificate": "c.pem", "key": "c.key"}
               for i, (name, role) in enumerate({"telco": "feature", "bank": "label", "hub": "coordinator"}.items())}
    path = write_config(tmp_path / "federation.toml", "ca.pem", parties, training or {"model": "logistic"},
                        pipeline=pipeline)
    return load_config(path)


def test_pipeline_table_is_parsed_and_fingerprinted(tmp_path):
    loaded = config(tmp_path, {"max_bins": 8, "share_woe": True, "top_k": 3, "pdo": 40})
    assert loaded.pipeline.max_bins == 8 and loaded.pipeline.share_woe is True
    assert loaded.pipeline.rules.top_k == 3 and loaded.pipeline.rules.iv_threshold == 0.02
    assert loaded.pipeline.scale.pdo == 40
    other = config(tmp_path, {"max_bins": 8, "share_woe": False, "top_k": 3, "pdo": 40})
    assert loaded.fingerprint("train") != other.fingerprint("train")


@pytest.mark.parametrize("table, message", [
    ({"share_woe": "false"}, "share_woe must be true or false"),
    ({"max_bins": 1}, "max_bins"),
    ({"strategy": "monotone"}, "only the label party bins monotonically"),
    ({"top_k": 0}, "top_k"),
    ({"max_vif": 0.5}, "max_vif"),
    ({"pdo": -1}, "pdo"),
    ({"bins": 5}, "unknown key"),
])
def test_bad_pipeline_settings_are_refused_by_name(tmp_path, table, message):
    with pytest.raises(ConfigurationError, match=message):
        config(tmp_path, table)


def test_the_pipeline_needs_logistic_regression(tmp_path):
    with pytest.raises(ConfigurationError, match="model = \"logistic\""):
        config(tmp_path, {}, {"model": "linear"})


def test_a_model_that_stays_shared_cannot_make_a_scorecard(tmp_path):
    # the scorecard turns each party's weights into its points: reveal = "never" leaves no party any
    with pytest.raises(ConfigurationError, match="reveal = 'respectively'"):
        config(tmp_path, {}, {"model": "logistic", "protocol": "shared", "reveal": "never"})
    assert config(tmp_path, {}, {"model": "logistic", "protocol": "shared"}).pipeline is not None
    woe = VerticalWOE(**KEYS)
    with pytest.raises(ConfigurationError, match=r"VerticalScorecard \('scorecard'\): .*reveal = 'respectively'"):
        VerticalPipeline([("woe", woe), ("selection", VerticalSelection()),
                          ("scorecard", VerticalScorecard(VerticalLogisticRegression(protocol="shared", reveal="never",
                                                                                     **KEYS)))]).fit(credit_data(n=300))
    assert not hasattr(woe, "iv_")          # refused before the WOE step ran
    with pytest.raises(ConfigurationError, match="VerticalScorecard: .*reveal = 'respectively'"):
        VerticalScorecard(VerticalLogisticRegression(protocol="shared", reveal="never", **KEYS)).fit(
            credit_data(n=300))


def test_api_refuses_what_the_file_refuses():
    data = credit_data(n=300)
    with pytest.raises(ConfigurationError, match="share_woe must be True or False"):
        VerticalWOE(share_woe=1, **KEYS).fit(data)
    with pytest.raises(ConfigurationError, match="only the label party bins monotonically"):
        VerticalWOE(VerticalBinning(strategy="monotone"), **KEYS).fit(data)
    with pytest.raises(ConfigurationError, match="top_k"):
        VerticalSelection(top_k=0).fit(data, upstream=VerticalWOE(**KEYS).fit(data))


def test_three_classes_get_one_vs_rest_iv_but_no_scorecard():
    data = credit_data(n=600, classes=3)
    with pytest.raises(DataError, match="party bank: monotone binning follows one event class, but the label column "
                                        "holds 3 classes"):
        VerticalWOE(**KEYS).fit(data)
    woe = VerticalWOE(VerticalBinning(label_strategy="quantile"), **KEYS).fit(data)
    assert woe.woe_["telco"][0].shape[1] == 3 and np.argmax(woe.iv_["telco"]) == 0
    with pytest.raises(DataError, match="party bank: a scorecard scores one event class, but the label column "
                                        "holds 3 classes"):
        VerticalScorecard().fit(data, upstream=woe)


def test_infinity_is_refused_naming_party_column_and_row():
    telco, bank = credit_frames(n=200)
    telco.loc[7, "tenure"] = np.inf
    with pytest.raises(DataError, match="party telco, column 'tenure': infinity at row 7"):
        VerticalWOE(**KEYS).fit(VerticalDataset({"telco": telco, "bank": bank}, label="default", id_column="id"))


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


def test_the_pipeline_trains_afresh(tmp_path):
    with pytest.raises(ConfigurationError, match="the pipeline bins, selects and trains afresh"):
        config(tmp_path, {}, {"model": "logistic", "warm_start": True})
