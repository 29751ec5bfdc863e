"""The small scikit-learn data sets used by the CLI and the examples."""

from __future__ import annotations

from sklearn import datasets as _sk
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from ._checks import check_interval
from .errors import InvalidParameterError

__all__ = ["DATASETS", "load_dataset"]

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
