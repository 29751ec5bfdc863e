"""Linear and logistic regression: each role's whole run, written once for the estimators and ``vfl party``.

One program per role for training (:func:`train_feature`, :func:`train_label`,
:func:`train_coordinator`) and for prediction (:func:`predict_feature`,
:func:`predict_label`, :func:`predict_coordinator`).  Each takes the party's
:class:`~vfl.transport.Endpoint` (its ``role`` is the party's name), its data (an
object with ``columns``, ``features``, ``labels`` and ``weights``, such as
:class:`vfl.deploy.data.PartyData`), the shared
:class:`~vfl.protocols.TrainingSettings` and the :class:`~vfl.protocols.Roster`,
and runs, in this order:

* standardization: each data party fits its own scaler on its rows (or keeps the
  one its warm start was trained with);
* the column counts: the label party tells every feature party every data party's
  column count (message ``columns``), so every data party checks the
  validation split, every party's batch size and the accumulated-equations rule
  for all of them, and refuses with the same message;
* the targets and the model count: one target, or one per class for logistic
  regression with three classes or more (one-vs-rest); the label party tells every
  peer how many models (message ``models``) after checking its warm start;
* at each feature party, after training, the release check of its partial scores on its training rows
  (:mod:`vfl.protocols.release`: a warning now, the refusal at prediction); the label-leak warnings at the
  label party;
* one protocol run per model (:mod:`vfl.protocols.linear`), under the coordinator's
  one key and on the same rows, each tagged with its index in the transcript.

What differs between the faces comes in as hooks (:class:`vfl.runs.hooks.Hooks`): where
checkpoints are kept and what is shown after every epoch (``on_model``), the warm starts
(``start``: fitted attributes or a previous shard), a separate validation set (the
estimator's ``fit(validation=...)``), a feature party's release policy (its ledger, opt-in
and DP) and the column-count exchange (``columns``: by default :class:`ShareColumns`; the
credit pipeline trains its coded columns with its own ``model_columns`` exchange).
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from vfl.errors import ConfigurationError, DataError, ProtocolError
from vfl.parties import Coordinator, row_weights, targets
from vfl.parties.linear import LinearFeatureParty, LinearLabelParty
from vfl.parties.linear.shareholders import CoordinatorShares
from vfl.parties.linear.shares import WeightShare
from vfl.parties.scaling import Standardizer
from vfl.protocols import Roster
from vfl.protocols import linear as protocol
from vfl.protocols.linear import TrainingSettings, check_batch_size, check_gradient_equations
from vfl.protocols.linear import shared as shared_protocol
from vfl.parties import explain as maths
from vfl.protocols import explain as explain_protocol
from vfl.runs.hooks import NO_HOOKS, Hooks
from vfl.protocols.release import ReleasePolicy, ReleaseWarning, linear_release, reason_release, refuse
from vfl.protocols.linear.checks import (check_validation_split, warn_clipped_labels,
                                         warn_mini_batch_labels)
from vfl.transport import Endpoint
from vfl.transport.message import quote

#: The most one-vs-rest models (classes) a run trains: a bound on a peer's ``models`` message.
MAX_MODELS = 1000

#: ``on_model(index, n_models, classes)`` -> ``(checkpoints, on_step)``: model ``index``'s checkpoints to
#: resume from (or None) and the callable its protocol program calls after every epoch (or None).
OnModel = Callable[[int, int, object], tuple]


@dataclass
class Trained:
    """What a role's training run leaves: per model, the trained party (data parties) or C's result."""

    #: the number of models (one, or one per class)
    n_models: int
    #: a data party's trained party per model (its weights, state, validation scores)
    parties: list = field(default_factory=list)
    #: the coordinator's result per model (``loss_curve``, ``n_iter``, ``converged``, ``best_epoch``...)
    results: list = field(default_factory=list)
    #: ``reveal = "never"``: the coordinator's share of every party's parameters, per model
    shares: list = field(default_factory=list)
    #: a data party's scaler (``standardize``), or None
    scaler: Standardizer | None = None
    #: the label party's classes (logistic regression), else None
    classes: np.ndarray | None = None


def kept_shared(settings) -> bool:
    """Whether the model stays shared after training (``protocol = "shared"``, ``reveal = "never"``)."""
    return getattr(settings, "shared", False) and settings.reveal == "never"


# --------------------------------------------------------------------------- training

def train_feature(ep: Endpoint, data, settings: TrainingSettings, roster: Roster, hooks: Hooks = NO_HOOKS
                  ) -> Trained:
    """A feature party's training run; ``hooks`` as for :func:`train_label`, with its ``release`` policy."""
    return _train_data_party(ep, data, settings, roster, hooks)


def train_label(ep: Endpoint, data, settings: TrainingSettings, roster: Roster, hooks: Hooks = NO_HOOKS
                ) -> Trained:
    """The label party's training run: features, labels and row weights (``data.weights``).

    Parameters
    ----------
    ep : Endpoint
        This party's endpoint; ``ep.role`` is its name.
    data : object
        ``columns``, ``features`` (rows aligned with every party's), ``labels``, ``weights``.
    settings : TrainingSettings
    roster : Roster
    hooks : Hooks
        What the run reads of them: ``columns``, the column-count exchange (by default
        :class:`ShareColumns`: the label party's carries the feature parties' column counts, as
        they told it; ``vfl party``: in their hellos); ``start``, a :class:`WarmStart`;
        ``release``, a feature party's release policy (after training, the model's partial
        scores are checked on its training rows and the verdict kept in its ledger);
        ``validation``, ``validation(index, n_models, party, trained)`` gives model ``index``'s
        party its separate validation rows (scaled by ``trained.scaler``; the label party's coded
        for ``trained.classes``); ``on_model`` (see :data:`OnModel`); ``engine``.

    Returns
    -------
    Trained
    """
    return _train_data_party(ep, data, settings, roster, hooks)


@dataclass(frozen=True)
class WarmStart:
    """A linear warm start (``Hooks.start``): the previous run's scaling and weights.

    Attributes
    ----------
    scaler : Standardizer or None
        The scaling the previous weights were trained with (kept: the weights continue on it).
    starts : callable
        ``starts(n_models, classes)`` -> this party's start per model, checked against the run's models.
    """

    scaler: Standardizer | None
    starts: Callable


def _train_data_party(ep: Endpoint, data, settings: TrainingSettings, roster: Roster, hooks: Hooks) -> Trained:
    role = ep.role
    label = role == roster.label
    warm = hooks.start
    scaler = fit_scaler(settings, warm.scaler if warm else None, data, role)
    features = scaled(data.features, scaler)
    exchange = hooks.columns or ShareColumns()
    exchange(ep, len(features), len(data.columns), settings, roster, hooks.validation is not None)
    starts = warm.starts if warm else None
    if label:
        model_targets, classes = targets(data.labels, settings.objective, role)
        weights = row_weights(data.labels, settings.class_weight, data.weights, role)
        begin = _warm_starts(starts, role, len(model_targets), classes)     # checked before the count goes out
        n_models = agree_on_models(ep, role, roster, len(model_targets))
        warn_clipped_labels(model_targets[0], settings, role)
    else:
        model_targets, classes, weights = None, None, None
        n_models = agree_on_models(ep, role, roster, None)
        begin = _warm_starts(starts, role, n_models, None)
    trained = Trained(n_models, scaler=scaler, classes=classes)
    for index in range(n_models):
        party = _party(role, features, data.columns, settings, n_models,
                       model_targets[index] if label else None, weights)
        party.ids = getattr(data, "ids", None)          # to name a row in an error
        if begin[index] is not None:            # warm start: continue from the previous weights
            party.warm_params = begin[index]
        if hooks.validation is not None:
            hooks.validation(index, n_models, party, trained)
        checkpoints, on_step = hooks.on_model(index, n_models, classes) if hooks.on_model else (None, None)
        ep.model = index if n_models > 1 else None
        program = protocol.train_label if label else protocol.train_feature
        program(ep, party, settings, checkpoints or None, on_step, engine=hooks.engine, roster=roster)
        trained.parties.append(party)
    ep.model = None
    if hooks.release is not None and not label:
        _check_trained(hooks.release, roster.label, data, trained)
    return trained


def _check_trained(release: ReleasePolicy, label_party: str, data, trained: Trained) -> None:
    """A feature party, after training: assess on its training rows what the model's partial scores would let the
    label party rebuild, keep the verdict in its ledger (a later prediction of too few rows to assess uses it), and
    warn now if a prediction would be refused (nothing is released yet).  A model that stays shared is checked at
    prediction, on generic directions."""
    params = [getattr(p, "params", None) for p in trained.parties]
    if not params or any(p is None or getattr(q, "share", None) is not None
                         for p, q in zip(params, trained.parties)):
        return
    weights = np.vstack([np.ravel(p)[:len(data.columns)] for p in params])
    assessment = release.check_model(label_party, list(data.columns), data.features,
                                     raw_release(weights, trained.scaler), what=_RELEASED)
    if not release.allowed and release.epsilon is None and not assessment.passes():
        try:
            refuse(release.party, label_party, release.named(_RELEASED), assessment, release.how)
        except ConfigurationError as exc:
            warnings.warn(f"{exc} (checked on its training rows; prediction will refuse)", ReleaseWarning,
                          stacklevel=2)


@dataclass(frozen=True)
class ShareColumns:
    """Linear's column-count exchange before any model (``Hooks.columns``' default).

    The label-leak warning at the label party, then every data party's column count
    (:func:`share_columns`, message ``columns``) and the checks on all of them: the validation split
    (unless a separate validation set is given), every party's batch size and the
    accumulated-equations rule.

    Attributes
    ----------
    peer_columns : mapping of str to int, optional
        The label party's: the feature parties' column counts, as they told it (``vfl party``: in
        their hellos); a feature party leaves it out (the label party tells it every count).
    """

    peer_columns: Mapping[str, int] | None = None

    def __call__(self, ep: Endpoint, n_rows: int, n_columns: int, settings, roster: Roster,
                 separate_validation: bool) -> None:
        if ep.role == roster.label:     # a warning about the settings and the row count: before any refusal of them
            warn_mini_batch_labels(settings, n_rows, stacklevel=5)
        counts = share_columns(ep, ep.role, n_columns, self.peer_columns, roster)
        if not separate_validation:
            check_validation_split(n_rows, settings, {name: counts[name] + (name == roster.label)
                                                      for name in roster.data_parties})
        check_gradients(n_rows, counts, settings, roster)


def _party(role: str, features: np.ndarray, columns, settings, n_models: int, target=None, weights=None):
    """A data party to train one model: the label party (with ``target``) if ``target`` is given."""
    if target is None:
        return LinearFeatureParty(features, role=role, columns=columns)
    party = LinearLabelParty(features, target, fit_intercept=settings.fit_intercept, role=role, columns=columns)
    party.dp_models = n_models          # DP noise is calibrated to every model's releases
    if weights is not None:             # the weights stay with the label party
        party.set_weights(weights)
    return party


def train_coordinator(ep: Endpoint, coordinator: Coordinator, settings: TrainingSettings, roster: Roster,
                      hooks: Hooks = NO_HOOKS) -> Trained:
    """The coordinator's training run: one key pair (``coordinator``'s) for every model of the run.

    Of its ``hooks``: ``on_model`` as for :func:`train_label`; ``on_batch_loss(epoch, batch, loss)``
    after every batch loss it decrypts.  The result holds each model's ``loss_curve``, ``n_iter``,
    ``converged`` and ``best_epoch``, and with ``reveal = "never"`` its shares.
    """
    n_models = agree_on_models(ep, ep.role, roster, None)
    trained = Trained(n_models)
    batch_loss = {"on_batch_loss": hooks.on_batch_loss} if hooks.on_batch_loss else {}
    for index in range(n_models):
        checkpoints, on_step = hooks.on_model(index, n_models, None) if hooks.on_model else (None, None)
        ep.model = index if n_models > 1 else None
        trained.results.append(protocol.train_coordinator(ep, coordinator, settings, checkpoints or None, on_step,
                                                          roster=roster, **batch_loss) or {})
        if kept_shared(settings):
            trained.shares.append(coordinator.shares.state())
    ep.model = None
    return trained


def fit_scaler(settings, kept: Standardizer | None, data, role: str) -> Standardizer | None:
    """This party's own standardization (``standardize``), fitted on its aligned training rows.

    A warm start continues weights trained on the previous scaling, so it keeps that scaling (``kept``).
    """
    if not settings.standardize:
        return None
    return kept or Standardizer.fit(data.features, role, data.columns)


def scaled(features, scaler: Standardizer | None) -> np.ndarray:
    """A party's rows as its model sees them: scaled by its own scaler, if it has one."""
    return np.asarray(features, dtype=np.float64) if scaler is None else scaler.transform(features)


def _warm_starts(starts, role: str, n_models: int, classes) -> list:
    """Each model's start (``starts(n_models, classes)``), or none without a warm start."""
    return [None] * n_models if starts is None else starts(n_models, classes)


def check_warm_models(role: str, previous: int, previous_classes, n_models: int, classes) -> None:
    """A warm start continues as many models as this run trains (and, where known, the same classes)."""
    if previous != n_models or (classes is not None and previous_classes is not None
                                and _plain(previous_classes) != _plain(classes)):
        raise DataError(f"party {role}: warm_start continues {previous} model(s)"
                        f"{' (classes ' + str(_plain(previous_classes)) + ')' if _named(previous_classes) else ''}; "
                        f"this run trains {n_models}"
                        f"{' (classes ' + str(_plain(classes)) + ')' if classes is not None else ''}; "
                        "train without warm_start")


def _named(classes) -> bool:
    """Whether a previous model names its classes (a linear model's shard holds none)."""
    return classes is not None and len(classes) > 0


def _plain(values) -> list:
    """Classes as plain Python values (as a shard stores them, and as messages print them)."""
    return np.asarray(values).tolist()


def share_columns(ep: Endpoint, role: str, n_columns: int, peer_columns: Mapping[str, int] | None,
                  roster: Roster) -> dict[str, int]:
    """Every data party's column count, in the roster's order: the label party tells the feature parties.

    The label party knows each feature party's count (``peer_columns``: ``vfl party``
    reads them from the hellos) and sends every feature party the whole list (message
    ``columns``: the names joined by commas, and the counts), since feature parties
    never talk to each other.  Each data party can then check the batch sizes and the
    accumulated-equations rule for every party (:func:`check_gradients`).

    Raises
    ------
    ProtocolError
        A feature party without a column count, or a ``columns`` message that does not list
        every data party once with a positive count, or this party's count wrongly.
    """
    label = roster.label
    if role == label:
        counts = {}
        for peer in roster.features:
            n = (peer_columns or {}).get(peer)
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ProtocolError(f"party {role}: the hello from {peer} has no column count")
            counts[peer] = n
        counts[role] = n_columns
        for peer in roster.features:
            ep.send(peer, "columns", "public", parties=",".join(counts),
                    counts=np.array(list(counts.values()), dtype=np.int64))
        return counts
    message = ep.recv(label, "columns")
    names, values = message.fields.get("parties"), message.fields.get("counts")
    problem = None
    if not isinstance(names, str) or names.split(",") != list(roster.data_parties):
        problem = f"it lists the parties {quote(names)}, not {','.join(roster.data_parties)}"
    elif (not isinstance(values, np.ndarray) or values.shape != (len(roster.data_parties),)
          or values.dtype.kind not in "iu" or not (values >= 1).all()):
        problem = "it does not give one positive column count per data party"
    elif int(values[roster.data_parties.index(role)]) != n_columns:
        problem = f"it says {role} has {int(values[roster.data_parties.index(role)])} columns, not {n_columns}"
    if problem:
        raise ProtocolError(f"{role}: waiting for 'columns' from {label}: {label} sent a malformed message: {problem}")
    return {name: int(v) for name, v in zip(roster.data_parties, values)}


def check_gradients(n_rows: int, columns: Mapping[str, int], settings, roster: Roster) -> None:
    """Every data party's batch size, then the accumulated-equations rule, for every data party.

    Every data party runs them on the same column counts, so each refuses with the same
    message.  Not with the shared protocol (no party learns a gradient); the equations
    rule not with DP either (the gradients are not exact).
    """
    if settings.shared:
        return
    for name, n in columns.items():
        check_batch_size(name, n_rows, settings.batch_size, n + (name == roster.label and settings.fit_intercept))
    check_equations(n_rows, columns, settings, roster)


def check_equations(n_rows: int, columns: Mapping[str, int], settings, roster: Roster) -> None:
    """The accumulated-equations rule (:func:`~vfl.protocols.check_gradient_equations`) for every data party.

    Every data party runs it on the same column counts, so each refuses with the same message.
    Not with DP (the gradients are not exact) nor the shared protocol (no party learns one).
    """
    if settings.dp or settings.shared:
        return
    check_gradient_equations(n_rows, settings.batch_size, settings.max_iter, columns, roster.label,
                             settings.fit_intercept)


def agree_on_models(ep: Endpoint, role: str, roster: Roster, count: int | None) -> int:
    """How many models the run trains or scores: the label party says (message ``models``), the others check.

    One, or one per class for logistic regression with three classes or more
    (one-vs-rest).  The count is public: every party sees the protocol run that
    many times.  A party that knows its own count (``count``: its model shard's)
    checks the label party's against it.

    Raises
    ------
    ProtocolError
        The label party sent no whole number from 1 to :data:`MAX_MODELS`.
    DataError
        This party's count is not the label party's.
    """
    if role == roster.label:
        for peer in roster.peers(role):
            ep.send(peer, "models", "public", count=count)
        return count
    value = ep.recv(roster.label, "models").fields.get("count")
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_MODELS:
        raise ProtocolError(f"{role}: waiting for 'models' from {roster.label}: {roster.label} sent a malformed "
                            f"message: the model count must be a whole number from 1 to {MAX_MODELS}")
    if count is not None and value != count:
        raise DataError(f"party {role}: its model shard holds {count} model(s) (one per class), but party "
                        f"{roster.label}'s holds {value}; use the shards of one training run")
    return value


# --------------------------------------------------------------------------- prediction

def predict_feature(ep: Endpoint, features: np.ndarray, columns, models: list, settings, roster: Roster,
                    hooks: Hooks = NO_HOOKS, *, scaler: Standardizer | None = None, mode: str = "private",
                    shared: bool = False, ids=None) -> int:
    """A feature party's part of prediction: its rows, scaled by its training ``scaler``, scored by each model.

    ``models`` holds this party's weights per model (or, ``shared``, its share of them).
    Of its ``hooks``: the ``engine``, and its ``release`` policy: before any score leaves the party, it checks what the label party
    could rebuild from them with every earlier release to it
    (:meth:`vfl.protocols.release.ReleasePolicy.release`; with DP, the noisy scores are
    what is sent; ``ids`` name the rows the noise is drawn for).  Returns the number of
    rows scored.
    """
    release, engine = hooks.release, hooks.engine
    n_models = agree_on_models(ep, ep.role, roster, len(models))
    x = scaled(features, scaler)
    sent = [None] * n_models
    if release is not None:
        if shared:
            if release.epsilon is not None:
                raise ConfigurationError(f"party {ep.role}: release_epsilon needs the party's own weights to add "
                                         "noise to its partial scores; a model that stays shared keeps them hidden")
            release.release(roster.label, list(columns), features, generic_release(len(columns), n_models),
                            _RELEASED + " (weights kept shared: checked on generic directions)", ids=ids)
        else:
            weights = np.vstack([np.ravel(m)[:len(columns)] for m in models])
            exact = x @ weights.T
            values = release.release(roster.label, list(columns), features, raw_release(weights, scaler),
                                     _RELEASED, ids=ids, values=exact)
            sent = [values[:, index] for index in range(n_models)]
    for index in range(n_models):
        ep.model = index if n_models > 1 else None
        score_rows(ep, settings, roster, x, columns, models[index], None, None, mode,
                   shared=shared, engine=engine, scores=sent[index])
    ep.model = None
    return len(x)


_RELEASED = "its partial scores at prediction"


def raw_release(weights, scaler: Standardizer | None) -> dict:
    """The release function of partial scores ``((x - mean) / scale) w`` in the party's own units."""
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    if scaler is None:
        return linear_release(w)
    scale = np.asarray(scaler.scale, dtype=np.float64)
    raw = np.where(np.isfinite(scale), w / scale, 0.0)          # a dropped constant column: infinite scale, weight 0
    return linear_release(raw, -(raw @ np.nan_to_num(np.asarray(scaler.mean, dtype=np.float64))))


def generic_release(n_columns: int, n_models: int) -> dict:
    """Fixed generic directions standing for weights the party does not know (a model that stays shared)."""
    return linear_release(np.random.default_rng(7321).standard_normal((n_models, n_columns)))


def predict_label(ep: Endpoint, features: np.ndarray, columns, models: list, fit_intercept: bool, settings,
                  roster: Roster, hooks: Hooks = NO_HOOKS, *, scaler: Standardizer | None = None,
                  mode: str = "private", shared: bool = False) -> np.ndarray:
    """The label party's part of prediction: the scores of its rows, shape (n,), or (n, models) for one-vs-rest.

    ``models`` holds its weights per model (with the intercept if ``fit_intercept``), or, ``shared``, its
    shares; its rows are scaled by its training ``scaler``; of its ``hooks`` it reads the ``engine``.
    """
    features = scaled(features, scaler)
    n_models = agree_on_models(ep, ep.role, roster, len(models))
    columns_out = []
    for index in range(n_models):
        ep.model = index if n_models > 1 else None
        columns_out.append(score_rows(ep, settings, roster, features, columns, models[index], fit_intercept, None,
                                      mode, shared=shared, engine=hooks.engine))
    ep.model = None
    return columns_out[0] if n_models == 1 else np.column_stack(columns_out)


def predict_coordinator(ep: Endpoint, coordinator: Coordinator, settings, roster: Roster, hooks: Hooks = NO_HOOKS, *,
                        mode: str = "private", shares: list | None = None) -> tuple[int, int]:
    """The coordinator's part of prediction, once per model; ``shares``: its own per model (``reveal="never"``).

    It reads none of its ``hooks`` (it encrypts nothing and releases nothing of its own).

    Returns the number of models (as the label party said) and of rows scored.
    """
    n_models = agree_on_models(ep, ep.role, roster, None)
    rows = 0
    for index in range(n_models):
        ep.model = index if n_models > 1 else None
        rows = score_rows(ep, settings, roster, None, None, shares[index] if shares else None, None, coordinator,
                          mode, shared=shares is not None)
    ep.model = None
    return n_models, rows


def score_rows(ep: Endpoint, settings, roster: Roster, features, columns, params, fit_intercept, coordinator,
               mode: str = "private", shared: bool = False, engine=None, scores=None):
    """One private prediction of ``features`` with the weights ``params``: the label party gets the scores.

    The coordinator passes ``coordinator`` (and no features); the others their own
    rows and weights.  A model that stays shared (``shared``) passes its share as
    ``params`` (a data party: its share, a list of integers or ``{"values": [...]}``;
    the coordinator: its share of every party's, by name) and runs the shared scoring
    round (:func:`vfl.protocols.linear.shared.predict_feature`...).  Returns the scores at
    the label party, the number of rows scored elsewhere.
    """
    role = ep.role
    kind = roster.role_of(role)
    if shared:
        return _score_shared(ep, settings, roster, kind, features, columns, fit_intercept, coordinator, params,
                             engine)
    packed = {"packing": settings.packed_prediction, "score_bound": settings.score_bound}
    if kind == "coordinator":
        return protocol.predict_coordinator(ep, coordinator, mode, roster=roster, **packed)
    if kind == "feature":
        party = LinearFeatureParty(features, role=role, columns=columns)
        party.load_state({"params": np.asarray(params, dtype=np.float64)})
        protocol.predict_feature(ep, party, features, mode, settings.frac_bits, engine, roster=roster, scores=scores,
                                 **packed)
        return len(features)
    party = LinearLabelParty(features, np.zeros(len(features)), fit_intercept=fit_intercept, role=role, columns=columns)
    party.load_state({"params": np.asarray(params, dtype=np.float64)})
    return protocol.predict_label(ep, party, features, mode, settings.frac_bits, engine, roster=roster, **packed)


def _score_shared(ep: Endpoint, settings, roster: Roster, kind: str, features, columns, fit_intercept, coordinator,
                  share, engine=None):
    """:func:`score_rows` for a model that stays shared: every party scores with its share."""
    role = ep.role
    if kind == "coordinator":
        coordinator.shares = CoordinatorShares(None)
        coordinator.shares.load_state(share)
        return shared_protocol.predict_coordinator(ep, coordinator, roster)
    values = [int(v) for v in (share["values"] if isinstance(share, dict) else share)]
    if kind == "feature":
        party = LinearFeatureParty(features, role=role, columns=columns)
    else:
        party = LinearLabelParty(features, np.zeros(len(features)), fit_intercept=fit_intercept, role=role,
                                 columns=columns)
    if len(values) != party.params.size:
        raise DataError(f"party {role}: its share holds {len(values)} values for {party.params.size} parameters")
    party.share = WeightShare.from_state({"values": values})
    if kind == "feature":
        shared_protocol.predict_feature(ep, party, features, settings.frac_bits, engine, roster=roster)
        return len(features)
    return shared_protocol.predict_label(ep, party, features, settings.frac_bits, engine, roster=roster)



# --------------------------------------------------------------------------- explanation

#: What a feature party's reason codes are, for its release check's messages.
REASONS = "the column it names as each row's reason (its reason codes)"


@dataclass
class Explaining:
    """One party's model for an explanation: its weights (one model, no intercept), its scaler, its training mean
    (raw units), and for its reasons the group (reported column) of each model column and the codes it may name
    (``{group: code}``; a feature party's consent, ``reason_columns``)."""

    weights: np.ndarray
    scaler: Standardizer | None
    mean: np.ndarray
    groups: list
    codes: dict = field(default_factory=dict)

    def reference(self) -> np.ndarray:
        """The training mean as the model sees it (0 for standardized columns)."""
        mean = self.scaler.mean if self.scaler is not None else self.mean
        return scaled(np.asarray(mean, dtype=np.float64)[None, :], self.scaler)[0]


def explain_feature(ep: Endpoint, features: np.ndarray, columns, model: Explaining, roster: Roster, *,
                    release: ReleasePolicy | None = None, ids=None) -> int:
    """A feature party's part of an explanation: per row its total contribution (its partial score less its
    score at the training mean) and that constant; with consent, per row the code it names as its reason.

    The totals are its partial scores less a constant: the same release as prediction's, checked by ``release``
    (and noised alike under DP).  Its codes are a release of their own, checked before they leave; under DP no
    code is sent (it appears as information from the party).  Returns what it sent, for its own record:
    ``{"rows": n, "named": {code: rows}}`` (how often it named each consented column).
    """

    x = scaled(features, model.scaler)
    sign = explain_protocol.asked(ep, roster, len(x))
    w = np.ravel(model.weights)[:len(columns)]
    reference = model.reference()
    constant = float(reference @ w)
    exact = x @ w
    sent = exact
    if release is not None:
        sent = release.release(roster.label, list(columns), features, raw_release(w, model.scaler), _RELEASED,
                               ids=ids, values=exact)[:, 0]
    codes = names = None
    if sign and model.codes and (release is None or release.epsilon is None):
        codes, names, onehot, spec = reason_codes(x, model, sign)
        if release is not None:
            release.release(roster.label, list(columns), features, spec, REASONS, values=onehot)
    explain_protocol.send_contributions(ep, roster, sent - constant, constant, codes, names)
    named = {} if codes is None else {name: int(np.sum(codes == j)) for j, name in enumerate(names)}
    return {"rows": len(x), "named": named}


def reason_codes(x: np.ndarray, model: Explaining, sign: float) -> tuple[np.ndarray, list, np.ndarray, dict]:
    """A consenting feature party's reasons for its rows ``x`` (scaled as its model sees them), the adverse side
    ``sign``: ``(codes, names, onehot, spec)`` — per row the index among ``names`` (the codes it may name) of its
    column with the largest contribution toward the adverse side (-1: that column is not named, or nothing pushes
    that way), and the release they are: the indicator per row and named column (``onehot``) and its function
    (``spec``, :func:`~vfl.protocols.release.reason_release`, in the party's own units)."""
    w = np.ravel(model.weights)[:x.shape[1]]
    reference = model.reference()
    groups, contributions = maths.grouped(maths.additive_contributions(x, w, reference), model.groups)
    named = [j for j, g in enumerate(groups) if g in model.codes]
    names = [str(model.codes[groups[j]]) for j in named]
    values = sign * contributions
    top = np.argmax(values, axis=1)
    top = np.where(values[np.arange(len(x)), top] > 0, top, -1)
    onehot = (top[:, None] == np.asarray(named)[None, :]).astype(np.float64)
    parts = []
    for g in groups:
        masked = np.where([c == g for c in model.groups], w, 0.0)
        spec = raw_release(masked, model.scaler)
        spec["offset"] = [spec["offset"][0] - float(reference @ masked)]
        parts.append(spec)
    codes = np.where(onehot.any(axis=1), np.argmax(onehot, axis=1), -1)
    return codes, names, onehot, reason_release(parts, named, sign)


def explain_label(ep: Endpoint, features: np.ndarray, model: Explaining, intercept: float, roster: Roster, *,
                  sign: float = 1.0) -> dict:
    """The label party's part of an explanation: its own columns' contributions (grouped), every feature party's
    totals, constants and codes, and the base value (the score at every party's training mean)."""

    x = scaled(features, model.scaler)
    explain_protocol.ask(ep, roster, len(x), sign)
    reference = model.reference()
    w = np.ravel(model.weights)[:x.shape[1]]
    names, own = maths.grouped(maths.additive_contributions(x, w, reference), model.groups)
    parts = explain_protocol.receive_contributions(ep, roster, len(x))
    base = float(intercept) + float(reference @ w) + sum(p["constant"] for p in parts.values())
    return {"columns": names, "own": own, "parties": parts, "base": base}


def explanation_programs(features: Mapping[str, np.ndarray], columns: Mapping[str, list],
                         models: Mapping[str, Explaining], intercept: float, roster: Roster, *, sign: float,
                         releases: Mapping[str, ReleasePolicy] | None = None, ids=None) -> dict:
    """Every role's explanation run as ``{name: program(endpoint)}`` (no coordinator: nothing is encrypted)."""
    roster = roster.without_coordinator()
    releases = releases or {}
    programs = {k: (lambda ep, k=k: explain_feature(ep, features[k], columns[k], models[k], roster,
                                                    release=releases.get(k), ids=ids))
                for k in roster.features}
    programs[roster.label] = lambda ep: explain_label(ep, features[roster.label], models[roster.label], intercept,
                                                      roster, sign=sign)
    return programs
