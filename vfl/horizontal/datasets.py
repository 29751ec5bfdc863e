"""The small scikit-learn data sets used by the CLI and the examples."""

from __future__ import annotations

import numpy as np
from sklearn import datasets as _sk
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from ._checks import check_interval
from .errors import InvalidParameterError
from .partition import partition, split_clients, train_test_split_clients

__all__ = ["DATASETS", "load_clients", "load_dataset"]

_LOADERS = {
    "digits": _sk.load_digits,
    "breast_cancer": _sk.load_breast_cancer,
    "iris": _sk.load_iris,
    "wine": _sk.load_wine,
}
#: Names accepted by :func:`load_dataset`.
DATASETS = tuple(_LOADERS)


def load_dataset(name: str, test_size: float = 0.2, seed: int = 0):
    """Load a bundled data set, split it stratified, and standardise it.

    The scaler is fitted on the training rows only.  (In a real federation
    the clients would agree on the scaling, e.g. with federated means and
    variances; this simulation takes the shortcut.)

    Parameters
    ----------
    name : {"digits", "breast_cancer", "iris", "wine"}
    test_size : float in (0, 1), default=0.2
        Held-out fraction.
    seed : int, default=0
        Seed of the split.

    Returns
    -------
    X_train, X_test, y_train, y_test : ndarray
    """
    if name not in _LOADERS:
        raise InvalidParameterError(f"unknown dataset {name!r}; choose one of {DATASETS}")
    check_interval("test_size", test_size, 0.0, 1.0, closed="neither")
    X, y = _LOADERS[name](return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=test_size, random_state=seed, stratify=y
    )
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def load_clients(name: str, n_clients: int, method: str = "iid", *, test_size: float = 0.25, seed: int = 0,
                 alpha: float = 0.5, shards_per_client: int = 2, sigma: float = 1.0, min_size: int = 2):
    """A bundled data set dealt to clients, each with a test set from its own distribution.

    All rows are partitioned with :func:`~vfl.horizontal.partition`, then
    every client's share is split into training and test rows by
    :func:`~vfl.horizontal.train_test_split_clients` (label by label, so a
    client's test set has its label mix).  Features are standardised with a
    scaler fitted on all clients' training rows (the same simulation shortcut
    as :func:`load_dataset`).  This is the evaluation of personalized
    federated learning: each client's model is scored on that client's test
    rows; the union of the test sets is a test set for a global model.

    Parameters
    ----------
    name : {"digits", "breast_cancer", "iris", "wine"}
    n_clients : int
    method : {"iid", "pathological", "unbalanced", "dirichlet"}, default="iid"
    test_size : float in (0, 1), default=0.25
        Share of each label of each client held out.
    seed : int, default=0
        Seeds the partition and the held-out rows.
    alpha, shards_per_client, sigma : optional
        Passed to :func:`~vfl.horizontal.partition`.
    min_size : int, default=2
        Smallest client for ``"unbalanced"`` and ``"dirichlet"``: two rows,
        so that every client can hold one out.

    Returns
    -------
    train_clients, test_clients : list of (ndarray, ndarray)
    """
    if name not in _LOADERS:
        raise InvalidParameterError(f"unknown dataset {name!r}; choose one of {DATASETS}")
    X, y = _LOADERS[name](return_X_y=True)
    parts = partition(y, n_clients, method, alpha=alpha, shards_per_client=shards_per_client, sigma=sigma,
                      min_size=min_size, seed=seed)
    train, test = train_test_split_clients(split_clients(X, y, parts), test_size, seed=seed)
    scaler = StandardScaler().fit(np.vstack([Xk for Xk, _ in train]))
    return ([(scaler.transform(Xk), yk) for Xk, yk in train], [(scaler.transform(Xk), yk) for Xk, yk in test])
