"""Hierarchical FedAvg: clients -> edge servers -> cloud (HierFAVG, Liu, Zhang, Song and Letaief 2020).

The K clients are attached to L edge servers (a base station, a hospital
group's server), the edges to one cloud server.  Client-edge links are cheap
and fast, edge-cloud links expensive.  HierFAVG (the paper's Algorithm 1)
averages often at the edges and rarely in the cloud:

1. every client takes ``kappa1`` local SGD steps (step ``learning_rate``);
2. every edge server sets the models of its clients to their
   ``n_k``-weighted mean (edge aggregation,
   :func:`~vfl.horizontal.aggregation.edge_average`);
3. after ``kappa2`` such edge rounds the cloud sets every model to the mean
   of the edge models weighted by the edges' numbers of examples (cloud
   aggregation, :func:`~vfl.horizontal.aggregation.weighted_average`); this is
   one *cloud round*, ``kappa1 * kappa2`` local steps.

``kappa2 = 1`` is FedAvg with every client in every round and ``kappa1``
local steps (the two weighted means compose into one), and so is ``L = 1``
with ``kappa1 * kappa2`` local steps between cloud rounds replaced by
``kappa2`` FedAvg rounds; the tests check both to float precision.  All
clients take part in every round, as in the paper.

``history_`` counts bytes on the two kinds of links separately: per cloud
round ``2 * kappa2 * K`` vectors between clients and edges and ``2 * L``
between edges and the cloud.
"""

from __future__ import annotations

import numpy as np

from . import clients as _clients
from ._checks import check_batch_size, check_positive_float, check_positive_int
from ._common import FederatedClassifierMixin, keep_params
from ._rounds import Rounds, start, warn_diverged
from .aggregation import edge_average, weighted_average
from .errors import InvalidParameterError, ShapeMismatchError

__all__ = ["HierFAVG", "assign_edges"]


def assign_edges(n_clients: int, edges) -> np.ndarray:
    """The edge index of every client.

    Parameters
    ----------
    n_clients : int
        K.
    edges : int or sequence of int
        L, the number of edge servers, to attach the clients in K/L
        contiguous blocks (client k to edge ``floor(k L / K)``); or one edge
        index per client, numbered ``0 .. L - 1`` with every edge used.

    Returns
    -------
    ndarray of int, shape (n_clients,)

    Raises
    ------
    InvalidParameterError
        ``L`` not in ``1 .. K``, or indices that skip an edge or are negative.
    ShapeMismatchError
        A sequence whose length is not K.
    """
    K = check_positive_int("n_clients", n_clients)
    if isinstance(edges, (int, np.integer)) and not isinstance(edges, (bool, np.bool_)):
        if not 1 <= edges <= K:
            raise InvalidParameterError(f"edges (L) must be between 1 and the number of clients {K}, got {edges}")
        return np.arange(K) * int(edges) // K
    if isinstance(edges, (str, bytes)) or not hasattr(edges, "__iter__"):
        raise InvalidParameterError(f"edges must be a number of edges L or one edge index per client, got {edges!r}")
    assignment = list(edges)
    if len(assignment) != K:
        raise ShapeMismatchError(f"edges gives {len(assignment)} edge indices for {K} clients; give one per client")
    if not all(isinstance(e, (int, np.integer)) and not isinstance(e, (bool, np.bool_)) for e in assignment):
        raise InvalidParameterError(f"edge indices must be integers, got {assignment!r}")
    assignment = np.array(assignment, dtype=int)
    L = int(assignment.max()) + 1
    if assignment.min() < 0 or np.unique(assignment).size != L:
        raise InvalidParameterError(f"edge indices must number the edges 0 .. L-1 with every edge used, "
                                    f"got {assignment.tolist()}")
    return assignment


class HierFAVG(FederatedClassifierMixin):
    """Client-edge-cloud hierarchical federated averaging.

    Parameters
    ----------
    model : {"logreg", "mlp"}, default="logreg"
    num_rounds : int, default=20
        Cloud rounds (cloud aggregations).
    kappa1 : int, default=5
        kappa_1, local SGD steps between two edge aggregations.
    kappa2 : int, default=2
        kappa_2, edge aggregations between two cloud aggregations.
    edges : int or sequence of int, default=2
        L edge servers with the clients in contiguous blocks, or each
        client's edge (see :func:`assign_edges`).
    learning_rate : float, default=0.1
        eta, the clients' SGD step.
    batch_size : int or None, default=None
        Minibatch of each local step, drawn afresh; None uses all local rows
        (full-batch steps).
    hidden_layer_sizes, l2, initial_parameters, random_state, progress
        As in :class:`~vfl.horizontal.FedAvg`.

    Attributes
    ----------
    parameters_ : ndarray of shape (n_params,)
        The cloud model after the last cloud round.
    edges_ : ndarray of shape (n_clients,)
        Each client's edge.
    model_, classes_, n_features_in_, n_clients_
        As in :class:`~vfl.horizontal.FedAvg`.
    history_ : pandas.DataFrame
        One row per cloud round: ``round``, ``clients`` (K), ``edges`` (L),
        ``edge_rounds`` (kappa2), ``train_loss``, ``train_objective``,
        ``test_loss``, ``test_accuracy``, ``client_accuracy_mean``,
        ``client_accuracy_worst10`` (as in FedAvg, of the cloud model),
        ``bytes_client_edge`` and ``bytes_edge_cloud`` (both directions, this
        round) and the running ``bytes_total``.
    """

    def __init__(self, model="logreg", *, num_rounds=20, kappa1=5, kappa2=2, edges=2, learning_rate=0.1,
                 batch_size=None, hidden_layer_sizes=(64, 64), l2=0.0, initial_parameters=None, random_state=None,
                 progress=False):
        keep_params(self, locals())

    def fit(self, clients, X_test=None, y_test=None, *, client_tests=None, classes=None):
        """Run ``num_rounds`` cloud rounds of HierFAVG.

        Parameters, the return value (``self``), the errors and the warning on
        divergence are as in :meth:`FedAvg.fit <vfl.horizontal.FedAvg.fit>`;
        bad ``edges`` (see :func:`assign_edges`) are one more error.
        """
        check_positive_int("num_rounds", self.num_rounds)
        kappa1 = check_positive_int("kappa1 (local steps per edge round)", self.kappa1)
        kappa2 = check_positive_int("kappa2 (edge rounds per cloud round)", self.kappa2)
        check_positive_float("learning_rate", self.learning_rate)
        check_batch_size(self.batch_size)
        assigned = []                   # the edges, assigned once: checked before the test sets
        run = start(self, clients, X_test, y_test, client_tests, classes,
                    check=lambda n_clients: assigned.append(assign_edges(n_clients, self.edges)))
        data, model, rng, w, metrics, K = run.data, run.model, run.rng, run.w, run.metrics, run.n_clients
        edge_of = assigned[0]
        L = int(edge_of.max()) + 1
        n_k = metrics.n_k
        vector_bytes = run.vector_bytes
        run.fitted(self)
        self.edges_ = edge_of
        rounds = Rounds(self, "HierFAVG", unit="cloud round")
        for t in rounds:
            edge_models = np.tile(w, (L, 1))  # the cloud model goes down to every edge
            with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported below
                for _ in range(kappa2):
                    updates = [
                        _clients.local_steps(model, edge_models[edge_of[k]], X, y, steps=kappa1,
                                             batch_size=self.batch_size, learning_rate=self.learning_rate, rng=rng)
                        for k, (X, y) in enumerate(data)
                    ]
                    edge_models, edge_n = edge_average(updates, n_k, edge_of)
                candidate = weighted_average(edge_models, edge_n)
            if not np.all(np.isfinite(candidate)):
                warn_diverged("HierFAVG", t, "model", f"learning_rate (now {self.learning_rate})", unit="cloud round")
                break
            w = candidate
            row = metrics(w)
            rounds.record({"round": t, "clients": K, "edges": L, "edge_rounds": kappa2, **row,
                           "train_objective": row["train_loss"] + model.penalty(w)},
                          {"loss": f"{row['train_loss']:.4f}", "acc": f"{row['test_accuracy']:.3f}"},
                          bytes_client_edge=2 * kappa2 * K * vector_bytes, bytes_edge_cloud=2 * L * vector_bytes)
        self.parameters_ = w
        self.history_ = rounds.history()
        return self
