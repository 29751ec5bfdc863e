"""FederatedAveraging (McMahan et al. 2017) as a scikit-learn-style estimator.

Every round the server samples ``m = max(floor(C * K), min_fit_clients)`` of
the ``K`` clients, sends them the global parameter vector, each runs
:func:`~vfl.horizontal.clients.local_update` (E local epochs of minibatch SGD
with batch size B), sends its vector back, and the server aggregates
(by default the mean weighted by ``n_k``).

Names of the knobs, side by side:

=====================  ======================  ==================================
this class             McMahan et al. 2017     Flower ``FedAvg`` / TFF
=====================  ======================  ==================================
``fraction_fit``       C                       ``fraction_fit``
``min_fit_clients``    (the 1 in max(CK, 1))   ``min_fit_clients``
``local_epochs``       E                       client config / ``client_optimizer_fn`` loop
``batch_size``         B (None = infinity)     client dataset ``.batch(B)``
``learning_rate``      eta                     client optimizer learning rate
``num_rounds``         rounds                  ``ServerConfig(num_rounds=...)``
``aggregator="mean"``  sum_k n_k/n w_k         weighting by ``num_examples`` /
                                               ``ClientWeighting.NUM_EXAMPLES``
=====================  ======================  ==================================

FedSGD is ``local_epochs=1, batch_size=None``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from . import clients as _clients
from ._checks import (check_batch_size, check_fraction, check_interval, check_nonnegative_float,
                      check_positive_float, check_positive_int)
from ._common import FederatedClassifierMixin, keep_params
from ._rounds import Rounds, start, warn_diverged
from .aggregation import AGGREGATORS, aggregate, max_tolerated_faults
from .errors import InvalidParameterError

__all__ = ["FedAvg"]


class FedAvg(FederatedClassifierMixin):
    """Horizontal federated averaging of a numpy classifier.

    Parameters
    ----------
    model : {"logreg", "mlp"}, default="logreg"
        Logistic regression (sigmoid for two classes, softmax otherwise) or a
        ReLU MLP with ``hidden_layer_sizes``.
    num_rounds : int, default=50
        Communication rounds.
    fraction_fit : float in (0, 1], default=0.1
        C, the fraction of clients sampled each round.
    min_fit_clients : int, default=1
        Lower bound on clients per round.
    local_epochs : int, default=1
        E, passes over the local data per round.
    batch_size : int or None, default=None
        B, the local minibatch size; None uses the whole local set as one batch.
    learning_rate : float, default=0.1
        Client SGD step size (eta).
    aggregator : {"mean", "median", "trimmed_mean"}, default="mean"
        Server rule; see :mod:`vfl.horizontal.aggregation`.  The robust rules
        need enough clients per round to protect anything: ``fit`` warns
        (``RuntimeWarning``, once) when they would tolerate no bad client,
        i.e. ``"median"`` with ``m <= 2`` or ``"trimmed_mean"`` with
        ``floor(trim_beta * m) == 0``.
    trim_beta : float in [0, 0.5), default=0.2
        Fraction trimmed from each end by ``"trimmed_mean"``.
    hidden_layer_sizes : tuple of int, default=(64, 64)
        Hidden layers of the ``"mlp"`` model.
    l2 : float, default=0.0
        Ridge penalty used in every client's loss.
    initial_parameters : ndarray or None, default=None
        Starting global vector (Flower's name); None draws one from the model.
    target_accuracy : float in (0, 1] or None, default=None
        Stop as soon as test accuracy reaches this (needs ``X_test``).
    target_train_objective : float or None, default=None
        Stop as soon as ``train_objective`` (see ``history_``) is at or below
        this finite value ``>= 0``, e.g. the centralised optimum plus a small
        tolerance.  With both targets given, training stops when both are met.
    random_state : int, Generator or None, default=None
        Seeds the initial vector, client sampling and local shuffling.
    progress : bool, default=False
        Show a tqdm progress bar over rounds.

    Attributes
    ----------
    parameters_ : ndarray of shape (n_params,)
        Final global parameter vector.
    model_ : LogisticRegressionModel or MLPModel
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    n_clients_ : int
        K, the number of clients given to ``fit``.
    history_ : pandas.DataFrame
        One row per round: ``round``, ``clients`` (m), ``train_loss`` (log
        loss over all clients' data, i.e. weighted by n_k), ``train_objective``
        (``train_loss`` plus the L2 term: the objective the clients minimise,
        equal to ``train_loss`` when ``l2=0``), ``test_loss``,
        ``test_accuracy`` (NaN without a test set), ``bytes_down`` (server to
        the sampled clients), ``bytes_up`` (clients to server) and the running
        ``bytes_total``.  Bytes count the float64 parameter vectors only.
        With ``client_tests`` given to ``fit`` also ``client_accuracy_mean``
        and ``client_accuracy_worst10``: the global model's accuracy on each
        client's own test set, its mean and the mean of the worst 10 % of
        clients (NaN without ``client_tests``).
    rounds_to_target_ : int or None
        First round at which the given target(s), ``target_accuracy`` and/or
        ``target_train_objective``, were reached; None if not reached or none
        given.
    """

    def __init__(self, model="logreg", *, num_rounds=50, fraction_fit=0.1, min_fit_clients=1,
                 local_epochs=1, batch_size=None, learning_rate=0.1, aggregator="mean",
                 trim_beta=0.2, hidden_layer_sizes=(64, 64), l2=0.0, initial_parameters=None,
                 target_accuracy=None, target_train_objective=None, random_state=None, progress=False):
        keep_params(self, locals())

    def _check_params(self):
        """Validate the scalar hyperparameters (the rest are checked in ``start``).

        Raises
        ------
        InvalidParameterError
            A value of the wrong type or outside its range.
        """
        check_positive_int("num_rounds", self.num_rounds)
        check_fraction("fraction_fit (C)", self.fraction_fit)
        check_positive_int("min_fit_clients", self.min_fit_clients)
        check_positive_int("local_epochs (E)", self.local_epochs)
        check_batch_size(self.batch_size)
        check_positive_float("learning_rate", self.learning_rate)
        if not isinstance(self.aggregator, str) or self.aggregator not in AGGREGATORS:
            raise InvalidParameterError(f"unknown aggregator {self.aggregator!r}; choose one of {AGGREGATORS}")
        check_interval("trim_beta", self.trim_beta, 0.0, 0.5, closed="left")
        if self.target_accuracy is not None:
            check_interval("target_accuracy", self.target_accuracy, 0.0, 1.0, closed="right")
        if self.target_train_objective is not None:
            check_nonnegative_float("target_train_objective", self.target_train_objective)

    def _warn_if_not_robust(self, m: int) -> None:
        """Warn once if the robust aggregator tolerates no bad client with ``m`` per round."""
        if self.aggregator == "mean" or max_tolerated_faults(self.aggregator, m, self.trim_beta) > 0:
            return
        more = "sample more clients per round (raise fraction_fit or min_fit_clients)"
        if self.aggregator == "median":
            what = "that value" if m == 1 else "their mean"
            message = (f"aggregator='median' with m={m} client(s) per round tolerates no malicious client "
                       f"(the median of {m} value(s) is {what}); {more}: it needs m >= 3")
        else:
            beta = float(self.trim_beta)
            if beta == 0.0:
                advice = "use trim_beta > 0"
            else:
                needed = math.ceil(1.0 / beta)
                while math.floor(beta * needed) < 1:  # guard against 1 / beta rounding down
                    needed += 1
                advice = f"{more}: it needs m >= {needed}, or raise trim_beta"
            message = (f"aggregator='trimmed_mean' with trim_beta={beta:g} and m={m} client(s) per round "
                       f"trims floor({beta:g} * {m}) = 0 values from each end: it is the plain unweighted "
                       f"mean and tolerates no malicious client; {advice}")
        warnings.warn(message, RuntimeWarning, stacklevel=3)

    def fit(self, clients, X_test=None, y_test=None, *, client_tests=None, classes=None):
        """Run ``num_rounds`` rounds of federated averaging.

        Parameters
        ----------
        clients : sequence of (X_k, y_k)
            One pair per client: ``X_k`` of shape ``(n_k, n_features)`` (same
            ``n_features`` for all), ``y_k`` of shape ``(n_k,)``.
        X_test, y_test : array-like, optional
            Held-out set for ``test_accuracy`` in ``history_``.
        client_tests : sequence of (X_k, y_k), optional
            One held-out set per client, in the order of ``clients``, drawn
            from that client's own distribution (see
            :func:`~vfl.horizontal.train_test_split_clients`); ``history_``
            then records the per-client accuracy.
        classes : array-like, optional
            Full label set, if some label is on no client.

        Returns
        -------
        self

        Raises
        ------
        FederatedInputError
            Bad clients, test set or hyperparameters (a subclass says which).

        Warns
        -----
        RuntimeWarning
            Once per fit if ``aggregator`` is ``"median"`` or
            ``"trimmed_mean"`` but tolerates no malicious client with the ``m``
            clients sampled per round (see
            :func:`~vfl.horizontal.aggregation.max_tolerated_faults`); and if
            the parameters become non-finite, in which case training stops.
        """
        self._check_params()
        run = start(self, clients, X_test, y_test, client_tests, classes,
                    check=lambda _: self._check_test_given(X_test, y_test))
        data, model, rng, w, metrics = run.data, run.model, run.rng, run.w, run.metrics
        n_k = metrics.n_k
        m = _clients.num_fit_clients(len(data), self.fraction_fit, self.min_fit_clients)
        self._warn_if_not_robust(m)
        vector_bytes = run.vector_bytes

        run.fitted(self)
        self.rounds_to_target_ = None
        rounds = Rounds(self, "FedAvg")
        for t in rounds:
            sampled = _clients.sample_clients(rng, len(data), m)
            with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported below
                updates = [
                    _clients.local_update(model, w, *data[k], local_epochs=self.local_epochs,
                                          batch_size=self.batch_size, learning_rate=self.learning_rate,
                                          rng=child)
                    for k, child in zip(sampled, _clients.child_generators(rng, m))
                ]
                w = aggregate(updates, n_k[sampled], self.aggregator, self.trim_beta)
                row = metrics(w)  # train_loss = sum_k n_k/n L_k on all clients' rows
                train_objective = row["train_loss"] + model.penalty(w)
            test_acc = row["test_accuracy"]
            rounds.record({"round": t, "clients": m, "train_loss": row["train_loss"],
                           "train_objective": train_objective, "test_loss": row["test_loss"],
                           "test_accuracy": test_acc, "client_accuracy_mean": row["client_accuracy_mean"],
                           "client_accuracy_worst10": row["client_accuracy_worst10"]},
                          {"loss": f"{row['train_loss']:.4f}", "acc": f"{test_acc:.3f}"},
                          bytes_down=m * vector_bytes, bytes_up=m * vector_bytes)
            if not np.all(np.isfinite(w)):
                warn_diverged("FedAvg", t, None, f"learning_rate (now {self.learning_rate})")
                break
            if self._targets_met(test_acc, train_objective):
                self.rounds_to_target_ = t
                break
        self.parameters_ = w
        self.history_ = rounds.history()
        return self

    def _check_test_given(self, X_test, y_test) -> None:
        """Raise if ``target_accuracy`` is set but no test set was given to measure it on."""
        if self.target_accuracy is not None and X_test is None and y_test is None:
            raise InvalidParameterError("target_accuracy needs X_test and y_test")

    def _targets_met(self, test_accuracy: float, train_objective: float) -> bool:
        """True if at least one target is set and every target that is set is reached."""
        targets = []
        if self.target_accuracy is not None:
            targets.append(test_accuracy >= self.target_accuracy)
        if self.target_train_objective is not None:
            targets.append(train_objective <= self.target_train_objective)
        return bool(targets) and all(targets)
