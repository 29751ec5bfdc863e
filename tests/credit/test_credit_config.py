"""The credit pipeline's bad settings and input through the API: clear errors, by name (the file's ``[pipeline]``
table: tests/deploy/test_config.py)."""

import numpy as np
import pytest

from credit_data import KEYS, config, credit_data, credit_frames
from vfl import VerticalDataset, VerticalLogisticRegression
from vfl.errors import ConfigurationError, DataError
from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE


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


def test_the_pipeline_trains_afresh(tmp_path):
    with pytest.raises(ConfigurationError, match="the pipeline bins, selects and trains afresh"):
        config(tmp_path, {}, {"model": "logistic", "warm_start": True})
