"""Helpers shared by the estimators of :mod:`vfl.horizontal`.

Input preparation (:func:`prepare`, :func:`encode_test`,
:func:`encode_client_tests`), the metrics every ``history_`` row records
(:class:`RoundMetrics`), the constructor's one line (:func:`keep_params`) and
the prediction methods of every fitted estimator
(:class:`FederatedClassifierMixin`); the frame of ``fit`` around each
algorithm's round is :mod:`._rounds`.  Personalized estimators (one model per
client) set ``personalized_parameters_``; the mixin then answers
``client=k`` questions with client ``k``'s own model.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from ._checks import check_fraction, check_hidden_layer_sizes, check_nonnegative_float
from .clients import check_clients, encode_labels
from .errors import EmptyClientError, InvalidParameterError, LabelError, ShapeMismatchError
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


def keep_params(estimator, params: dict) -> None:
    """Store every constructor argument as the attribute of its name, unchanged.

    What scikit-learn asks of an estimator's ``__init__`` (``get_params`` and
    ``clone`` read the attributes back); ``fit`` checks them.  ``params`` is
    the constructor's ``locals()``, ``self`` included.
    """
    for name, value in params.items():
        if name != "self":
            setattr(estimator, name, value)


def check_features(X, n_features: int, what: str = "X") -> np.ndarray:
    """``X`` as floats of shape ``(n, n_features)``, every value finite (else an error naming the row)."""
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"{what} is not numeric ({exc})") from None
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ShapeMismatchError(f"{what} has shape {X.shape}; expected (n, {n_features})")
    bad = ~np.isfinite(X)
    if bad.any():
        row, col = map(int, np.argwhere(bad)[0])
        raise InvalidParameterError(f"{what}, row {row}, column {col}: {X[row, col]} (values must be finite)")
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


def encode_client_tests(client_tests, classes, n_features: int, n_clients: int):
    """Validate per-client test sets ``[(X_k, y_k), ...]``, one per training client, in the same order.

    Returns ``None`` if ``client_tests`` is None, else a list of ``(X_k, y_k)``
    with labels as class indices.

    Raises
    ------
    ShapeMismatchError
        Not one test set per client, or a test set of the wrong shape.
    EmptyClientError
        A client's test set has no rows.
    LabelError
        A test label that is not among ``classes``.
    """
    if client_tests is None:
        return None
    try:
        client_tests = list(client_tests)
    except TypeError:
        raise InvalidParameterError("client_tests must be a sequence of (X, y) pairs, one per client") from None
    if len(client_tests) != n_clients:
        raise ShapeMismatchError(f"client_tests has {len(client_tests)} test sets for {n_clients} clients; "
                                 f"give one per client, in the order of the clients")
    encoded = []
    for k, pair in enumerate(client_tests):
        try:
            X, y = pair
        except (TypeError, ValueError):
            raise InvalidParameterError(f"client_tests[{k}] must be an (X, y) pair") from None
        X = check_features(X, n_features, f"client {k}'s test X")
        y = np.asarray(y)
        if y.shape != (X.shape[0],):
            raise ShapeMismatchError(f"client {k}'s test y has shape {y.shape}; expected ({X.shape[0]},)")
        if X.shape[0] == 0:
            raise EmptyClientError(f"client {k}'s test set has no rows")
        unknown = np.setdiff1d(y, classes)
        if unknown.size:
            raise LabelError(f"client {k}'s test labels {unknown.tolist()} are not in classes {classes.tolist()}")
        encoded.append((X, np.searchsorted(classes, y)))
    return encoded


def worst_fraction_mean(values, fraction: float = 0.1) -> float:
    """Mean of the lowest ``ceil(fraction * K)`` of ``K`` values (at least one).

    With per-client accuracies this is the "worst 10 %" of Li et al.'s q-FFL
    (2020): the mean accuracy of the tenth of the clients served worst.
    """
    fraction = check_fraction("fraction", fraction)
    values = np.sort(np.asarray(values, dtype=np.float64))
    if values.ndim != 1 or values.size == 0:
        raise ShapeMismatchError(f"expected a non-empty 1-D array of values, got shape {values.shape}")
    return float(values[: max(1, int(np.ceil(fraction * values.size - 1e-9)))].mean())


def accuracy(model, w, X, y) -> float:
    """Share of rows of ``X`` whose most probable class under ``w`` is ``y`` (class indices)."""
    return float(np.mean(model.predict_proba(w, X).argmax(axis=1) == y))


class RoundMetrics:
    """The metrics of one training state, as each ``history_`` row records them.

    Parameters
    ----------
    model : LogisticRegressionModel or MLPModel
    data : list of (X_k, y_k)
        Training clients, labels as class indices.
    X_test, y_test : ndarray or None
        Pooled evaluation set (from :func:`encode_test`).
    client_tests : list of (X_k, y_k) or None
        Per-client evaluation sets (from :func:`encode_client_tests`).
    """

    def __init__(self, model, data, X_test, y_test, client_tests):
        self.model, self.data, self.X_test, self.y_test, self.client_tests = model, data, X_test, y_test, client_tests
        self.n_k = np.array([X.shape[0] for X, _ in data])
        self.X_all, self.y_all = np.vstack([X for X, _ in data]), np.concatenate([y for _, y in data])

    def __call__(self, w, personal=None) -> dict:
        """Metrics of the global vector ``w`` and, if given, per-client vectors ``personal`` (K, d).

        Returns a dict with ``train_loss`` (log loss over all training rows,
        each row scored by its client's model: ``personal[k]``, or ``w`` for
        all when ``personal`` is None), ``test_loss`` and ``test_accuracy``
        (``w`` on the pooled test set; NaN without one; NaN if ``w`` is None)
        and ``client_accuracy_mean`` / ``client_accuracy_worst10`` (each
        client's model on its own test set; NaN without ``client_tests``).
        """
        model = self.model
        if personal is None:
            train_loss = cross_entropy(model, w, self.X_all, self.y_all)
        else:
            losses = [cross_entropy(model, v, X, y) for v, (X, y) in zip(personal, self.data)]
            train_loss = float(np.average(losses, weights=self.n_k))
        test_loss, test_accuracy = test_metrics(model, w, self.X_test, self.y_test) if w is not None else (np.nan,) * 2
        mean = worst = float("nan")
        if self.client_tests is not None:
            vectors = [w] * len(self.client_tests) if personal is None else personal
            scores = [accuracy(model, v, X, y) for v, (X, y) in zip(vectors, self.client_tests)]
            mean, worst = float(np.mean(scores)), worst_fraction_mean(scores, 0.1)
        return {"train_loss": train_loss, "test_loss": test_loss, "test_accuracy": test_accuracy,
                "client_accuracy_mean": mean, "client_accuracy_worst10": worst}


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
    return cross_entropy(model, w, X_test, y_test), accuracy(model, w, X_test, y_test)


class FederatedClassifierMixin(BaseEstimator):
    """``predict_proba`` / ``predict`` / ``score`` / per-client metrics from ``model_`` and ``parameters_``.

    ``client=k`` in the prediction methods selects client ``k``'s model:
    its personalized model (``personalized_parameters_[k]``) in a
    personalized estimator, the one global model otherwise.
    """

    def _check_fitted(self):
        if not hasattr(self, "parameters_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def _parameters_for(self, client=None) -> np.ndarray:
        """The vector that serves ``client`` (an index into the clients given to ``fit``), or the global one."""
        self._check_fitted()
        personal = getattr(self, "personalized_parameters_", None)
        if client is None:
            if self.parameters_ is None:
                raise InvalidParameterError(f"{type(self).__name__} has no global model; "
                                            f"pass client=k for client k's own model")
            return self.parameters_
        if isinstance(client, (bool, np.bool_)) or not isinstance(client, (int, np.integer)) \
                or not 0 <= client < self.n_clients_:
            raise InvalidParameterError(f"client must be an index 0 .. {self.n_clients_ - 1} of the clients "
                                        f"given to fit, got {client!r}")
        return self.parameters_ if personal is None else personal[int(client)]

    def predict_proba(self, X, client=None) -> np.ndarray:
        """Class probabilities, shape ``(n, n_classes)``, columns in ``classes_`` order.

        ``client=k`` uses client ``k``'s model (see the class docstring).
        """
        w = self._parameters_for(client)
        return self.model_.predict_proba(w, check_features(X, self.n_features_in_))

    def predict(self, X, client=None) -> np.ndarray:
        """Most probable class label for each row (``client=k``: client ``k``'s model)."""
        proba = self.predict_proba(X, client)
        return self.classes_[proba.argmax(axis=1)]

    def _per_client(self, clients, what: str):
        """``[(vector, X_k, y_k)]`` for ``clients`` paired with the models that serve them."""
        self._check_fitted()
        _, encoded = encode_labels(check_clients(clients), self.classes_)
        personal = getattr(self, "personalized_parameters_", None)
        if personal is not None and len(encoded) != self.n_clients_:
            raise ShapeMismatchError(f"{what} got {len(encoded)} data sets; this {type(self).__name__} has one "
                                     f"model per client for {self.n_clients_} clients: give one per client, "
                                     f"in the order used in fit")
        for k, (X, _) in enumerate(encoded):
            check_features(X, self.n_features_in_, f"client {k}'s X")
        return [(self.parameters_ if personal is None else personal[k], X, y) for k, (X, y) in enumerate(encoded)]

    def client_losses(self, clients) -> np.ndarray:
        """Log loss of each client's model on that client's data, ``[L_0, L_1, ...]``.

        With one global model, ``clients`` may be any list of data sets and
        ``max`` of this is the worst-domain loss that
        :class:`~vfl.horizontal.AgnosticFL` minimises.  With personalized
        models give one data set per client, in the order used in ``fit``.
        """
        return np.array([cross_entropy(self.model_, w, X, y) for w, X, y in self._per_client(clients, "client_losses")])

    def client_accuracies(self, client_tests) -> np.ndarray:
        """Accuracy of each client's model on that client's data (e.g. its own test set).

        Summarise with ``mean()`` and :func:`worst_fraction_mean` (the mean of
        the worst 10 %); ``history_`` records both per round when ``fit`` is
        given ``client_tests``.
        """
        return np.array([accuracy(self.model_, w, X, y) for w, X, y in self._per_client(client_tests,
                                                                                       "client_accuracies")])

    def score(self, X, y, client=None) -> float:
        """Mean accuracy on ``(X, y)`` (``client=k``: of client ``k``'s model)."""
        predicted = self.predict(X, client)
        y = np.asarray(y)
        if y.shape != predicted.shape:
            raise ShapeMismatchError(f"y has shape {y.shape}; expected ({len(predicted)},), one label per row of X")
        unknown = np.setdiff1d(y, self.classes_)
        if unknown.size:
            raise LabelError(f"y has labels {unknown.tolist()[:10]} not seen in training {self.classes_.tolist()}")
        return float(np.mean(predicted == y))
