"""L2GD against its objective, written out independently in numpy (logistic_reference), and its limits.

F(theta_1..theta_K) = 1/K sum_k F_k(theta_k) + lam/(2K) sum_k ||theta_k - mean||^2 (Hanzely and Richtárik 2020).
"""

import numpy as np
import pytest

from logistic_reference import argmin, consensus_optimum, grad, local_optima, loss, make_clients
from vfl.horizontal import FedAvg, L2GD, LocalOnly, mixture_objective
from vfl.horizontal.errors import InvalidParameterError

L2 = 0.1


@pytest.fixture(scope="module")
def clients():
    return make_clients([20, 30, 40])


def objective(flat, clients, lam):
    """F and its gradient for the stacked models (K * (d + 1),)."""
    K = len(clients)
    T = flat.reshape(K, -1)
    mean = T.mean(axis=0)
    value = sum(loss(T[k], *clients[k], L2) for k in range(K)) / K + lam / (2 * K) * np.sum((T - mean) ** 2)
    gradient = np.concatenate([grad(T[k], *clients[k], L2) / K + lam / K * (T[k] - mean) for k in range(K)])
    return value, gradient


def minimiser(clients, lam):
    K, d = len(clients), clients[0][0].shape[1] + 1
    return argmin(lambda flat: objective(flat, clients, lam), np.zeros(K * d)).reshape(K, d)


def test_each_round_is_the_papers_coin_flips(clients):
    # Algorithm 1 of the paper, one coin flip at a time, with the paper's stepsize alpha: a local
    # step theta_k -= alpha / (K (1 - p)) grad F_k, an aggregation step theta_k -= alpha lam / (K p)
    # (theta_k - mean).  The estimator reports each round's run lengths; replaying them step by step
    # (the aggregation steps one by one, not composed) must give its models.
    K, lam, p, rate = 3, 0.7, 0.3, 0.2
    est = L2GD(num_rounds=8, lam=lam, p=p, learning_rate=rate, l2=L2, random_state=5).fit(clients)
    alpha = K * (1 - p) * rate  # the paper's stepsize for this learning_rate
    T = np.zeros((K, 4))
    for local, mixing in zip(est.history_["local_steps"], est.history_["aggregation_steps"]):
        for _ in range(local):
            T = np.array([T[k] - alpha / (K * (1 - p)) * grad(T[k], *clients[k], L2) for k in range(K)])
        for _ in range(mixing):
            T = T - alpha * lam / (K * p) * (T - T.mean(axis=0))
    np.testing.assert_allclose(est.personalized_parameters_, T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.parameters_, T.mean(axis=0), rtol=1e-10, atol=1e-12)
    assert (est.history_["local_steps"] >= 1).all() and (est.history_["aggregation_steps"] >= 1).all()
    assert est.history_["local_steps"].nunique() > 1  # the coin really varies the rounds
    # every round: K models up, the mean down to K clients
    assert (est.history_["bytes_up"] == K * 4 * 8).all() and est.history_["bytes_total"].iloc[-1] == 8 * 2 * K * 32
    # the recorded objective is F at the models
    assert est.history_["train_objective"].iloc[-1] == pytest.approx(objective(T.ravel(), clients, lam)[0], rel=1e-10)
    assert mixture_objective(est.model_, T, [(X, y) for X, y in clients], lam) == pytest.approx(
        objective(T.ravel(), clients, lam)[0], rel=1e-12)


def test_coin_gives_aggregation_steps_with_probability_p():
    tiny = make_clients([5, 5], d=1, seed=1)
    p = 0.3
    h = L2GD(num_rounds=1500, lam=0.1, p=p, learning_rate=0.1, random_state=0).fit(tiny).history_
    steps = h["local_steps"].sum() + h["aggregation_steps"].sum()
    share = h["aggregation_steps"].sum() / steps
    assert abs(share - p) < 3 * np.sqrt(p * (1 - p) / steps) + 0.01, share
    assert h["local_steps"].mean() == pytest.approx(1 / p, rel=0.1)        # runs of local steps: Geometric(p)
    assert h["aggregation_steps"].mean() == pytest.approx(1 / (1 - p), rel=0.1)


def test_averaged_iterates_reach_the_minimiser_of_the_objective(clients):
    lam = 1.0
    exact = minimiser(clients, lam)
    local, consensus = local_optima(clients, L2), consensus_optimum(clients, L2)
    # the mixture optimum is neither local training nor one shared model: the check below discriminates
    scale = min(np.abs(exact - local).max(), np.abs(exact - consensus).max())
    assert scale > 0.3
    est = L2GD(num_rounds=3000, lam=lam, p=0.5, learning_rate=0.02, l2=L2, average_iterates=True,
               random_state=0).fit(clients)
    assert np.abs(est.personalized_parameters_ - exact).max() < 0.05 * scale
    gap = est.history_["train_objective"].iloc[-1] - objective(exact.ravel(), clients, lam)[0]
    assert 0 <= gap < 1e-3 * (objective(local.ravel(), clients, lam)[0] - objective(exact.ravel(), clients, lam)[0])


def test_lambda_zero_is_local_training(clients):
    K = len(clients)
    est = L2GD(num_rounds=6, lam=0.0, p=0.4, learning_rate=0.3, l2=L2, random_state=2).fit(clients)
    steps = int(est.history_["local_steps"].sum())
    expected = []
    for X, y in clients:
        theta = np.zeros(4)
        for _ in range(steps):
            theta = theta - 0.3 * grad(theta, X, y, L2)
        expected.append(theta)
    np.testing.assert_allclose(est.personalized_parameters_, expected, rtol=1e-10, atol=1e-12)
    # ... which LocalOnly does without communicating
    alone = LocalOnly(num_rounds=steps, learning_rate=0.3, l2=L2).fit(clients)
    np.testing.assert_allclose(alone.personalized_parameters_, expected, rtol=1e-10, atol=1e-12)
    assert (alone.history_["bytes_total"] == 0).all() and len(alone.history_) == steps
    # and at the objective level: as lam -> 0 the minimiser of F tends to the clients' own optima
    local = local_optima(clients, L2)
    assert np.abs(minimiser(clients, 1e-5) - local).max() < 1e-3 < np.abs(minimiser(clients, 0.1) - local).max()
    assert len(expected) == K


def test_full_pull_is_fedavg_with_equal_weights():
    # c = learning_rate * lam * (1 - p) / p = 1: every aggregation is a full average, so each round
    # is a FedAvg round with s_t local full-batch steps; with equal client sizes FedAvg's n_k weights
    # are equal weights.  Replayed round by round with FedAvg itself.
    equal = make_clients([25, 25, 25, 25], seed=3)
    p, rate = 0.25, 0.2
    lam = p / ((1 - p) * rate)
    est = L2GD(num_rounds=5, lam=lam, p=p, learning_rate=rate, l2=L2, random_state=1).fit(equal)
    w = np.zeros(4)
    for local in est.history_["local_steps"]:
        w = FedAvg(num_rounds=1, fraction_fit=1.0, local_epochs=int(local), batch_size=None, learning_rate=rate,
                   l2=L2, initial_parameters=w).fit(equal).parameters_
    np.testing.assert_allclose(est.personalized_parameters_, np.tile(w, (4, 1)), rtol=1e-10, atol=1e-12)
    with pytest.raises(InvalidParameterError, match=r"lam.* = 1.\d+ > 1: an aggregation step would move"):
        L2GD(lam=lam * 1.01, p=p, learning_rate=rate).fit(equal)


def test_large_lambda_gives_one_shared_model(clients):
    # lam -> infinity: all models tend to the minimiser of the plain mean of the losses (FedAvg's problem)
    consensus = consensus_optimum(clients, L2)
    est = L2GD(num_rounds=3000, lam=100.0, p=0.95, learning_rate=0.05, l2=L2, average_iterates=True,
               random_state=0).fit(clients)
    assert np.abs(est.personalized_parameters_ - consensus).max() < 1e-2
    assert np.abs(local_optima(clients, L2) - consensus).max() > 1.0


def test_personal_predictions_and_metrics(digits_clients):
    train, tests = digits_clients
    est = L2GD(num_rounds=10, lam=0.1, p=0.2, learning_rate=0.3, l2=1e-3, random_state=0)
    X_test, y_test = np.vstack([X for X, _ in tests]), np.concatenate([y for _, y in tests])
    est.fit(train, X_test, y_test, client_tests=tests)
    accuracies = est.client_accuracies(tests)
    for k in (0, 7):
        X, y = tests[k]
        assert accuracies[k] == est.score(X, y, client=k)
        np.testing.assert_array_equal(est.predict_proba(X, client=k),
                                      est.model_.predict_proba(est.personalized_parameters_[k], X))
    h = est.history_
    assert h["client_accuracy_mean"].iloc[-1] == pytest.approx(accuracies.mean())
    assert h["test_accuracy"].iloc[-1] == pytest.approx(est.score(X_test, y_test))  # the mean model
    assert accuracies.mean() > 0.95  # pathological split: two labels per client, easy to personalize


@pytest.mark.parametrize("params, message", [
    (dict(lam=-1.0), r"lam \(lambda\) must be a finite number >= 0"),
    (dict(lam="x"), r"lam \(lambda\)"),
    (dict(p=0.0), r"p must be in \(0, 1\)"),
    (dict(p=1.0), r"p must be in \(0, 1\)"),
    (dict(learning_rate=0.0), "learning_rate"),
    (dict(lam=10.0, p=0.2, learning_rate=0.1), r"= 4 > 1: an aggregation step would move the models past"),
    (dict(num_rounds=0), "num_rounds"),
    (dict(batch_size=0), r"batch_size \(B\)"),
])
def test_bad_parameters(clients, params, message):
    with pytest.raises(InvalidParameterError, match=message):
        L2GD(**params).fit(clients)


def test_divergence_stops_with_the_last_finite_models(clients):
    with pytest.warns(RuntimeWarning, match="L2GD diverged"):
        est = L2GD("mlp", num_rounds=30, lam=0.0, learning_rate=1e5, hidden_layer_sizes=(4,),
                   random_state=0).fit(clients)
    assert len(est.history_) < 30 and np.all(np.isfinite(est.personalized_parameters_))
