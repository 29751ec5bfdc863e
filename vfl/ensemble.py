"""Scikit-learn style gradient-boosted trees across parties (SecureBoost, Cheng et al. 2019).

Thin: they validate their parameters, hand every party's data to the family's run
(:mod:`vfl.runs.trees`, the same run ``vfl party`` uses) in threads, and expose
the fitted attributes.  Parameter
names follow scikit-learn's ``HistGradientBoostingClassifier``; the arithmetic
lives in :mod:`vfl.parties.trees`, and :mod:`vfl.centralized.trees` is
the same boosting on the pooled table, which the federated trees equal split
for split.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.metrics import accuracy_score, r2_score

from vfl import release_options
from vfl.crypto import compute
from vfl.deploy.shards.trees import read_shard, write_shard
from vfl.dataset import VerticalDataset, check_fit_arguments, score_labels
from vfl.parties.trees.label_party import TreeLabelParty
from vfl.parties.trees.loss import class_probabilities
from vfl.progressbar import ProgressBar, check_verbose
from vfl.protocols.trees import TreeSettings
from vfl.runs import trees as run
from vfl.runs.threads import run_in_threads
from vfl.transport import Transcript
from vfl.vertical_estimator import PartyExplanations, VerticalEstimator


class _VerticalGradientBoosting(PartyExplanations, VerticalEstimator):
    _family = "trees"
    _loss = ""

    def __init__(self, *, learning_rate=0.1, max_iter=100, max_leaf_nodes=None, max_depth=3, min_samples_leaf=20,
                 l2_regularization=0.0, min_child_weight=1e-3, max_bins=32, early_stopping="auto", scoring="loss",
                 validation_fraction=0.1, n_iter_no_change=10, tol=1e-7, random_state=None, hide_membership=False,
                 label_party_trees=1, key_bits=2048, insecure=False, frac_bits=16, engine=None, verbose="auto",
                 n_jobs=None, allow_reconstruction=None, release_epsilon=None, release_delta=1e-6, release_clip=4.0,
                 release_budget=10.0):
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.max_leaf_nodes = max_leaf_nodes
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.min_child_weight = min_child_weight
        self.max_bins = max_bins
        self.early_stopping = early_stopping
        self.scoring = scoring
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.random_state = random_state
        self.hide_membership = hide_membership
        self.label_party_trees = label_party_trees
        self.key_bits = key_bits
        self.insecure = insecure
        self.frac_bits = frac_bits
        self.engine = engine
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.allow_reconstruction = allow_reconstruction
        self.release_epsilon = release_epsilon
        self.release_delta = release_delta
        self.release_clip = release_clip
        self.release_budget = release_budget

    def _settings(self) -> TreeSettings:
        return self._settings_of(TreeSettings, loss=self._loss)

    def _check_run_params(self) -> None:
        compute.check_engine(self.engine)
        check_verbose(self.verbose)
        compute.check_n_jobs(self.n_jobs)

    # -- fitting -------------------------------------------------------------------------------
    def fit(self, data: VerticalDataset, y=None):
        """Boost on aligned vertical data; the party holding the label is the label party.

        Parameters
        ----------
        data : VerticalDataset
            Every party's frame, the label column inside one of them; missing values
            (NaN) are taken as they are.
        y : None
            Not used: present only to answer scikit-learn's ``fit(X, y)``.

        Returns
        -------
        self
        """
        check_fit_arguments(data, y)
        settings = self._settings()
        self._check_run_params()
        data.require_label()
        roster = self._roster_of(data)
        roles = self._roles(data, roster)
        releases = self._releases(roster, roles)
        self.transcript_ = Transcript()
        held = {}
        with ProgressBar(self.verbose, settings.max_iter, "vfl boosting", "iteration") as bar:
            def on_iteration(iteration: int, state: dict) -> None:
                bar.step(run.training_loss(held["label"]) if bar.shown else None)

            results = run_in_threads(roster, run.training_programs(roles, settings, roster, engine=self.engine,
                                                                   on_step=on_iteration,
                                                                   on_party=lambda p: held.update(label=p),
                                                                   releases=releases),
                                     self.transcript_, n_jobs=self.n_jobs)
        result = results[roster.label]
        label = result.party
        self._fitted(roster, data, {name: results[name].party for name in roster.data_parties})
        self.n_iter_ = result.n_iter
        self._seed_ = result.seed
        self.n_trees_per_iteration_ = label.n_trees
        self.validation_score_ = np.asarray(result.validation_scores, dtype=np.float64)
        self.baseline_ = label.baseline.copy()
        self._after_fit(label)
        return self

    def _after_fit(self, label: TreeLabelParty) -> None:
        pass

    @property
    def feature_importances_(self) -> dict:
        """Every party's columns' share of the total split gain (all shares sum to 1), by party.

        The label party computes them: its own splits' gains by column, and each
        feature party's by the column index that party named for its split.
        """
        self._check_fitted()
        label = self._parties[self.label_party_]
        totals = {name: np.zeros(len(columns)) for name, columns in self.feature_names_.items()}
        order = self._roster.data_parties
        for entry in label.trees:
            tree = entry["tree"]
            for node in np.flatnonzero(tree.left >= 0).tolist():
                owner = order[int(tree.owner[node])]
                column = entry["splits"][node][0] if owner == self.label_party_ else entry["foreign"][node]
                totals[owner][column] += tree.gain[node]
        grand = sum(t.sum() for t in totals.values())
        return {name: (t / grand if grand > 0 else t) for name, t in totals.items()}

    @property
    def trees_(self) -> list:
        """The label party's view of every tree: shape, owners (data-party index), leaf values, gains."""
        self._check_fitted()
        return [entry["tree"] for entry in self._parties[self.label_party_].trees]

    def _run_files(self) -> dict:
        """A party's run record keeps its shard: a feature party's trees with its own thresholds."""
        return {"model.json": self._write_shard}

    def _write_shard(self, target, name: str) -> Path:
        role = "label" if name == self.label_party_ else "feature"
        return write_shard(target, self._parties[name], role, self._trained_with(),
                           feature_parties=self.feature_parties_, n_iter=self.n_iter_,
                           validation_scores=self.validation_score_)

    def _shards(self) -> dict:
        """Every data party's shard as ``vfl.deploy.shards.trees.read_shard`` reads it back (for export)."""
        with tempfile.TemporaryDirectory() as folder:
            return {name: read_shard(self._write_shard(Path(folder) / f"{name}.json", name), name,
                                     "label" if name == self.label_party_ else "feature")
                    for name in self._roster.data_parties}

    # -- prediction ---------------------------------------------------------------------------
    def _party_shapley(self, data: VerticalDataset) -> dict:
        """The parties' Shapley values by the label party's private prediction (the trees' training cover marginalises an absent party; the feature parties send the leaf masks
        they send to predict)."""
        return self._raw(data, run.explanation_programs)

    def _raw(self, data: VerticalDataset, programs=None) -> np.ndarray:
        """Raw scores (rows, trees per iteration) by private prediction: only the label party learns them."""
        features = self._prediction_data(data)
        self._check_run_params()
        roster = self._roster.without_coordinator()
        roles = self._roles(data, roster, features)
        releases = self._releases(roster)
        return run_in_threads(roster, (programs or run.prediction_programs)(roles, self._parties, roster, releases),
                              n_jobs=self.n_jobs)[roster.label]


@release_options.document
class VerticalGradientBoostingClassifier(ClassifierMixin, _VerticalGradientBoosting):
    """Gradient-boosted trees for classification across parties, the label party holding the key.

    Binary log loss, or the multinomial log loss (one tree per class and
    iteration) with three classes or more.  Each party bins its own columns
    (``max_bins`` bins, one more for missing values, whose direction every split
    learns); the label party encrypts gradients and hessians under its own
    Paillier key, the feature parties return encrypted sums of their split
    candidates (shuffled), and the label party picks every split.  The trees
    equal those of :func:`vfl.centralized.trees.fit_boosting` on the pooled
    bins, split for split.

    Parameters
    ----------
    learning_rate : float, default=0.1
        Shrinkage of every leaf value, in (0, 1].
    max_iter : int, default=100
        Boosting iterations.
    max_leaf_nodes : int or None, default=None
        Leaves per tree at most; ``None`` grows depth-wise to ``max_depth``, an
        integer best-first (highest gain first, as scikit-learn's).
    max_depth : int or None, default=3
        Depth of a tree at most (root at depth 0).
    min_samples_leaf : int, default=20
    l2_regularization : float, default=0.0
    min_child_weight : float, default=1e-3
        Hessian sum each child must hold (XGBoost's name).
    max_bins : int, default=32
        Bins per column for non-missing values (2 to 255).
    early_stopping : "auto" or bool, default="auto"
        Hold out ``validation_fraction`` of the rows (chosen from
        ``random_state``, never from the labels) and stop when ``n_iter_no_change``
        iterations did not improve ``scoring`` by ``tol``; ``"auto"``: from 10,000 rows.
    scoring : {"loss", "roc_auc", "accuracy"}, default="loss"
    validation_fraction : float, default=0.1
    n_iter_no_change : int, default=10
    tol : float, default=1e-7
    random_state : int or None, default=None
        Seed of the validation split only (never of any cryptographic randomness).
    hide_membership : bool, default=False
        A feature party learns no row's node (the label party sends one packed
        ciphertext per row and round instead); costs about one encryption per row
        per tree level.  See docs/trees.md.
    label_party_trees : int, default=1
        The first iterations split on the label party's own columns only.
    key_bits : int, default=2048
    insecure : bool, default=False
        Allow ``key_bits`` below 2048 (teaching and tests).
    frac_bits : int, default=16
        Fixed point of the gradients and hessians.
    engine : str, optional
        The crypto engine ("fast", "simple").
    verbose : bool or "auto", default="auto"
        A progress bar over the iterations, with the training loss and the time left:
        ``"auto"`` shows it on a terminal or in a notebook; in logs, pipes or CI it writes a plain
        line to standard error at most every 10 s instead (nothing for a shorter fit).
    n_jobs : int or None, default=None
        Workers for the encrypted work, scikit-learn's meaning.
    <<release options: vfl.release_options.DOC>>
        (Trees: the label party learns, per row predicted, the side of every split a
        feature party owns — its leaf masks; a column of few values, a 0/1 flag or a
        code, that the trees split on is read back exactly, so that prediction is
        refused unless the party is named in ``allow_reconstruction``; training warns
        first, with a ReleaseWarning. See docs/trees.md.)

    Attributes
    ----------
    classes_ : ndarray
    n_iter_ : int
    n_trees_per_iteration_ : int
    validation_score_ : ndarray
        The score of the validation rows after each iteration (higher is better;
        ``"loss"`` negated), when early stopping held rows out.
    feature_importances_ : dict of party name to ndarray
        Each column's share of the total split gain.
    trees_ : list of Tree
        The label party's view of the trees.
    transcript_ : Transcript
        Every message of the training.
    label_party_, feature_parties_, feature_names_
    """

    _loss = "log_loss"

    def _after_fit(self, label: TreeLabelParty) -> None:
        self.classes_ = label.classes.copy()

    def decision_function(self, data: VerticalDataset) -> np.ndarray:
        """Raw scores: shape (n,) for two classes, (n, n_classes) for more."""
        raw = self._raw(data)
        return raw[:, 0] if raw.shape[1] == 1 else raw

    def predict_proba(self, data: VerticalDataset) -> np.ndarray:
        """Class probabilities, shape (n, n_classes), as scikit-learn's classifiers."""
        return class_probabilities(self._raw(data))

    def predict(self, data: VerticalDataset) -> np.ndarray:
        proba = self.predict_proba(data)
        return self.classes_[np.argmax(proba, axis=1)]

    def score(self, data: VerticalDataset, y=None) -> float:
        """Accuracy on ``data`` against ``y``, or the labels ``data`` holds."""
        return float(accuracy_score(score_labels(data, y), self.predict(data)))


class VerticalGradientBoostingRegressor(RegressorMixin, _VerticalGradientBoosting):
    """Gradient-boosted trees for regression (squared error) across parties.

    The same parameters as :class:`VerticalGradientBoostingClassifier`, with
    ``scoring`` one of ``"loss"`` and ``"r2"``.  The label party scales its
    targets by a power of two privately (see :mod:`vfl.parties.trees.loss`),
    which changes no split.
    """

    _loss = "squared_error"

    def predict(self, data: VerticalDataset) -> np.ndarray:
        return self._raw(data)[:, 0]

    def score(self, data: VerticalDataset, y=None) -> float:
        """R^2 on ``data`` against ``y``, or the targets ``data`` holds."""
        return float(r2_score(np.asarray(score_labels(data, y), dtype=np.float64), self.predict(data)))

