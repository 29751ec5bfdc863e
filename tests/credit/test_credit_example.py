"""examples/credit_pipeline.py runs (1024-bit test keys): IV finds the planted column, the AUC is the centralized one's."""

import runpy
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "credit_pipeline.py"


def test_the_example_finds_the_planted_column_and_scores_like_the_centralized_scorecard(capsys):
    result = runpy.run_path(str(EXAMPLE), run_name="not_main")["main"](["--key-bits", "1024", "--rows", "2500"])
    assert result["ranking"][0][1:] == ("telco", "calls")
    assert "calls" in result["selected"]["telco"]
    (vfl_auc, vfl_ks), (central_auc, central_ks) = result["results"]["vfl"], result["results"]["centralized"]
    assert vfl_auc > 0.65 and abs(vfl_auc - central_auc) < 0.03 and abs(vfl_ks - central_ks) < 0.06, result["results"]
    out = capsys.readouterr().out
    assert "information value, highest first" in out and "AUC" in out and "KS" in out
