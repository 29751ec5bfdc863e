"""Per-client evaluation shared by every estimator: client test sets, worst 10 %, client=k, local-only."""

import numpy as np
import pytest

from vfl.horizontal import (
    AgnosticFL,
    FedAvg,
    HierFAVG,
    L2GD,
    LocalOnly,
    PerFedAvg,
    load_clients,
    worst_fraction_mean,
)
from vfl.horizontal.errors import EmptyClientError, InvalidParameterError, LabelError, ShapeMismatchError


def test_worst_fraction_mean():
    values = np.arange(20) / 20  # 0.00, 0.05, ...
    assert worst_fraction_mean(values) == pytest.approx(0.025)  # the worst 2 of 20
    assert worst_fraction_mean(values[:5]) == 0.0  # at least one client
    assert worst_fraction_mean(values[:11]) == pytest.approx(0.025)  # ceil(1.1) = 2
    assert worst_fraction_mean(values, 1.0) == pytest.approx(values.mean())
    with pytest.raises(InvalidParameterError, match="fraction"):
        worst_fraction_mean(values, 0.0)
    with pytest.raises(ShapeMismatchError, match="non-empty"):
        worst_fraction_mean([])


def test_load_clients_gives_each_client_its_own_test_rows():
    train, tests = load_clients("digits", 10, "pathological", test_size=0.25, seed=1)
    assert len(train) == len(tests) == 10
    assert sum(len(y) for _, y in train) + sum(len(y) for _, y in tests) == 1797
    for (_, y_train), (_, y_test) in zip(train, tests):
        assert set(y_test) <= set(y_train)  # the client's own labels, mostly two (shards straddle labels)
        assert np.sort(np.bincount(y_train))[-2:].sum() > 0.9 * len(y_train)
        assert 0.2 < len(y_test) / (len(y_train) + len(y_test)) < 0.3
    pooled = np.vstack([X for X, _ in train])
    np.testing.assert_allclose(pooled.mean(axis=0), 0, atol=1e-10)  # scaled with the training rows only
    again, _ = load_clients("digits", 10, "pathological", test_size=0.25, seed=1)
    np.testing.assert_array_equal(again[3][0], train[3][0])


def test_fedavg_records_the_global_model_on_every_clients_test_set(digits_clients):
    train, tests = digits_clients
    est = FedAvg(num_rounds=3, fraction_fit=0.5, batch_size=20, random_state=0).fit(train, client_tests=tests)
    accuracies = est.client_accuracies(tests)
    assert accuracies.shape == (20,)
    assert est.history_["client_accuracy_mean"].iloc[-1] == pytest.approx(accuracies.mean())
    assert est.history_["client_accuracy_worst10"].iloc[-1] == pytest.approx(np.sort(accuracies)[:2].mean())
    # one global model: client=k is that model for everyone
    X, y = tests[4]
    np.testing.assert_array_equal(est.predict(X, client=4), est.predict(X))
    assert accuracies[4] == est.score(X, y)
    # without client tests the columns are there, NaN
    plain = FedAvg(num_rounds=2, fraction_fit=0.5, random_state=0).fit(train)
    assert plain.history_["client_accuracy_mean"].isna().all()


def test_local_only_has_no_global_model(digits_clients):
    train, tests = digits_clients
    est = LocalOnly(num_rounds=3, local_epochs=2, batch_size=10, learning_rate=0.1, random_state=0)
    est.fit(train, client_tests=tests)
    assert est.parameters_ is None and est.personalized_parameters_.shape == (20, 650)
    with pytest.raises(InvalidParameterError, match="LocalOnly has no global model; pass client=k"):
        est.predict(tests[0][0])
    assert est.client_accuracies(tests).mean() > 0.9  # two labels per client: easy alone
    assert est.history_["test_accuracy"].isna().all() and (est.history_["bytes_total"] == 0).all()


@pytest.mark.parametrize("estimator", [
    FedAvg(num_rounds=1, fraction_fit=1.0), AgnosticFL(num_rounds=1), L2GD(num_rounds=1),
    PerFedAvg(num_rounds=1, fraction_fit=1.0), HierFAVG(num_rounds=1, kappa1=1, kappa2=1), LocalOnly(num_rounds=1),
], ids=lambda est: type(est).__name__)
def test_bad_client_tests_and_client_index(digits_clients, estimator):
    train, tests = digits_clients
    with pytest.raises(ShapeMismatchError, match="client_tests has 19 test sets for 20 clients"):
        estimator.fit(train, client_tests=tests[:-1])
    broken = list(tests)
    broken[3] = (tests[3][0][:, :10], tests[3][1])
    with pytest.raises(ShapeMismatchError, match=r"client 3's test X has shape \(\d+, 10\)"):
        estimator.fit(train, client_tests=broken)
    broken[3] = (tests[3][0][:0], tests[3][1][:0])
    with pytest.raises(EmptyClientError, match="client 3's test set has no rows"):
        estimator.fit(train, client_tests=broken)
    broken[3] = (tests[3][0], np.full(len(tests[3][1]), 11))
    with pytest.raises(LabelError, match=r"client 3's test labels \[11\]"):
        estimator.fit(train, client_tests=broken)
    estimator.fit(train, client_tests=tests)
    for bad in (20, -1, 1.0, True, "0"):
        with pytest.raises(InvalidParameterError, match=r"client must be an index 0 \.\. 19"):
            estimator.predict(tests[0][0], client=bad)
    if hasattr(estimator, "personalized_parameters_"):
        with pytest.raises(ShapeMismatchError, match="one model per client for 20 clients"):
            estimator.client_accuracies(tests[:3])
