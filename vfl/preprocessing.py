"""The credit-scoring pipeline around the model: binning, WOE/IV, selection, scorecard — across parties.

Thin estimators in scikit-learn's style over the family's run
(:mod:`vfl.runs.credit`: each role's binning, WOE/IV, selection, model columns
and points), every role in its own thread (:mod:`vfl.runs.threads`); ``vfl
party`` runs the same run one process per party (:mod:`vfl.federation.credit`)::

    from vfl.preprocessing import (VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection,
                                   VerticalWOE)
    pipeline = VerticalPipeline([
        ("woe", VerticalWOE(VerticalBinning(max_bins=10), key_bits=2048)),
        ("selection", VerticalSelection(iv_threshold=0.02, max_correlation=0.8)),
        ("scorecard", VerticalScorecard(base_score=600, base_odds=50, pdo=20)),
    ])
    pipeline.fit(data)                        # data: a VerticalDataset, label at the label party
    pipeline.predict_score(data)              # scorecard points, by private prediction
    pipeline.shards()                         # {party: its own shard}: thresholds, WOE values, points

Each step fits on what the step before it passes on (raw columns: the
selection keeps only the selected ones) and reads the fitted steps before it
(``upstream``): the selection reads the WOE step's IVs, the scorecard its bins
and WOE values.  What each step reveals to whom: docs/credit_scoring.md.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone

from contextlib import contextmanager
from types import SimpleNamespace

from vfl import fitted_runs
from vfl.crypto import compute
from vfl.dataset import VerticalDataset, check_fit_arguments
from vfl.deploy.jsonfile import write_json
from vfl.errors import ConfigurationError, DataError, NotFittedError
from vfl.linear_model import VerticalLogisticRegression
from vfl.parties.binning import Binner
from vfl.deploy.shards import credit as shards
from vfl.deploy.shards.roundtrip import read_back
from vfl.parties.credit.scorecard import Coder, ScorecardScale, flat_codes
from vfl.parties.credit.selection import SelectionRules
from vfl.protocols import Roster
from vfl.protocols.credit.settings import CreditSettings, check_scorecard_model
from vfl.runs import credit as run
from vfl.runs.hooks import Hooks
from vfl.runs.threads import run_in_threads
from vfl.parties.scaling import Standardizer
from vfl.transport import Transcript
from vfl.vertical_estimator import ModelExport


def _flag(value, name: str) -> bool:
    """An opt-in must be a real boolean: ``"false"`` (a string) is refused, not taken as true."""
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigurationError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _labelled(data, y, what: str) -> None:
    check_fit_arguments(data, y)
    if data.label is not None:
        data.require_label()
    if data.label is None or data.label_party is None:
        raise DataError(f"{what} needs labels: name the label column with VerticalDataset(..., label='column'), in "
                        "one party's frame")


def _role_data(data: VerticalDataset, party: str) -> SimpleNamespace:
    """One party's rows as the run takes them: ``columns``, ``features``, ``labels`` (the label party's, else None)."""
    return SimpleNamespace(columns=data.columns(party), features=data.features(party),
                           labels=data.labels if party == data.label_party else None, weights=None)


def _dataset(data: VerticalDataset, features: dict) -> VerticalDataset:
    """A VerticalDataset of the same rows and label with other columns: ``features[party] = (array, names)``."""
    frames = {}
    for party in data.parties:
        if party not in features:
            continue
        x, names = features[party]
        frame = pd.DataFrame(np.asarray(x, dtype=np.float64).reshape(data.n_rows, len(names)), columns=list(names))
        if party == data.label_party and data.labels is not None:
            frame[data.label] = data.labels
        frames[party] = frame
    return VerticalDataset(frames, label=data.label if data.label_party in frames else None)


def _same_columns(data: VerticalDataset, trained: dict) -> None:
    """Refuse data whose parties or columns (names, order) are not those a step was fitted on, naming the party."""
    data.prediction_features(trained)


def _upstream(upstream, kind, who: str, required: bool = True):
    """The fitted step of type ``kind`` among ``upstream`` (a dict of fitted steps, or one step)."""
    steps = upstream.values() if isinstance(upstream, dict) else ([upstream] if upstream is not None else [])
    for step in steps:
        if isinstance(step, kind):
            if not hasattr(step, "classes_"):
                raise NotFittedError(f"{who} reads a fitted {kind.__name__}; fit it first")
            return step
    if required:
        raise ConfigurationError(f"{who} needs a fitted {kind.__name__} before it: in a VerticalPipeline, or "
                                 f"fit(data, upstream=fitted_{kind.__name__.lower()})")
    return None


class VerticalBinning(BaseEstimator):
    """Each party bins its own columns (its thresholds never leave it); missing values get a bin of their own.

    Parameters
    ----------
    max_bins : int, default=10
        Bins per column for non-missing values, at most (2 to 255).
    strategy : {"quantile", "uniform"}, default="quantile"
        The feature parties' columns (and the label party's unless ``label_strategy``).
    label_strategy : {"monotone", "quantile", "uniform"} or None, default="monotone"
        The label party's own columns: ``"monotone"`` bins them with its labels so that
        the event rate rises or falls from bin to bin (two classes only); ``None``: ``strategy``.
    min_bin_fraction : float, default=0.05
        ``"monotone"``: each bin holds at least this share of the rows.

    Attributes
    ----------
    binners_ : dict of party name to Binner
    """

    def __init__(self, max_bins=10, strategy="quantile", label_strategy="monotone", min_bin_fraction=0.05):
        self.max_bins = max_bins
        self.strategy = strategy
        self.label_strategy = label_strategy
        self.min_bin_fraction = min_bin_fraction

    def fit(self, data: VerticalDataset, y=None, upstream=None):
        if y is not None or not isinstance(data, VerticalDataset):
            check_fit_arguments(data, y)
        settings = CreditSettings(max_bins=self.max_bins, strategy=self.strategy,
                                  label_strategy=self.strategy if self.label_strategy is None else self.label_strategy,
                                  min_bin_fraction=self.min_bin_fraction)
        self.binners_ = {party: run.fit_binner(settings, _role_data(data, party), party, party == data.label_party,
                                               scorecard=False)
                         for party in data.parties}
        self.columns_ = {party: data.columns(party) for party in data.parties}
        return self

    def transform(self, data: VerticalDataset) -> VerticalDataset:
        """Each party's bin codes (``max_bins`` for a missing value), the label kept."""
        if not hasattr(self, "binners_"):
            raise NotFittedError("this VerticalBinning is not fitted yet; call fit first")
        _same_columns(data, self.columns_)
        return _dataset(data, {p: (self.binners_[p].transform(data.features(p), f"party {p}", data.columns(p)),
                                   data.columns(p)) for p in data.parties})


class VerticalWOE(BaseEstimator):
    """WOE and IV of every party's columns, the label party holding the key (see :mod:`vfl.protocols.credit.woe`).

    The label party encrypts each row's class, one-hot in one packed ciphertext;
    each feature party multiplies them into its bins and returns every column's
    bins' encrypted class counts, the bins shuffled; the label party decrypts counts
    per anonymous bin and computes WOE and IV.  With more than two classes, one-vs-rest.

    Parameters
    ----------
    binning : VerticalBinning, optional
        How every party bins its columns (default ``VerticalBinning()``); cloned and fitted.
    share_woe : bool, default=False
        Opt-in: the label party gives each feature party its bins' WOE values (and
        its columns' IVs) after selection, so that its columns enter the scorecard
        as WOE values.  A feature party then learns each of its bins' event rate.
        Without it, a feature party learns nothing but its plan, and its columns
        enter the scorecard as bin indicators.
    key_bits : int, default=2048
    insecure : bool, default=False
        Allow keys below 2048 bits (teaching and tests).
    engine : str, optional
    n_jobs : int or None

    Attributes
    ----------
    binning_ : VerticalBinning
    classes_ : ndarray
    iv_ : dict of party name to ndarray
        Each column's IV (more than two classes: its largest one-vs-rest IV).
    woe_ : dict of party name to list of ndarray
        Per column, the WOE of each bin in the party's own order (missing last);
        shape (bins,) for two classes, (bins, n_classes) for more.
    counts_, events_ : dict of party name to list of ndarray
        Per column, rows and events per bin (own order).
    transcript_ : DataFrame
    """

    def __init__(self, binning=None, share_woe=False, key_bits=2048, insecure=False, engine=None, n_jobs=None):
        self.binning = binning
        self.share_woe = share_woe
        self.key_bits = key_bits
        self.insecure = insecure
        self.engine = engine
        self.n_jobs = n_jobs

    def fit(self, data: VerticalDataset, y=None, upstream=None):
        _labelled(data, y, "VerticalWOE")
        _flag(self.share_woe, "share_woe")
        _flag(self.insecure, "insecure")
        compute.check_engine(self.engine)
        compute.check_n_jobs(self.n_jobs)
        binning = clone(self.binning) if self.binning is not None else VerticalBinning()
        binning.fit(data)
        roster = Roster(data.feature_parties, data.label_party, None).without_coordinator()
        binners, roles = binning.binners_, {p: _role_data(data, p) for p in data.parties}
        hooks = Hooks(engine=self.engine)
        programs = {k: (lambda ep, k=k: run.woe_feature(ep, roles[k], k, binners[k], roster, hooks))
                    for k in roster.features}
        programs[roster.label] = lambda ep: run.woe_label(ep, roles[roster.label], roster.label, binners[roster.label],
                                                          roster, self.key_bits, self.insecure, hooks)
        transcript = Transcript()
        parties = run_in_threads(roster, programs, transcript, n_jobs=self.n_jobs)
        label = parties[roster.label]
        self.binning_ = binning
        self.classes_ = label.classes.copy()
        self.iv_, self.woe_, self.counts_, self.events_ = {}, {}, {}, {}
        for name in roster.data_parties:
            orders = parties[name].orders if name != roster.label else None
            self.iv_[name] = label.ivs(name)
            own = [_own_order(t, orders[j] if orders else None) for j, t in enumerate(label.tables[name])]
            self.woe_[name] = [t["woe"][:, 0] if len(self.classes_) == 2 else t["woe"] for t in own]
            self.counts_[name] = [t["counts"] for t in own]
            self.events_[name] = [t["events"] for t in own]
        self.columns_ = {name: data.columns(name) for name in roster.data_parties}
        self.transcript_ = transcript.to_frame()
        self._parties, self._roster = parties, roster
        return self

    def transform(self, data: VerticalDataset) -> VerticalDataset:
        """The data as it is (the WOE step computes statistics; the scorecard codes the columns), checked."""
        if not hasattr(self, "columns_"):
            raise NotFittedError("this VerticalWOE is not fitted yet; call fit first")
        _same_columns(data, self.columns_)
        return data

    def woe_table(self) -> pd.DataFrame:
        """Every party's columns' bins: thresholds, rows, events, WOE; and each column's IV."""
        if not hasattr(self, "classes_"):
            raise NotFittedError("this VerticalWOE is not fitted yet; call fit first")
        rows = []
        for party, columns in self.columns_.items():
            binner = self.binning_.binners_[party]
            for j, column in enumerate(columns):
                for k, label in enumerate(bin_labels(binner, j)):
                    rows.append({"party": party, "column": column, "bin": label, "rows": int(self.counts_[party][j][k]),
                                 "events": self.events_[party][j][k].tolist() if len(self.classes_) > 2 else
                                 int(self.events_[party][j][k, 0]),
                                 "woe": self.woe_[party][j][k].tolist() if len(self.classes_) > 2 else
                                 float(self.woe_[party][j][k]), "iv": float(self.iv_[party][j])})
        return pd.DataFrame(rows)

    def transform_woe(self, data: VerticalDataset) -> VerticalDataset:
        """Every party's columns replaced by their bins' WOE (two classes): the pooled view, for teaching and checks."""
        if len(self.classes_) != 2:
            raise ConfigurationError("WOE substitution takes one event class; the label has more than two classes")
        out = {}
        for party, columns in self.columns_.items():
            binner = self.binning_.binners_[party]
            codes = flat_codes(binner.transform(data.features(party)), binner.n_bins_, binner.missing_code)
            out[party] = (np.column_stack([self.woe_[party][j][codes[:, j]] for j in range(len(columns))]), columns)
        return _dataset(data, out)


def _own_order(table: dict, order) -> dict:
    """A table of a feature party's column (bins in the order it sent) in its own order of bins."""
    if order is None:
        return table
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.arange(len(order))
    return {key: (value[inverse] if key != "iv" else value) for key, value in table.items()}


def bin_labels(binner: Binner, column: int) -> list[str]:
    """Human-readable bins of one column: ``(-inf, t0]``, ``(t0, t1]``, ..., ``missing``."""
    t = binner.thresholds_[column]
    edges = [-np.inf, *t.tolist(), np.inf]
    return [f"({edges[k]:.6g}, {edges[k + 1]:.6g}]" for k in range(len(t) + 1)] + ["missing"]


class VerticalSelection(BaseEstimator):
    """Keep the columns the label party selects by IV (and a correlation or VIF bound); each party learns its own.

    Parameters are :class:`~vfl.parties.credit.selection.SelectionRules`' (``None`` leaves a rule out).
    A correlation or VIF bound runs the encrypted Pearson between the label party
    and each feature party (both learn their block) and each feature party sends
    the label party its own kept columns' correlations.

    Attributes
    ----------
    support_ : dict of party name to bool ndarray
    selected_columns_ : dict of party name to list of str
    correlation_ : DataFrame or None
        With a bound: the correlations of the IV-kept columns (NaN between two feature parties).
    transcript_ : DataFrame
    """

    def __init__(self, iv_threshold=0.02, top_k_per_party=None, top_k=None, max_correlation=None, max_vif=None):
        self.iv_threshold = iv_threshold
        self.top_k_per_party = top_k_per_party
        self.top_k = top_k
        self.max_correlation = max_correlation
        self.max_vif = max_vif

    def _rules(self) -> SelectionRules:
        return SelectionRules(self.iv_threshold, self.top_k_per_party, self.top_k, self.max_correlation,
                              self.max_vif)

    def fit(self, data: VerticalDataset, y=None, upstream=None):
        rules = self._rules()
        woe = _upstream(upstream, VerticalWOE, "VerticalSelection")
        if {p: data.columns(p) for p in data.parties} != woe.columns_:
            raise DataError("VerticalSelection takes the data the WOE step was fitted on (the same parties and columns)")
        roster, parties, share = woe._roster, woe._parties, bool(woe.share_woe)
        roles = {p: _role_data(data, p) for p in data.parties}
        programs = {k: (lambda ep, k=k: run.select_feature(ep, parties[k], roles[k], roster, rules, share))
                    for k in roster.features}
        programs[roster.label] = lambda ep: run.select_label(ep, parties[roster.label], roles[roster.label], roster,
                                                             rules, share)
        transcript = Transcript()
        plan = run_in_threads(roster, programs, transcript, n_jobs=woe.n_jobs)[roster.label]["plan"]
        self.columns_ = {p: data.columns(p) for p in data.parties}
        self.support_ = {p: np.asarray(plan[p], dtype=bool) for p in data.parties}
        self.selected_columns_ = {p: [c for c, s in zip(data.columns(p), self.support_[p]) if s] for p in data.parties}
        label = woe._parties[woe._roster.label]
        self.correlation_ = None
        if label.correlation is not None:
            columns, matrix = label.correlation
            names = [f"{p}:{woe.columns_[p][j]}" for p, j in columns]
            self.correlation_ = pd.DataFrame(matrix, index=names, columns=names)
        self.transcript_ = transcript.to_frame()
        self.classes_ = woe.classes_
        return self

    def transform(self, data: VerticalDataset) -> VerticalDataset:
        """The selected columns only (a party with none left keeps none)."""
        if not hasattr(self, "support_"):
            raise NotFittedError("this VerticalSelection is not fitted yet; call fit first")
        _same_columns(data, self.columns_)
        return _dataset(data, {p: (data.features(p)[:, self.support_[p]], self.selected_columns_[p])
                               for p in data.parties})


class VerticalScorecard(BaseEstimator):
    """A logistic model on the parties' coded bins and its scorecard: points per bin per column, per party.

    The label party's columns (and, with ``share_woe``, the feature parties')
    enter as their bins' WOE; a feature party without its WOE values enters as
    its bins' indicators (its most populous bin the reference).  The model is
    ``model`` (default ``VerticalLogisticRegression()``, cloned) on those columns;
    the points follow from its weights and the anchors (see
    :mod:`vfl.parties.credit.scorecard`): a row's score is the sum of its bins'
    points over every party plus the base points, the same as ``offset - factor z``.

    Parameters
    ----------
    model : VerticalLogisticRegression, optional
    base_score : float, default=600
        The score at odds of ``base_odds`` to one (non-events to events).
    base_odds : float, default=50
    pdo : float, default=20
        Points to double the odds.
    reason_columns : dict or None, default=None
        Each feature party's consent to have its (raw) columns named as reasons
        (:meth:`predict_reasons`), as the logistic model's; None: the model's own.

    Attributes
    ----------
    model_ : VerticalLogisticRegression
    coders_ : dict of party name to Coder
    points_ : dict of party name to dict of column to ndarray
        Each selected column's points per bin (own order, missing last).
    base_points_ : float
    scale_ : ScorecardScale
    """

    def __init__(self, model=None, base_score=600.0, base_odds=50.0, pdo=20.0, reason_columns=None):
        self.reason_columns = reason_columns
        self.model = model
        self.base_score = base_score
        self.base_odds = base_odds
        self.pdo = pdo

    def fit(self, data: VerticalDataset, y=None, upstream=None):
        _labelled(data, y, "VerticalScorecard")
        if self.model is not None:
            check_scorecard_model(getattr(self.model, "protocol", "yang"), getattr(self.model, "reveal", "respectively"),
                                  "VerticalScorecard")
        woe = _upstream(upstream, VerticalWOE, "VerticalScorecard")
        run.event_classes(data.labels, data.label_party, None, scorecard=True)
        self.scale_ = ScorecardScale(self.base_score, self.base_odds, self.pdo)
        self.columns_ = {party: data.columns(party) for party in data.parties}
        self.coders_, self._binners = {}, {}
        for party in data.parties:
            trained = woe.columns_[party]
            missing = [c for c in data.columns(party) if c not in trained]
            if missing:
                raise DataError(f"party {party}: columns {missing} were not binned by the WOE step")
            index = [trained.index(c) for c in data.columns(party)]
            binner = woe.binning_.binners_[party].subset(index)
            self._binners[party] = binner
            self.coders_[party] = run.model_coder(party, run.coding(party, woe._roster, woe.share_woe), binner,
                                                  self._codes(data, party), range(len(index)), data.columns(party),
                                                  woe=[woe.woe_[party][j] for j in index])
        coded = self._coded(data)
        dropped = [p for p in data.feature_parties if p not in coded.parties]
        if not coded.feature_parties:
            raise DataError("no feature party has a selected column: the model would be the label party's alone; "
                            "lower the selection bounds")
        model = clone(self.model) if self.model is not None else VerticalLogisticRegression()
        if not isinstance(model, VerticalLogisticRegression):
            raise ConfigurationError(f"model must be a VerticalLogisticRegression, got {type(model).__name__}")
        with self._viewed_releases(model, data):
            self.model_ = model.fit(coded)
        self.parties_ = coded.parties
        self.dropped_parties_ = dropped
        self.points_ = {}
        standardized = self.model_.mean_ is not None
        for party in coded.parties:
            coder = self.coders_[party]
            self.points_[party] = dict(zip([coder.columns[j] for j in coder.selected], run.points(
                coder, self.model_.coef_[party], self.model_.mean_[party] if standardized else None,
                self.model_.scale_[party] if standardized else None, self.scale_)))
        self.base_points_ = run.base_points(self.scale_, self.model_.intercept_)
        self.classes_ = self.model_.classes_
        return self

    @contextmanager
    def _viewed_releases(self, model, data: VerticalDataset):
        """Each feature party's release check sees its part of a score as what it is, one value per bin of its
        selected columns, and assesses it against its raw columns and their bins (:class:`vfl.runs.credit.
        ScorecardRelease`) for the rows of this call, not against the coded columns the model sees: a party opts
        in with ``allow_reconstruction`` of the scorecard's model (``allow_score_span``, its earlier name)."""
        raw = {p: np.asarray(data.features(p), dtype=np.float64) for p in data.parties}
        model._release_view = lambda name, policy: run.ScorecardRelease(
            policy, self._binners[name], self.coders_[name], raw[name],
            how=f"allow_reconstruction=[{name!r}] in the scorecard's model")
        try:
            yield
        finally:
            del model._release_view             # the rows of this call only (and a model that pickles)

    def _codes(self, data: VerticalDataset, party: str) -> np.ndarray:
        return run.bin_codes(self._binners[party], _role_data(data, party), party)

    def _coded(self, data: VerticalDataset) -> VerticalDataset:
        """Every party in the model (fitted: ``parties_``; while fitting: the label party and every party
        with a model column) with its model columns."""
        _same_columns(data, self.columns_)
        take = getattr(self, "parties_", None) or [p for p in data.parties
                                                   if self.coders_[p].names or p == data.label_party]
        return _dataset(data, {p: (run.model_rows(self._binners[p], self.coders_[p], _role_data(data, p), p),
                                   self.coders_[p].names) for p in data.parties if p in take})

    def transform(self, data: VerticalDataset) -> VerticalDataset:
        """The model's columns: WOE values or bin indicators per party."""
        return self._coded(data)

    def decision_function(self, data: VerticalDataset) -> np.ndarray:
        """The model's log-odds of the event, by private prediction (only the label party learns them)."""
        self._check()
        coded = self._coded(data)
        with self._viewed_releases(self.model_, data):
            return self.model_.decision_function(coded)

    def predict_proba(self, data: VerticalDataset) -> np.ndarray:
        self._check()
        coded = self._coded(data)
        with self._viewed_releases(self.model_, data):
            return self.model_.predict_proba(coded)

    def explain(self, data: VerticalDataset) -> pd.DataFrame:
        """Each row's log-odds (:meth:`decision_function`) split into contributions: the label party's columns, one
        total per feature party, ``base_value``; a column's contribution is its model columns' ``w (x - mean)`` on
        its WOE values or bin indicators (see :meth:`VerticalLogisticRegression.explain`, docs/explanations.md)."""
        return self._through_model(data, "explain")

    def predict_reasons(self, data: VerticalDataset, k: int = 4, adverse=None) -> pd.DataFrame:
        """The ``k`` largest contributions toward the adverse class (default the event, ``classes_[1]``), as codes;
        a feature party's columns named only where ``reason_columns`` lets it (see the logistic model's)."""
        return self._through_model(data, "predict_reasons", k=k, adverse=adverse)

    def _through_model(self, data: VerticalDataset, method: str, **options):
        self._check()
        coded = self._coded(data)
        model = self.model_
        model._explain_groups = {p: run.model_groups(self.coders_[p]) for p in self.parties_}
        kept = model.reason_columns
        model.reason_columns = self.reason_columns if self.reason_columns is not None else kept
        try:
            with self._viewed_releases(model, data):
                return getattr(model, method)(coded, **options)
        finally:
            model.reason_columns = kept
            del model._explain_groups

    def predict_score(self, data: VerticalDataset) -> np.ndarray:
        """Scorecard scores, ``offset - factor z``, by private prediction."""
        return self.scale_.score(self.decision_function(data))

    def points(self, data: VerticalDataset) -> dict:
        """Each party's points per row, summed over its columns (in the clear: each party's own part of the score)."""
        self._check()
        out = {}
        for party in self.parties_:
            codes = self._codes(data, party)
            coder = self.coders_[party]
            table = [self.points_[party][coder.columns[j]] for j in coder.selected]
            out[party] = sum(t[codes[:, j]] for t, j in zip(table, coder.selected)) if table else np.zeros(len(codes))
        return out

    def points_table(self) -> pd.DataFrame:
        """Every party's points per bin: party, column, bin (its range), points; the base points last."""
        self._check()
        rows = []
        for party in self.parties_:
            for j, column in enumerate(self.coders_[party].columns):
                for label, value in zip(bin_labels(self._binners[party], j), self.points_[party][column]):
                    rows.append({"party": party, "column": column, "bin": label, "points": float(value)})
        rows.append({"party": self.model_.label_party_, "column": "(base)", "bin": "", "points": self.base_points_})
        return pd.DataFrame(rows)

    def _check(self) -> None:
        if not hasattr(self, "model_"):
            raise NotFittedError("this VerticalScorecard is not fitted yet; call fit first")


class VerticalPipeline(ModelExport):
    """A chain of vfl steps fitted in turn, each on what the step before passes on; its state splits by party.

    Parameters
    ----------
    steps : list of (name, step)
        Steps with ``fit(data, upstream=...)`` and ``transform(data)`` (the last one
        ``fit`` only): :class:`VerticalWOE`, :class:`VerticalSelection`,
        :class:`VerticalScorecard`.

    Attributes
    ----------
    named_steps : dict
    """

    #: its export (``consent``, ``export``: docs/export.md) is the credit family's, from its parties' shards
    _family = "credit"

    def __init__(self, steps):
        names = [name for name, _ in steps]
        if not steps or len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
            raise ConfigurationError("steps must be a non-empty list of (name, step) with distinct names")
        self.steps = list(steps)

    @property
    def named_steps(self) -> dict:
        return dict(self.steps)

    def fit(self, data: VerticalDataset, y=None):
        for name, step in self.steps:       # settings no step could finish with: refused before any work
            model = getattr(step, "model", None) if isinstance(step, VerticalScorecard) else None
            if model is not None:
                check_scorecard_model(getattr(model, "protocol", "yang"), getattr(model, "reveal", "respectively"),
                                      f"VerticalScorecard ({name!r})")
        if any(isinstance(step, VerticalScorecard) for _, step in self.steps) and \
                isinstance(data, VerticalDataset) and data.labels is not None:
            run.event_classes(data.labels, data.label_party, None, scorecard=True)
        fitted, current = {}, data
        for i, (name, step) in enumerate(self.steps):
            step.fit(current, upstream=dict(fitted))
            fitted[name] = step
            if i < len(self.steps) - 1:
                current = step.transform(current)
        self.fitted_ = True
        return self

    def _through(self, data: VerticalDataset) -> VerticalDataset:
        if not getattr(self, "fitted_", False):
            raise NotFittedError("this VerticalPipeline is not fitted yet; call fit first")
        for _, step in self.steps[:-1]:
            data = step.transform(data)
        return data

    def decision_function(self, data: VerticalDataset) -> np.ndarray:
        return self.steps[-1][1].decision_function(self._through(data))

    def predict_proba(self, data: VerticalDataset) -> np.ndarray:
        return self.steps[-1][1].predict_proba(self._through(data))

    def explain(self, data: VerticalDataset) -> pd.DataFrame:
        """The last step's explanation of ``data`` (:meth:`VerticalScorecard.explain`)."""
        return self.steps[-1][1].explain(self._through(data))

    def predict_reasons(self, data: VerticalDataset, k: int = 4, adverse=None) -> pd.DataFrame:
        """The last step's reasons (:meth:`VerticalScorecard.predict_reasons`)."""
        return self.steps[-1][1].predict_reasons(self._through(data), k=k, adverse=adverse)

    def predict_score(self, data: VerticalDataset) -> np.ndarray:
        return self.steps[-1][1].predict_score(self._through(data))

    def predict(self, data: VerticalDataset) -> np.ndarray:
        """The predicted class of each row: the scorecard's event class where its probability is at least 0.5."""
        proba = np.asarray(self.predict_proba(data))
        proba = proba if proba.ndim == 1 else proba[:, -1]
        classes = self.steps[-1][1].classes_
        return np.asarray(classes)[(proba >= 0.5).astype(int)]

    def score(self, data: VerticalDataset, y=None) -> float:
        """Accuracy of :meth:`predict` on ``data`` (labels from ``data`` unless ``y`` is given), as every vfl
        classifier's ``score``."""
        from sklearn.metrics import accuracy_score

        from vfl.dataset import score_labels

        return float(accuracy_score(score_labels(data, y), self.predict(data)))

    def save_run(self, path, data: VerticalDataset | None = None, party: str | None = None):
        """Write this fit's run record as party ``party`` saw it (default: the label party) under ``path``.

        For ``vfl board --run path``: every step's messages to and from the party, the
        coordinator's loss curve, a data party's shard (its bins, coding and points, as
        :meth:`shards`) with the IVs and the selection it learned (the label party: every
        party's; a feature party: its own plan, and its IVs with ``share_woe``); with labelled
        ``data``, the label party's metrics and curves on it (private prediction). Needs the
        steps :meth:`shards` needs. Returns the run's folder.
        """
        if not getattr(self, "fitted_", False):
            raise NotFittedError("this VerticalPipeline is not fitted yet; call fit first")
        steps = self.named_steps
        woe = _upstream(steps, VerticalWOE, "save_run()")
        card = _upstream(steps, VerticalScorecard, "save_run()")
        selection = _upstream(steps, VerticalSelection, "save_run()", required=False)
        support = {p: (selection.support_[p] if selection is not None else np.ones(len(c), dtype=bool)).tolist()
                   for p, c in woe.columns_.items()}
        shard_of = self.shards()

        def result(name, role):
            if role == "coordinator":
                return {}
            out = {"selected": [c for c, kept in zip(woe.columns_[name], support[name]) if kept]}
            if role == "feature":
                return dict(out, iv=woe.iv_[name].tolist()) if woe.share_woe else out
            out.update(iv={p: woe.iv_[p].tolist() for p in woe.columns_}, plan=support, base_points=card.base_points_)
            if data is not None:
                out["metrics"] = {"training": fitted_runs.report(self, data, card.classes_)}
            return out

        def shard(target, name):
            if name in shard_of:
                write_json(target, shard_of[name])

        transcripts = [step.transcript_ for step in (woe, selection) if step is not None] + [card.model_.transcript_]
        settings = {f"{name}__{key}": value for name, step in self.steps if hasattr(step, "get_params")
                    for key, value in fitted_runs.scalar_settings(step.get_params(deep=False)).items()}
        return fitted_runs.save_view(path, family="credit", label=woe._roster.label, features=woe._roster.features,
                                     transcripts=transcripts, settings=settings, party=party,
                                     loss_curve=card.model_.loss_curve_, loss_known_by="coordinator", result=result,
                                     files={"model.json": shard})

    def shards(self) -> dict:
        """Every party's shard (format ``vfl-pipeline-shard/1``): only its own bins, WOE values, weights, points.

        Needs a :class:`VerticalWOE` and a :class:`VerticalScorecard` (and optionally a
        :class:`VerticalSelection`) among the steps.
        """
        steps = self.named_steps
        woe = _upstream(steps, VerticalWOE, "shards()")
        card = _upstream(steps, VerticalScorecard, "shards()")
        selection = _upstream(steps, VerticalSelection, "shards()", required=False)
        label = woe._roster.label
        out = {}
        for party, columns in woe.columns_.items():
            role = "label" if party == label else "feature"
            in_model = party in card.parties_
            chosen = [j for j, c in enumerate(columns) if in_model and (selection is None or
                                                                        selection.support_[party][j])]
            coding = "woe" if role == "label" or woe.share_woe else "bins"
            coder = Coder(coding, (woe.binning_.binners_[party].n_bins_ + 1).tolist(), chosen, columns,
                          woe=[woe.woe_[party][j] for j in chosen], counts=[woe.counts_[party][j] for j in chosen])
            model = {"columns": coder.names, "coef": [], "mean": [], "scale": []}
            if in_model:
                coef = np.asarray(card.model_.coef_[party], dtype=np.float64)
                standardized = card.model_.mean_ is not None
                scaler = Standardizer(card.model_.mean_[party], card.model_.scale_[party]) if standardized else \
                    Standardizer(np.zeros(len(coef)), np.ones(len(coef)))
                model.update(coef=coef.tolist(), **scaler.to_dict())       # JSON numbers only
            points = [card.points_[party][columns[j]] for j in coder.selected]
            iv = None
            if role == "label":
                iv = {p: woe.iv_[p].tolist() for p in woe.columns_}
                model.update(intercept=float(card.model_.intercept_), classes=[_plain(c) for c in woe.classes_])
            elif woe.share_woe:
                iv = woe.iv_[party].tolist()
            scorecard = dict(card.scale_.to_dict(), base_points=card.base_points_) if role == "label" else None
            out[party] = shards.build(party, role, columns, woe.binning_.binners_[party],
                                      woe.counts_[party], coder, model, points, iv=iv, scorecard=scorecard)
        return out


    def _shards(self) -> dict:
        """Every party's shard, ``{party: shard}``, exactly as :func:`vfl.deploy.shards.credit.read_shard` returns it
        from the file :meth:`save_run` or ``vfl party`` writes (``trained_with``: this fit's digest)."""
        built = self.shards()

        def party(name: str) -> tuple:
            def write(path, fingerprint):
                write_json(path, dict(built[name], trained_with=fingerprint), private=True)
            return write, lambda path: shards.read_shard(path, name, built[name]["role"])

        return read_back({name: party(name) for name in built})

def _plain(value):
    return value.item() if hasattr(value, "item") else value
