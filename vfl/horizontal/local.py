"""Local-only training: every client trains alone, nothing is communicated.

The floor a federation has to beat, and the ``lam = 0`` end of
:class:`~vfl.horizontal.L2GD`'s objective.  Each client runs the same local
SGD as FedAvg's clients (:func:`~vfl.horizontal.clients.local_update`,
``local_epochs`` passes per round with batch size ``batch_size``) on its own
rows, from the same starting vector; "rounds" only pace the ``history_`` so
that it lines up with the federated estimators'.  There is no global model:
predict with ``client=k``.
"""

from __future__ import annotations

import numpy as np

from . import clients as _clients
from ._checks import check_batch_size, check_positive_float, check_positive_int
from ._common import FederatedClassifierMixin, keep_params
from ._rounds import Rounds, start, warn_diverged

__all__ = ["LocalOnly"]


class LocalOnly(FederatedClassifierMixin):
    """Each client trains its own model on its own rows only.

    Parameters
    ----------
    model : {"logreg", "mlp"}, default="logreg"
    num_rounds : int, default=50
        Training periods of ``local_epochs`` epochs each (nothing is sent).
    local_epochs : int, default=1
    batch_size : int or None, default=None
    learning_rate : float, default=0.1
    hidden_layer_sizes, l2, initial_parameters, random_state, progress
        As in :class:`~vfl.horizontal.FedAvg`.

    Attributes
    ----------
    personalized_parameters_ : ndarray of shape (n_clients, n_params)
        Each client's model; ``predict(X, client=k)`` uses it.
    parameters_ : None
        There is no global model.
    model_, classes_, n_features_in_, n_clients_
        As in :class:`~vfl.horizontal.FedAvg`.
    history_ : pandas.DataFrame
        One row per period: ``round``, ``clients``, ``train_loss`` (log loss
        over all training rows, each scored by its client's model),
        ``train_objective`` (the mean over clients of their own objectives,
        ``1/K sum_k F_k``), ``client_accuracy_mean``,
        ``client_accuracy_worst10`` (NaN without ``client_tests``),
        ``bytes_total`` (always 0).
    """

    def __init__(self, model="logreg", *, num_rounds=50, local_epochs=1, batch_size=None, learning_rate=0.1,
                 hidden_layer_sizes=(64, 64), l2=0.0, initial_parameters=None, random_state=None, progress=False):
        keep_params(self, locals())

    def fit(self, clients, X_test=None, y_test=None, *, client_tests=None, classes=None):
        """Train every client alone for ``num_rounds * local_epochs`` epochs.

        ``X_test, y_test`` are checked, for a common signature, but unused
        (there is no global model to score them with); ``client_tests``
        score each client's model on its own test set.

        Returns
        -------
        self

        Warns
        -----
        RuntimeWarning
            If the parameters become non-finite; training then stops.
        """
        check_positive_int("num_rounds", self.num_rounds)
        check_positive_int("local_epochs (E)", self.local_epochs)
        check_batch_size(self.batch_size)
        check_positive_float("learning_rate", self.learning_rate)
        run = start(self, clients, X_test, y_test, client_tests, classes, score_test=False)
        data, model, rng, metrics, K = run.data, run.model, run.rng, run.metrics, run.n_clients
        run.fitted(self)
        personal = np.tile(run.w, (K, 1))
        rounds = Rounds(self, "local only")
        for t in rounds:
            with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported below
                updated = np.vstack([
                    _clients.local_update(model, theta, X, y, local_epochs=self.local_epochs,
                                          batch_size=self.batch_size, learning_rate=self.learning_rate, rng=child)
                    for theta, (X, y), child in zip(personal, data, _clients.child_generators(rng, K))
                ])
            if not np.all(np.isfinite(updated)):
                warn_diverged("local training", t, "models", f"learning_rate (now {self.learning_rate})")
                break
            personal = updated
            row = metrics(None, personal)
            objective = float(np.mean([model.loss(v, X, y) for v, (X, y) in zip(personal, data)]))
            rounds.record({"round": t, "clients": K, **row, "train_objective": objective},
                          {"client_acc": f"{row['client_accuracy_mean']:.3f}"})
        self.parameters_ = None
        self.personalized_parameters_ = personal
        self.history_ = rounds.history()
        return self
