"""Per-FedAvg: a model that each client personalizes in a gradient step (Fallah, Mokhtari and Ozdaglar 2020).

The meta-learning (MAML) form of personalization.  Per-FedAvg looks for one
starting point ``theta`` that serves every client well *after* one gradient
step on that client's own loss::

    F(theta) = 1/K sum_k F_k(theta - alpha grad F_k(theta))

``F_k`` is client k's mean log loss (plus the ``l2`` ridge term).  A new or
existing client personalizes by taking that step (or a few,
``adaptation_steps``) from ``theta`` on its own rows.  ``alpha = 0`` is plain
FedAvg's problem with equal client weights; this class then runs FedAvg
exactly (full-batch local steps).

Each round the server samples ``m`` clients as FedAvg does; each runs ``tau``
local steps of stochastic gradient descent on ``F_k(theta - alpha grad
F_k(theta))`` with step ``beta``, drawing three independent minibatches
``D, D', D''`` for each step (the paper's Algorithm 1)::

    g        = grad F_k(theta; D)
    theta~   = theta - alpha g
    g'       = grad F_k(theta~; D')
    theta   <- theta - beta (I - alpha Hess F_k(theta; D'')) g'

and the server takes the plain mean of the returned models (the objective
weights clients equally).  The Hessian-vector product is what the paper's two
practical variants treat differently (``variant=``):

``"hf"``, Per-FedAvg (HF), Hessian-free
    ``Hess F_k(theta; D'') g'`` by the central difference of two gradients,
    ``(grad F_k(theta + delta g'; D'') - grad F_k(theta - delta g'; D'')) / (2 delta)``:
    an unbiased-up-to-O(delta^2) gradient of F.  With full batches
    (``batch_size=None``) and every client each round, ``tau=1`` is gradient
    descent on F itself.
``"fo"``, Per-FedAvg (FO), first-order
    Drops the Hessian term: ``theta <- theta - beta g'`` (like first-order
    MAML); cheaper, but a biased gradient of F.

The default is ``"hf"``, the variant whose fixed point is the optimum of F.
"""

from __future__ import annotations

import numpy as np

from . import clients as _clients
from ._checks import check_batch_size, check_fraction, check_nonnegative_float, check_positive_float, check_positive_int
from ._common import FederatedClassifierMixin, check_features, keep_params
from ._rounds import Rounds, start, warn_diverged
from .aggregation import weighted_average
from .clients import check_clients, encode_labels
from .errors import InvalidParameterError

__all__ = ["PerFedAvg", "adapt_parameters", "meta_gradient"]

#: Names accepted by ``PerFedAvg(variant=...)``.
VARIANTS = ("hf", "fo")


def meta_gradient(model, theta, batches, *, alpha: float, variant: str = "hf", delta: float = 1e-3) -> np.ndarray:
    """Per-FedAvg's stochastic gradient of ``F_k(theta - alpha grad F_k(theta))``.

    Parameters
    ----------
    model : LogisticRegressionModel or MLPModel
    theta : ndarray of shape (n_params,)
    batches : three (X, y) pairs
        ``D``, ``D'`` and ``D''`` (the same rows three times for full batches).
    alpha : float
        Step of the inner (personalizing) gradient step.
    variant : {"hf", "fo"}, default="hf"
        Hessian-free (finite-difference Hessian-vector product) or first-order
        (no Hessian term); see the module docstring.
    delta : float, default=1e-3
        Finite-difference step of ``"hf"``.

    Returns
    -------
    ndarray of shape (n_params,)
    """
    (X, y), (X1, y1), (X2, y2) = batches
    g = model.loss_and_grad(theta, X, y)[1]
    g_prime = model.loss_and_grad(theta - alpha * g, X1, y1)[1]
    if variant == "fo" or alpha == 0.0:
        return g_prime
    plus = model.loss_and_grad(theta + delta * g_prime, X2, y2)[1]
    minus = model.loss_and_grad(theta - delta * g_prime, X2, y2)[1]
    return g_prime - alpha * (plus - minus) / (2.0 * delta)


def adapt_parameters(model, theta, X, y, *, alpha: float, steps: int = 1) -> np.ndarray:
    """Personalize ``theta`` to ``(X, y)``: ``steps`` full-batch gradient steps of size ``alpha``."""
    theta = np.array(theta, dtype=np.float64, copy=True)
    for _ in range(steps):
        theta -= alpha * model.loss_and_grad(theta, X, y)[1]
    return theta


def _batch(X, y, batch_size, rng):
    """``batch_size`` rows drawn without replacement, or all rows for None."""
    if batch_size is None or batch_size >= X.shape[0]:
        return X, y
    rows = rng.choice(X.shape[0], size=batch_size, replace=False)
    return X[rows], y[rows]


class PerFedAvg(FederatedClassifierMixin):
    """Personalized FedAvg in the meta-learning form (Per-FedAvg, HF or FO variant).

    Parameters
    ----------
    model : {"logreg", "mlp"}, default="logreg"
    num_rounds : int, default=50
    fraction_fit : float in (0, 1], default=0.1
        r, the fraction of clients sampled each round, as in FedAvg.
    min_fit_clients : int, default=1
    tau : int, default=5
        tau, local steps per round.
    alpha : float >= 0, default=0.01
        alpha, the personalizing step: the inner step of the objective, and
        the step of each client's adaptation.  0 gives FedAvg.
    beta : float > 0, default=0.1
        beta, the step of the local updates of the meta-model (FedAvg's
        ``learning_rate``).
    batch_size : int or None, default=None
        Size of each of ``D``, ``D'`` and ``D''``; None uses all local rows.
    variant : {"hf", "fo"}, default="hf"
        Per-FedAvg (HF), Hessian-free, or Per-FedAvg (FO), first-order.
    delta : float > 0, default=1e-3
        delta, the finite-difference step of ``"hf"``.
    adaptation_steps : int, default=1
        Gradient steps (size ``alpha``, full local training set) with which
        each client personalizes the meta-model; one step is the objective's.
    hidden_layer_sizes, l2, initial_parameters, random_state, progress
        As in :class:`~vfl.horizontal.FedAvg`.

    Attributes
    ----------
    parameters_ : ndarray of shape (n_params,)
        theta, the meta-model (what the server holds).
    personalized_parameters_ : ndarray of shape (n_clients, n_params)
        Each client's adapted model: theta after ``adaptation_steps`` steps
        on the client's training rows; ``predict(X, client=k)`` uses it.  :meth:`adapt` personalizes for
        any other data set, e.g. a client that joins later.
    model_, classes_, n_features_in_, n_clients_
        As in :class:`~vfl.horizontal.FedAvg`.
    history_ : pandas.DataFrame
        One row per round: ``round``, ``clients`` (m), ``train_loss`` (log
        loss over all training rows, each scored by its client's adapted
        model), ``train_objective`` (F above, full local sets),
        ``test_loss`` and ``test_accuracy`` (the meta-model theta, not
        adapted, on the pooled test set), ``client_accuracy_mean`` and
        ``client_accuracy_worst10`` (each client's adapted model on its own
        test set; NaN without ``client_tests``), ``bytes_down``,
        ``bytes_up``, ``bytes_total``.
    """

    def __init__(self, model="logreg", *, num_rounds=50, fraction_fit=0.1, min_fit_clients=1, tau=5, alpha=0.01,
                 beta=0.1, batch_size=None, variant="hf", delta=1e-3, adaptation_steps=1,
                 hidden_layer_sizes=(64, 64), l2=0.0, initial_parameters=None, random_state=None, progress=False):
        keep_params(self, locals())

    def _check_params(self):
        check_positive_int("num_rounds", self.num_rounds)
        check_fraction("fraction_fit (r)", self.fraction_fit)
        check_positive_int("min_fit_clients", self.min_fit_clients)
        check_positive_int("tau (local steps)", self.tau)
        check_nonnegative_float("alpha", self.alpha)
        check_positive_float("beta", self.beta)
        check_batch_size(self.batch_size)
        if not isinstance(self.variant, str) or self.variant not in VARIANTS:
            raise InvalidParameterError(f"unknown variant {self.variant!r}; choose 'hf' (Per-FedAvg (HF), "
                                        f"Hessian-free) or 'fo' (Per-FedAvg (FO), first-order)")
        check_positive_float("delta", self.delta)
        check_positive_int("adaptation_steps", self.adaptation_steps)

    def adapt(self, X, y) -> np.ndarray:
        """Personalize the fitted meta-model to ``(X, y)``: ``adaptation_steps`` steps of size ``alpha``.

        Returns the personalized parameter vector; score it with
        ``model_.predict_proba(vector, X_new)``.
        """
        self._check_fitted()
        _, ((X, y),) = encode_labels(check_clients([(X, y)]), self.classes_)
        X = check_features(X, self.n_features_in_)
        return adapt_parameters(self.model_, self.parameters_, X, y, alpha=self.alpha, steps=self.adaptation_steps)

    def fit(self, clients, X_test=None, y_test=None, *, client_tests=None, classes=None):
        """Run ``num_rounds`` rounds of Per-FedAvg.

        Parameters, the return value (``self``), the errors and the warning on
        divergence are as in :meth:`L2GD.fit <vfl.horizontal.L2GD.fit>`:
        ``X_test, y_test`` score the meta-model, ``client_tests`` (one per
        client) score each client's adapted model.
        """
        self._check_params()
        run = start(self, clients, X_test, y_test, client_tests, classes)
        data, model, rng, theta, metrics = run.data, run.model, run.rng, run.w, run.metrics
        K = len(data)
        m = _clients.num_fit_clients(K, self.fraction_fit, self.min_fit_clients)
        alpha, beta, delta = float(self.alpha), float(self.beta), float(self.delta)
        vector_bytes = run.vector_bytes
        run.fitted(self)
        personal = np.tile(theta, (K, 1))
        rounds = Rounds(self, "Per-FedAvg")
        for t in rounds:
            sampled = _clients.sample_clients(rng, K, m)
            updates = []
            with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported below
                for k, child in zip(sampled, _clients.child_generators(rng, m)):  # the same draws as FedAvg
                    X, y = data[k]
                    local = theta.copy()
                    for _ in range(self.tau):
                        batches = [_batch(X, y, self.batch_size, child) for _ in range(3)]
                        local -= beta * meta_gradient(model, local, batches, alpha=alpha, variant=self.variant,
                                                      delta=delta)
                    updates.append(local)
                candidate = weighted_average(updates, np.ones(m))  # the plain mean: clients count equally
                one_step = [adapt_parameters(model, candidate, X, y, alpha=alpha) for X, y in data]
            if not (np.all(np.isfinite(candidate)) and np.all(np.isfinite(one_step))):
                warn_diverged("Per-FedAvg", t, "model", f"beta (now {self.beta}) or alpha (now {self.alpha})")
                break
            theta = candidate
            personal = np.vstack([v if self.adaptation_steps == 1 else
                                  adapt_parameters(model, v, X, y, alpha=alpha, steps=self.adaptation_steps - 1)
                                  for v, (X, y) in zip(one_step, data)])
            objective = float(np.mean([model.loss(v, X, y) for v, (X, y) in zip(one_step, data)]))
            row = metrics(theta, personal)
            rounds.record({"round": t, "clients": m, **row, "train_objective": objective},
                          {"objective": f"{objective:.4f}", "client_acc": f"{row['client_accuracy_mean']:.3f}"},
                          bytes_down=m * vector_bytes, bytes_up=m * vector_bytes)
        self.parameters_ = theta
        self.personalized_parameters_ = personal
        self.history_ = rounds.history()
        return self
