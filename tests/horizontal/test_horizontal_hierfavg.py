"""HierFAVG against a direct numpy version of Liu et al.'s Algorithm 1, and its FedAvg limits."""

import numpy as np
import pytest

from logistic_reference import grad, make_clients
from vfl.horizontal import FedAvg, HierFAVG, assign_edges
from vfl.horizontal.errors import InvalidParameterError, ShapeMismatchError

L2 = 0.05


@pytest.fixture(scope="module")
def clients():
    return make_clients([12, 30, 18, 25, 40], seed=4)  # unequal sizes: the n_k weights matter


def paper_algorithm(clients, edge_of, kappa1, kappa2, eta, iterations):
    """Liu et al. (2020), Algorithm 1, with the iteration counter k of the paper."""
    n = np.array([len(y) for _, y in clients], dtype=float)
    w = [np.zeros(4) for _ in clients]
    for k in range(1, iterations + 1):
        w = [w_i - eta * grad(w_i, X, y, L2) for w_i, (X, y) in zip(w, clients)]
        if k % kappa1 == 0:
            edge_models = {}
            for edge in set(edge_of):
                members = [i for i, e in enumerate(edge_of) if e == edge]
                edge_models[edge] = sum(n[i] * w[i] for i in members) / n[members].sum()
            if k % (kappa1 * kappa2) == 0:
                cloud = sum(n[edge_of == edge].sum() * model for edge, model in edge_models.items()) / n.sum()
                w = [cloud.copy() for _ in clients]
            else:
                w = [edge_models[e].copy() for e in edge_of]
    return w[0]


def test_matches_the_papers_algorithm(clients):
    edge_of = np.array([0, 1, 0, 1, 1])
    est = HierFAVG(num_rounds=3, kappa1=2, kappa2=3, edges=edge_of.tolist(), learning_rate=0.3, l2=L2).fit(clients)
    expected = paper_algorithm(clients, edge_of, 2, 3, 0.3, iterations=3 * 2 * 3)
    np.testing.assert_allclose(est.parameters_, expected, rtol=1e-10, atol=1e-12)
    # the edges matter: without edge rounds in between the result differs
    flat = paper_algorithm(clients, edge_of, 6, 1, 0.3, iterations=18)
    assert np.abs(flat - expected).max() > 1e-3


def test_one_edge_round_per_cloud_round_is_fedavg(clients):
    # kappa2 = 1: every edge aggregation goes on to the cloud; the two weighted means are one
    hier = HierFAVG(num_rounds=4, kappa1=3, kappa2=1, edges=2, learning_rate=0.3, l2=L2).fit(clients)
    fedavg = FedAvg(num_rounds=4, fraction_fit=1.0, local_epochs=3, batch_size=None, learning_rate=0.3,
                    l2=L2).fit(clients)
    np.testing.assert_allclose(hier.parameters_, fedavg.parameters_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hier.history_["train_loss"], fedavg.history_["train_loss"], rtol=1e-10)


def test_one_edge_is_fedavg_with_kappa2_rounds_per_cloud_round(clients):
    hier = HierFAVG(num_rounds=2, kappa1=2, kappa2=3, edges=1, learning_rate=0.3, l2=L2).fit(clients)
    fedavg = FedAvg(num_rounds=6, fraction_fit=1.0, local_epochs=2, batch_size=None, learning_rate=0.3,
                    l2=L2).fit(clients)
    np.testing.assert_allclose(hier.parameters_, fedavg.parameters_, rtol=1e-10, atol=1e-12)


def test_history_counts_both_kinds_of_links(digits_clients):
    train, tests = digits_clients
    est = HierFAVG(num_rounds=3, kappa1=2, kappa2=4, edges=5, batch_size=10, learning_rate=0.1,
                   random_state=0).fit(train, client_tests=tests)
    h, vector = est.history_, est.model_.n_params * 8
    assert list(h["edges"]) == [5] * 3 and list(h["edge_rounds"]) == [4] * 3
    assert (h["bytes_client_edge"] == 2 * 4 * 20 * vector).all()
    assert (h["bytes_edge_cloud"] == 2 * 5 * vector).all()
    assert h["bytes_total"].iloc[-1] == 3 * (2 * 4 * 20 + 2 * 5) * vector
    np.testing.assert_array_equal(est.edges_, np.repeat(np.arange(5), 4))
    assert h["client_accuracy_mean"].iloc[-1] == pytest.approx(est.client_accuracies(tests).mean())
    assert h["train_loss"].iloc[-1] < h["train_loss"].iloc[0]


def test_assign_edges():
    np.testing.assert_array_equal(assign_edges(5, 2), [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(assign_edges(4, 4), [0, 1, 2, 3])
    np.testing.assert_array_equal(assign_edges(3, [1, 0, 1]), [1, 0, 1])
    with pytest.raises(InvalidParameterError, match="between 1 and the number of clients 3, got 4"):
        assign_edges(3, 4)
    with pytest.raises(InvalidParameterError, match=r"every edge used, got \[0, 2, 2\]"):
        assign_edges(3, [0, 2, 2])
    with pytest.raises(ShapeMismatchError, match="2 edge indices for 3 clients"):
        assign_edges(3, [0, 1])
    with pytest.raises(InvalidParameterError, match="edge indices must be integers"):
        assign_edges(2, [0, 1.5])
    with pytest.raises(InvalidParameterError, match="number of edges L or one edge index per client"):
        assign_edges(2, "2")


@pytest.mark.parametrize("params, message", [
    (dict(kappa1=0), r"kappa1 \(local steps per edge round\) must be an integer >= 1"),
    (dict(kappa2=1.5), r"kappa2 \(edge rounds per cloud round\)"),
    (dict(edges=0), "edges"),
    (dict(edges=[0, 0, 1]), "3 edge indices for 5 clients"),
    (dict(learning_rate=-0.1), "learning_rate"),
])
def test_bad_parameters(clients, params, message):
    with pytest.raises((InvalidParameterError, ShapeMismatchError), match=message):
        HierFAVG(**params).fit(clients)
