"""The settings every party must share, and the batch schedule they all derive from them."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from vfl.crypto import check_key_bits
from vfl.errors import ConfigurationError, DataError
from vfl.parties import get_objective
from vfl.parties.linear.optim import OPTIMIZERS, PENALTIES, SCHEDULES, Penalty, learning_rate
from vfl.parties.linear.shares import SHARED_OPTIMIZERS, SHARED_PENALTIES
from vfl.protocols.linear.checks import check_settings_safety
from vfl.protocols.values import built, is_bool, is_int, is_real, require, table_values

INITS = ("random", "zeros")
#: Who learns what: Yang et al.'s protocol (each party its own gradient) or the shared one (no party any gradient).
PROTOCOLS = ("yang", "shared")
#: With the shared protocol, who gets the weights at the end: each party its own (FATE's "respectively"), or no one.
REVEALS = ("respectively", "never")
#: How the parties move their weights: conjugate gradient with exact line search, or first-order steps.
SOLVERS = ("auto", "cg", "gd")
#: The settings of first-order steps, at their defaults: conjugate gradient (an exact line search) uses none.
STEP_DEFAULTS = {"optimizer": "sgd", "learning_rate": 0.15, "learning_rate_schedule": "constant"}
#: Validation scores each objective can be stopped on.
SCORINGS = {"logistic": ("loss", "roc_auc", "ks", "accuracy"), "linear": ("loss", "r2")}


@dataclass(frozen=True)
class TrainingSettings:
    """Shared training settings; all three parties must hold the same ones.

    Parameters
    ----------
    objective : {"linear", "logistic"}
    solver : {"auto", "cg", "gd"}
        ``"cg"``: conjugate gradient with an exact line search (the objective is a
        quadratic), full batch, L2 or no penalty; one encrypted pass per step, and the
        optimum in about as many steps as there are weights (see
        :mod:`vfl.protocols.linear.conjugate`).  ``"gd"``: gradient steps with ``optimizer``
        (any batch size, penalty, DP).  ``"auto"``: ``"cg"`` where it applies (full
        batch, L2 or no penalty, no DP, and ``optimizer``, ``learning_rate`` and
        ``learning_rate_schedule`` at their defaults: a step setting asked for is
        honoured), else ``"gd"``.  ``"cg"`` with a step setting other than its
        default is refused: it would go unused.
    standardize : bool
        Each data party scales its own columns to mean 0 and standard deviation 1
        on its training rows (kept in its model shard and applied again at
        prediction); no message is needed.
    learning_rate : float
        Constant step size of gradient descent (``solver="gd"``); 0.15 by default, as the estimators.
    max_iter : int
        Maximum number of epochs (passes over the data; with ``"cg"``, steps).
    alpha : float
        L2 penalty ``(alpha / 2) ||w||^2``; the intercept is not penalised.  0.01 by default, as the estimators.
    batch_size : int or None
        Rows per gradient step; ``None`` is full batch.
    tol : float or None
        ``"gd"``: stop when the epoch loss changes by less than ``tol``.  ``"cg"``: stop
        when the gradient's norm has fallen to ``tol`` times its norm at the start.
        ``None`` runs ``max_iter`` epochs.
    fit_intercept : bool
        Party B holds an intercept.
    key_bits : int
        Paillier modulus size.
    insecure : bool
        Allow ``key_bits`` below 2048 (teaching and tests only).
    frac_bits : int
        Fixed-point precision of the whole protocol.
    random_state : int or None
        Seed of the batch order (not of any cryptographic randomness); ``None`` draws one.
    init : {"random", "zeros"}
        Where the weights start.  ``"random"``: each party draws its own secret start
        from the operating system's CSPRNG, so that the first residual does not hand
        the feature parties ``-kappa y`` (see docs/protocol.md).  ``"zeros"``: every
        weight starts at 0 (teaching, reproducible comparisons): **the first gradient
        then reveals** ``X^T y`` to every feature party, so it needs ``insecure=True``;
        not with ``protocol="shared"``, where no party learns a gradient.
    dp_epsilon, dp_delta : float or None
        Differential privacy of the labels in what the feature parties learn: party B
        adds calibrated Gaussian noise to the residual so that all epochs together
        are ``(dp_epsilon, dp_delta)``-DP (see :mod:`vfl.parties.linear.dp`).  Both or neither.
    dp_label_bound : float or None
        With DP and linear regression: B clips its labels to ``[-bound, bound]``,
        which bounds the sensitivity.  Logistic labels are -1/+1 and need none.
    packing : bool or "auto"
        Pack several values per ciphertext (see :mod:`vfl.parties.linear.packed`); the slots
        are sized from the declared bounds below.  ``"auto"`` packs wherever packing
        applies: everywhere but training with row weights (:attr:`packed`).
    feature_bound : float
        Declared bound on ``|x|`` of every feature (packed slots are sized for it).
    score_bound : float
        Declared bound on each party's share of a score: ``|u_k|`` at a feature
        party, ``|u_B - kappa y|`` (with the DP noise) at B, and every partial score
        at prediction.  A value beyond it is a ``FixedPointOverflowError`` naming
        the party before anything is encrypted ("raise score_bound or scale the column").
    optimizer : {"sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam"}
        Each party's update rule, run on its own weights (:mod:`vfl.parties.linear.optim`).
    penalty : {"l2", "l1", "elasticnet", "none"}
        ``alpha (l1_ratio ||w||_1 + (1 - l1_ratio) / 2 ||w||^2)``; L1 by a proximal step.
    l1_ratio : float
        The L1 share of an ``"elasticnet"`` penalty, in [0, 1].
    learning_rate_schedule : {"constant", "invscaling", "step"}
        ``learning_rate``; ``learning_rate / t^power_t`` at gradient step ``t``; or
        times ``decay_rate`` every ``decay_steps`` epochs.
    power_t, decay_rate, decay_steps : float, float, int
        The schedules' parameters.
    momentum, beta_1, beta_2, epsilon : float
        The optimizers' parameters (scikit-learn's MLP defaults).
    rho : float
        RMSprop's decay of the mean square gradient, in [0, 1) (0.99, as torch and FATE).
    early_stopping : bool
        Hold out validation rows (``validation_fraction`` of them, chosen from the
        batch seed, never from the labels), score them after every epoch by private
        prediction (only B sees the scores), stop when the score has not improved by
        more than ``tol`` for ``n_iter_no_change`` epochs, and restore every party's
        weights of the best epoch.  The loss-change criterion is then not used.
    validation_fraction : float
        In (0, 1).
    n_iter_no_change : int
    scoring : {"loss", "roc_auc", "ks", "accuracy", "r2"}
        The validation score (``"loss"`` is lower-is-better, the others higher).
    class_weight : "balanced", dict or None
        The label party weighs each row's loss by its class's weight (logistic):
        ``"balanced"`` is ``n / (n_classes * count(class))`` as in scikit-learn.  The
        weights stay with B; that weighting is on is public (the range bounds need it).
    sample_weighted : bool
        The label party also weighs rows by its own per-row weights (``sample_weight``).
    protocol : {"yang", "shared"}
        ``"yang"``: Yang et al.'s Table 2, every data party learns its own gradient
        each step.  ``"shared"``: the weights, scores, residuals and gradients stay
        additively shared between each data party and the coordinator for the whole
        run, and no party learns any gradient (:mod:`vfl.protocols.linear.shared`); it runs
        ``solver="gd"`` with ``optimizer`` sgd, momentum or nesterov, an L2 penalty or
        none, no DP, and early stopping on the validation loss; packed as Yang's (``packing``).
    reveal : {"respectively", "never"}
        With ``protocol="shared"``: at the end each data party learns its own weights
        (FATE's "respectively"), or none does and the model stays shared (prediction
        then needs the coordinator's shares).
    """

    objective: str = "logistic"
    solver: str = "auto"
    standardize: bool = True
    learning_rate: float = 0.15
    max_iter: int = 100
    alpha: float = 0.01
    batch_size: int | None = None
    tol: float | None = 1e-5
    fit_intercept: bool = True
    key_bits: int = 2048
    insecure: bool = False
    frac_bits: int = 32
    random_state: int | None = None
    init: str = "random"
    dp_epsilon: float | None = None
    dp_delta: float | None = None
    dp_label_bound: float | None = None
    packing: bool | str = "auto"
    feature_bound: float = 2.0 ** 8
    score_bound: float = 2.0 ** 12
    optimizer: str = "sgd"
    penalty: str = "l2"
    l1_ratio: float = 0.15
    learning_rate_schedule: str = "constant"
    power_t: float = 0.5
    decay_rate: float = 0.5
    decay_steps: int = 10
    momentum: float = 0.9
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-8
    rho: float = 0.99
    early_stopping: bool = False
    validation_fraction: float = 0.1
    n_iter_no_change: int = 5
    scoring: str = "loss"
    class_weight: str | dict | None = None
    sample_weighted: bool = False
    protocol: str = "yang"
    reveal: str = "respectively"

    @classmethod
    def from_table(cls, where: str, table: dict, roles: Mapping[str, str] | None = None,
                   also=()) -> "TrainingSettings":
        """``[training]`` of ``federation.toml``: these fields by name, ``model`` for ``objective`` and
        ``iterations`` for ``max_iter``.

        TOML has no null: 0 is "none" for ``batch_size`` (full batch) and ``tol`` (every epoch runs).  ``roles``
        (each party's role, by name) is not needed; ``also``: the keys the caller reads from the table itself.
        """
        values = table_values(cls, where, table, {"model": "objective", "iterations": "max_iter"}, also=also)
        for name in ("batch_size", "tol"):
            if values.get(name) == 0:
                values[name] = None
        return built(cls, where, values)

    def __post_init__(self):
        get_objective(self.objective)
        require(is_real(self.learning_rate) and self.learning_rate > 0, "learning_rate must be a positive number",
               self.learning_rate)
        require(is_int(self.max_iter) and self.max_iter >= 1, "max_iter must be a positive integer", self.max_iter)
        require(is_real(self.alpha) and self.alpha >= 0, "alpha must be a non-negative number", self.alpha)
        require(self.batch_size is None or (is_int(self.batch_size) and self.batch_size >= 1),
               "batch_size must be None or a positive integer", self.batch_size)
        require(self.tol is None or (is_real(self.tol) and self.tol >= 0), "tol must be None or >= 0", self.tol)
        require(is_int(self.frac_bits) and 8 <= self.frac_bits <= 128, "frac_bits must be in [8, 128]",
               self.frac_bits)
        require(self.random_state is None or is_int(self.random_state), "random_state must be None or an integer",
               self.random_state)
        require(is_bool(self.fit_intercept), "fit_intercept must be True or False", self.fit_intercept)
        require(is_bool(self.insecure), "insecure must be True or False", self.insecure)
        check_key_bits(self.key_bits, self.insecure)
        require(self.init in INITS, f"init must be one of {INITS}", self.init)
        self._check_dp()
        require(is_bool(self.packing) or self.packing == "auto", "packing must be True, False or 'auto'",
               self.packing)
        require(self.solver in SOLVERS, f"solver must be one of {SOLVERS}", self.solver)
        require(is_bool(self.standardize), "standardize must be True or False", self.standardize)
        for name in ("feature_bound", "score_bound"):
            value = getattr(self, name)
            require(is_real(value) and 0 < value <= 2.0 ** 256, f"{name} must be a positive number up to 2**256",
                   value)
        self._check_update()
        self._check_solver()
        self._check_protocol()
        check_settings_safety(self)

    def _check_update(self) -> None:
        require(self.optimizer in OPTIMIZERS, f"optimizer must be one of {OPTIMIZERS}", self.optimizer)
        require(self.penalty in PENALTIES, f"penalty must be one of {PENALTIES}", self.penalty)
        require(is_real(self.l1_ratio) and 0 <= self.l1_ratio <= 1, "l1_ratio must be in [0, 1]", self.l1_ratio)
        require(self.learning_rate_schedule in SCHEDULES, f"learning_rate_schedule must be one of {SCHEDULES}",
               self.learning_rate_schedule)
        require(is_real(self.power_t) and self.power_t >= 0, "power_t must be a non-negative number", self.power_t)
        require(is_real(self.decay_rate) and 0 < self.decay_rate <= 1, "decay_rate must be in (0, 1]",
               self.decay_rate)
        require(is_int(self.decay_steps) and self.decay_steps >= 1, "decay_steps must be a positive integer",
               self.decay_steps)
        for name in ("momentum", "beta_1", "beta_2", "rho"):
            value = getattr(self, name)
            require(is_real(value) and 0 <= value < 1, f"{name} must be in [0, 1)", value)
        require(is_real(self.epsilon) and self.epsilon > 0, "epsilon must be a positive number", self.epsilon)
        require(is_bool(self.early_stopping), "early_stopping must be True or False", self.early_stopping)
        require(is_real(self.validation_fraction) and 0 < self.validation_fraction < 1,
               "validation_fraction must be in (0, 1)", self.validation_fraction)
        require(is_int(self.n_iter_no_change) and self.n_iter_no_change >= 1,
               "n_iter_no_change must be a positive integer", self.n_iter_no_change)
        allowed = SCORINGS[self.objective]
        require(self.scoring in allowed, f"scoring for {self.objective} regression must be one of {allowed}",
               self.scoring)
        require(not (self.early_stopping and self.dp), "early stopping chooses the epoch from validation labels, "
               "which differential privacy does not cover: use one or the other", self.early_stopping)
        self._check_weights()

    def _check_weights(self) -> None:
        cw = self.class_weight
        require(cw is None or cw == "balanced" or (isinstance(cw, dict) and cw and all(
            is_real(v) and 0 <= v <= 2 ** 16 for v in cw.values())),
            "class_weight must be None, 'balanced' or a dict {class: weight} of weights in [0, 65536]", cw)
        require(cw is None or self.objective == "logistic", "class_weight is for classification (logistic)", cw)
        require(not (cw is not None and self.dp), "class_weight derives the weights from the labels, which the "
               "differential-privacy sensitivity does not cover: use sample weights or no weights with DP", cw)
        require(is_bool(self.sample_weighted), "sample_weighted must be True or False", self.sample_weighted)
        require(not (self.packing is True and self.weighted), "packed ciphertexts do not take row "
               "weights (class_weight, sample_weight) yet: set packing=False (or 'auto') to weigh rows", self.packing)

    def _check_solver(self) -> None:
        if self.solver != "cg":
            return
        asked = self.step_settings
        require(not asked, f"solver='cg' moves the weights by an exact line search, so {' and '.join(asked)} would "
               "go unused: use solver='gd' (or 'auto', which then runs gradient steps) to train with "
               f"{'them' if len(asked) > 1 else 'it'}, or leave {'them' if len(asked) > 1 else 'it'} out for "
               "conjugate gradient", self.solver)
        require(self.batch_size is None, "solver='cg' steps on the whole data set: set batch_size=None, or use "
               "solver='gd' for mini-batches", self.batch_size)
        require(self.penalty in ("l2", "none"), "solver='cg' minimises a quadratic: use penalty='l2' or 'none', or "
               "solver='gd' for an L1 or elastic-net penalty", self.penalty)
        require(not self.dp, "solver='cg' needs the exact residual; differential privacy adds noise to it: use "
               "solver='gd' with dp_epsilon", self.solver)

    def _check_protocol(self) -> None:
        require(self.protocol in PROTOCOLS, f"protocol must be one of {PROTOCOLS}", self.protocol)
        require(self.reveal in REVEALS, f"reveal must be one of {REVEALS}", self.reveal)
        if not self.shared:
            require(self.reveal == "respectively", "reveal='never' keeps the weights shared, which only "
                   "protocol='shared' does", self.reveal)
            return
        why = "the shared protocol keeps the weights additively shared, and "
        require(self.optimizer in SHARED_OPTIMIZERS, why + "updates the shares with linear rules only: use optimizer "
               f"in {SHARED_OPTIMIZERS} (adagrad, rmsprop and adam need the gradient's square)", self.optimizer)
        require(self.penalty in SHARED_PENALTIES, why + "L1 needs the weights' signs: use penalty 'l2' or 'none' "
               "with protocol='shared'", self.penalty)
        require(self.solver != "cg", why + "runs gradient steps: use solver='gd' (or 'auto') with "
               "protocol='shared'", self.solver)
        require(not self.dp, "differential privacy protects the labels in the gradients the feature parties learn; "
               "with protocol='shared' they learn none: leave dp_epsilon out, or use protocol='yang'",
               self.dp_epsilon)
        require(not self.early_stopping or self.scoring == "loss", "with protocol='shared' no party sees a "
               "validation score, only the coordinator the validation loss, computed under encryption: use "
               "scoring='loss'", self.scoring)

    @property
    def shared(self) -> bool:
        """Whether the weights stay shared (``protocol="shared"``): no party learns a gradient."""
        return self.protocol == "shared"

    @property
    def conjugate(self) -> bool:
        """Whether the parties run conjugate gradient (``solver``, with ``"auto"`` resolved)."""
        if self.solver == "auto":
            return (self.batch_size is None and self.penalty in ("l2", "none") and not self.dp and not self.shared
                    and not self.step_settings)
        return self.solver == "cg"

    @property
    def step_settings(self) -> list[str]:
        """The first-order step settings given other than their defaults (:data:`STEP_DEFAULTS`), as ``name=value``."""
        return [f"{name}={getattr(self, name)!r}" for name, default in STEP_DEFAULTS.items()
                if getattr(self, name) != default]

    @property
    def packed(self) -> bool:
        """Whether training packs its ciphertexts (``packing``, with ``"auto"`` resolved)."""
        return self.packing is True or (self.packing == "auto" and not self.weighted)

    @property
    def packed_prediction(self) -> bool:
        """Whether prediction packs its ciphertexts: it takes no row weights, so ``"auto"`` always packs."""
        return self.packing is not False

    @property
    def weighted(self) -> bool:
        """Whether the label party weighs rows (public: every party's range bounds depend on it)."""
        return self.class_weight is not None or self.sample_weighted
    @property
    def penalty_spec(self) -> Penalty:
        """The penalty as the parties apply it."""
        return Penalty.of(self.penalty, self.alpha, self.l1_ratio)

    def optimizer_hyper(self) -> dict:
        """The optimizer's parameters, for :meth:`vfl.parties.FeatureParty.set_optimizer`."""
        return {"momentum": self.momentum, "rho": self.rho, "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon}

    def step_size(self, step: int, epoch: int) -> float:
        """The learning rate of gradient step ``step`` (from 1) in ``epoch`` (from 0)."""
        return learning_rate(self.learning_rate_schedule, self.learning_rate, step, epoch, self.power_t,
                             self.decay_rate, self.decay_steps)

    def _check_dp(self) -> None:
        eps, delta, bound = self.dp_epsilon, self.dp_delta, self.dp_label_bound
        if eps is None and delta is None:
            require(bound is None, "dp_label_bound only applies with dp_epsilon and dp_delta", bound)
            return
        require(eps is not None and delta is not None,
               "differential privacy needs both dp_epsilon and dp_delta", (eps, delta))
        require(is_real(eps) and eps > 0, "dp_epsilon must be a positive number", eps)
        require(is_real(delta) and 0 < delta < 1, "dp_delta must be in (0, 1)", delta)
        require(self.tol is None, "with differential privacy set tol=None: when to stop would depend on the "
               "exact loss, which the privacy guarantee does not cover; every max_iter epoch runs", self.tol)
        if self.objective == "linear":
            require(bound is not None and is_real(bound) and bound > 0,
                   "differential privacy for linear regression needs dp_label_bound > 0 (labels are clipped to "
                   "[-bound, bound], which bounds the sensitivity)", bound)
        else:
            require(bound is None, "logistic labels are -1/+1: leave dp_label_bound out", bound)

    @property
    def dp(self) -> bool:
        """Whether differential privacy is on."""
        return self.dp_epsilon is not None

    @property
    def label_bound(self) -> float:
        """``B_y``: the largest label magnitude the DP sensitivity assumes."""
        return 1.0 if self.objective == "logistic" else float(self.dp_label_bound)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of the settings: equal settings, equal fingerprint."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def batch_sizes(n_rows: int, batch_size: int | None) -> list[int]:
    """Sizes of the batches of one epoch: full batches, the remainder folded into the last one.

    Every batch therefore has at least ``batch_size`` rows (or all rows, if fewer).
    """
    if batch_size is None or batch_size >= n_rows:
        return [n_rows]
    count = n_rows // batch_size
    sizes = [batch_size] * count
    sizes[-1] += n_rows - count * batch_size
    return sizes


def batches(n_rows: int, batch_size: int | None, seed: int, epoch: int) -> list[np.ndarray]:
    """The row indices of each batch of ``epoch``: every party computes the same list from a shared seed.

    Full batch keeps the natural order; mini-batches shuffle each epoch.  The order
    depends on the seed and the epoch only, never on labels or features.
    """
    sizes = batch_sizes(n_rows, batch_size)
    if len(sizes) == 1:
        return [np.arange(n_rows)]
    order = np.random.default_rng([int(seed), int(epoch)]).permutation(n_rows)
    return np.split(order, np.cumsum(sizes)[:-1])


def check_batch_size(role: str, n_rows: int, batch_size: int | None, n_gradient_values: int) -> None:
    """Refuse batches no larger than what a party learns per step.

    A party that learns ``k`` gradient values ``X^T d`` of a batch of ``m <= k`` rows
    could solve for the per-sample residuals ``d`` and so for its peer's scores.
    """
    smallest = min(batch_sizes(n_rows, batch_size))
    if smallest <= n_gradient_values:
        what = "the data set" if smallest == n_rows else f"a batch of {smallest} rows"
        raise DataError(
            f"party {role}: {what} is not larger than the {n_gradient_values} gradient values party {role} "
            f"learns per step, so {role} could solve for the per-sample residuals; "
            f"use batch_size > {n_gradient_values} (and more rows than that)"
        )


def gradient_unknowns(n_rows: int, steps: int, party: str, columns: Mapping[str, int], label_party: str,
                      intercept: bool) -> int:
    """How many unknowns hide the other parties' contributions from ``party``'s residuals.

    ``party`` sees ``X_P^T r^t`` with ``r^t = sum_Q X_Q w_Q^t (+ b^t) - kappa y``
    summed over the other parties ``Q``.  ``X_Q w_Q^t`` over ``steps`` steps is an
    ``n x steps`` matrix of rank at most ``f_Q`` (``columns[Q]``): ``r (n + steps - r)``
    free values with ``r = min(f_Q, n, steps)``.  A party without the labels also
    faces one label (or secret starting offset) per row, and the label party's
    intercept per step.
    """
    unknowns = 0
    for other, f in columns.items():
        if other != party:
            rank = min(f, n_rows, steps)
            unknowns += rank * (n_rows + steps - rank)
    if party != label_party:
        unknowns += n_rows + (steps if intercept else 0)
    return unknowns


def check_gradient_equations(n_rows: int, batch_size: int | None, max_iter: int, columns: Mapping[str, int],
                             label_party: str, intercept: bool) -> None:
    """Refuse settings under which a party collects as many exact gradient equations as unknowns.

    Each step gives party ``P`` ``g_P`` exact linear equations (its gradient:
    ``columns[P]`` weights, plus the intercept at the label party).  With full
    batches every step sees the same rows, so ``P`` never learns more than
    ``X_P^T`` applied to the residuals, whatever the number of epochs (the batch-size
    rule covers that).  With mini-batches, each new batch gives new equations about
    other rows; over ``max_iter`` epochs ``P`` must still have fewer equations than
    the unknowns of :func:`gradient_unknowns`, or it could solve for them: the
    other parties' partial scores and, for a feature party, the labels.
    Not applied with differential privacy (the gradients are then not exact).
    """
    per_epoch = len(batch_sizes(n_rows, batch_size))
    if per_epoch == 1:
        return
    for party, f in columns.items():
        g = f + (1 if intercept and party == label_party else 0)

        def safe(epochs: int) -> bool:
            steps = epochs * per_epoch
            return steps * g < gradient_unknowns(n_rows, steps, party, columns, label_party, intercept)

        if safe(max_iter):
            continue
        allowed = next((e for e in range(max_iter - 1, 0, -1) if safe(e)), 0)
        limit = f"at most {allowed} epochs, " if allowed else ""
        steps = max_iter * per_epoch
        raise ConfigurationError(
            f"party {party}: {max_iter} epochs of {per_epoch} batches give {party} {steps * g} exact gradient "
            f"equations ({g} per batch), not fewer than the "
            f"{gradient_unknowns(n_rows, steps, party, columns, label_party, intercept)} unknowns that hide the "
            f"other parties' scores{'' if party == label_party else ' and the labels'} from it, so it could solve "
            f"for them; use {limit}full batches (batch_size=None), or differential privacy (dp_epsilon)")
