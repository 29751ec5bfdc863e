import numpy as np
import pytest

from vfl.horizontal import aggregate, coordinate_median, trimmed_mean, weighted_average
from vfl.horizontal.errors import EmptyClientError, InvalidParameterError, ShapeMismatchError


@pytest.fixture
def honest():
    rng = np.random.default_rng(1)
    return [1.0 + 0.1 * rng.normal(size=6) for _ in range(9)]


def test_weighted_average_is_sum_of_nk_over_n_times_wk():
    w = [np.array([1.0, 0.0]), np.array([0.0, 2.0]), np.array([4.0, 4.0])]
    n_k = [1, 3, 4]
    expected = (1 * w[0] + 3 * w[1] + 4 * w[2]) / 8
    np.testing.assert_allclose(weighted_average(w, n_k), expected)


def test_weighted_average_properties(honest):
    n_k = np.arange(1, 10)
    # scale invariance of the weights, equal weights give the plain mean
    np.testing.assert_allclose(weighted_average(honest, n_k), weighted_average(honest, 7 * n_k))
    np.testing.assert_allclose(weighted_average(honest, np.ones(9)), np.mean(honest, axis=0))
    # a client with zero examples has no influence
    with_zero = weighted_average(honest + [np.full(6, 1e9)], list(n_k) + [0])
    np.testing.assert_allclose(with_zero, weighted_average(honest, n_k))
    # unequal weights really differ from the unweighted mean
    assert not np.allclose(weighted_average(honest, n_k), np.mean(honest, axis=0))


def test_trimmed_mean_known_values():
    values = [np.array([v]) for v in (1.0, 2.0, 3.0, 4.0, 100.0)]
    assert trimmed_mean(values, beta=0.2)[0] == pytest.approx(3.0)
    assert trimmed_mean(values, beta=0.0)[0] == pytest.approx(22.0)
    assert coordinate_median(values)[0] == pytest.approx(3.0)


@pytest.mark.parametrize("attack", [1e9, -1e9, np.inf])
def test_malicious_update_breaks_mean_not_robust_rules(honest, attack):
    bad = honest + [np.full(6, attack)]
    n_k = np.ones(len(bad))
    low, high = np.min(honest, axis=0), np.max(honest, axis=0)
    mean = aggregate(bad, n_k, "mean")
    assert not np.all(np.abs(mean - np.mean(honest, axis=0)) < 1.0)
    for method in ("median", "trimmed_mean"):
        robust = aggregate(bad, n_k, method, beta=0.2)
        assert np.all(np.isfinite(robust))
        assert np.all((robust >= low) & (robust <= high)), method


def test_robust_rules_do_not_depend_on_weights(honest):
    # median / trimmed mean are unweighted (as Flower's FedMedian / FedTrimmedAvg)
    a = aggregate(honest, np.ones(9), "median")
    b = aggregate(honest, np.arange(1, 10), "median")
    np.testing.assert_array_equal(a, b)


def test_aggregation_errors():
    with pytest.raises(EmptyClientError):
        weighted_average([], [])
    with pytest.raises(ShapeMismatchError, match="client 1 sent 3 parameters but client 0 sent 2"):
        coordinate_median([np.zeros(2), np.zeros(3)])
    with pytest.raises(ShapeMismatchError, match="2 parameter vectors but 3 weights"):
        weighted_average([np.zeros(2), np.zeros(2)], [1, 1, 1])
    with pytest.raises(InvalidParameterError, match="sum to zero"):
        weighted_average([np.zeros(2)], [0])
    with pytest.raises(InvalidParameterError, match="beta"):
        trimmed_mean([np.zeros(2)], beta=0.5)
    with pytest.raises(InvalidParameterError, match="unknown aggregator"):
        aggregate([np.zeros(2)], [1], "krum")
