"""Scikit-learn style estimators over the three-party protocol.

Thin: they validate their parameters, hand each party's columns to the roles'
runs of :mod:`vfl.runs.linear` (the same runs ``vfl party`` and ``vfl predict``
use), run them in threads (:mod:`vfl.runs.threads`) and expose the fitted
attributes (``coef_``, ``intercept_``, ``n_iter_``, ``loss_curve_``,
``transcript_``).  The mathematics lives in :mod:`vfl.parties` and
:mod:`vfl.protocols`.
"""

from __future__ import annotations

import dataclasses
import secrets
import warnings
from functools import partial

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, r2_score

from vfl import release_options
from vfl.crypto import compute
from vfl.dataset import VerticalDataset, check_fit_arguments, score_labels
from vfl.deploy.shards.linear import read_shard, write_shard
from vfl.deploy.shards.roundtrip import read_back
from vfl.errors import ConfigurationError, DataError
from vfl.parties import Coordinator, targets
from vfl.parties.linear import dp
from vfl.parties.scaling import Standardizer
from vfl.parties.linear.shareholders import whole
from vfl.protocols import Roster
from vfl.protocols.linear import TrainingSettings
from vfl.protocols.linear.inference import MODES
from vfl.runs import explained, linear as run_linear
from vfl.runs.data import RoleData
from vfl.runs.hooks import Hooks
from vfl.runs.linear import check_warm_models, scaled
from vfl.runs.threads import run_in_threads
from vfl.progressbar import ProgressBar, check_verbose
from vfl.transport import Transcript
from vfl.vertical_estimator import VerticalEstimator




class _VerticalLinearModel(VerticalEstimator):
    _objective = ""
    _fitted_attribute, _family, _loss_known_by = "coef_", "linear", "coordinator"

    def __init__(self, solver="auto", standardize=True, learning_rate=0.15, max_iter=100, alpha=0.01, batch_size=None,
                 tol=1e-5,
                 fit_intercept=True, key_bits=2048, insecure=False, frac_bits=32, random_state=None,
                 inference="private", engine=None, verbose="auto", init="random", dp_epsilon=None, dp_delta=None,
                 dp_label_bound=None, optimizer="sgd", penalty="l2", l1_ratio=0.15, learning_rate_schedule="constant",
                 power_t=0.5, decay_rate=0.5, decay_steps=10, momentum=0.9, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-8, rho=0.99, early_stopping=False, validation_fraction=0.1, n_iter_no_change=5,
                 scoring="loss",
                 warm_start=False, class_weight=None, packing="auto", feature_bound=2.0 ** 8,
                 score_bound=2.0 ** 12, n_jobs=None, allow_reconstruction=None, release_epsilon=None,
                 release_delta=1e-6, release_clip=4.0, release_budget=10.0, protocol="yang", reveal="respectively",
                 allow_score_span=None, reason_columns=None):
        self.reason_columns = reason_columns
        self.solver = solver
        self.standardize = standardize
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.alpha = alpha
        self.batch_size = batch_size
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.key_bits = key_bits
        self.insecure = insecure
        self.frac_bits = frac_bits
        self.random_state = random_state
        self.inference = inference
        self.engine = engine
        self.verbose = verbose
        self.init = init
        self.dp_epsilon = dp_epsilon
        self.dp_delta = dp_delta
        self.dp_label_bound = dp_label_bound
        self.optimizer = optimizer
        self.penalty = penalty
        self.l1_ratio = l1_ratio
        self.learning_rate_schedule = learning_rate_schedule
        self.power_t = power_t
        self.decay_rate = decay_rate
        self.decay_steps = decay_steps
        self.momentum = momentum
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.rho = rho
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.scoring = scoring
        self.warm_start = warm_start
        self.class_weight = class_weight
        self.packing = packing
        self.feature_bound = feature_bound
        self.score_bound = score_bound
        self.n_jobs = n_jobs
        self.allow_reconstruction = allow_reconstruction
        self.release_epsilon = release_epsilon
        self.release_delta = release_delta
        self.release_clip = release_clip
        self.release_budget = release_budget
        self.allow_score_span = allow_score_span
        self.protocol = protocol
        self.reveal = reveal

    # -- fitting -------------------------------------------------------------------
    def _settings(self) -> TrainingSettings:
        return self._settings_of(TrainingSettings, objective=self._objective)

    def _check_run_params(self) -> None:
        """The parameters that are not training settings: how prediction runs, the engine, the progress bar."""
        if not isinstance(self.inference, str) or self.inference not in MODES:
            raise ConfigurationError(f"inference must be one of {MODES}, got {self.inference!r}")
        compute.check_engine(self.engine)
        check_verbose(self.verbose)
        compute.check_n_jobs(self.n_jobs)
        release_options.check(self)

    def fit(self, data: VerticalDataset, y=None, validation: VerticalDataset | None = None, sample_weight=None):
        """Train on aligned vertical data; the party holding the label plays B.

        Parameters
        ----------
        data : VerticalDataset
            Every party's frame, the label column inside one of them.
        y : None
            Not used: present only to answer scikit-learn's ``fit(X, y)`` with a
            message saying what to pass instead.
        validation : VerticalDataset, optional
            With ``early_stopping=True``: the rows to score after every epoch (same
            parties, columns and label), instead of ``validation_fraction`` of ``data``.
        sample_weight : array of shape (n_rows,), optional
            Each row's weight in the loss, held by the label party only.

        Returns
        -------
        self
        """
        check_fit_arguments(data, y)
        data.require_columns("a linear model")
        data.require_complete()
        settings = dataclasses.replace(self._settings(), sample_weighted=sample_weight is not None)
        self._check_run_params()
        if data.label is None:
            raise DataError("fit needs labels: name the label column with VerticalDataset(..., label='column')")
        data.require_label()
        roster = _roster(data.feature_parties, data.label_party)
        allowed = release_options.allowed(self, roster)
        if validation is not None:
            self._check_validation(validation, data, roster)
        warm = self._warm(data, roster)
        coordinator = Coordinator.for_settings(self, self.engine)     # the estimator's own key_bits, insecure, frac_bits
        peer_columns = {name: len(data.columns(name)) for name in roster.features}
        programs, scopes = {}, {}           # each feature party's release ledger, per data set
        for name in roster.data_parties:
            label = name == roster.label
            own = RoleData(data.columns(name), np.asarray(data.features(name), dtype=np.float64),
                           data.labels if label else None, sample_weight if label else None, data.ids)
            hooks = Hooks(start=run_linear.WarmStart(warm["scalers"][name] if warm["scalers"] else None,
                                                     self._starts_hook(warm, roster, name)) if warm else None,
                          validation=self._validation_hook(validation, name, label) if validation is not None
                          else None, engine=self.engine)
            if label:
                programs[name] = partial(run_linear.train_label, data=own, settings=settings, roster=roster,
                                         hooks=dataclasses.replace(
                                             hooks, columns=run_linear.ShareColumns(peer_columns)))
            else:
                scopes[name] = release_options.scope(roster.label, own.columns, own.features)
                release = release_options.viewed(self, name, release_options.policy(self, name, scopes[name], allowed))
                programs[name] = partial(run_linear.train_feature, data=own, settings=settings, roster=roster,
                                         hooks=dataclasses.replace(hooks, release=release))
        bars = _Bars(self.verbose, self.max_iter)
        programs[roster.coordinator] = partial(run_linear.train_coordinator, coordinator=coordinator,
                                               settings=settings, roster=roster, hooks=Hooks(on_model=bars.on_model))
        transcript = Transcript()
        try:
            trained = run_in_threads(roster, programs, transcript, n_jobs=self.n_jobs)
        finally:
            bars.close()
        self._set_fitted(trained, roster, data, settings, coordinator, transcript)
        self.training_mean_ = {name: np.asarray(data.features(name), dtype=np.float64).mean(axis=0)
                               for name in roster.data_parties}      # each party's own: the explanations' reference
        # in-process, each feature party's ledger is this process's, per data set: prediction releases scores
        self._release_scopes = scopes
        return self

    def _set_fitted(self, trained: dict, roster: Roster, data: VerticalDataset, settings, coordinator: Coordinator,
                    transcript: Transcript) -> None:
        """The fitted attributes from every role's run (``trained``, by party name)."""
        label = trained[roster.label]
        models = [self._model(trained, roster, index, settings, coordinator) for index in range(label.n_models)]
        scalers = {name: trained[name].scaler for name in roster.data_parties} if self.standardize else None
        if label.classes is not None:
            self.classes_ = label.classes
        self._fitted(roster, data)
        self.solver_ = "cg" if settings.conjugate else "gd"
        self.mean_ = {name: scaler.mean.copy() for name, scaler in scalers.items()} if scalers else None
        self.scale_ = {name: scaler.scale.copy() for name, scaler in scalers.items()} if scalers else None
        one = len(models) == 1
        stack = (lambda key: models[0][key]) if one else (lambda key: np.array([m[key] for m in models]))
        self.coef_ = {name: stack("coef")[name] if one else np.array([m["coef"][name] for m in models])
                      for name in roster.data_parties}
        self.intercept_ = stack("intercept")
        self.unscaled_coef_, self.unscaled_intercept_ = self._unscaled(scalers, roster)
        self.initial_coef_ = {name: models[0]["initial_coef"][name] if one else
                              np.array([m["initial_coef"][name] for m in models]) for name in roster.data_parties}
        self.initial_intercept_ = stack("initial_intercept")
        self.n_iter_ = stack("n_iter")
        self.loss_curve_ = models[0]["loss_curve"] if one else [m["loss_curve"] for m in models]
        self.converged_ = all(m["converged"] for m in models)
        releases = sum(m["n_iter"] for m in models)
        self.dp_spent_ = ((dp.epsilon_spent(models[0]["noise_multiplier"], self.dp_delta, releases), self.dp_delta)
                          if settings.dp else None)
        self.dp_noise_std_ = models[0]["noise_std"] if settings.dp else None
        self.validation_scores_ = (None if not self.early_stopping else models[0]["validation_scores"] if one
                                   else [m["validation_scores"] for m in models])
        self.best_iteration_ = None if not self.early_stopping else stack("best_iteration")
        self.transcript_ = transcript.to_frame()
        self.model_shares_ = [m["shares"] for m in models] if settings.reveal == "never" else None
        # Prediction needs the weights (above) and C's key pair, not the training rows: keep only the
        # coordinator, in memory (never pickled, see __getstate__).
        self._coordinator = coordinator
        if self.tol is not None and not self.converged_:
            if self.solver_ == "cg":
                warnings.warn(f"{type(self).__name__} reached max_iter={self.max_iter} steps before the gradient's "
                              f"norm fell to tol={self.tol:g} times its first; increase max_iter", ConvergenceWarning)
            else:
                warnings.warn(f"{type(self).__name__} reached max_iter={self.max_iter} epochs before the loss changed "
                              f"by less than tol={self.tol:g}; {_convergence_advice(models)}", ConvergenceWarning)

    def _model(self, trained: dict, roster: Roster, index: int, settings, coordinator: Coordinator) -> dict:
        """One model's figures (of the one-vs-rest models), from every role's run."""
        parties = {name: trained[name].parties[index] for name in roster.data_parties}
        party_b, result = parties[roster.label], trained[roster.coordinator].results[index]
        shares = None
        if settings.shared and settings.reveal == "never":     # no party learnt its weights; in-process, we hold all
            shares = {"parties": {name: party.share.state() for name, party in parties.items()},
                      "coordinator": trained[roster.coordinator].shares[index]}
            for name, party in parties.items():
                party.params = whole(shares["parties"][name], shares["coordinator"][name], self.frac_bits)
        return {"coef": {name: party.coef for name, party in parties.items()}, "intercept": party_b.intercept,
                "shares": shares,
                "initial_coef": {name: party.initial_params[:party.n_features].copy()
                                 for name, party in parties.items()},
                "initial_intercept": float(party_b.initial_params[-1]) if self.fit_intercept else 0.0,
                "n_iter": result["n_iter"], "loss_curve": np.asarray(result["loss_curve"]),
                "converged": result["converged"], "noise_multiplier": party_b.noise_multiplier,
                "noise_std": party_b.noise_std,
                "validation_scores": np.asarray(result["validation_scores"] if settings.shared
                                                else party_b.validation_scores),
                "best_iteration": result["best_epoch"] + 1}

    def _warm(self, data: VerticalDataset, roster: Roster) -> dict | None:
        """With ``warm_start`` and a fitted model of the same parties and columns: what the run continues."""
        if not self.warm_start or not hasattr(self, "coef_"):
            return None
        if self.reveal == "never":
            raise ConfigurationError("warm_start continues from each party's weights, and with reveal='never' no "
                                     "party holds its weights: set warm_start=False, or reveal='respectively'")
        _check_warm_start(self.feature_names_, self.label_party_, {n: data.columns(n) for n in data.parties},
                         roster.label)
        return {"scalers": self._fitted_scalers(), "intercepts": np.atleast_1d(self.intercept_),
                "classes": getattr(self, "classes_", None)}

    def _starts_hook(self, warm: dict, roster: Roster, name: str):
        """Party ``name``'s warm start: its fitted weights per model (the label party's with the intercept)."""
        intercepts = warm["intercepts"]

        def starts(n_models: int, classes) -> list:
            check_warm_models(name, len(intercepts), warm["classes"], n_models, classes)
            own = np.atleast_2d(self.coef_[name])
            if name != roster.label or not self.fit_intercept:
                return [own[index].copy() for index in range(n_models)]
            return [np.append(own[index], intercepts[index]) for index in range(n_models)]
        return starts

    def _unscaled(self, scalers: dict | None, roster: Roster) -> tuple[dict, float | np.ndarray]:
        """The model in the columns' own units: each party's ``w / scale``; the intercept takes their offsets."""
        if not scalers:
            return {name: np.copy(coef) for name, coef in self.coef_.items()}, np.copy(self.intercept_)
        coef, intercept = {}, np.asarray(self.intercept_, dtype=np.float64)
        for name in roster.data_parties:
            coef[name], offset = scalers[name].unscale(self.coef_[name])
            intercept = intercept + offset
        return coef, intercept if intercept.ndim else float(intercept)

    def _check_validation(self, validation, data: VerticalDataset, roster: Roster) -> None:
        """A separate validation set (``fit(validation=...)``): for early stopping, with the training data's shape."""
        if not self.early_stopping:
            raise ConfigurationError("fit(..., validation=...) scores the validation rows for early stopping: "
                                     "pass early_stopping=True as well")
        if not isinstance(validation, VerticalDataset) or set(validation.parties) != set(data.parties):
            raise DataError(f"validation must be a VerticalDataset with the parties {list(data.parties)}")
        validation.require_complete()
        if validation.label_party != roster.label:
            raise DataError(f"the validation data must hold the label {data.label!r} in party {roster.label}'s frame")
        for name in roster.data_parties:
            if validation.columns(name) != data.columns(name):
                raise DataError(f"party {name}: validation columns differ from the training columns")

    def _validation_hook(self, validation: VerticalDataset, name: str, label: bool):
        """Party ``name``'s validation rows for each model, scaled by its scaler (the label party's labels coded)."""
        def give(index: int, n_models: int, party, trained) -> None:
            party.validation = scaled(validation.features(name), trained.scaler)
            if not label:
                return
            labels = validation.labels
            if trained.classes is not None:     # logistic: the training classes, -1/+1 for this model's class
                classes = trained.classes
                unknown = sorted(set(np.unique(labels).tolist()) - set(classes.tolist()), key=str)
                if unknown:
                    raise DataError(f"party {name}: the validation labels hold {unknown[:5]}, not among the "
                                    f"training classes {classes.tolist()}")
                positive = classes[1] if n_models == 1 else classes[index]
                labels = np.where(labels == positive, 1.0, -1.0)
            else:
                labels = targets(labels, self._objective, name)[0][0]
            party.validation_labels = labels
        return give

    # -- pickling ------------------------------------------------------------------
    def __getstate__(self):
        """What a pickle keeps: the parameters and the fitted model, never the coordinator's private key.

        An unpickled model predicts with a fresh key pair (made at its first prediction).
        """
        state = dict(super().__getstate__())
        state.pop("_coordinator", None)
        return state

    # -- prediction ----------------------------------------------------------------
    def decision_function(self, data: VerticalDataset) -> np.ndarray:
        """The scores ``z = sum_k x_k w_k + x_B w_B + b``, computed by the inference protocol."""
        features = self._prediction_data(data, complete=True)
        self._check_run_params()
        roster = _roster(self.feature_parties_, self.label_party_)
        allowed = release_options.allowed(self, roster)
        coordinator = self.__dict__.get("_coordinator")
        if coordinator is None:     # unpickled, or copied: C makes a fresh key pair, kept for later predictions
            coordinator = self._coordinator = Coordinator.for_settings(self, self.engine)
        transcript = Transcript()
        scores = run_in_threads(roster, self._prediction_programs(features, roster, coordinator, allowed, data.ids),
                                transcript, n_jobs=self.n_jobs)[roster.label]
        self.predict_transcript_ = transcript.to_frame()
        return scores

    def explain(self, data: VerticalDataset):
        """Each row's score split into contributions (a pandas DataFrame): the label party's columns, one total per
        feature party (named by the party; its columns' split stays with it), and ``base_value`` (the score at the
        training mean); a row sums to :meth:`decision_function`'s score.  A column's contribution is ``w_j (x_j -
        mean_j)`` in the model's units (interventional Shapley values against the training mean).  Each feature
        party's totals pass its release check first (see docs/explanations.md)."""
        return explained.frame(self._explained(data, 0.0), index=data.ids)

    def predict_reasons(self, data: VerticalDataset, k: int = 4, adverse=None):
        """Per row the ``k`` largest contributions toward the adverse outcome (``adverse``: a class, default the
        positive class ``classes_[1]``; a regressor's ``"high"`` or ``"low"``), as codes: the label party's column
        names; a feature party's column (or its code) where ``reason_columns`` lets it be named; else
        ``"information from <party>"``.  A DataFrame of ``reason_1`` .. ``reason_k`` (None where fewer)."""
        sign = explained.adverse_sign(getattr(self, "classes_", None), adverse)
        return explained.reasons(self._explained(data, sign), k, sign, index=data.ids)

    def _explained(self, data: VerticalDataset, sign: float) -> dict:
        """The label party's explanation of ``data`` (every role's run in threads, :mod:`vfl.runs.linear`)."""
        self._check_fitted()
        if np.ndim(self.intercept_) or getattr(self, "model_shares_", None) or "training_mean_" not in self.__dict__:
            raise ConfigurationError("explanations need one model (not one-vs-rest), each party's own weights (not "
                                     "reveal='never') and its training mean (a model fitted by this version)")
        features = self._prediction_data(data, complete=True)
        self._check_run_params()
        roster = _roster(self.feature_parties_, self.label_party_)
        allowed = release_options.allowed(self, roster)
        groups = self.__dict__.get("_explain_groups") or {}       # a scorecard reports its bins by column
        consent = explained.check_reason_columns(self.reason_columns, {k: groups.get(k, self.feature_names_[k])
                                                                       for k in roster.features})
        scalers = self._fitted_scalers() or {}
        models = {name: run_linear.Explaining(self.coef_[name], scalers.get(name), self.training_mean_[name],
                                              groups.get(name, list(self.feature_names_[name])),
                                              consent.get(name, {}))
                  for name in roster.data_parties}
        programs = run_linear.explanation_programs(
            features, self.feature_names_, models, float(self.intercept_), roster, sign=sign, ids=data.ids,
            releases={name: self._release_policy(name, allowed) for name in roster.features})
        transcript = Transcript()
        result = run_in_threads(roster.without_coordinator(), programs, transcript, n_jobs=self.n_jobs)[roster.label]
        self.explain_transcript_ = transcript.to_frame()
        return result

    def _release_policy(self, name: str, allowed) -> object:
        """Feature party ``name``'s release policy for a prediction: its ledger is the one its training started in
        this process (a model copied or unpickled elsewhere starts a ledger of its own there)."""
        scope = (self.__dict__.get("_release_scopes") or {}).get(name) or "unscoped-" + secrets.token_hex(8)
        return release_options.viewed(self, name, release_options.policy(self, name, scope, allowed))

    def _prediction_programs(self, features: dict, roster: Roster, coordinator: Coordinator, allowed, ids=None
                             ) -> dict:
        """Every role's prediction run with the fitted weights (or, ``reveal="never"``, each role's shares).

        The label party always carries an intercept (0.0 when none was fitted): the same scores.
        """
        settings = self._settings()
        intercepts = np.atleast_1d(self.intercept_)
        shares = getattr(self, "model_shares_", None)
        scalers = self._fitted_scalers() or {}
        run = dict(settings=settings, roster=roster, mode=self.inference, shared=shares is not None)
        programs = {}
        for name in roster.features:
            models = ([s["parties"][name] for s in shares] if shares else list(np.atleast_2d(self.coef_[name])))
            programs[name] = partial(run_linear.predict_feature, features=features[name], scaler=scalers.get(name),
                                     columns=self.feature_names_[name], models=models,
                                     hooks=Hooks(engine=self.engine, release=self._release_policy(name, allowed)),
                                     ids=ids, **run)
        own = np.atleast_2d(self.coef_[roster.label])
        models = ([s["parties"][roster.label] for s in shares] if shares else
                  [np.append(own[index], intercept) for index, intercept in enumerate(intercepts)])
        programs[roster.label] = partial(run_linear.predict_label, features=features[roster.label],
                                         scaler=scalers.get(roster.label),
                                         columns=self.feature_names_[roster.label], models=models,
                                         fit_intercept=True if not shares else self.fit_intercept,
                                         hooks=Hooks(engine=self.engine), **run)
        programs[roster.coordinator] = partial(run_linear.predict_coordinator, coordinator=coordinator,
                                               settings=settings, roster=roster, mode=self.inference,
                                               shares=[s["coordinator"] for s in shares] if shares else None)
        return programs

    def _shards(self) -> dict:
        """Every data party's model shard, ``{party: shard}``, exactly as :func:`vfl.deploy.shards.linear.read_shard`
        returns it from the file ``vfl party`` writes (a model kept shared, ``reveal="never"``: its shares)."""
        self._check_fitted()
        roster = _roster(self.feature_parties_, self.label_party_)
        shares = getattr(self, "model_shares_", None)
        scalers = self._fitted_scalers() or {}
        classes = [_plain(c) for c in self.classes_] if hasattr(self, "classes_") else None
        intercepts = np.atleast_1d(self.intercept_)
        starts = np.atleast_1d(self.initial_intercept_)

        def vectors(coef, ends, label: bool) -> list:
            rows = np.atleast_2d(coef)
            return [np.append(row, ends[k]) if label and self.fit_intercept else row for k, row in enumerate(rows)]

        def party(name: str) -> tuple:
            role = "label" if name == roster.label else "feature"
            params = vectors(self.coef_[name], intercepts, role == "label")
            initial = vectors(self.initial_coef_[name], starts, role == "label")
            one = len(params) == 1

            def write(path, fingerprint):
                write_shard(path, name, role, self._objective, self.feature_names_[name], params[0] if one else params,
                            self.fit_intercept, fingerprint, classes if role == "label" else None,
                            initial=initial[0] if one else initial, scaler=scalers.get(name),
                            shares=[s["parties"][name] for s in shares] if shares else None,
                            data_parties=roster.data_parties)
            return write, lambda path: read_shard(path, name, role)

        return read_back({name: party(name) for name in roster.data_parties})

    def _fitted_scalers(self) -> dict | None:
        mean = getattr(self, "mean_", None)
        return {name: Standardizer(mean[name], self.scale_[name]) for name in mean} if mean else None


@release_options.document
class VerticalLinearRegression(RegressorMixin, _VerticalLinearModel):
    """Linear regression on vertically partitioned data, trained with Paillier encryption.

    Minimises ``(1/2n) sum (z_i - y_i)^2 + (alpha/2) ||w||^2`` from a secret random
    start (or zero), by conjugate gradient or gradient descent, each step an
    encrypted pass of Yang et al. 2019, Table 2.

    Parameters
    ----------
    solver : {"auto", "cg", "gd"}, default="auto"
        ``"cg"``: conjugate gradient with an exact line search, full batch, L2 or no
        penalty: one encrypted pass per step, and the optimum of the objective in
        about as many steps as there are weights, with no learning rate to tune
        (see :mod:`vfl.protocols.linear.conjugate`).  ``"gd"``: gradient steps with
        ``optimizer`` and ``learning_rate`` (mini-batches, L1, DP).  ``"auto"``: ``"cg"``
        where it applies, else ``"gd"``; the choice is ``solver_``.  An ``optimizer``,
        ``learning_rate`` or ``learning_rate_schedule`` other than its default is a
        request for gradient steps: ``"auto"`` then runs ``"gd"``, and ``"cg"`` refuses it.
    standardize : bool, default=True
        Each party scales its own columns to mean 0 and standard deviation 1 on its
        training rows (no message: the means and scales stay with the party) and
        again at prediction, as a scikit-learn ``StandardScaler`` would before the
        model.  ``coef_`` is in standardized units; ``unscaled_coef_`` in the columns'
        own.  A constant column is left out with a ``ConstantColumnWarning`` naming it
        (its ``unscaled_coef_`` is 0).
    learning_rate : float, default=0.15
        Step size of ``solver="gd"``.
    max_iter : int, default=100
        Maximum epochs (``"cg"``: steps, one encrypted pass each).
    alpha : float, default=0.01
        L2 penalty; the intercept is not penalised.
    batch_size : int or None, default=None
        ``None`` is full batch.  Must exceed each party's number of weights.
        Mini-batches without differential privacy let a feature party infer most
        labels from its own gradients (measured in docs/protocol.md): such a fit
        warns with :class:`vfl.errors.LabelLeakWarning`; prefer full batches or DP.
    tol : float or None, default=1e-5
        ``"cg"``: stop when the gradient's norm has fallen to ``tol`` times its norm at
        the start.  ``"gd"``: stop when the epoch loss changes by less than ``tol``.
    fit_intercept : bool, default=True
    key_bits : int, default=2048
    insecure : bool, default=False
        Allow ``key_bits < 2048`` and ``init="zeros"`` (teaching and tests only).
    frac_bits : int, default=32
        Fixed-point precision.
    random_state : int or None, default=None
        Seed of the mini-batch order (cryptographic randomness always comes from the OS).
    inference : {"private", "table3"}, default="private"
        How prediction runs (see :mod:`vfl.protocols.linear.inference`; ``table3`` leaks).
    engine : str or None, default=None
        The crypto engine (default: the fastest registered).
    verbose : bool or "auto", default="auto"
        A progress bar over the epochs, with the loss and the time left: ``"auto"``
        shows it on a terminal or in a notebook; in logs, pipes or CI it writes a plain line to
        standard error at most every 10 s instead (nothing for a shorter fit).
    init : {"random", "zeros"}, default="random"
        Where the weights start.  ``"random"``: each party draws a secret start from
        the operating system's CSPRNG, so the first gradient does not reveal the labels
        to the feature party.  ``"zeros"``: today's textbook start, for teaching and
        reproducible comparisons — the first gradient hands party A ``X_A^T y``, so it
        needs ``insecure=True`` as an explicit acknowledgement (not with
        ``protocol="shared"``, where no party learns a gradient).
    dp_epsilon, dp_delta : float or None, default=None
        Differential privacy for the labels in what party A learns: party B adds
        calibrated Gaussian noise to the residual so that the whole run is
        ``(dp_epsilon, dp_delta)``-DP.  Needs ``tol=None`` (every epoch runs).
    dp_label_bound : float or None, default=None
        With DP, linear regression only: labels are clipped to ``[-bound, bound]``.
    optimizer : {"sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam"}, default="sgd"
        Each party's update rule, run on its own weights: the coordinator never sees
        a gradient.  All are coordinate-wise, so federated equals centralized.
    penalty : {"l2", "l1", "elasticnet", "none"}, default="l2"
        ``alpha (l1_ratio ||w||_1 + (1 - l1_ratio) / 2 ||w||^2)``; L1 by a proximal
        (soft-threshold) step, which zeroes weights.  The loss C decrypts includes it.
    l1_ratio : float, default=0.15
        The L1 share of ``"elasticnet"``, in [0, 1].
    learning_rate_schedule : {"constant", "invscaling", "step"}, default="constant"
        ``learning_rate``; ``learning_rate / t^power_t`` at gradient step ``t``; or
        times ``decay_rate`` every ``decay_steps`` epochs.
    power_t, decay_rate, decay_steps : float, float, int, default=0.5, 0.5, 10
    momentum : float, default=0.9
        For ``"momentum"`` and ``"nesterov"``.
    beta_1, beta_2, epsilon : float, default=0.9, 0.999, 1e-8
        Adam's (scikit-learn's MLP defaults); ``epsilon`` also for adagrad and rmsprop.
    rho : float, default=0.99
        RMSprop's decay of the mean square gradient (torch's and FATE's 0.99).
    early_stopping : bool, default=False
        Score held-out rows after every epoch by private prediction (only the label
        party sees the scores), stop when the score has not improved by more than
        ``tol`` for ``n_iter_no_change`` epochs, and give every party its weights of
        the best epoch.  The rows: ``validation_fraction`` of the training rows, chosen
        from the batch seed, or ``fit(data, validation=...)``.
    validation_fraction : float, default=0.1
    n_iter_no_change : int, default=5
    class_weight : "balanced", dict or None, default=None
        Logistic regression: weigh each row's loss by its class's weight
        (``"balanced"``: ``n / (n_classes * count)``).  With ``fit(..., sample_weight=)``
        the weights multiply.  Both stay with the label party: they enter its residual,
        and the other parties learn only that weighting is on.
    warm_start : bool, default=False
        ``fit`` continues from the fitted weights (scikit-learn's meaning) instead of
        a new start; the data must have the same parties, columns (and classes).
    scoring : str, default="loss"
        ``"loss"`` (the objective; lower is better), ``"roc_auc"``, ``"ks"``,
        ``"accuracy"`` (logistic) or ``"r2"`` (linear).
    packing : bool or "auto", default="auto"
        Several values per ciphertext in training and private prediction, with slots
        sized from the declared bounds; the same weights and scores bit for bit, and
        faster at every size.  ``"auto"`` packs wherever packing applies: everywhere
        but training with row weights (``class_weight``, ``sample_weight``).  See
        docs/protocol.md.
    feature_bound : float, default=2**8
        Declared bound on ``|x|`` (packed slots are sized for it).
    score_bound : float, default=2**12
        Declared bound on each party's share of a score; a larger one is refused with
        ``FixedPointOverflowError`` naming the party ("raise score_bound or scale the column").
    <<release options: vfl.release_options.DOC>>
    reason_columns : dict or None, default=None
        Each feature party's consent to have its columns named as reasons
        (:meth:`predict_reasons`): ``{party: [column, ...]}`` or ``{party: {column: code}}``
        (the code it publishes for the column).  A party not named appears as
        "information from <party>".  See docs/explanations.md.
    n_jobs : int or None, default=None
        Workers for the parties' encrypted work, with scikit-learn's meaning: ``None``
        the default (vfl's worker processes, ``VFL_WORKERS`` or one per core; inside
        ``joblib.parallel_config(backend=...)`` that configuration's ``n_jobs``, else
        all of the backend's workers), ``-1`` every core or worker, ``1`` none (all in
        the parties' threads).  ``with joblib.parallel_config(backend="dask"):
        model.fit(data)`` (and ``predict``) sends the work to the current
        ``dask.distributed.Client``'s cluster; C's decryption stays in this process.
        See docs/scale_out.md.

    Attributes
    ----------
    coef_ : dict of str to ndarray
        Each party's weights, in its column order.
    label_party_ : str
        The party that held the labels (B).
    feature_parties_ : tuple of str
        The other parties, in the order of the data set.
    intercept_ : float
    unscaled_coef_, unscaled_intercept_ : dict of str to ndarray, float
        The same model for the columns in their own units (with ``standardize``:
        each weight divided by its column's scale; the intercept takes every
        party's offset ``-sum w mean / scale``); without, ``coef_`` and ``intercept_``.
    mean_, scale_ : dict of str to ndarray, or None
        Each party's column means and standard deviations (``standardize``).
    solver_ : {"cg", "gd"}
        The solver that ran.
    n_iter_ : int
    loss_curve_ : ndarray
        The objective the coordinator learnt at each epoch: with ``"gd"``, at the
        weights each batch started from, averaged over the epoch's batches; with
        ``"cg"``, at the weights each step reached.
    transcript_ : DataFrame
        Every message of training: iteration, sender, receiver, name, kind, bytes.
    dp_spent_ : tuple (epsilon, delta) or None
        The privacy budget spent over the epochs run, with DP on.
    validation_scores_ : ndarray or None
        With early stopping: the validation score after each epoch (the label party's).
    best_iteration_ : int or None
        With early stopping: the epoch (counted from 1) whose weights the model holds.
    dp_noise_std_ : float or None
        The standard deviation of the noise B added to each residual (a function of
        the public settings: epsilon, delta, epochs and the sensitivity).
    initial_coef_, initial_intercept_ : dict of str to ndarray, float
        Where training started (each party's secret start, or zeros).  Only an
        in-process model, which holds every party, knows them; pass them to
        :func:`vfl.centralized.fit_gradient_descent` to reproduce the run centrally.

    Notes
    -----
    The estimator runs all three parties in this process, for experiments and
    teaching: the user sees every party's weights, and a fitted estimator keeps
    the coordinator's private key in memory for its predictions (it keeps no
    training rows).  Pickling (or ``copy.deepcopy``) keeps what the parties'
    model shards hold together — ``coef_``, ``intercept_``, ``classes_``,
    ``feature_names_``, ``label_party_``, ``feature_parties_``, ``n_iter_``, ``loss_curve_``, the
    transcripts and the parameters — and never the private key: an unpickled
    model predicts with a fresh key pair, made at its first prediction.  To keep
    the parties apart, run each as its own process (``vfl party``, see
    docs/network.md); each then writes only its own shard.
    """

    _objective = "linear"

    def predict(self, data: VerticalDataset) -> np.ndarray:
        """The predicted target of each row, shape (n,)."""
        return self.decision_function(data)

    def score(self, data: VerticalDataset, y=None) -> float:
        """R^2 of the predictions on ``data`` (labels from ``data`` unless ``y`` is given)."""
        predicted = self.predict(data)
        return float(r2_score(score_labels(data, y), predicted))


class VerticalLogisticRegression(ClassifierMixin, _VerticalLinearModel):
    """Logistic regression on vertically partitioned data, trained with Paillier encryption.

    Minimises the second-order Taylor approximation of the log loss (Hardy et al.
    2017), ``(1/n) sum (log 2 - y_i z_i / 2 + z_i^2 / 8) + (alpha/2) ||w||^2`` with
    ``y`` in {-1, +1}, by conjugate gradient or gradient descent (Yang et al. 2019, Table 2).

    Parameters are those of :class:`VerticalLinearRegression`, with ``warm_start``.
    More than two classes train one binary model per class (one-vs-rest), in one
    federation run: one key pair, the same aligned rows.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The labels; with two, ``classes_[1]`` is the positive class.
    coef_, intercept_, n_iter_, loss_curve_, transcript_, dp_spent_
        As for :class:`VerticalLinearRegression`; with more than two classes,
        ``coef_[party]`` has shape (n_classes, n_columns), ``intercept_`` and
        ``n_iter_`` shape (n_classes,), ``loss_curve_`` is one curve per class, and
        the transcript has a ``model`` column (the class's index).  With DP, the
        budget is accounted over every class's epochs.
    """

    _objective = "logistic"

    def predict_proba(self, data: VerticalDataset) -> np.ndarray:
        """Probability of the positive class ``classes_[1]``, shape (n,); with more classes, (n, n_classes).

        One-vs-rest probabilities are each class's sigmoid, normalised to sum to 1
        (as scikit-learn's one-vs-rest logistic regression).
        """
        proba = 1.0 / (1.0 + np.exp(-np.clip(self.decision_function(data), -500, 500)))
        return proba if proba.ndim == 1 else proba / proba.sum(axis=1, keepdims=True)

    def predict(self, data: VerticalDataset) -> np.ndarray:
        """The predicted class of each row (binary: ``classes_[1]`` where the probability is at least 0.5)."""
        z = self.decision_function(data)
        if z.ndim == 2:
            return self.classes_[np.argmax(z, axis=1)]
        return self.classes_[(z >= 0).astype(int)]

    def score(self, data: VerticalDataset, y=None) -> float:
        """Accuracy of the predictions on ``data``."""
        predicted = self.predict(data)
        return float(accuracy_score(score_labels(data, y), predicted))


def _check_warm_start(trained: dict, label_party: str, given: dict, label: str) -> None:
    """``warm_start`` continues the fitted weights: the same parties, label party and columns, named if not."""
    if set(given) != set(trained) or label != label_party:
        raise DataError(f"warm_start continues a model fitted with the parties {list(trained)} (label party "
                        f"{label_party}); this data has {list(given)} (label party {label}): use the same parties "
                        "(or set warm_start=False)")
    for party, columns in trained.items():
        if given[party] != columns:
            missing = [c for c in columns if c not in given[party]]
            extra = [c for c in given[party] if c not in columns]
            raise DataError(f"party {party}: warm_start continues weights fitted on the columns {columns}; this data "
                            f"has {given[party]} (missing {missing}, unexpected {extra}, or another order): give "
                            "the same columns (or set warm_start=False)")


def _convergence_advice(models: list) -> str:
    """What to change when training stopped at max_iter: the loss grew (diverging) or still falls (too slow)."""
    grew = [m["loss_curve"] for m in models if len(m["loss_curve"]) > 1 and m["loss_curve"][-1] > m["loss_curve"][0]]
    if grew:
        return (f"the loss grew from {grew[0][0]:.4g} to {grew[0][-1]:.4g}, so the training diverges: lower "
                "learning_rate (or scale the features)")
    if any(len(m["loss_curve"]) > 1 for m in models):
        return "the loss is still falling: increase max_iter (or learning_rate)"
    return "increase max_iter"


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def _roster(features, label: str) -> Roster:
    """The in-process federation: the users' party names; the coordinator is "C" unless a party took that name."""
    taken = {*features, label}
    coordinator = next(name for name in ("C", "coordinator", "vfl-coordinator") if name not in taken)
    return Roster(tuple(features), label, coordinator)


class _Bars:
    """The coordinator's ``on_model`` hook: a progress bar over each model's epochs (``verbose``)."""

    def __init__(self, verbose, total: int):
        self.verbose, self.total, self.bar = verbose, total, None

    def on_model(self, index: int, n_models: int, classes) -> tuple:
        self.close()
        bar = self.bar = _progress(self.verbose, self.total)
        return None, lambda epoch, state: bar.step(state["loss_curve"][-1])

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _progress(verbose, total: int) -> ProgressBar:
    """A fit's bar over one model's epochs (a seam: the FATE comparison times each epoch through it)."""
    return ProgressBar(verbose, total, "vfl training", "epoch")
