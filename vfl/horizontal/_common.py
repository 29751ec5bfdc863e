"""Helpers shared by :class:`~vfl.horizontal.FedAvg` and :class:`~vfl.horizontal.AgnosticFL`."""

from __future__ import annotations

import numpy as np
from sklearn.exceptions import NotFittedError

from ._checks import check_hidden_layer_sizes, check_nonnegative_float
from .clients import check_clients, encode_labels
from .errors import InvalidParameterError, LabelError, ShapeMismatchError
from .models import make_model

BYTES_PER_FLOAT = np.dtype(np.float64).itemsize


def prepare(clients, classes, model_name, hidden_layer_sizes, l2, initial_parameters, rng):
    """Check clients, encode labels, build the model and the starting vector.

    Parameters
    ----------
    clients : sequence of (X_k, y_k)
    classes : array-like or None
    model_name : str
    hidden_layer_sizes : sequence of int
        Checked even for ``"logreg"``, which ignores it.
    l2 : float
    initial_parameters : array-like or None
    rng : numpy.random.Generator

    Returns
    -------
    classes : ndarray
    encoded : list of (ndarray, ndarray)
        Clients with labels as class indices.
    model : LogisticRegressionModel or MLPModel
    w : ndarray of shape (model.n_params,)
        The starting vector.

    Raises
    ------
    InvalidParameterError
        Bad ``l2`` or ``hidden_layer_sizes``, unknown model, non-numeric or
        non-finite ``initial_parameters``.
    ShapeMismatchError
        ``initial_parameters`` of the wrong length.
    """
    check_nonnegative_float("l2", l2)
    check_hidden_layer_sizes(hidden_layer_sizes)
    clients = check_clients(clients)
    classes, encoded = encode_labels(clients, classes)
    model = make_model(model_name, encoded[0][0].shape[1], classes.size,
                       hidden_layer_sizes=hidden_layer_sizes, l2=l2)
    if initial_parameters is None:
        w = model.init_params(rng)
    else:
        try:
            w = np.array(initial_parameters, dtype=np.float64, copy=True)
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(f"initial_parameters must be a numeric vector ({exc})") from None
        if w.shape != (model.n_params,):
            raise ShapeMismatchError(
                f"initial_parameters has shape {w.shape}; the {model_name} model needs ({model.n_params},)"
            )
        if not np.all(np.isfinite(w)):
            raise InvalidParameterError("initial_parameters contains NaN or infinite values")
    return classes, encoded, model, w


def check_features(X, n_features: int, what: str = "X") -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ShapeMismatchError(f"{what} has shape {X.shape}; expected (n, {n_features})")
    return X


def encode_test(X_test, y_test, classes, n_features):
    """Validate an optional evaluation set; returns ``(None, None)`` if absent."""
    if X_test is None and y_test is None:
        return None, None
    if X_test is None or y_test is None:
        raise InvalidParameterError("give both X_test and y_test, or neither")
    X_test = check_features(X_test, n_features, "X_test")
    y_test = np.asarray(y_test)
    if y_test.shape != (X_test.shape[0],):
        raise ShapeMismatchError(f"y_test has shape {y_test.shape}; expected ({X_test.shape[0]},)")
    unknown = np.setdiff1d(y_test, classes)
    if unknown.size:
        raise LabelError(f"y_test has labels {unknown.tolist()} not seen in training {classes.tolist()}")
    return X_test, np.searchsorted(classes, y_test)


def cross_entropy(model, w, X, y) -> float:
    """Mean log loss of ``w`` on ``(X, y)`` (``y`` as class indices), without the L2 term.

    Reported losses (history, :meth:`FederatedClassifierMixin.client_losses`)
    are this; the L2 penalty only enters the optimisation.
    """
    proba = model.predict_proba(w, X)
    return float(-np.mean(np.log(np.clip(proba[np.arange(y.size), y], 1e-300, None))))


def test_metrics(model, w, X_test, y_test) -> tuple[float, float]:
    """``(loss, accuracy)`` on the evaluation set, NaN when there is none."""
    if X_test is None:
        return float("nan"), float("nan")
    accuracy = np.mean(model.predict_proba(w, X_test).argmax(axis=1) == y_test)
    return cross_entropy(model, w, X_test, y_test), float(accuracy)


class FederatedClassifierMixin:
    """``predict_proba`` / ``predict`` / ``score`` from ``model_`` and ``parameters_``."""

    def _check_fitted(self):
        if not hasattr(self, "parameters_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, shape ``(n, n_classes)``, columns in ``classes_`` order."""
        self._check_fitted()
        return self.model_.predict_proba(self.parameters_, check_features(X, self.n_features_in_))

    def predict(self, X) -> np.ndarray:
        """Most probable class label for each row."""
        proba = self.predict_proba(X)
        return self.classes_[proba.argmax(axis=1)]

    def client_losses(self, clients) -> np.ndarray:
        """Log loss of the fitted model on each client's data, ``[L_0, L_1, ...]``.

        With clients as domains, ``max`` of this is the worst-domain loss that
        :class:`~vfl.horizontal.AgnosticFL` minimises.
        """
        self._check_fitted()
        _, encoded = encode_labels(check_clients(clients), self.classes_)
        for k, (X, _) in enumerate(encoded):
            check_features(X, self.n_features_in_, f"client {k}'s X")
        return np.array([cross_entropy(self.model_, self.parameters_, X, y) for X, y in encoded])

    def score(self, X, y) -> float:
        """Mean accuracy on ``(X, y)``."""
        return float(np.mean(self.predict(X) == np.asarray(y)))
