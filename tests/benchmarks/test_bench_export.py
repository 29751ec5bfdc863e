"""The export benchmark measures exports that load: a small binary model's XGBoost and ONNX exports, scored."""

import pytest

from benchmarks.export import PARTIES, measure
from vfl.transport.tls import write_federation_certs

pytest.importorskip("xgboost")
pytest.importorskip("onnxruntime")


def test_the_export_benchmark_scores_both_exports(tmp_path):
    certs = write_federation_certs(tmp_path / "certs", PARTIES)
    line = measure("binary", 300, 500, 3, tmp_path, certs)
    assert line.startswith("binary") and "500 rows" in line and "same leaf 100.0000%" in line
    assert "float32 band: 0 rows" in line
