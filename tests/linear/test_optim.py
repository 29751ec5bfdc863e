"""The update rules, checked against steps computed by hand."""

import math

import numpy as np
import pytest

from vfl.metrics import ks_statistic
from vfl.parties.linear.optim import (Optimizer, Penalty, l1_ratio_of, learning_rate, penalised_step, penalty_value,
                               soft_threshold)

W0 = np.array([1.0, 1.0])
G1, G2 = np.array([0.5, -2.0]), np.array([1.0, 0.0])


def two_steps(name, eta=0.1, **hyper):
    opt = Optimizer(name, 2, **hyper)
    w1 = opt.update(W0, G1, eta)
    return w1, opt.update(w1, G2, eta)


def test_adam_first_steps_written_out():
    """beta_1 0.9, beta_2 0.999, eps 1e-8 (scikit-learn's MLP defaults): the first step is about eta sign(g)."""
    w1, w2 = two_steps("adam")
    np.testing.assert_allclose(w1, [0.9000000632455132, 1.0999999841886143], rtol=0, atol=1e-15)
    np.testing.assert_allclose(w2, [0.8034818879655292, 1.1670057990024174], rtol=0, atol=1e-15)


def test_sgd_momentum_nesterov_by_hand():
    w1, w2 = two_steps("sgd")
    np.testing.assert_allclose(w1, [0.95, 1.2])
    np.testing.assert_allclose(w2, [0.85, 1.2])
    # momentum 0.9: v1 = -0.1 g1 = [-0.05, 0.2]; v2 = 0.9 v1 - 0.1 g2 = [-0.145, 0.18]
    w1, w2 = two_steps("momentum")
    np.testing.assert_allclose(w1, [0.95, 1.2])
    np.testing.assert_allclose(w2, [0.95 - 0.145, 1.2 + 0.18])
    # nesterov: step = 0.9 v - 0.1 g: [-0.095, 0.38], then [0.9 * -0.145 - 0.1, 0.9 * 0.18 - 0]
    w1, w2 = two_steps("nesterov")
    np.testing.assert_allclose(w1, [1 - 0.095, 1 + 0.38])
    np.testing.assert_allclose(w2, [1 - 0.095 - 0.2305, 1 + 0.38 + 0.162])


def test_adagrad_and_rmsprop_by_hand():
    w1, w2 = two_steps("adagrad")
    # G1 = [0.25, 4]: steps 0.1 * [0.5/0.5, -2/2] = [0.1, -0.1]; G2 = [1.25, 4]: [0.1/sqrt(1.25), 0]
    np.testing.assert_allclose(w1, [0.9, 1.1], atol=1e-7)
    np.testing.assert_allclose(w2, [0.9 - 0.1 / math.sqrt(1.25), 1.1], atol=1e-7)
    w1, w2 = two_steps("rmsprop")
    # rho = 0.99 (torch's and FATE's): S1 = 0.01 [0.25, 4] = [0.0025, 0.04]; S2 = [0.99 * 0.0025 + 0.01, 0.0396]
    # (epsilon = 1e-8 beside sqrt(S1) = 0.05 moves the first step by 2e-7)
    np.testing.assert_allclose(w1, [1 - 0.05 / math.sqrt(0.0025), 1 + 0.2 / math.sqrt(0.04)], atol=1e-6)
    np.testing.assert_allclose(w2, w1 - [0.1 / math.sqrt(0.012475), 0.0], atol=1e-6)
    w1, w2 = two_steps("rmsprop", rho=0.9)
    # rho = 0.9: S1 = 0.1 [0.25, 4] = [0.025, 0.4]; S2 = [0.9 * 0.025 + 0.1, 0.36]
    np.testing.assert_allclose(w1, [1 - 0.05 / math.sqrt(0.025), 1 + 0.2 / math.sqrt(0.4)], atol=1e-7)
    np.testing.assert_allclose(w2, w1 - [0.1 / math.sqrt(0.1225), 0.0], atol=1e-7)


def test_optimizer_state_round_trips_for_resume():
    a = Optimizer("adam", 2)
    w = a.update(W0, G1, 0.1)
    b = Optimizer("adam", 2)
    b.load_state(a.state())
    np.testing.assert_array_equal(a.update(w, G2, 0.1), b.update(w, G2, 0.1))


def test_coordinate_wise_so_a_party_may_run_its_slice():
    """What makes federated = centralized: the update of a slice is the slice of the update."""
    rng = np.random.default_rng(0)
    grads = rng.normal(size=(5, 6))
    for name in ("sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam"):
        whole, left, right = Optimizer(name, 6), Optimizer(name, 4), Optimizer(name, 2)
        w = v = np.ones(6)
        for g in grads:
            w = whole.update(w, g, 0.05)
            v = np.concatenate([left.update(v[:4], g[:4], 0.05), right.update(v[4:], g[4:], 0.05)])
        np.testing.assert_array_equal(w, v)


def test_penalties_and_the_proximal_step():
    assert l1_ratio_of("l2", 0.3) == 0 and l1_ratio_of("l1", 0.3) == 1 and l1_ratio_of("elasticnet", 0.3) == 0.3
    assert penalty_value(np.array([1.0, -2.0]), 0.1, 0.0) == pytest.approx(0.1 * 0.5 * 5)
    assert penalty_value(np.array([1.0, -2.0]), 0.1, 1.0) == pytest.approx(0.3)
    np.testing.assert_allclose(soft_threshold(np.array([0.3, -0.05, -1.0]), 0.1), [0.2, 0.0, -0.9], atol=1e-15)
    # elastic net: L2 part in the gradient, L1 part as a soft threshold; the intercept (last) untouched
    opt = Optimizer("sgd", 3)
    new, gradient = penalised_step(opt, np.array([1.0, 0.01, 2.0]), np.zeros(3), np.array([1.0, 1.0, 0.0]),
                                   Penalty(0.5, 0.4), eta=0.1)
    np.testing.assert_allclose(gradient, [0.3, 0.003, 0.0])
    np.testing.assert_allclose(new, [1.0 - 0.03 - 0.02, 0.0, 2.0])


def test_learning_rate_schedules():
    assert learning_rate("constant", 0.1, 7, 3) == 0.1
    assert learning_rate("invscaling", 0.1, 4, 0, power_t=0.5) == pytest.approx(0.05)
    assert learning_rate("step", 0.1, 1, 25, decay_rate=0.5, decay_steps=10) == pytest.approx(0.025)
    with pytest.raises(ValueError, match="unknown learning-rate schedule"):
        learning_rate("cosine", 0.1, 1, 0)


def test_ks_statistic():
    assert ks_statistic([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert ks_statistic([0, 1, 0, 1], [0.1, 0.2, 0.3, 0.4]) == pytest.approx(0.5)
    assert ks_statistic(["good", "bad", "good", "bad"], [0.1, 0.2, 0.3, 0.4], pos_label="bad") == pytest.approx(0.5)
