"""Scikit-learn style neural networks across parties (split learning), named as ``sklearn.neural_network``.

Thin: they validate their parameters, hand every party's data to the family's
run (:mod:`vfl.runs.mlp`) in threads, and expose the fitted attributes.  The
arithmetic lives in :mod:`vfl.parties.mlp`, the programs in
:mod:`vfl.protocols.mlp`, and :mod:`vfl.centralized.mlp` is the same network on
the pooled table, which the federated network equals up to the fixed-point
precision (docs/mlp.md).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, r2_score

from vfl import release_options
from vfl.dataset import VerticalDataset, check_fit_arguments, score_labels
from vfl.deploy.shards.mlp import read_shard, write_shard
from vfl.deploy.shards.roundtrip import read_back
from vfl.errors import ConfigurationError
from vfl.parties.labels import class_labels
from vfl.parties import privacy as label_dp
from vfl.parties.mlp.split import SplitNetwork
from vfl.progressbar import ProgressBar, check_verbose
from vfl.protocols.mlp import MLPSettings
from vfl.runs import mlp as run
from vfl.runs.threads import run_in_threads
from vfl.transport import Transcript
from vfl.vertical_estimator import PartyExplanations, VerticalEstimator

#: The coordinator's name in the in-process run (it must not clash with a party's).
_COORDINATOR = "coordinator"


class _VerticalMLP(PartyExplanations, VerticalEstimator):
    _family = "mlp"
    _task = ""

    def __init__(self, hidden_layer_sizes=(100,), *, bottom_sizes="auto", standardize=True, activation="relu",
                 solver="adam",
                 alpha=0.0001, batch_size="auto", learning_rate_init=0.001, max_iter=200, shuffle=True,
                 random_state=None, tol=1e-4, verbose="auto", momentum=0.9, nesterovs_momentum=True,
                 early_stopping=False, validation_fraction=0.1, beta_1=0.9, beta_2=0.999, epsilon=1e-8,
                 n_iter_no_change=10, frac_bits=40, dp_epsilon=None, dp_delta=None, dp_label_bound=None,
                 allow_reconstruction=None, release_epsilon=None, release_delta=1e-6, release_clip=4.0,
                 release_budget=10.0):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.bottom_sizes = bottom_sizes
        self.standardize = standardize
        self.activation = activation
        self.solver = solver
        self.alpha = alpha
        self.batch_size = batch_size
        self.learning_rate_init = learning_rate_init
        self.max_iter = max_iter
        self.shuffle = shuffle
        self.random_state = random_state
        self.tol = tol
        self.verbose = verbose
        self.momentum = momentum
        self.nesterovs_momentum = nesterovs_momentum
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.n_iter_no_change = n_iter_no_change
        self.frac_bits = frac_bits
        self.dp_epsilon = dp_epsilon
        self.dp_delta = dp_delta
        self.dp_label_bound = dp_label_bound
        self.allow_reconstruction = allow_reconstruction
        self.release_epsilon = release_epsilon
        self.release_delta = release_delta
        self.release_clip = release_clip
        self.release_budget = release_budget

    def _settings(self, task: str) -> MLPSettings:
        per_party = dict(self.bottom_sizes) if isinstance(self.bottom_sizes, dict) else {}
        default = "auto" if isinstance(self.bottom_sizes, dict) else self.bottom_sizes
        hidden = self.hidden_layer_sizes
        if isinstance(hidden, (int, np.integer)) and not isinstance(hidden, bool):
            hidden = (int(hidden),)
        return self._settings_of(MLPSettings, task=task, hidden_layer_sizes=hidden, bottom_sizes=per_party,
                                 default_bottom=tuple(default) if isinstance(default, (tuple, list)) else default)

    def _fit_task(self, data: VerticalDataset) -> str:
        return self._task

    def fit(self, data: VerticalDataset, y=None):
        """Train the split network on aligned vertical data; the party holding the label is the label party.

        Parameters
        ----------
        data : VerticalDataset
            Every party's frame, the label column inside one of them (that party may hold no other column).
        y : None
            Not used: present only to answer scikit-learn's ``fit(X, y)``.

        Returns
        -------
        self
        """
        check_fit_arguments(data, y)
        data.require_label()
        data.require_complete()
        check_verbose(self.verbose)
        settings = self._settings(self._fit_task(data))
        if _COORDINATOR in data.parties:
            raise ConfigurationError(f"a party is named {_COORDINATOR!r}, the name of the in-process coordinator: "
                                     "rename it")
        roster = self._roster_of(data, _COORDINATOR)
        roles = self._roles(data, roster)
        releases = self._releases(roster, roles)
        self.transcript_ = Transcript()
        with ProgressBar(self.verbose, settings.max_iter, "vfl mlp", "epoch") as bar:
            results = run_in_threads(roster, run.training_programs(
                roles, settings, roster, on_step=lambda epoch, state: bar.step(state["loss"]), releases=releases),
                self.transcript_)
        record = results[roster.label].record
        self._fitted(roster, data, {name: results[name].party for name in roster.data_parties})
        self._settings_ = settings
        self.n_iter_ = record["n_iter"]
        self.loss_curve_ = list(record["loss_curve"])
        self.loss_ = self.loss_curve_[-1]
        self.best_loss_ = None if settings.early_stopping else record["best_loss"]
        self.validation_scores_ = list(record["validation_scores"]) if settings.early_stopping else None
        self.best_validation_score_ = max(self.validation_scores_) if settings.early_stopping else None
        label = self._parties[roster.label]
        self.n_outputs_ = label.n_outputs
        self.out_activation_ = {"binary": "logistic", "multiclass": "softmax", "regression": "identity"}[label.task]
        if label.classes is not None:
            self.classes_ = label.classes.copy()
        self.dp_noise_std_ = record["noise_std"] if settings.dp else None
        self.dp_spent_ = ((label_dp.epsilon_spent(record["noise_std"] / settings.dp_sensitivity(), settings.dp_delta,
                                                  self.n_iter_), settings.dp_delta) if settings.dp else None)
        if not settings.dp and not record["converged"] and self.n_iter_ == settings.max_iter:
            warnings.warn(f"the split network did not converge in max_iter={settings.max_iter} epochs (the loss "
                          f"changed by more than tol={settings.tol} within the last n_iter_no_change epochs)",
                          ConvergenceWarning)
        return self

    @property
    def network_(self) -> SplitNetwork:
        """Every party's weights as one :class:`~vfl.parties.mlp.SplitNetwork` (parties in the roster's order).

        Only the in-process estimator holds them all; in a deployment each party holds its own
        bottom and block, and the label party the intercept and the top.
        """
        self._check_fitted()
        order = [*self._roster.features, self._roster.label]
        parties = [self._parties[name] for name in order]
        label = parties[-1]
        has_block = [p.block is not None for p in parties]
        return SplitNetwork([p.bottom for p, b in zip(parties, has_block) if b],
                            [p.block for p, b in zip(parties, has_block) if b], label.bias, label.top)

    def _shards(self) -> dict:
        """Every data party's model shard, ``{party: shard}``, exactly as :func:`vfl.deploy.shards.mlp.read_shard`
        returns it from the file ``vfl party`` writes."""
        self._check_fitted()
        roster = self._roster
        record = {"n_iter": self.n_iter_, "loss_curve": self.loss_curve_,
                  "validation_scores": self.validation_scores_ or []}

        def party(name: str) -> tuple:
            role = "label" if name == roster.label else "feature"

            def write(path, fingerprint):
                write_shard(path, self._parties[name], role, fingerprint, feature_parties=roster.features,
                            record=record if role == "label" else None)
            return write, lambda path: read_shard(path, name, role)

        return read_back({name: party(name) for name in roster.data_parties})

    def _party_shapley(self, data: VerticalDataset) -> dict:
        """The parties' Shapley values by the label party's private prediction (an absent party feeds its training mean to its bottom; each feature party's part travels on its
        own, after its release check)."""
        return self._output(data, run.explanation_programs)

    def _output(self, data: VerticalDataset, programs=None) -> np.ndarray:
        """The outputs (after the output activation), by private prediction: only the label party learns them."""
        features = self._prediction_data(data)
        roster = self._roster
        roles = self._roles(data, roster, features)
        releases = self._releases(roster)
        return run_in_threads(roster, (programs or run.prediction_programs)(roles, self._parties, self._settings_,
                                                                           roster, releases))[roster.label]


@release_options.document
class VerticalMLPClassifier(ClassifierMixin, _VerticalMLP):
    """A neural network for classification across parties (split learning), as scikit-learn's ``MLPClassifier``.

    Every data party runs a *bottom* network on its own columns (``bottom_sizes``;
    none by default: its columns go straight into the interactive layer); the
    interactive layer sums each party's output times that party's block of
    weights; the label party runs the *top* network (``hidden_layer_sizes[1:]``)
    and the output layer.  Each party's weights stay with it.  The backward pass
    into a feature party runs on secret shares with a dealer (docs/mlp.md): a
    feature party learns its own gradients summed over each batch, never a row's
    gradient — the vector split learning's label-leak attacks read.  With the same
    start and batches the network equals :func:`vfl.centralized.mlp.fit_mlp` on the
    pooled table, which equals scikit-learn's ``MLPClassifier``.

    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default=(100,)
        The interactive layer's width, then the top's hidden widths (at least one).
    bottom_sizes : "auto", tuple of int or dict, default="auto"
        Every party's bottom layers' widths, or ``{party: widths}`` (a party not named gets ``"auto"``).
        ``"auto"``: each feature party one layer of ``max(1, min(16, columns // 2))`` units — narrower than
        its columns, so that its part of the interactive layer is no linear image of its rows — and the
        label party none.  ``()`` sends a party's columns straight into the interactive layer: a linear
        image of its rows, which its release check refuses once it is as wide as their rank.
    standardize : bool, default=True
        Each party scales its own columns on its training rows (kept with its model, applied at
        prediction): columns in their own units otherwise dominate the network.
    activation : {"identity", "logistic", "tanh", "relu"}, default="relu"
    solver : {"adam", "sgd"}, default="adam"
    alpha : float, default=0.0001
        L2 penalty, scaled as scikit-learn's (every weight matrix, bottoms included).
    batch_size : int or "auto", default="auto"
        ``min(200, rows)``; the last batch takes the remainder (no short batch).  Refused when so small
        that a feature party's summed gradients would determine its rows' gradients.
    learning_rate_init : float, default=0.001
    max_iter : int, default=200
        Epochs at most.
    shuffle : bool, default=True
        A new order of the rows every epoch, from the shared seed.
    random_state : int or None, default=None
        Seed of the public schedule (batches, validation rows); never of a weight: starts are secret.
    tol, n_iter_no_change, early_stopping, validation_fraction : scikit-learn's meanings
        (the validation rows are drawn from the seed, not stratified by label).
    verbose : bool or "auto", default="auto"
        A progress bar over the epochs with the loss: ``"auto"`` shows it on a terminal or in a
        notebook; in logs, pipes or CI it writes a plain line to standard error at most every 10 s
        instead (nothing for a shorter fit).
    momentum, nesterovs_momentum, beta_1, beta_2, epsilon : scikit-learn's meanings
    frac_bits : int, default=40
        Fixed-point precision of the shared backward pass.
    dp_epsilon, dp_delta : float or None, default=None
        Label differential privacy: the label party adds Gaussian noise to every row's output delta
        ``out - y`` each epoch, calibrated so that everything the feature parties and the coordinator
        receive over ``max_iter`` epochs is ``(dp_epsilon, dp_delta)``-DP for the labels (every epoch
        runs; ``early_stopping`` is refused).  A feature party's summed gradients otherwise let it guess
        labels better than chance over many epochs (docs/mlp.md gives the measured figures).
    dp_label_bound : float or None, default=None
        Regression with DP: the targets are clipped to ``[-dp_label_bound, dp_label_bound]``.
    <<release options: vfl.release_options.DOC>>

    Attributes
    ----------
    classes_, n_iter_, loss_, loss_curve_, best_loss_, validation_scores_, best_validation_score_, n_outputs_,
    out_activation_ : scikit-learn's meanings
    network_ : SplitNetwork
        Every party's weights (the in-process estimator only).
    dp_spent_ : tuple (epsilon, delta) or None
        The privacy spent over the epochs run.
    dp_noise_std_ : float or None
        The noise's standard deviation on each output delta.
    transcript_ : Transcript
        Every message of the training.
    label_party_, feature_parties_, feature_names_
    """

    def _fit_task(self, data: VerticalDataset) -> str:
        classes, _ = class_labels(data.labels, data.label_party, "a classifier", "VerticalMLPRegressor")
        return "binary" if classes.size == 2 else "multiclass"

    def predict_proba(self, data: VerticalDataset) -> np.ndarray:
        """Class probabilities, shape (n, n_classes)."""
        out = self._output(data)
        return np.column_stack([1 - out[:, 0], out[:, 0]]) if out.shape[1] == 1 else out

    def predict(self, data: VerticalDataset) -> np.ndarray:
        proba = self.predict_proba(data)          # (checks the fit before classes_ is read)
        return self.classes_[np.argmax(proba, axis=1)]

    def score(self, data: VerticalDataset, y=None) -> float:
        """Accuracy on ``data`` against ``y``, or the labels ``data`` holds."""
        return float(accuracy_score(score_labels(data, y), self.predict(data)))


class VerticalMLPRegressor(RegressorMixin, _VerticalMLP):
    """A neural network for regression across parties (split learning), as scikit-learn's ``MLPRegressor``.

    The same parameters as :class:`VerticalMLPClassifier`; the output layer is the identity and the loss half
    the mean squared error.
    """

    _task = "regression"

    def predict(self, data: VerticalDataset) -> np.ndarray:
        out = self._output(data)
        return out[:, 0] if out.shape[1] == 1 else out

    def score(self, data: VerticalDataset, y=None) -> float:
        """R^2 on ``data`` against ``y``, or the targets ``data`` holds."""
        return float(r2_score(np.asarray(score_labels(data, y), dtype=np.float64), self.predict(data)))
