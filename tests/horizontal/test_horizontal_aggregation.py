import re
import warnings

import numpy as np
import pytest

from vfl.horizontal import (
    FedAvg,
    aggregate,
    coordinate_median,
    edge_average,
    max_tolerated_faults,
    mix_toward_mean,
    trimmed_mean,
    weighted_average,
)
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
    with pytest.raises(InvalidParameterError, match=r"beta must be in \[0, 0.5\), got 'x'"):
        trimmed_mean([np.zeros(2)], beta="x")
    with pytest.raises(InvalidParameterError, match="beta"):
        aggregate([np.zeros(2)], [1], "trimmed_mean", beta=np.nan)
    with pytest.raises(InvalidParameterError, match="unknown aggregator"):
        aggregate([np.zeros(2)], [1], "krum")


@pytest.mark.parametrize("method, m, beta, expected", [
    ("mean", 10, 0.2, 0),
    ("median", 1, 0.2, 0), ("median", 2, 0.2, 0), ("median", 3, 0.2, 1), ("median", 10, 0.2, 4),
    ("median", 11, 0.2, 5),
    ("trimmed_mean", 4, 0.2, 0), ("trimmed_mean", 5, 0.2, 1), ("trimmed_mean", 10, 0.2, 2),
    ("trimmed_mean", 10, 0.0, 0), ("trimmed_mean", 10, 0.1, 1), ("trimmed_mean", 3, 0.49, 1),
])
def test_max_tolerated_faults(method, m, beta, expected):
    assert max_tolerated_faults(method, m, beta) == expected


@pytest.mark.parametrize("method, m, beta", [("median", 3, 0.2), ("median", 10, 0.2), ("trimmed_mean", 5, 0.2),
                                             ("trimmed_mean", 10, 0.1), ("trimmed_mean", 7, 0.3)])
def test_max_tolerated_faults_is_attained(method, m, beta):
    # f = max_tolerated_faults bad vectors (at +/- huge values) keep the aggregate
    # inside the honest range; f + 1 of them do not
    rng = np.random.default_rng(0)
    f = max_tolerated_faults(method, m, beta)
    for bad_count, stays in ((f, True), (f + 1, False)):
        honest = [rng.uniform(-1, 1, size=4) for _ in range(m - bad_count)]
        bad = [np.full(4, 1e9)] * bad_count
        agg = aggregate(honest + bad, np.ones(m), method, beta)
        inside = np.all((agg >= np.min(honest, axis=0)) & (agg <= np.max(honest, axis=0)))
        assert inside == stays, (bad_count, agg)


def test_max_tolerated_faults_errors():
    with pytest.raises(InvalidParameterError, match="unknown aggregator"):
        max_tolerated_faults("krum", 5)
    with pytest.raises(InvalidParameterError, match="n_clients"):
        max_tolerated_faults("median", 0)
    with pytest.raises(InvalidParameterError, match="beta"):
        max_tolerated_faults("trimmed_mean", 5, beta=0.5)


def _clients(k):
    rng = np.random.default_rng(0)
    return [(rng.normal(size=(8, 3)), np.arange(8) % 2) for _ in range(k)]


def _not_robust_warnings(**params):
    """Fit 3 rounds on 10 clients; return the messages of the robust-aggregator warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FedAvg(num_rounds=3, learning_rate=0.1, random_state=0, **params).fit(_clients(10))
    return [str(w.message) for w in caught
            if issubclass(w.category, RuntimeWarning) and "tolerates no malicious client" in str(w.message)]


@pytest.mark.parametrize("params, expected", [
    (dict(aggregator="median", fraction_fit=0.1), r"median of 1 value\(s\) is that value.*m >= 3"),
    (dict(aggregator="median", fraction_fit=0.2), r"median of 2 value\(s\) is their mean"),
    (dict(aggregator="trimmed_mean", fraction_fit=0.4, trim_beta=0.2),
     r"trim_beta=0.2 and m=4 .* floor\(0.2 \* 4\) = 0 .* needs m >= 5, or raise trim_beta"),
    (dict(aggregator="trimmed_mean", fraction_fit=0.1, min_fit_clients=2, trim_beta=0.3), r"m=2 .* m >= 4"),
    (dict(aggregator="trimmed_mean", fraction_fit=1.0, trim_beta=0.0), "use trim_beta > 0"),
])
def test_robust_aggregator_that_protects_nothing_warns_once_per_fit(params, expected):
    messages = _not_robust_warnings(**params)
    assert len(messages) == 1  # once per fit, not once per round
    assert re.search(expected, messages[0]), messages


@pytest.mark.parametrize("params", [
    dict(aggregator="mean", fraction_fit=0.1),
    dict(aggregator="median", fraction_fit=0.3),
    dict(aggregator="trimmed_mean", fraction_fit=0.5, trim_beta=0.2),
    dict(aggregator="trimmed_mean", fraction_fit=0.1, min_fit_clients=5),
])
def test_robust_aggregator_with_enough_clients_does_not_warn(params):
    assert _not_robust_warnings(**params) == []


def test_mix_toward_mean_moves_each_vector_a_fraction_of_the_way(honest):
    stacked = np.array(honest)
    mean = stacked.mean(axis=0)
    np.testing.assert_allclose(mix_toward_mean(honest, 0.0), stacked)
    np.testing.assert_allclose(mix_toward_mean(honest, 1.0), np.tile(mean, (9, 1)))
    moved = mix_toward_mean(honest, 0.3)
    np.testing.assert_allclose(moved, 0.7 * stacked + 0.3 * mean)
    np.testing.assert_allclose(moved.mean(axis=0), mean)  # the mean does not move...
    # ... so j steps of weight c compose into one step of weight 1 - (1 - c)^j
    twice = mix_toward_mean(mix_toward_mean(mix_toward_mean(honest, 0.3), 0.3), 0.3)
    np.testing.assert_allclose(twice, mix_toward_mean(honest, 1 - 0.7**3))
    with pytest.raises(InvalidParameterError, match=r"weight must be in \[0, 1\], got 1.5"):
        mix_toward_mean(honest, 1.5)


def test_edge_then_cloud_average_is_one_weighted_average(honest):
    n_k = np.arange(1, 10)
    edges = np.array([2, 0, 1, 1, 0, 2, 2, 1, 0])
    edge_models, edge_n = edge_average(honest, n_k, edges)
    assert edge_models.shape == (3, 6)
    np.testing.assert_array_equal(edge_n, [n_k[edges == e].sum() for e in range(3)])
    members = np.flatnonzero(edges == 1)
    np.testing.assert_allclose(edge_models[1], weighted_average([honest[i] for i in members], n_k[members]))
    np.testing.assert_allclose(weighted_average(edge_models, edge_n), weighted_average(honest, n_k))
    with pytest.raises(InvalidParameterError, match="each with at least one client"):
        edge_average(honest, n_k, np.array([0, 0, 2, 2, 0, 2, 2, 0, 0]))
    with pytest.raises(ShapeMismatchError, match="one integer edge index per client"):
        edge_average(honest, n_k, [0, 1])
    with pytest.raises(ShapeMismatchError, match="9 parameter vectors but 2 weights"):
        edge_average(honest, [1, 2], edges)
