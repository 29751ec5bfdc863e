"""The parts of ``python -m benchmarks --quality`` that need no FATE data: unit recovery, the exact optimum, the goals."""

import numpy as np
import pytest
from scipy.optimize import minimize

from benchmarks import quality
from vfl.protocols.linear import TrainingSettings


def _zscored(values: np.ndarray) -> np.ndarray:
    """As FATE wrote its columns: population z-scores, six decimals."""
    return np.round((values - values.mean()) / values.std(), 6)


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(7)
    n = 5000
    amounts = np.where(rng.random(n) < 0.2, 0, rng.integers(-3000, 60000, n))
    amounts[:3] = [-165580, 964511, 420000]         # a sparse tail, as bills have
    limits = rng.choice(np.arange(1, 101) * 10000, n)
    limits[:2] = [16000, 327680]                    # a few values off the 10,000 grid
    return {"codes": rng.integers(-2, 9, n), "ages": rng.integers(21, 80, n), "amounts": amounts,
            "limits": limits}


@pytest.mark.parametrize("name", ["codes", "ages", "amounts"])
def test_integers_come_back_from_their_z_scores_and_minimum(table, name):
    original = table[name]
    found = quality.recover_integers(_zscored(original), int(original.min()), name=name)
    np.testing.assert_array_equal(found.values, original)
    assert found.unit == pytest.approx(original.std(), rel=1e-6)
    assert found.max_deviation < 0.25 and found.restandardized_error <= 1e-6


def test_a_column_without_two_values_one_unit_apart_needs_its_maximum(table):
    original, z = table["limits"], _zscored(table["limits"])
    with pytest.raises(ValueError, match="limits: the values are not integers.*known maximum"):
        quality.recover_integers(z, int(original.min()), name="limits")
    found = quality.recover_integers(z, int(original.min()), int(original.max()), name="limits")
    np.testing.assert_array_equal(found.values, original)


def test_a_scale_that_puts_values_between_integers_is_refused(table):
    original = table["ages"]
    assert (original.min(), original.max()) == (21, 79)
    with pytest.raises(ValueError, match="ages: the values are not integers"):
        quality.recover_integers(_zscored(original), 21, 21 + 87, name="ages")     # 1.5 times the range


def test_resolution_reads_the_decimals_written():
    assert quality.resolution(np.array([0.123456, -1.5])) == pytest.approx(5e-7)
    assert quality.resolution(np.array([1.0, 2.0])) == 0.5


def test_closed_form_optimum_matches_a_numerical_minimiser():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 5)) * [1, 2, 0.5, 1, 3]
    y = np.where(x @ [1.0, -0.5, 2.0, 0.0, 0.3] + 0.4 + rng.normal(size=400) > 0, 1.0, -1.0)
    settings = TrainingSettings(alpha=0.05, insecure=True, key_bits=1024)
    coef, intercept, condition = quality.taylor_optimum(x, y, settings.alpha)

    def loss(theta):
        return quality.objective_value(x, y, theta[:-1], theta[-1], settings)

    def gradient(theta):
        z = x @ theta[:-1] + theta[-1]
        dz = (z / 4 - y / 2) / len(y)
        return np.append(x.T @ dz + settings.alpha * theta[:-1], dz.sum())

    numerical = minimize(loss, np.zeros(6), jac=gradient, method="BFGS", options={"gtol": 1e-12})
    np.testing.assert_allclose(coef, numerical.x[:-1], atol=1e-6)
    assert intercept == pytest.approx(numerical.x[-1], abs=1e-6)
    assert loss(np.append(coef, intercept)) <= numerical.fun + 1e-14
    assert condition > 1


def _figures(aucs, passes, gaps):
    return {"auc": aucs, "passes": passes, "gap": gaps, "error": None}


def test_goals_met_and_missed_are_reported_with_their_figures():
    met = quality.goal_lines(_figures([0.7101, 0.7105], [30, 33], [1e-8, 5e-7]), 24)
    assert met == ["goal test AUC >= 0.709 from any start: met (lowest 0.7101 over 2 starts)",
                   "goal spread <= 0.002 over starts: met (max - min = 0.0004)",
                   "goal loss within 1e-06 relative of the optimum in <= 34 passes (24 weights + 10): met "
                   "(largest gap 5.00e-07, most passes 33)"]
    missed = quality.goal_lines(_figures([0.65, 0.69], [30, 30], [0.02, 0.1]), 24)
    assert [line.split(": ")[1].split()[0] for line in missed] == ["MISSED"] * 3
    assert "lowest 0.6500" in missed[0] and "max - min = 0.0400" in missed[1]
    slow = quality.goal_lines(_figures([0.71, 0.71], [35, 35], [0.0, 0.0]), 24, with_auc=False)
    assert len(slow) == 2 and "MISSED" in slow[1] and "most passes 35" in slow[1]
    failed = quality.goal_lines({"auc": [], "passes": [], "gap": [], "error": "diverges"}, 24)
    assert failed == ["goals: not measurable, training failed: diverges"]


def test_the_bench_runs_on_bundled_data_and_says_what_it_needs(capsys):
    from benchmarks.__main__ import machine, load, parse_args, table

    args = parse_args(["--quality", "--runs", "2", "--federated", "0", "--federated-2048", "0"])
    report = quality.main_quality(args, machine, load, table)
    out = capsys.readouterr().out
    assert "pass --data DIR" in out and "default_credit_hetero_guest.csv" in out
    assert "defaults: VerticalLogisticRegression()" in out and "optimum of vfl's Taylor objective" in out
    assert report["dataset"] == "breast_cancer" and len(report["rows"][0]["auc"]) == 2
    assert "goal spread <= 0.002" in out
