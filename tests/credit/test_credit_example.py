"""examples/credit_pipeline.py runs from the parties' raw CSVs (1024-bit test keys): IV finds the planted column,
the AUC is the centralized one's, and the federation it writes for ``vfl party`` loads."""

import runpy
from pathlib import Path

import pandas as pd

from vfl.deploy.config import load_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "credit_pipeline.py"


def test_the_example_finds_the_planted_column_and_scores_like_the_centralized_scorecard(capsys, tmp_path):
    main = runpy.run_path(str(EXAMPLE), run_name="not_main")["main"]
    result = main(["--key-bits", "1024", "--rows", "1800", "--data", str(tmp_path), "--federation"])
    assert result["ranking"][0][1:] == ("telco", "calls")
    assert "calls" in result["selected"]["telco"]
    (vfl_auc, vfl_ks), (central_auc, central_ks) = result["results"]["vfl"], result["results"]["centralized"]
    assert vfl_auc > 0.65 and abs(vfl_auc - central_auc) < 0.03 and abs(vfl_ks - central_ks) < 0.06, result["results"]
    out = capsys.readouterr().out
    assert "information value, highest first" in out and "AUC" in out and "KS" in out
    # the CSVs are raw: each party lacks some of the other's customers and lists its own in its own order
    telco, bank = (pd.read_csv(tmp_path / f"{name}.csv", dtype={"id": str}) for name in ("telco", "bank"))
    assert set(telco.id) != set(bank.id) and list(telco.id) != list(bank.id)
    assert "default" in bank.columns and "default" not in telco.columns
    config = load_config(tmp_path / "federation.toml")
    assert config.pipeline is not None and config.label == "default"
