"""``vfl export`` of a logistic model trained by ``vfl party``: the feature party signs, the label party writes the
ONNX model, which gives on raw test rows the probabilities ``vfl predict`` wrote."""

import json

import numpy as np
import pandas as pd
import pytest

from export_helpers import onnx_run
from vfl.cli import main
from vfl_net_helpers import assert_succeeded, federation, federation_certs, run_parties  # noqa: F401 - fixtures

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]    # party processes over TLS
pytest.importorskip("onnxruntime")


def test_a_federation_s_logistic_model_exported_by_vfl_export_predicts_as_vfl_predict(federation, tmp_path):
    # A's three continuous columns reach B through its partial scores: whether its release check lets them out
    # depends on the secret start, and this test is about the export, so A opts in
    config = federation["make"](training={"standardize": True}, )
    config.write_text(config.read_text().replace("[parties.A]\n", "[parties.A]\nallow_reconstruction = true\n"))
    data, work = federation["data"], federation["dir"] / "run"
    assert_succeeded(run_parties("party", config, data, work, timeout=180))
    assert_succeeded(run_parties("predict", config, data, work, timeout=180))
    consent = tmp_path / "A.consent.json"
    assert main(["export", "consent", "--config", str(config), "--role", "A", "--model", str(work / "A"),
                 "--format", "onnx", "--to", "B", "--out", str(consent)]) == 0
    assert json.loads(consent.read_text())["consent"]["family"] == "linear"
    out = tmp_path / "model.onnx"
    assert main(["export", "--config", str(config), "--role", "B", "--model", str(work / "B"), "--format", "onnx",
                 "--consents", str(consent), "--out", str(out)]) == 0
    rows = pd.read_csv(data[("A", "test")]).merge(pd.read_csv(data[("B", "test")]), on="id").set_index("id")
    scores = pd.read_csv(work / "B" / "scores.csv").set_index("id").loc[rows.index]
    got = np.asarray(onnx_run(out, rows)["probability"], dtype=np.float64)
    got = got[:, -1] if got.ndim == 2 else got
    np.testing.assert_allclose(got, scores["probability"], atol=1e-6)
    # without A's consent nothing is written
    refused = tmp_path / "refused.onnx"
    assert main(["export", "--config", str(config), "--role", "B", "--model", str(work / "B"), "--format", "onnx",
                 "--out", str(refused)]) != 0
    assert not refused.exists()
