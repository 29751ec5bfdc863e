"""Differential privacy of the labels: the accountant, the noise, and federated = centralized with the same noise."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld, rdp
from scipy.stats import norm

from vertical_data import make_vertical
from vfl import ConfigurationError, VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression
from vfl.centralized import fit_gradient_descent
from vfl.parties.linear import PartyB, dp
from vfl.protocols.linear import TrainingSettings

# the first-order protocol (solver="gd"), on the columns as given
FAST = dict(key_bits=1024, insecure=True, solver="gd", standardize=False)


def analytic_gaussian_delta(epsilon, mu):
    """delta(epsilon) of a Gaussian mechanism with mu = sensitivity / sigma (Balle & Wang 2018, Theorem 8)."""
    return norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * norm.cdf(-mu / 2 - epsilon / mu)


@pytest.mark.parametrize("z,epochs,delta", [(2.0, 30, 1e-5), (7.6, 30, 1e-5), (1.0, 5, 1e-6)])
def test_epsilon_matches_the_exact_gaussian_composition(z, epochs, delta):
    """E Gaussian releases of multiplier z are exactly one of multiplier z / sqrt(E): check against the formula."""
    epsilon = dp.epsilon_spent(z, delta, epochs)
    mu = math.sqrt(epochs) / z
    assert analytic_gaussian_delta(epsilon, mu) == pytest.approx(delta, rel=0.02)


def test_epsilon_matches_the_librarys_own_composition():
    """The library composing 10 Gaussian events itself (PLD) gives our figure; RDP bounds it from above."""
    z, epochs, delta = 3.0, 10, 1e-5
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(z), epochs)
    library = pld.PLDAccountant(value_discretization_interval=1e-3)
    library.compose(event)
    ours = dp.epsilon_spent(z, delta, epochs)
    assert ours == pytest.approx(library.get_epsilon(delta), rel=1e-3)
    upper = rdp.RdpAccountant()
    upper.compose(event)
    assert ours <= upper.get_epsilon(delta)


def test_calibrated_noise_spends_the_budget_asked_for():
    z = dp.noise_multiplier(3.0, 1e-5, 30)
    assert dp.epsilon_spent(z, 1e-5, 30) == pytest.approx(3.0, abs=1e-3)
    assert dp.epsilon_spent(z, 1e-5, 30) <= 3.0 + 1e-6
    assert dp.noise_multiplier(1.0, 1e-5, 30) > z > dp.noise_multiplier(8.0, 1e-5, 30)
    assert dp.sensitivity(2.0, 1.0) == 4.0   # logistic: flipping y moves kappa y by 2 kappa


def test_dp_off_never_draws_noise(monkeypatch, vertical_data):
    """DP off: the protocol is unchanged, bit for bit — B never touches the noise source."""
    def refuse(n):
        raise AssertionError("noise drawn with DP off")

    monkeypatch.setattr(PartyB, "__init__", _wrap_init(PartyB.__init__, refuse))
    fits = [VerticalLogisticRegression(max_iter=2, tol=None, init="zeros", **FAST).fit(vertical_data)
            for _ in range(2)]
    assert all(np.array_equal(fits[0].coef_[p], fits[1].coef_[p]) for p in ("A", "B"))
    assert fits[0].intercept_ == fits[1].intercept_ and fits[0].dp_spent_ is None


def _wrap_init(init, source):
    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.standard_normal = source
    return patched


class Recorder:
    """A reproducible stand-in for B's CSPRNG noise, replayable for the centralized reference."""

    def __init__(self, seed):
        self.rng, self.draws = np.random.default_rng(seed), []

    def __call__(self, n):
        self.draws.append(self.rng.standard_normal(n))
        return self.draws[-1]


@pytest.mark.parametrize("task,batch_size", [("logistic", None), ("linear", 20)])
def test_federated_with_dp_equals_centralized_with_the_same_noise(monkeypatch, task, batch_size):
    frame_a, frame_b, x, y = make_vertical(n_rows=60, task=task, seed=21)
    data = VerticalDataset({"A": frame_a, "B": frame_b}, label="y", id_column="id")
    recorder = Recorder(5)
    monkeypatch.setattr(PartyB, "__init__", _wrap_init(PartyB.__init__, recorder))
    cls = VerticalLogisticRegression if task == "logistic" else VerticalLinearRegression
    bound = {} if task == "logistic" else {"dp_label_bound": 1.5}
    model = cls(learning_rate=0.2, max_iter=4, batch_size=batch_size, tol=None, random_state=3, dp_epsilon=3.0,
                dp_delta=1e-5, init="zeros", **bound, **FAST).fit(data)
    settings = model._settings()
    sigma = dp.noise_multiplier(3.0, 1e-5, 4) * dp.sensitivity(2.0 if task == "logistic" else 1.0,
                                                               settings.label_bound)
    assert model.dp_noise_std_ == pytest.approx(sigma)
    replay = iter(recorder.draws)
    target = np.where(y == 1, 1.0, -1.0) if task == "logistic" else y
    ref = fit_gradient_descent(x, target, settings, start=(np.zeros(5), 0.0),
                               noise=lambda n: sigma * next(replay))
    np.testing.assert_allclose(np.concatenate([model.coef_["A"], model.coef_["B"]]), ref["coef"], atol=1e-6)
    assert model.intercept_ == pytest.approx(ref["intercept"], abs=1e-6)
    np.testing.assert_allclose(model.loss_curve_, ref["loss_curve"], atol=1e-6)
    epsilon, delta = model.dp_spent_
    assert delta == 1e-5 and epsilon == pytest.approx(3.0, abs=1e-3) and epsilon <= 3.0 + 1e-6
    if task == "linear":   # the reference clips the labels to the bound; so must B, or the weights would differ
        assert np.abs(y).max() > 1.5


def test_noise_comes_from_the_csprng_and_hides_the_residual(vertical_data):
    from vfl.crypto.randomness import gaussian

    assert PartyB(np.zeros((3, 1)), np.ones(3)).standard_normal is gaussian
    model = VerticalLogisticRegression(max_iter=1, tol=None, dp_epsilon=1.0, dp_delta=1e-5, **FAST)
    model.fit(vertical_data)
    assert model.dp_noise_std_ > 4.0                    # far above the labels' scale at epsilon = 1


@pytest.mark.parametrize("kwargs,message", [
    (dict(dp_epsilon=1.0), "needs both dp_epsilon and dp_delta"),
    (dict(dp_epsilon=1.0, dp_delta=1e-5, tol=1e-4), "with differential privacy set tol=None"),
    (dict(dp_epsilon=-1.0, dp_delta=1e-5, tol=None), "dp_epsilon must be a positive number"),
    (dict(dp_epsilon=1.0, dp_delta=1.0, tol=None), r"dp_delta must be in \(0, 1\)"),
    (dict(dp_epsilon=1.0, dp_delta=1e-5, tol=None, dp_label_bound=2.0), "logistic labels are -1/\\+1"),
    (dict(dp_label_bound=2.0), "dp_label_bound only applies"),
    (dict(init="ones"), "init must be one of"),
])
def test_bad_dp_settings_are_refused(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        TrainingSettings(objective="logistic", **{"tol": None, **kwargs})


def test_linear_regression_with_dp_needs_a_label_bound():
    with pytest.raises(ConfigurationError, match="needs dp_label_bound > 0"):
        TrainingSettings(objective="linear", dp_epsilon=1.0, dp_delta=1e-5, tol=None)
