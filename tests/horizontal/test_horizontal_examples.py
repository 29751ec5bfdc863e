"""Smoke test of examples/compare_vertical_horizontal.py's horizontal part (a few seconds)."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "compare_vertical_horizontal.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("compare_vertical_horizontal", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fedavg_runs_to_the_centralized_optimum(example, tmp_path, capsys):
    figure = tmp_path / "sub" / "compare.png"
    assert example.main(["--skip-vertical", "--clients", "2", "10", "--tol", "1e-3", "--figure", str(figure)]) == 0
    out = capsys.readouterr().out
    assert figure.is_file() and figure.stat().st_size > 10_000
    assert "1 row = 0.88 accuracy points" in out
    assert "When each paradigm applies" in out and "same people, different features" in out
    assert "NOT converged" not in out
    centralized = re.search(r"centralized \(pooled rows\)\s+(\S+)\s+(\S+)\s+(\S+)", out).groups()
    for K in (2, 10):
        line = re.search(rf"FedAvg, K={K} clients\s+(\S+)\s+(\S+)\s+(\S+)\s+\+(\S+)%\s+(\d+) rounds", out)
        accuracy, auc, objective, gap, rounds = line.groups()
        assert float(gap) <= 0.1 and float(objective) <= float(centralized[2]) * 1.001
        assert int(rounds) > 30  # the old fixed budget was far too short
        assert (accuracy, auc) == centralized[:2]  # at the optimum FedAvg is the centralized model


def test_taylor_optimum_is_stationary(example):
    import numpy as np

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)), rng.integers(0, 2, size=50)
    coef, intercept = example.taylor_optimum(X, y)
    s, z = 2.0 * y - 1.0, X @ coef + intercept
    residual = (z / 4 - s / 2) / len(y)  # derivative of log 2 - s z / 2 + z^2 / 8, averaged
    np.testing.assert_allclose(X.T @ residual + example.L2 * coef, 0, atol=1e-12)
    assert abs(residual.sum()) < 1e-12


PERSONALIZED = Path(__file__).resolve().parents[2] / "examples" / "personalized_digits.py"


def test_personalized_example_runs_its_comparison_in_miniature(tmp_path, capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("personalized_digits", PERSONALIZED)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "personalized_digits", module)  # its worker processes find its functions
    spec.loader.exec_module(module)
    figure = tmp_path / "personalized.png"
    assert module.main(["--seeds", "1", "--rounds", "4", "--cloud-rounds", "3", "--target", "0.9",
                        "--figure", str(figure)]) == 0
    out = capsys.readouterr().out
    assert figure.is_file() and figure.stat().st_size > 10_000
    for split in ("pathological", "Dirichlet 0.1", "Dirichlet 0.5", "Dirichlet 10"):
        for method in ("FedAvg", "L2GD", r"Per-FedAvg \(HF\)", "local only"):
            row = rf"^\| {split} \| {method} \| 0\.\d{{3}} \| 0\.\d{{3}} \| "
            assert re.search(row, out, re.MULTILINE), (split, method)
    assert re.search(r"^\| pathological \| L2GD \| .* \| lambda = [\d.]+ \|$", out, re.MULTILINE)
    assert re.search(r"^\| 5 \| 5 \| 25 \| ", out, re.MULTILINE)  # the HierFAVG table
    assert "load average" in out
