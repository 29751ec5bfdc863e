"""Agnostic Federated Learning (Mohri, Sivek and Suresh, ICML 2019).

FedAvg minimises the loss on the *union* of client data, i.e. the mixture of
client domains with weights ``n_k / n``.  If the data a model meets at
inference is mixed differently, a small or unusual domain can be served badly.
AFL instead minimises the worst case over all mixtures ``lambda`` in the
simplex::

    min_w  max_{lambda in simplex}  sum_k lambda_k L_k(w)   (= max_k L_k(w))

and solves this saddle point with **Stochastic-AFL**: each round every sampled
domain returns a stochastic gradient ``g_k`` and its loss ``L_k`` at the
current ``w``; the server does a gradient *descent* step on ``w`` with
``sum_k lambda_k g_k`` and a projected gradient *ascent* step on ``lambda``
with the loss vector, projecting back onto the simplex with
:func:`project_onto_simplex`.  The paper outputs the average of the iterates,
which carries the convergence guarantee for convex losses and noisy
gradients; ``average_iterates=True`` does that.  The default returns the last
iterate, which with full-batch gradients converges as well and does not lag
behind because of the early iterates (on digits it reached lower losses in the
same number of rounds).

Here each client passed to ``fit`` is one domain; merge clients beforehand if
several belong to the same domain.
"""

from __future__ import annotations

import numpy as np

from . import clients as _clients
from ._checks import check_batch_size, check_fraction, check_positive_float, check_positive_int
from ._common import BYTES_PER_FLOAT, FederatedClassifierMixin, cross_entropy, keep_params
from ._rounds import Rounds, start, warn_diverged
from .errors import InvalidParameterError, ShapeMismatchError

__all__ = ["AgnosticFL", "project_onto_simplex"]


def project_onto_simplex(v) -> np.ndarray:
    """Euclidean projection of ``v`` onto ``{x : x >= 0, sum(x) = 1}``.

    Sort-based algorithm (Held, Wolfe and Crowder 1974; Duchi et al. 2008):
    the projection is ``max(v - theta, 0)`` for the unique threshold ``theta``
    making it sum to one, found from the sorted values in ``O(p log p)``.
    """
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise ShapeMismatchError(f"expected a non-empty 1-D vector, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise InvalidParameterError("cannot project a vector with NaN or infinite entries")
    v = v - v.max()  # the projection is unchanged by adding a constant to every entry
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - 1.0
    j = np.arange(1, v.size + 1)
    rho = np.flatnonzero(u - cumulative / j > 0)[-1]
    theta = cumulative[rho] / (rho + 1)
    return np.maximum(v - theta, 0.0)


class AgnosticFL(FederatedClassifierMixin):
    """Stochastic-AFL: minimise the worst-case mixture of client (domain) losses.

    Parameters
    ----------
    model : {"logreg", "mlp"}, default="logreg"
    num_rounds : int, default=200
        T, the number of game steps (communication rounds).
    fraction_fit : float in (0, 1], default=1.0
        Fraction of domains sampled per round; with ``m < p`` domains sampled
        the gradients are rescaled by ``p / m`` so both stay unbiased.
    min_fit_clients : int, default=1
    batch_size : int or None, default=None
        Minibatch drawn on each domain for its stochastic gradient and loss;
        None uses the whole domain (deterministic gradients).
    learning_rate : float, default=0.1
        gamma_w, the descent step on the model parameters.
    lambda_learning_rate : float, default=0.1
        gamma_lambda, the ascent step on the mixture weights.
    average_iterates : bool, default=False
        Return the average of the iterates (``w_A`` of the paper) rather than
        the last one; use it with small ``batch_size`` (noisy gradients).
    hidden_layer_sizes, l2, initial_parameters, random_state, progress
        As in :class:`~vfl.horizontal.FedAvg`.

    Attributes
    ----------
    parameters_ : ndarray
        The last iterate, or ``w_A`` with ``average_iterates=True``.
    lambda_ : ndarray of shape (n_domains,)
        ``lambda_A``, the averaged mixture weights: which domains are hardest.
    domain_losses_ : ndarray of shape (n_domains,)
        Loss of ``parameters_`` on each whole domain.
    model_, classes_, n_features_in_, n_clients_
        As in :class:`~vfl.horizontal.FedAvg`.
    history_ : pandas.DataFrame
        Per round: ``round``, ``clients``, ``train_loss`` (n_k-weighted),
        ``worst_domain_loss``, ``worst_domain``, ``test_loss``,
        ``test_accuracy``, ``bytes_down`` (parameter vectors to the sampled
        domains), ``bytes_up`` (a gradient vector plus one float64 loss from
        each), ``bytes_total``, and ``client_accuracy_mean`` /
        ``client_accuracy_worst10`` (on ``client_tests``, NaN without); metrics
        are of the model that would be output after that round.
    """

    def __init__(self, model="logreg", *, num_rounds=200, fraction_fit=1.0, min_fit_clients=1,
                 batch_size=None, learning_rate=0.1, lambda_learning_rate=0.1, average_iterates=False,
                 hidden_layer_sizes=(64, 64), l2=0.0, initial_parameters=None, random_state=None,
                 progress=False):
        keep_params(self, locals())

    def fit(self, clients, X_test=None, y_test=None, *, client_tests=None, classes=None):
        """Play ``num_rounds`` rounds of the Stochastic-AFL game.

        Parameters are as in :meth:`FedAvg.fit`; each client is one domain.
        """
        check_positive_int("num_rounds", self.num_rounds)
        check_fraction("fraction_fit", self.fraction_fit)
        check_positive_int("min_fit_clients", self.min_fit_clients)
        batch_size = check_batch_size(self.batch_size)
        check_positive_float("learning_rate", self.learning_rate)
        check_positive_float("lambda_learning_rate", self.lambda_learning_rate)
        run = start(self, clients, X_test, y_test, client_tests, classes)
        data, model, rng, w, metrics = run.data, run.model, run.rng, run.w, run.metrics
        p = len(data)
        n_k = metrics.n_k
        m = _clients.num_fit_clients(p, self.fraction_fit, self.min_fit_clients)

        run.fitted(self)
        lam = np.full(p, 1.0 / p)
        w_avg, lam_avg, current = np.zeros_like(w), np.zeros(p), w
        losses = np.array([cross_entropy(model, w, X, y) for X, y in data])
        rounds = Rounds(self, "AFL")
        for t in rounds:
            sampled = _clients.sample_clients(rng, p, m)
            grad_w, grad_lam = np.zeros_like(w), np.zeros(p)
            with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported below
                for k in sampled:
                    X, y = data[k]
                    if batch_size is not None and batch_size < X.shape[0]:
                        rows_k = rng.choice(X.shape[0], size=batch_size, replace=False)
                        X, y = X[rows_k], y[rows_k]
                    loss_k, g_k = model.loss_and_grad(w, X, y)
                    grad_w += (p / m) * lam[k] * g_k
                    grad_lam[k] = (p / m) * loss_k
                w = w - self.learning_rate * grad_w
                ascent = lam + self.lambda_learning_rate * grad_lam
            if not (np.all(np.isfinite(w)) and np.all(np.isfinite(ascent))):
                warn_diverged("AFL", t, "model", f"learning_rate (now {self.learning_rate})")
                break
            lam = project_onto_simplex(ascent)
            w_avg += (w - w_avg) / t
            lam_avg += (lam - lam_avg) / t
            current = w_avg if self.average_iterates else w
            with np.errstate(over="ignore", invalid="ignore"):
                losses = np.array([cross_entropy(model, current, X, y) for X, y in data])
                row = metrics(current)
            rounds.record({"round": t, "clients": m, "train_loss": float(np.average(losses, weights=n_k)),
                           "worst_domain_loss": float(losses.max()), "worst_domain": int(losses.argmax()),
                           "test_loss": row["test_loss"], "test_accuracy": row["test_accuracy"],
                           "client_accuracy_mean": row["client_accuracy_mean"],
                           "client_accuracy_worst10": row["client_accuracy_worst10"]},
                          {"worst": f"{losses.max():.4f}", "acc": f"{row['test_accuracy']:.3f}"},
                          bytes_down=m * model.n_params * BYTES_PER_FLOAT,
                          bytes_up=m * (model.n_params + 1) * BYTES_PER_FLOAT)
        self.parameters_ = current
        self.lambda_ = lam_avg if rounds.rows else lam
        self.domain_losses_ = losses
        self.history_ = rounds.history()
        return self
