"""Server-side aggregation math: pure functions on stacked parameter vectors.

Nothing here does I/O, sampling or training.  Each function receives the flat
parameter vectors returned by the sampled clients (one per client, all the same
length) and returns the new global vector.  Because every client starts the
round from the same global vector ``w_t``, aggregating models ``w_k`` or model
deltas ``w_k - w_t`` gives the same result for all three rules below (they are
all translation-equivariant).

- :func:`weighted_average` is FederatedAveraging's rule (McMahan et al. 2017,
  Algorithm 1): ``w = sum_k (n_k / n) w_k`` with ``n = sum_k n_k`` over the
  clients that took part in the round.  This is Flower's ``aggregate`` and TFF's
  ``ClientWeighting.NUM_EXAMPLES``.
- :func:`coordinate_median` and :func:`trimmed_mean` are unweighted, coordinate
  by coordinate, and tolerate a minority of arbitrary ("Byzantine") vectors
  (Yin et al. 2018); they correspond to Flower's ``FedMedian`` and
  ``FedTrimmedAvg``.  Being unweighted, a client with many examples counts as
  much as one with few.

:func:`max_tolerated_faults` says how many bad vectors a rule survives for a
given number of clients per round; with too few clients (one or two for the
median, ``beta * m < 1`` for the trimmed mean) that number is zero and the
robust rules give no protection at all.

Two more rules serve the personalized and hierarchical estimators:

- :func:`mix_toward_mean` is the aggregation step of L2GD (Hanzely and
  Richtárik 2020): every client's model moves a fraction of the way toward the
  plain mean of all models, ``x_k <- x_k - c (x_k - mean)``; ``c = 1`` is full
  averaging, ``c = 0`` leaves the models alone.
- :func:`edge_average` is the edge aggregation of HierFAVG (Liu et al. 2020):
  the ``n_k``-weighted mean of the clients of each edge server, returned with
  each edge's number of examples, so that the cloud aggregation is
  :func:`weighted_average` of the edge models.  Two levels of weighted means
  equal one weighted mean over all clients.
"""

from __future__ import annotations

import numpy as np

from ._checks import check_interval, check_positive_int
from .errors import EmptyClientError, InvalidParameterError, ShapeMismatchError

__all__ = [
    "AGGREGATORS",
    "aggregate",
    "coordinate_median",
    "edge_average",
    "max_tolerated_faults",
    "mix_toward_mean",
    "trimmed_mean",
    "weighted_average",
]

#: Names accepted by :func:`aggregate`.
AGGREGATORS = ("mean", "median", "trimmed_mean")


def _stack(parameters) -> np.ndarray:
    """Stack client vectors into an ``(m, d)`` float64 array, checking shapes."""
    vectors = [np.asarray(p, dtype=np.float64) for p in parameters]
    if not vectors:
        raise EmptyClientError("cannot aggregate: no client parameter vectors were given")
    for k, vec in enumerate(vectors):
        if vec.ndim != 1:
            raise ShapeMismatchError(
                f"client {k} sent parameters of shape {vec.shape}; expected a flat vector"
            )
        if vec.shape != vectors[0].shape:
            raise ShapeMismatchError(
                f"client {k} sent {vec.shape[0]} parameters but client 0 sent "
                f"{vectors[0].shape[0]}"
            )
    return np.vstack(vectors)


def weighted_average(parameters, num_examples) -> np.ndarray:
    """Average client vectors weighted by their number of examples.

    Parameters
    ----------
    parameters : sequence of ndarray of shape (d,)
        One parameter vector per participating client.
    num_examples : sequence of int or float
        ``n_k`` for each client; non-negative with a positive sum.

    Returns
    -------
    ndarray of shape (d,)
        ``sum_k n_k w_k / sum_k n_k``.
    """
    stacked = _stack(parameters)
    weights = np.asarray(num_examples, dtype=np.float64)
    if weights.shape != (stacked.shape[0],):
        raise ShapeMismatchError(
            f"got {stacked.shape[0]} parameter vectors but {weights.size} weights"
        )
    if np.any(weights < 0) or not np.all(np.isfinite(weights)):
        raise InvalidParameterError(f"weights must be finite and non-negative, got {weights}")
    total = weights.sum()
    if total <= 0:
        raise InvalidParameterError("weights sum to zero: every client reported 0 examples")
    return (weights / total) @ stacked


def coordinate_median(parameters) -> np.ndarray:
    """Coordinate-wise median of the client vectors (unweighted).

    With ``m`` clients, any coordinate stays within the range of the honest
    clients' values as long as fewer than ``m / 2`` clients are malicious.
    """
    return np.median(_stack(parameters), axis=0)


def trimmed_mean(parameters, beta: float = 0.2) -> np.ndarray:
    """Coordinate-wise trimmed mean (unweighted).

    For each coordinate, the ``floor(beta * m)`` largest and smallest values are
    dropped and the rest averaged.  It tolerates up to ``floor(beta * m)``
    malicious clients; with few clients per round (``beta * m < 1``) nothing is
    trimmed and it equals the plain unweighted mean.

    Parameters
    ----------
    parameters : sequence of ndarray of shape (d,)
    beta : float, default=0.2
        Fraction trimmed from *each* end, in ``[0, 0.5)``.  Flower's
        ``FedTrimmedAvg`` uses the same name and default.

    Returns
    -------
    ndarray of shape (d,)
    """
    beta = check_interval("beta", beta, 0.0, 0.5, closed="left")
    stacked = _stack(parameters)
    m = stacked.shape[0]
    cut = _trim_count(beta, m)
    ordered = np.sort(stacked, axis=0)
    return ordered[cut : m - cut].mean(axis=0)


def _trim_count(beta: float, m: int) -> int:
    """``floor(beta * m)``, the values :func:`trimmed_mean` drops from each end."""
    return int(np.floor(beta * m))


def max_tolerated_faults(method: str, n_clients: int, beta: float = 0.2) -> int:
    """How many arbitrary client vectors a rule tolerates among ``n_clients``.

    "Tolerates ``f``" means: with at most ``f`` of the ``n_clients`` vectors
    replaced by anything at all, every coordinate of the aggregate stays
    within the range of the honest clients' values.

    Parameters
    ----------
    method : {"mean", "median", "trimmed_mean"}
    n_clients : int
        ``m``, the number of vectors aggregated (clients sampled per round).
    beta : float, default=0.2
        The trimmed mean's fraction, in ``[0, 0.5)``; ignored otherwise.

    Returns
    -------
    int
        0 for ``"mean"`` (one vector can move it anywhere); ``(m - 1) // 2``
        for ``"median"`` (so 0 with one or two clients: the median of one
        value is that value, of two their mean); ``floor(beta * m)`` for
        ``"trimmed_mean"`` (0 whenever ``beta * m < 1``, when nothing is
        trimmed and it is the plain unweighted mean).

    Raises
    ------
    InvalidParameterError
        Unknown ``method``, ``n_clients < 1`` or ``beta`` outside ``[0, 0.5)``.
    """
    m = check_positive_int("n_clients", n_clients)
    if method == "mean":
        return 0
    if method == "median":
        return (m - 1) // 2
    if method == "trimmed_mean":
        return _trim_count(check_interval("beta", beta, 0.0, 0.5, closed="left"), m)
    raise InvalidParameterError(f"unknown aggregator {method!r}; choose one of {AGGREGATORS}")


def aggregate(parameters, num_examples, method: str = "mean", beta: float = 0.2) -> np.ndarray:
    """Dispatch to one of :data:`AGGREGATORS` by name.

    Parameters
    ----------
    parameters : sequence of ndarray of shape (d,)
        One vector per participating client.
    num_examples : sequence of int or float
        ``n_k`` per client; used by ``"mean"`` only.
    method : {"mean", "median", "trimmed_mean"}, default="mean"
    beta : float, default=0.2
        Used by ``"trimmed_mean"`` only.

    Returns
    -------
    ndarray of shape (d,)
    """
    if method == "mean":
        return weighted_average(parameters, num_examples)
    if method == "median":
        return coordinate_median(parameters)
    if method == "trimmed_mean":
        return trimmed_mean(parameters, beta)
    raise InvalidParameterError(f"unknown aggregator {method!r}; choose one of {AGGREGATORS}")


def mix_toward_mean(parameters, weight: float) -> np.ndarray:
    """Move every vector the fraction ``weight`` of the way to their plain mean.

    Parameters
    ----------
    parameters : sequence of ndarray of shape (d,)
        One vector per client (all clients: the mean is over these vectors).
    weight : float in [0, 1]
        ``c`` in ``x_k - c (x_k - mean)``.  ``c`` applied ``j`` times in a row
        equals ``1 - (1 - c) ** j`` applied once (the mean does not move).

    Returns
    -------
    ndarray of shape (m, d)
        The moved vectors, in the order given; their mean is the old mean.
    """
    weight = check_interval("weight", weight, 0.0, 1.0, closed="both")
    stacked = _stack(parameters)
    mean = stacked.mean(axis=0)
    return stacked - weight * (stacked - mean)


def edge_average(parameters, num_examples, edges) -> tuple[np.ndarray, np.ndarray]:
    """Each edge server's ``n_k``-weighted mean of its clients' vectors.

    Parameters
    ----------
    parameters : sequence of ndarray of shape (d,)
        One vector per client.
    num_examples : sequence of int or float
        ``n_k`` per client.
    edges : sequence of int
        The edge (``0 .. L - 1``) each client is attached to; every edge must
        have at least one client.

    Returns
    -------
    edge_parameters : ndarray of shape (L, d)
        ``sum_{k in edge l} n_k w_k / n_l`` for each edge ``l``.
    edge_examples : ndarray of shape (L,)
        ``n_l = sum_{k in edge l} n_k``, the weights of the cloud aggregation.
    """
    stacked = _stack(parameters)
    weights = np.asarray(num_examples, dtype=np.float64)
    if weights.shape != (stacked.shape[0],):
        raise ShapeMismatchError(f"got {stacked.shape[0]} parameter vectors but {weights.size} weights")
    edges = np.asarray(edges)
    if edges.shape != (stacked.shape[0],) or not np.issubdtype(edges.dtype, np.integer):
        raise ShapeMismatchError(f"edges must give one integer edge index per client ({stacked.shape[0]}), "
                                 f"got {edges.tolist()!r}")
    n_edges = int(edges.max()) + 1
    if edges.min() < 0 or np.unique(edges).size != n_edges:
        raise InvalidParameterError(f"edges must number the edges 0 .. L-1, each with at least one client; "
                                    f"got {edges.tolist()}")
    groups = [np.flatnonzero(edges == edge) for edge in range(n_edges)]
    edge_parameters = np.vstack([weighted_average(stacked[g], weights[g]) for g in groups])
    return edge_parameters, np.array([weights[g].sum() for g in groups])
