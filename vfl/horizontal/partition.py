"""Split one labelled data set by rows into simulated clients.

Each function returns a list with one integer index array per client; the
arrays are disjoint and together cover every row exactly once.  Pass the list
to :func:`split_clients` to get the ``[(X_k, y_k), ...]`` that
:class:`~vfl.horizontal.FedAvg` takes.  All randomness comes from ``seed`` (an
int, ``None`` or a :class:`numpy.random.Generator`), so equal seeds give equal
partitions.

- ``iid``: shuffle, then cut into near-equal parts.
- ``pathological``: McMahan et al. (2017)'s non-IID MNIST split: sort rows by
  label, cut into ``n_clients * shards_per_client`` shards, give every client
  ``shards_per_client`` random shards, so most clients see only two labels.
- ``unbalanced``: IID labels, but client sizes drawn from a log-normal with
  shape ``sigma`` (0 gives equal sizes, larger is more skewed).
- ``dirichlet``: label skew of Hsu et al. (2019): for every class, the share
  of each client is drawn from ``Dirichlet(alpha, ..., alpha)``; small
  ``alpha`` (0.1) is very skewed, large (100) is close to IID.  Draws are
  repeated until every client holds at least ``min_size`` rows.

For personalized federated learning each client also needs a test set drawn
from its *own* distribution: :func:`train_test_split_clients` splits every
client's rows into training and test rows label by label, so a client's test
set has (up to rounding) the label mix of its training set.  Partition all
rows first, then split each client (as :func:`~vfl.horizontal.load_clients`
does).
"""

from __future__ import annotations

import numpy as np

from ._checks import (
    check_interval,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_random_state,
)
from .errors import InvalidParameterError, PartitionError, ShapeMismatchError

__all__ = [
    "PARTITIONS",
    "dirichlet_partition",
    "iid_partition",
    "partition",
    "pathological_partition",
    "split_clients",
    "train_test_split_clients",
    "unbalanced_partition",
]

#: Names accepted by :func:`partition`.
PARTITIONS = ("iid", "pathological", "unbalanced", "dirichlet")


def _rng(n_samples: int, n_clients: int, seed, per_client: int = 1) -> np.random.Generator:
    """The generator from ``seed``, once ``n_samples`` rows are known to give ``n_clients`` clients ``per_client`` each.

    The checks every partition makes after its own parameters' (so in this
    order: ``n_samples``, ``n_clients``, enough rows, ``seed``).

    Raises
    ------
    InvalidParameterError
        ``n_samples`` or ``n_clients`` not an integer (``>= 0``, ``>= 1``),
        or a ``seed`` that cannot seed a generator.
    PartitionError
        Fewer than ``n_clients * per_client`` rows.
    """
    check_positive_int("n_samples", n_samples, minimum=0)
    check_positive_int("n_clients", n_clients)
    if n_samples < n_clients * per_client:
        raise PartitionError(
            f"cannot give {n_clients} clients {per_client} row(s) each from only {n_samples} rows"
        )
    return check_random_state(seed, "seed")


def _labels(y) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1:
        raise ShapeMismatchError(f"y must be one-dimensional, got shape {y.shape}")
    return y


def iid_partition(n_samples: int, n_clients: int, seed=None) -> list[np.ndarray]:
    """Shuffle the ``n_samples`` rows and cut them into ``n_clients`` parts whose sizes differ by at most one.

    ``n_clients`` (at most ``n_samples``), ``seed`` and the list returned are
    as in :func:`partition`.
    """
    rng = _rng(n_samples, n_clients, seed)
    return np.array_split(rng.permutation(n_samples), n_clients)


def pathological_partition(y, n_clients: int, shards_per_client: int = 2, seed=None) -> list[np.ndarray]:
    """McMahan's non-IID split: sort by label, deal ``shards_per_client`` shards each.

    ``y`` (the labels), ``n_clients``, ``seed`` and the list returned are as
    in :func:`partition`; ``shards_per_client`` label-sorted shards go to each
    client (2 in McMahan et al. 2017).
    """
    y = _labels(y)
    shards_per_client = check_positive_int("shards_per_client", shards_per_client)
    rng = _rng(y.size, n_clients, seed, shards_per_client)
    shuffled = rng.permutation(y.size)  # random order within each label
    by_label = shuffled[np.argsort(y[shuffled], kind="stable")]
    shards = np.array_split(by_label, n_clients * shards_per_client)
    order = rng.permutation(len(shards))
    return [
        np.concatenate([shards[s] for s in order[k * shards_per_client : (k + 1) * shards_per_client]])
        for k in range(n_clients)
    ]


def unbalanced_partition(n_samples: int, n_clients: int, sigma: float = 1.0, min_size: int = 1,
                         seed=None) -> list[np.ndarray]:
    """IID rows, client sizes proportional to log-normal draws (at least ``min_size``).

    ``n_samples`` rows; ``n_clients``, ``sigma`` (the log-normal's shape,
    finite and ``>= 0``: 0 gives equal sizes), ``min_size``, ``seed`` and the
    list returned are as in :func:`partition`.  An infinite ``sigma`` is
    refused: it would give NaN shares and a corrupt split.
    """
    sigma = check_nonnegative_float("sigma", sigma)
    min_size = check_positive_int("min_size", min_size)
    rng = _rng(n_samples, n_clients, seed, min_size)
    # lognormal(0, sigma) shares, normalised in log space: exp(N(0, sigma)) overflows
    # for large sigma, and inf / inf would turn the sizes into NaN
    log_share = rng.normal(0.0, sigma, size=n_clients)
    share = np.exp(log_share - log_share.max())
    spare = n_samples - n_clients * min_size
    exact = share / share.sum() * spare
    sizes = min_size + np.floor(exact).astype(int)
    leftover = n_samples - sizes.sum()
    sizes[np.argsort(exact - np.floor(exact))[::-1][:leftover]] += 1
    return np.split(rng.permutation(n_samples), np.cumsum(sizes)[:-1])


def dirichlet_partition(y, n_clients: int, alpha: float = 0.5, min_size: int = 1, seed=None,
                        max_tries: int = 1000) -> list[np.ndarray]:
    """Label skew: per class, client shares ~ ``Dirichlet(alpha)``.

    ``y`` (the labels), ``n_clients``, ``alpha`` (finite, ``> 0``),
    ``min_size``, ``seed`` and the list returned are as in :func:`partition`;
    draws are repeated until every client holds ``min_size`` rows, at most
    ``max_tries`` times (then a ``PartitionError``).
    """
    y = _labels(y)
    alpha = check_positive_float("alpha", alpha)
    min_size = check_positive_int("min_size", min_size)
    max_tries = check_positive_int("max_tries", max_tries)
    rng = _rng(y.size, n_clients, seed, min_size)
    by_class = [np.flatnonzero(y == c) for c in np.unique(y)]
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        for idx in by_class:
            idx = rng.permutation(idx)
            cuts = (np.cumsum(rng.dirichlet(np.full(n_clients, alpha))) * idx.size).astype(int)[:-1]
            for k, piece in enumerate(np.split(idx, cuts)):
                parts[k].append(piece)
        result = [np.concatenate(p) for p in parts]
        if min(r.size for r in result) >= min_size:
            return [rng.permutation(r) for r in result]
    raise PartitionError(
        f"no Dirichlet(alpha={alpha}) draw in {max_tries} tries gave all {n_clients} clients "
        f">= {min_size} rows; increase alpha or use fewer clients"
    )


def partition(y, n_clients: int, method: str = "iid", *, alpha: float = 0.5, shards_per_client: int = 2,
              sigma: float = 1.0, min_size: int = 1, seed=None) -> list[np.ndarray]:
    """Partition rows by ``method`` (one of :data:`PARTITIONS`); see the module doc.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels (only their number is used by ``"iid"`` and ``"unbalanced"``).
    n_clients : int
        K, the number of clients: at least 1, and at most the number of rows
        (times ``shards_per_client`` or ``min_size``).
    method : {"iid", "pathological", "unbalanced", "dirichlet"}, default="iid"
    alpha : float, default=0.5
        ``"dirichlet"``: the finite concentration ``> 0``; small is skewed,
        large is close to IID.
    shards_per_client : int, default=2
        ``"pathological"``: label-sorted shards given to each client.
    sigma : float, default=1.0
        ``"unbalanced"``: shape of the log-normal of the client sizes; finite
        and ``>= 0`` (0 gives equal sizes).
    min_size : int, default=1
        ``"unbalanced"`` and ``"dirichlet"``: the smallest client size.
    seed : int, numpy.random.Generator or None, default=None
        All the randomness; equal seeds give equal partitions.

    Returns
    -------
    list of ndarray of int
        One index array per client; disjoint, together covering every row.

    Raises
    ------
    InvalidParameterError
        Unknown ``method`` or a bad value for one of its parameters.
    PartitionError
        Too few rows for the requested split (or, ``"dirichlet"``, no draw
        giving every client ``min_size`` rows).
    ShapeMismatchError
        ``y`` is not one-dimensional.
    """
    y = _labels(y)
    if method == "iid":
        return iid_partition(y.size, n_clients, seed=seed)
    if method == "pathological":
        return pathological_partition(y, n_clients, shards_per_client, seed=seed)
    if method == "unbalanced":
        return unbalanced_partition(y.size, n_clients, sigma, min_size, seed=seed)
    if method == "dirichlet":
        return dirichlet_partition(y, n_clients, alpha, min_size, seed=seed)
    raise InvalidParameterError(f"unknown partition {method!r}; choose one of {PARTITIONS}")


def split_clients(X, y, parts) -> list[tuple[np.ndarray, np.ndarray]]:
    """Turn index arrays into a list of ``(X_k, y_k)`` pairs.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    parts : sequence of array-like of int
        Row indices per client, as returned by :func:`partition`.

    Returns
    -------
    list of (ndarray, ndarray)
    """
    X, y = np.asarray(X), np.asarray(y)
    if X.shape[0] != y.shape[0]:
        raise ShapeMismatchError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
    return [(X[idx], y[idx]) for idx in parts]


def train_test_split_clients(clients, test_size: float = 0.25, seed=None):
    """Split each client's rows into its own training and test rows, stratified by label.

    For every label a client holds, ``round(test_size * count)`` of its rows,
    but at most ``count - 1``, go to the client's test set, the rest stay for
    training: each label keeps at least one training row, and the test set
    follows the client's own label mix.  A client whose labels are all too
    rare to spare a row (e.g. two labels with one row each) gives one row of
    its most frequent label.

    Parameters
    ----------
    clients : sequence of (X_k, y_k)
        E.g. from :func:`split_clients`.
    test_size : float in (0, 1), default=0.25
    seed : int, numpy.random.Generator or None, default=None
        Chooses which rows of each label are held out.

    Returns
    -------
    train_clients, test_clients : list of (ndarray, ndarray)
        Same order as ``clients``; together they hold every row once.

    Raises
    ------
    InvalidParameterError
        ``test_size`` outside (0, 1).
    PartitionError
        A client with fewer than two rows (nothing to hold out).
    """
    test_size = check_interval("test_size", test_size, 0.0, 1.0, closed="neither")
    rng = check_random_state(seed, "seed")
    train, test = [], []
    for k, (X, y) in enumerate(clients):
        X, y = np.asarray(X), _labels(y)
        if X.shape[0] != y.size:
            raise ShapeMismatchError(f"client {k}: X has {X.shape[0]} rows but y has {y.size}")
        if y.size < 2:
            raise PartitionError(f"client {k} holds {y.size} row(s): too few to hold out a test row; "
                                 f"use fewer clients")
        labels, counts = np.unique(y, return_counts=True)
        held = np.minimum(counts - 1, np.floor(test_size * counts + 0.5).astype(int))
        if held.sum() == 0:
            held[np.argmax(counts)] = 1
        out = np.concatenate([rng.permutation(np.flatnonzero(y == label))[:h] for label, h in zip(labels, held)])
        mask = np.zeros(y.size, dtype=bool)
        mask[out] = True
        train.append((X[~mask], y[~mask]))
        test.append((X[mask], y[mask]))
    return train, test
