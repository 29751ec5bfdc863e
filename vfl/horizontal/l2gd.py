"""Personalized models regularized toward their mean: L2GD (Hanzely and Richtárik 2020).

Each of the K clients keeps its own model ``theta_k``; together they minimise::

    F(theta_1 .. theta_K) = 1/K sum_k F_k(theta_k) + lam/(2K) sum_k ||theta_k - theta_bar||^2

with ``theta_bar = 1/K sum_l theta_l`` and ``F_k`` client k's mean log loss
(plus the ``l2`` ridge term).  ``lam = 0`` leaves every client to train alone;
as ``lam`` grows the models are pulled together, and in the limit they are one
model, the minimiser of ``1/K sum_k F_k``: FedAvg's problem with equal client
weights.  Ditto (Li et al. 2021) and pFedMe (T. Dinh et al. 2020) penalise the
same distance to a shared model.

Loopless Local Gradient Descent (L2GD, the paper's Algorithm 1) is gradient
descent on F with a coin flip for which part of the gradient to follow: with
probability ``1 - p`` every client takes a local step on its own loss, with
probability ``p`` every model takes a step toward the mean::

    local step (prob. 1 - p):      theta_k <- theta_k - alpha / (K (1 - p)) * grad F_k(theta_k)
    aggregation step (prob. p):    theta_k <- theta_k - alpha lam / (K p) * (theta_k - theta_bar)

Only an aggregation step that follows a local step needs communication (the
clients send their models, the server returns the mean); further aggregation
steps in a row do not move the mean, so each client applies them itself.  This
class therefore plays the coin flips as *communication rounds*: round t is a
run of ``s_t`` local steps (``s_t ~ Geometric(p)``, mean ``1/p``) followed by
``j_t`` aggregation steps (``j_t ~ Geometric(1 - p)``), which compose into one
move of the fraction ``1 - (1 - c)^j_t`` toward the mean
(:func:`~vfl.horizontal.aggregation.mix_toward_mean`), where
``c = alpha lam / (K p)``.  The coin sequence, and so the algorithm, is
exactly the paper's.

Parameters are the paper's ``lam`` (lambda) and ``p``; the step is given as
``learning_rate``, the size of a client's local step, which is the paper's
``alpha / (K (1 - p))`` (so ``alpha = K (1 - p) learning_rate``).  With it,
``c = learning_rate * lam * (1 - p) / p`` does not depend on K; ``c = 1``
makes every aggregation a full average, i.e. FedAvg with a random number of
local steps and equal client weights.  ``c > 1`` would step past the mean and
is refused.

L2GD is a stochastic method with a constant step: its iterates converge to a
neighbourhood of the optimum whose size shrinks with the step (the paper's
Theorem), and they keep fluctuating there, because the coin decides how
many local steps each round has.  ``average_iterates=True`` returns the
average of the models of the last half of the rounds (suffix averaging,
Rakhlin, Shamir and Sridharan 2012), which approaches the optimum itself
(``tests/horizontal/test_horizontal_l2gd.py`` compares it with the minimiser
of F computed directly).
"""

from __future__ import annotations

import numpy as np

from . import clients as _clients
from ._checks import check_batch_size, check_interval, check_nonnegative_float, check_positive_float, check_positive_int
from ._common import FederatedClassifierMixin, keep_params
from ._rounds import Rounds, start, warn_diverged
from .aggregation import mix_toward_mean
from .errors import InvalidParameterError

__all__ = ["L2GD", "mixture_objective"]


def mixture_objective(model, personal, data, lam: float) -> float:
    """Hanzely and Richtárik's objective F at the per-client models ``personal`` (K, d).

    ``1/K sum_k model.loss(personal[k], X_k, y_k) + lam/(2K) sum_k ||personal[k] - mean||^2``,
    where ``model.loss`` includes the model's L2 term.
    """
    personal = np.asarray(personal, dtype=np.float64)
    losses = [model.loss(theta, X, y) for theta, (X, y) in zip(personal, data)]
    spread = np.sum((personal - personal.mean(axis=0)) ** 2)
    return float(np.mean(losses) + lam / (2 * len(data)) * spread)


class L2GD(FederatedClassifierMixin):
    """Personalized federated learning: one model per client, pulled toward their mean (L2GD).

    Parameters
    ----------
    model : {"logreg", "mlp"}, default="logreg"
    num_rounds : int, default=50
        Communication rounds (aggregation steps that follow a local step).
    lam : float >= 0, default=0.5
        lambda, the strength of the pull toward the mean; 0 is local-only
        training, large values approach one shared model.
    p : float in (0, 1), default=0.2
        Probability of an aggregation step; a round has ``1 / p`` local steps
        on average.
    learning_rate : float, default=0.1
        Size of a client's local gradient step, ``alpha / (K (1 - p))`` in the
        paper's notation.  ``learning_rate * lam * (1 - p) / p`` must be at
        most 1.
    batch_size : int or None, default=None
        None: full local gradients (L2GD as in the paper); an integer draws a
        minibatch of that many rows for each local step instead.
    average_iterates : bool, default=False
        Return the average of the models of rounds ``num_rounds // 2 + 1``
        to ``num_rounds`` (each client's, and so their mean) rather than the
        last ones.
    hidden_layer_sizes, l2, initial_parameters, random_state, progress
        As in :class:`~vfl.horizontal.FedAvg`; every client starts from
        ``initial_parameters``.

    Attributes
    ----------
    personalized_parameters_ : ndarray of shape (n_clients, n_params)
        ``theta_k``, client k's own model (averaged over the last half of
        the rounds with ``average_iterates=True``); ``predict(X, client=k)``
        uses it.
    parameters_ : ndarray of shape (n_params,)
        ``theta_bar``, the mean of the personalized models (the global model
        of the mixture).
    model_, classes_, n_features_in_, n_clients_
        As in :class:`~vfl.horizontal.FedAvg`.
    history_ : pandas.DataFrame
        One row per communication round: ``round``, ``clients`` (K, all take
        part), ``local_steps`` (s_t), ``aggregation_steps`` (j_t),
        ``train_loss`` (log loss over all training rows, each scored by its
        client's model), ``train_objective`` (F above), ``test_loss`` and
        ``test_accuracy`` (``theta_bar`` on the pooled test set),
        ``client_accuracy_mean`` and ``client_accuracy_worst10`` (each
        client's model on its own test set; NaN without ``client_tests``),
        ``bytes_down``, ``bytes_up``, ``bytes_total``.  Metrics are of the
        models that would be output after that round.
    """

    def __init__(self, model="logreg", *, num_rounds=50, lam=0.5, p=0.2, learning_rate=0.1, batch_size=None,
                 average_iterates=False, hidden_layer_sizes=(64, 64), l2=0.0, initial_parameters=None,
                 random_state=None, progress=False):
        keep_params(self, locals())

    def _check_params(self) -> float:
        """Validate the hyperparameters; return ``c = learning_rate * lam * (1 - p) / p``, checked to be at most 1."""
        check_positive_int("num_rounds", self.num_rounds)
        lam = check_nonnegative_float("lam (lambda)", self.lam)
        p = check_interval("p", self.p, 0.0, 1.0, closed="neither")
        rate = check_positive_float("learning_rate", self.learning_rate)
        check_batch_size(self.batch_size)
        c = rate * lam * (1.0 - p) / p
        if c > 1.0:
            raise InvalidParameterError(
                f"learning_rate * lam * (1 - p) / p = {rate:g} * {lam:g} * {1 - p:g} / {p:g} = {c:.3g} > 1: "
                f"an aggregation step would move the models past their mean; lower learning_rate or lam, "
                f"or raise p")
        return c

    def fit(self, clients, X_test=None, y_test=None, *, client_tests=None, classes=None):
        """Run ``num_rounds`` communication rounds of L2GD.

        Parameters
        ----------
        clients : sequence of (X_k, y_k)
        X_test, y_test : array-like, optional
            Pooled held-out set, scored with the mean model ``parameters_``.
        client_tests : sequence of (X_k, y_k), optional
            One held-out set per client from its own distribution, scored
            with that client's model (see
            :func:`~vfl.horizontal.train_test_split_clients`).
        classes : array-like, optional

        Returns
        -------
        self

        Raises
        ------
        InvalidParameterError
            ``learning_rate * lam * (1 - p) / p > 1`` (an aggregation step would
            move the models past their mean), or another bad hyperparameter.
        FederatedInputError
            Bad clients or test sets (a subclass says which).

        Warns
        -----
        RuntimeWarning
            If the parameters become non-finite; training then stops with the
            previous round's models.
        """
        c = self._check_params()
        run = start(self, clients, X_test, y_test, client_tests, classes)
        data, model, rng, metrics = run.data, run.model, run.rng, run.metrics
        K, p, lam = len(data), float(self.p), float(self.lam)
        vector_bytes = run.vector_bytes
        run.fitted(self)
        personal = np.tile(run.w, (K, 1))
        output, average, start_round = personal, np.zeros_like(personal), self.num_rounds // 2
        rounds = Rounds(self, "L2GD")
        for t in rounds:
            local, mixing = int(rng.geometric(p)), int(rng.geometric(1.0 - p))
            with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported below
                updated = np.vstack([
                    _clients.local_steps(model, theta, X, y, steps=local, batch_size=self.batch_size,
                                         learning_rate=self.learning_rate, rng=rng)
                    for theta, (X, y) in zip(personal, data)
                ])
            if not np.all(np.isfinite(updated)):
                warn_diverged("L2GD", t, "models", f"learning_rate (now {self.learning_rate})")
                break
            personal = mix_toward_mean(updated, 1.0 - (1.0 - c) ** mixing)
            if self.average_iterates and t > start_round:  # the running mean of rounds start_round+1 .. t
                average += (personal - average) / (t - start_round)
                output = average
            else:
                output = personal
            row = metrics(output.mean(axis=0), output)
            objective = mixture_objective(model, output, data, lam)
            rounds.record({"round": t, "clients": K, "local_steps": local, "aggregation_steps": mixing, **row,
                           "train_objective": objective},
                          {"objective": f"{objective:.4f}", "client_acc": f"{row['client_accuracy_mean']:.3f}"},
                          bytes_down=K * vector_bytes, bytes_up=K * vector_bytes)
        self.personalized_parameters_ = output
        self.parameters_ = output.mean(axis=0)
        self.history_ = rounds.history()
        return self
