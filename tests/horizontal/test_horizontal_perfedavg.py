"""Per-FedAvg against its objective F(theta) = 1/K sum_k F_k(theta - alpha grad F_k(theta)), written out in numpy.

The exact gradient of F uses the Hessian (logistic_reference.hessian); Per-FedAvg (HF) replaces the
Hessian-vector product by a finite difference, Per-FedAvg (FO) drops it.
"""

import numpy as np
import pytest

from logistic_reference import argmin, grad, hessian, loss, make_clients
from vfl.horizontal import FedAvg, PerFedAvg, meta_gradient
from vfl.horizontal.errors import InvalidParameterError, ShapeMismatchError

L2, ALPHA = 0.1, 0.3


@pytest.fixture(scope="module")
def clients():
    return make_clients([20, 30, 40])


def meta_objective(theta, clients, alpha=ALPHA):
    return float(np.mean([loss(theta - alpha * grad(theta, X, y, L2), X, y, L2) for X, y in clients]))


def meta_grad(theta, clients, alpha=ALPHA):
    """The exact gradient: mean_k (I - alpha H_k(theta)) grad F_k(theta - alpha grad F_k(theta))."""
    eye = np.eye(theta.size)
    return np.mean([(eye - alpha * hessian(theta, X, y, L2)) @ grad(theta - alpha * grad(theta, X, y, L2), X, y, L2)
                    for X, y in clients], axis=0)


def test_hf_with_full_batches_is_gradient_descent_on_the_objective(clients):
    beta, theta = 0.5, np.zeros(4)
    for rounds in range(1, 6):
        theta = theta - beta * meta_grad(theta, clients)
        est = PerFedAvg(num_rounds=rounds, fraction_fit=1.0, tau=1, alpha=ALPHA, beta=beta, l2=L2).fit(clients)
        # the central difference is exact up to O(delta^2): 1e-9 here
        np.testing.assert_allclose(est.parameters_, theta, rtol=0, atol=1e-8)
    assert est.history_["train_objective"].iloc[-1] == pytest.approx(meta_objective(theta, clients), rel=1e-8)


def test_hf_converges_to_the_minimiser_of_the_objective(clients):
    exact = argmin(lambda t: (meta_objective(t, clients), meta_grad(t, clients)), np.zeros(4))
    est = PerFedAvg(num_rounds=300, fraction_fit=1.0, tau=1, alpha=ALPHA, beta=2.0, l2=L2).fit(clients)
    np.testing.assert_allclose(est.parameters_, exact, atol=1e-7)
    # ... which is not FedAvg's solution: the personalizing step matters
    fedavg_problem = argmin(lambda t: (meta_objective(t, clients, 0.0), meta_grad(t, clients, 0.0)), np.zeros(4))
    assert np.abs(exact - fedavg_problem).max() > 0.01  # 1e5 times the tolerance above
    # each client's personalized model is one step of size alpha from theta on its own rows
    for k, (X, y) in enumerate(clients):
        step = est.parameters_ - ALPHA * grad(est.parameters_, X, y, L2)
        np.testing.assert_allclose(est.personalized_parameters_[k], step, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.adapt(*clients[1]), est.personalized_parameters_[1], rtol=1e-12)


def test_fo_drops_the_hessian_term(clients):
    beta, theta = 0.5, np.zeros(4)
    for _ in range(3):
        theta = theta - beta * np.mean([grad(theta - ALPHA * grad(theta, X, y, L2), X, y, L2) for X, y in clients],
                                       axis=0)
    est = PerFedAvg(num_rounds=3, fraction_fit=1.0, tau=1, alpha=ALPHA, beta=beta, variant="fo", l2=L2).fit(clients)
    np.testing.assert_allclose(est.parameters_, theta, rtol=1e-10, atol=1e-12)
    hf = PerFedAvg(num_rounds=3, fraction_fit=1.0, tau=1, alpha=ALPHA, beta=beta, l2=L2).fit(clients)
    assert np.abs(hf.parameters_ - est.parameters_).max() > 1e-3  # the Hessian term is not negligible here


def test_local_steps_follow_the_meta_gradient(clients):
    # tau local steps on one client, then the plain mean (the objective weights clients equally)
    beta, tau = 0.4, 3
    updates = []
    for X, y in clients:
        theta = np.zeros(4)
        for _ in range(tau):
            theta = theta - beta * meta_grad(theta, [(X, y)])
        updates.append(theta)
    est = PerFedAvg(num_rounds=1, fraction_fit=1.0, tau=tau, alpha=ALPHA, beta=beta, l2=L2).fit(clients)
    np.testing.assert_allclose(est.parameters_, np.mean(updates, axis=0), atol=1e-8)
    # meta_gradient, the client's step, on its own
    X, y = clients[0]
    theta = np.array([0.3, -0.2, 0.1, 0.05])
    np.testing.assert_allclose(meta_gradient(est.model_, theta, [(X, y)] * 3, alpha=ALPHA),
                               meta_grad(theta, [(X, y)]), atol=1e-9)


@pytest.mark.parametrize("variant", ["hf", "fo"])
def test_alpha_zero_is_fedavg(digits, variant):
    # with alpha = 0 the objective is FedAvg's (equal weights), the step is FedAvg's local step, and the
    # sampling draws the same clients: with equal client sizes Per-FedAvg is FedAvg, round for round
    X, Xt, y, yt = digits
    equal = [(X[k * 120:(k + 1) * 120], y[k * 120:(k + 1) * 120]) for k in range(10)]
    kw = dict(num_rounds=4, fraction_fit=0.5, batch_size=None, l2=1e-3, random_state=7)
    per = PerFedAvg(tau=3, alpha=0.0, beta=0.2, variant=variant, **kw).fit(equal, Xt, yt)
    fedavg = FedAvg(local_epochs=3, learning_rate=0.2, **kw).fit(equal, Xt, yt)
    np.testing.assert_allclose(per.parameters_, fedavg.parameters_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(per.history_["test_accuracy"], fedavg.history_["test_accuracy"])
    np.testing.assert_allclose(per.personalized_parameters_, np.tile(per.parameters_, (10, 1)))


def test_minibatches_sampling_and_bytes(digits_clients):
    train, tests = digits_clients
    kw = dict(num_rounds=6, fraction_fit=0.25, tau=4, alpha=0.05, beta=0.1, batch_size=16, l2=1e-3,
              random_state=3)
    a = PerFedAvg(**kw).fit(train, client_tests=tests)
    b = PerFedAvg(**kw).fit(train, client_tests=tests)
    np.testing.assert_array_equal(a.parameters_, b.parameters_)
    h = a.history_
    assert (h["clients"] == 5).all()
    d = a.model_.n_params
    assert (h["bytes_down"] == 5 * d * 8).all() and (h["bytes_up"] == 5 * d * 8).all()
    assert h["train_objective"].iloc[-1] < h["train_objective"].iloc[0]
    assert h["client_accuracy_mean"].iloc[-1] == pytest.approx(a.client_accuracies(tests).mean())
    # adaptation_steps personalize further from the same meta-model
    more = PerFedAvg(**kw, adaptation_steps=3).fit(train)
    np.testing.assert_array_equal(more.parameters_, a.parameters_)
    X, y = train[2]
    step = a.personalized_parameters_[2]
    for _ in range(2):
        step = step - 0.05 * a.model_.loss_and_grad(step, X, np.searchsorted(a.classes_, y))[1]
    np.testing.assert_allclose(more.personalized_parameters_[2], step, rtol=1e-12)


@pytest.mark.parametrize("params, message", [
    (dict(alpha=-0.1), "alpha must be a finite number >= 0"),
    (dict(beta=0.0), "beta must be a finite number > 0"),
    (dict(tau=0), r"tau \(local steps\) must be an integer >= 1"),
    (dict(variant="exact"), r"unknown variant 'exact'; choose 'hf'"),
    (dict(delta=0.0), "delta"),
    (dict(adaptation_steps=0), "adaptation_steps"),
    (dict(fraction_fit=1.5), r"fraction_fit \(r\)"),
])
def test_bad_parameters(clients, params, message):
    with pytest.raises(InvalidParameterError, match=message):
        PerFedAvg(**params).fit(clients)


def test_bad_adaptation_data(clients):
    est = PerFedAvg(num_rounds=1, fraction_fit=1.0).fit(clients)
    with pytest.raises(ShapeMismatchError, match=r"expected \(n, 3\)"):
        est.adapt(np.zeros((4, 2)), np.array([0, 1, 0, 1]))
