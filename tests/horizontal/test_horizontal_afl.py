import numpy as np
import pytest

from vfl.horizontal import AgnosticFL, FedAvg, partition, project_onto_simplex, split_clients
from vfl.horizontal.errors import InvalidParameterError, ShapeMismatchError


def test_simplex_projection_known_points():
    np.testing.assert_allclose(project_onto_simplex([0.2, 0.3, 0.5]), [0.2, 0.3, 0.5])
    np.testing.assert_allclose(project_onto_simplex([2.0, 0.0]), [1.0, 0.0])
    np.testing.assert_allclose(project_onto_simplex([5.0, 5.0, 5.0]), [1 / 3] * 3)
    np.testing.assert_allclose(project_onto_simplex([0.6, 0.6, -3.0]), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(project_onto_simplex([-7.0]), [1.0])


def test_simplex_projection_is_the_euclidean_projection():
    # p is the projection of v iff p is in the simplex and <v - p, q - p> <= 0
    # for every q in the simplex (checked on vertices and random points)
    rng = np.random.default_rng(0)
    for _ in range(200):
        size = int(rng.integers(1, 8))
        v = rng.normal(scale=3.0, size=size)
        p = project_onto_simplex(v)
        assert p.min() >= 0 and p.sum() == pytest.approx(1.0)
        qs = np.vstack([np.eye(size), rng.dirichlet(np.ones(size), size=20)])
        assert np.all((qs - p) @ (v - p) <= 1e-10)
        np.testing.assert_allclose(project_onto_simplex(p), p, atol=1e-12)


def test_simplex_projection_rejects_bad_shapes():
    with pytest.raises(ShapeMismatchError):
        project_onto_simplex(np.zeros((2, 2)))
    with pytest.raises(ShapeMismatchError):
        project_onto_simplex([])
    with pytest.raises(InvalidParameterError, match="NaN or infinite"):
        project_onto_simplex([1.0, np.inf])


def test_simplex_projection_shift_invariant_and_stable():
    v = np.array([3.0, 1.0, -2.0])
    np.testing.assert_allclose(project_onto_simplex(v + 1e12), project_onto_simplex(v), atol=1e-3)
    np.testing.assert_allclose(project_onto_simplex([1e300, 0.0]), [1.0, 0.0])


@pytest.fixture(scope="module")
def skewed(digits):
    X, Xt, y, yt = digits
    parts = partition(y, 10, "dirichlet", alpha=0.2, seed=3)
    return split_clients(X, y, parts), Xt, yt


def test_afl_worst_domain_loss_lower_than_fedavg(skewed):
    clients, Xt, yt = skewed
    sizes = [len(yk) for _, yk in clients]
    assert max(sizes) > 3 * min(sizes)  # skewed in size as well as in labels
    kw = dict(num_rounds=300, fraction_fit=1.0, batch_size=None, learning_rate=0.5, l2=0.01, random_state=0)
    fedavg = FedAvg(**kw).fit(clients, Xt, yt)
    afl = AgnosticFL(lambda_learning_rate=0.5, **kw).fit(clients, Xt, yt)
    fed_losses, afl_losses = fedavg.client_losses(clients), afl.client_losses(clients)
    assert afl_losses.max() < fed_losses.max()
    assert afl_losses.max() - afl_losses.min() < fed_losses.max() - fed_losses.min()
    np.testing.assert_allclose(afl_losses, afl.domain_losses_)
    assert afl.history_["worst_domain_loss"].iloc[-1] == pytest.approx(afl_losses.max())
    # lambda is a distribution that favours the domains FedAvg serves worst
    assert afl.lambda_.min() >= 0 and afl.lambda_.sum() == pytest.approx(1.0)
    assert afl.lambda_[np.argmax(fed_losses)] > 1 / len(clients)
    assert afl.score(Xt, yt) > 0.9


def test_afl_partial_participation_minibatches_and_bytes(skewed):
    clients, Xt, yt = skewed
    afl = AgnosticFL(num_rounds=30, fraction_fit=0.5, batch_size=32, learning_rate=0.2,
                     average_iterates=True, random_state=1).fit(clients, Xt, yt)
    h = afl.history_
    assert (h["clients"] == 5).all()
    d = afl.model_.n_params
    assert (h["bytes_down"] == 5 * d * 8).all() and (h["bytes_up"] == 5 * (d + 1) * 8).all()
    assert h["worst_domain_loss"].iloc[-1] < h["worst_domain_loss"].iloc[0]
