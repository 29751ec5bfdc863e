"""The small scikit-learn data sets used by the CLI and the examples."""

from __future__ import annotations

from sklearn import datasets as _sk
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

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

    Returns
    -------
    X_train, X_test, y_train, y_test : ndarray
    """
    if name not in _LOADERS:
        raise InvalidParameterError(f"unknown dataset {name!r}; choose one of {DATASETS}")
    if not 0.0 < test_size < 1.0:
        raise InvalidParameterError(f"test_size must be in (0, 1), got {test_size!r}")
    X, y = _LOADERS[name](return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=test_size, random_state=seed, stratify=y
    )
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test
