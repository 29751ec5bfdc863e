"""Party A recovering B's labels from its first gradient: the attack, run against the real protocol.

With every weight starting at zero the first residual is ``d = -kappa y`` exactly,
so A, unmasking ``X_A^T d``, can solve ``X_A^T y = g`` over ``y`` in {-1, +1}^n.
For a batch just above the enforced minimum (one more row than A's weights) an
exhaustive search over the free labels finds exactly one candidate: the labels.
With vfl's default secret random start it finds none.
"""

import itertools

import numpy as np
import pandas as pd
import pytest

from vfl import ConfigurationError, VerticalDataset, VerticalLogisticRegression
from vfl.parties.linear import FeatureParty
from vfl.protocols.linear import check_gradient_equations, gradient_unknowns

KAPPA = 2.0   # logistic regression


def label_candidates(x, xtd, known_scores, tol=1e-6):
    """A's exhaustive search: every y in {-1,+1}^n with ``X^T (known - kappa y) = X^T d``, free labels enumerated.

    The first ``f`` rows' labels are solved for from each assignment of the other ``n - f``.
    """
    n, f = x.shape
    target = (x.T @ known_scores - xtd) / KAPPA           # = X^T y if the residual is known_scores - kappa y
    found = []
    for free in itertools.product((-1.0, 1.0), repeat=n - f):
        free = np.array(free)
        solved = np.linalg.solve(x[:f].T, target - x[f:].T @ free)
        if np.all(np.abs(np.abs(solved) - 1.0) < tol):
            found.append(np.concatenate([np.sign(solved), free]))
    return found


def first_gradient(monkeypatch, n_rows, n_a, init, seed):
    """Train one full-batch step; return A's features, the X_A^T d it unmasked, its start's scores, and y."""
    rng = np.random.default_rng(seed)
    x_a, x_b = rng.normal(size=(n_rows, n_a)), rng.normal(size=(n_rows, 3))
    y = rng.integers(0, 2, n_rows)
    y[:2] = [0, 1]                                              # both classes present
    seen = {}
    original = FeatureParty.apply_update

    def spy(self, residues, n, objective, alpha, learning_rate):
        if self.role == "A" and "xtd" not in seen:
            before = self.params.copy()
            gradient = original(self, residues, n, objective, alpha, learning_rate)
            seen["xtd"] = gradient * n / objective.grad_scale      # alpha = 0: the gradient is 2a X^T d / n
            seen["scores"] = x_a @ before                            # A knows where it started
            return gradient
        return original(self, residues, n, objective, alpha, learning_rate)

    monkeypatch.setattr(FeatureParty, "apply_update", spy)
    data = VerticalDataset({"A": pd.DataFrame(x_a).add_prefix("a"),
                            "B": pd.DataFrame(x_b).add_prefix("b").assign(y=y)}, label="y")
    VerticalLogisticRegression(max_iter=1, alpha=0.0, tol=None, key_bits=1024, insecure=True, solver="gd",
                               standardize=False, init=init).fit(data)
    return x_a, seen["xtd"], seen["scores"], np.where(y == 1, 1.0, -1.0)


@pytest.mark.parametrize("n_rows,n_a", [(11, 10), (12, 10), (20, 8)])
def test_zero_start_hands_a_the_labels(monkeypatch, n_rows, n_a):
    """The textbook start (kept for teaching): the search finds one candidate, and it is B's labels."""
    x, xtd, scores, y = first_gradient(monkeypatch, n_rows, n_a, "zeros", seed=n_rows)
    found = label_candidates(x, xtd, scores)
    assert len(found) == 1 and np.array_equal(found[0], y)


@pytest.mark.parametrize("n_rows,n_a", [(11, 10), (12, 10), (20, 8)])
def test_secret_random_start_leaves_the_search_nothing(monkeypatch, n_rows, n_a):
    """vfl's default: B's residual carries its secret start, so no labelling fits the gradient."""
    x, xtd, scores, y = first_gradient(monkeypatch, n_rows, n_a, "random", seed=n_rows)
    found = label_candidates(x, xtd, scores)
    assert not (len(found) == 1 and np.array_equal(found[0], y))
    assert found == []


def test_gradient_unknowns_counts_rank_limited_products():
    # A against B (3 columns, intercept): B's scores over 4 steps have rank 3 -> 3 (10 + 4 - 3); labels 10; b 4
    assert gradient_unknowns(10, 4, "A", {"A": 5, "B": 3}, "B", True) == 33 + 10 + 4
    # B against A (5 columns, more than the 4 steps): the 10 x 4 matrix is unconstrained
    assert gradient_unknowns(10, 4, "B", {"A": 5, "B": 3}, "B", True) == 40


def test_accumulated_equations_are_refused_with_the_bound_named():
    # 100 rows, batches of 20: 5 steps an epoch. A: 10 weights; B: 1 column and the intercept.
    check_gradient_equations(100, 20, 4, {"A": 10, "B": 1}, "B", True)
    with pytest.raises(ConfigurationError, match=r"party A: 5 epochs of 5 batches give A 250 exact gradient "
                                                 r"equations \(10 per batch\), not fewer than the 249 unknowns .* "
                                                 r"use at most 4 epochs, full batches"):
        check_gradient_equations(100, 20, 5, {"A": 10, "B": 1}, "B", True)
    check_gradient_equations(100, None, 1000, {"A": 10, "B": 1}, "B", True)    # full batch: never


def test_the_estimator_refuses_such_settings_before_any_key_is_made():
    rng = np.random.default_rng(3)
    data = VerticalDataset({"A": pd.DataFrame(rng.normal(size=(100, 10))).add_prefix("a"),
                            "B": pd.DataFrame(rng.normal(size=(100, 1))).add_prefix("b")
                                   .assign(y=rng.integers(0, 2, 100))}, label="y")
    model = VerticalLogisticRegression(batch_size=20, max_iter=30, key_bits=2048)
    with pytest.raises(ConfigurationError, match="exact gradient equations"):
        model.fit(data)
    assert not hasattr(model, "coef_")


# -- the mini-batch attack: A infers the labels from its own gradients over many batches -----------------------
def most_epochs(n_rows, batch_size, columns):
    """As many epochs as vfl allows (the accumulated-equations rule), up to 200."""
    epochs = 1
    while epochs < 200:
        try:
            check_gradient_equations(n_rows, batch_size, epochs + 1, columns, "B", True)
        except ConfigurationError:
            break
        epochs += 1
    return epochs


def gradients_seen_by_a(monkeypatch, model, data, n_a):
    """Fit ``model``; return every step's (rows, gradient) as party A unmasks them (its own view only)."""
    from vfl.parties.linear import data_party as feature_party

    steps, last = [], {}
    design, step = feature_party.FeatureParty.design, feature_party.penalised_step

    def spy_design(self, rows=None, features=None):
        if self.role == "A" and rows is not None and features is None:
            last["rows"] = np.asarray(rows)              # the rows of A's current batch
        return design(self, rows, features)

    def spy_step(optimizer, params, gradient, *args, **kwargs):
        if len(params) == n_a and "rows" in last:         # A's step: the gradient it unmasked, 2a X_b^T d / n
            steps.append((last["rows"], np.array(gradient)))
        return step(optimizer, params, gradient, *args, **kwargs)

    monkeypatch.setattr(feature_party.FeatureParty, "design", spy_design)
    monkeypatch.setattr(feature_party, "penalised_step", spy_step)
    model.fit(data)
    return steps


def minimum_norm_attack(x_a, steps):
    """Each step's minimum-norm d with X_b^T d = g, summed per row; the sign of -sum guesses y (d ~ z/4 - y/2)."""
    score = np.zeros(len(x_a))
    for rows, gradient in steps:
        score[rows] += np.linalg.pinv(x_a[rows].T) @ gradient
    return (score < 0).astype(int)


def leak_data(seed, n_rows=160, n_a=6, n_b=4):
    """Labels driven by B's columns (A's predict little by themselves): what A guesses beyond that is leaked."""
    rng = np.random.default_rng(seed)
    x_a, x_b = rng.normal(size=(n_rows, n_a)), rng.normal(size=(n_rows, n_b))
    y = (x_a @ (0.2 * rng.normal(size=n_a)) + x_b @ rng.normal(size=n_b) + 0.5 * rng.normal(size=n_rows) > 0)
    data = VerticalDataset({"A": pd.DataFrame(x_a).add_prefix("a"),
                            "B": pd.DataFrame(x_b).add_prefix("b").assign(y=y.astype(int))}, label="y")
    return x_a, y.astype(int), data


def attack_accuracy(monkeypatch, seed=0, **settings):
    x_a, y, data = leak_data(seed)
    model = VerticalLogisticRegression(key_bits=1024, insecure=True, random_state=1, **settings)
    steps = gradients_seen_by_a(monkeypatch, model, data, x_a.shape[1])
    return float(np.mean(minimum_norm_attack(x_a, steps) == y)), max(y.mean(), 1 - y.mean())


def test_mini_batches_without_dp_hand_a_most_labels_and_the_fit_warns(monkeypatch):
    """vfl's defaults with mini-batches of 16 and as many epochs as vfl allows: A guesses most labels."""
    from vfl.errors import LabelLeakWarning

    with pytest.warns(LabelLeakWarning, match=r"infer the label party's labels.*full batches.*differential privacy"):
        accuracy, majority = attack_accuracy(monkeypatch, batch_size=16,
                                             max_iter=most_epochs(160, 16, {"A": 6, "B": 4}))
    assert accuracy >= 0.8 and accuracy - majority >= 0.25


def test_full_batches_leave_the_attack_near_what_a_columns_predict(monkeypatch):
    accuracy, majority = attack_accuracy(monkeypatch, max_iter=30)
    assert accuracy - majority <= 0.12


def test_dp_leaves_the_attack_near_the_majority_class(monkeypatch):
    accuracy, majority = attack_accuracy(monkeypatch, batch_size=16, max_iter=20, tol=None, dp_epsilon=1.0,
                                         dp_delta=1e-5)
    assert accuracy - majority <= 0.12
