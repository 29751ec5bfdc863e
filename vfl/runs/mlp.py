"""Split networks (vertical neural networks): one run per role, for the estimators and ``vfl party`` alike.

:class:`vfl.VerticalMLPClassifier` / ``Regressor`` run every role in threads
(:func:`vfl.runs.threads.run_in_threads`); ``vfl party`` / ``vfl predict`` with
``model = "mlp"`` (:mod:`vfl.federation.mlp`) run one role over the endpoint of
its TLS session.  Each function here builds its party
from its data (any object with ``columns``, ``features`` and, at the label
party, ``labels``: :class:`vfl.runs.data.RoleData`), makes every check that party
makes, and runs its protocol program (:mod:`vfl.protocols.mlp`).  ``starts`` (by
party name) are given starting weights, for the tests that compare the federated
network with the pooled one; by default every party draws its own secret start.
Of the run's :class:`~vfl.runs.hooks.Hooks` it reads ``start``, ``checkpoints`` (its saved
states by epoch, to resume), ``on_step(epoch, state)`` and a feature party's ``release``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from vfl.datachecks import check_complete
from vfl.errors import ConfigurationError, DataError, FixedPointOverflowError, NoBetterThanChanceWarning
from vfl.parties import explain as maths
from vfl.parties.mlp.feature_party import MLPFeatureParty
from vfl.parties.mlp.label_party import MLPLabelParty
from vfl.parties.mlp.losses import constant_loss
from vfl.parties.scaling import Standardizer
from vfl.protocols.release import ReleasePolicy, assess, check_model, evaluate, network_release, refuse, release_name
from vfl.protocols import Roster
from vfl.protocols import mlp as protocol
from vfl.protocols.mlp import MLPSettings
from vfl.protocols.mlp import inference as protocol_inference
from vfl.protocols.mlp.settings import warn_label_leak
from vfl.protocols.mlp.training import schedule, check_settings_for, validation_count
from vfl.runs.hooks import NO_HOOKS, Hooks
from vfl.transport import Endpoint

#: The fewest aligned rows a run takes: a training batch and a validation row besides.
MIN_ROWS = 4


@dataclass
class Trained:
    """What a party's training run ends with: the party and (the label party) the run's record."""

    party: MLPFeatureParty | MLPLabelParty
    record: dict = field(default_factory=dict)


def split_rows(n_rows: int, settings: MLPSettings, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The run's training rows and validation rows (early stopping), from its seed (the label party's record)."""
    return schedule(n_rows, settings, seed, validation_count(n_rows, settings))


def _checked(data, role: str) -> np.ndarray:
    features = np.asarray(data.features, dtype=np.float64)
    check_complete(f"party {role}", features, data.columns)
    return features


def _scaled(features: np.ndarray, role: str, columns, settings: MLPSettings, ids=None):
    """A party's rows scaled by its own standardization (``standardize``), and that scaler (or None); a value the
    network's fixed point cannot carry is refused, naming its cell (:func:`check_range`)."""
    if not settings.standardize or features.shape[1] == 0:
        return check_range(features, role, columns, ids), None
    scaler = Standardizer.fit(features, role, columns)
    return check_range(scaler.apply(features), role, columns, ids), scaler


#: The largest input a split network takes (after scaling): its parts must stay within the shared backward
#: pass's fixed point, ``2^VALUE_BITS``, with room for the weights.
INPUT_BOUND = 2.0 ** 32


def check_range(x: np.ndarray, role: str, columns, ids=None) -> np.ndarray:
    """``x``, or the fixed-point range error the other families give, naming the first cell beyond
    :data:`INPUT_BOUND` (its row, and its id where known)."""
    with np.errstate(invalid="ignore"):
        beyond = ~(np.abs(x) < INPUT_BOUND)
    if x.size and beyond.any():
        row, col = map(int, np.argwhere(beyond)[0])
        named = f" (id {ids[row]!r})" if ids is not None and len(ids) > row else ""
        raise FixedPointOverflowError(
            f"party {role}, column {columns[col]!r}: value {x[row, col]:.6g} at row {row}{named} is beyond the range "
            f"the split network's fixed point carries (|x| < 2^32 after scaling); standardize the column "
            f"(standardize=True) or clip its outliers")
    return x


def feature_party(data, role: str, settings: MLPSettings) -> MLPFeatureParty:
    """A feature party built from its data (every value finite; its bottom from ``settings``; its columns scaled
    by its own standardization, ``standardize``)."""
    features = _checked(data, role)
    if features.shape[1] == 0:
        raise DataError(f"party {role}: a feature party with no column has nothing to bring to the network")
    scaled, scaler = _scaled(features, role, data.columns, settings, getattr(data, "ids", None))
    party = MLPFeatureParty(role, scaled, data.columns, settings.bottom_of(role, features.shape[1]),
                            settings.activation)
    party.scaler = scaler
    return party


def label_party(data, role: str, settings: MLPSettings) -> MLPLabelParty:
    """The label party built from its data and labels (it may hold no column at all)."""
    if data.labels is None:
        raise DataError(f"party {role}: the label party has no labels")
    features = _checked(data, role)
    if len(features) < MIN_ROWS:
        raise DataError(f"party {role}: {len(features)} rows, fewer than the {MIN_ROWS} a network needs")
    if data.weights is not None:
        raise DataError(f"party {role}: the split network does not take row weights (sample_weight) yet")
    scaled, scaler = _scaled(features, role, data.columns, settings, getattr(data, "ids", None))
    party = MLPLabelParty(role, scaled, data.columns, data.labels, settings.task,
                          settings.bottom_of(role, features.shape[1], feature=False), settings.hidden_layer_sizes,
                          settings.activation, settings.dp_label_bound if settings.dp else None)
    party.scaler = scaler
    return party


def train_feature(ep: Endpoint, data, settings: MLPSettings, roster: Roster, hooks: Hooks = NO_HOOKS) -> Trained:
    """A feature party's training run (of its ``hooks``: ``start``, ``on_step``, ``checkpoints``, its saved
    states by epoch, to resume, and ``release``, its release policy, which checks every epoch's parts before
    they leave it, :class:`TrainingReleases`)."""
    check_settings_for(roster, settings)
    party = feature_party(data, ep.role, settings)
    guard = None
    if hooks.release is not None:
        guard = TrainingReleases(hooks.release, roster.label, data, settings.max_iter)
    record = protocol.train_feature(ep, party, settings, roster, hooks.start, hooks.on_step, hooks.checkpoints,
                                    guard)
    if guard is not None:
        guard.finish(party)
    return Trained(party, record)


def release_spec(party) -> dict:
    """A feature party's part ``h_k W_k`` as a function of its rows in their own units: its standardization, its
    bottom layers, its block (:func:`vfl.protocols.release.network_release`)."""
    layers = []
    scaler = getattr(party, "scaler", None)
    if scaler is not None:
        scale = np.asarray(scaler.scale, dtype=np.float64)
        layers.append((np.diag(1.0 / scale), -np.asarray(scaler.mean, dtype=np.float64) / scale, "identity"))
    layers += [(w, b, party.activation) for w, b in party.bottom]
    layers.append((party.block, np.zeros(np.asarray(party.block).shape[1]), "identity"))
    return network_release(layers)


class TrainingReleases:
    """A feature party's releases while a network trains: its part of the interactive layer for every batch.

    Before each epoch's first part leaves it, the party evaluates its current part on a
    fixed sample of its rows (at most :data:`TRAINING_SAMPLE`), adds it to what the label
    party has received of those rows over the epochs so far (kept compressed: its top
    :data:`HISTORY_DIRECTIONS` principal directions) and runs the release check
    (:func:`vfl.protocols.release.assess`) on the union; a part that would let the label party
    rebuild a column ends the run (unless the party opted in).  The parts sent within an
    epoch come from the weights of its batches' steps; the check sees the epoch's first.
    With ``release_epsilon`` every part carries the row's Gaussian noise for that epoch,
    calibrated so that all ``max_iter`` epochs together are (epsilon, delta)-DP per row.
    """

    def __init__(self, policy: ReleasePolicy, label_party: str, data, epochs: int):
        self.policy, self.label, self.epochs = policy, label_party, int(epochs)
        self.columns = list(data.columns)
        self.raw = np.asarray(data.features, dtype=np.float64)
        ids = getattr(data, "ids", None)
        self.ids = [str(i) for i in (range(len(self.raw)) if ids is None else ids)]
        order = np.random.default_rng(len(self.raw)).permutation(len(self.raw))     # fixed rows: not a secret
        self.sample = np.sort(order[:TRAINING_SAMPLE])
        self.history = None
        self.version = "training-" + release_name({"rows": len(self.raw)}, self.columns)[:12]
        self.dp = None

    def before_epoch(self, epoch: int, party) -> None:
        out = evaluate(release_spec(party), self.raw[self.sample])
        if self.policy.epsilon is not None:
            out = self._noised(epoch, self.sample, out, "part")
        stack = out if self.history is None else np.hstack([self.history, out])
        if stack.shape[1] > HISTORY_DIRECTIONS:
            centred = stack - stack.mean(axis=0)
            u, s, _ = np.linalg.svd(centred, full_matrices=False)
            stack = u[:, :HISTORY_DIRECTIONS] * s[:HISTORY_DIRECTIONS]
        self.history = stack
        if self.policy.allowed:
            return
        what = (f"its part of the interactive layer at training (epoch {epoch + 1}, with every epoch before)"
                + (f" (with noise, epsilon {self.policy.epsilon:g})" if self.policy.epsilon is not None else ""))
        refuse(self.policy.party, self.label, what, assess(self.raw[self.sample], stack, self.columns),
               self.policy.how)

    def _noised(self, epoch: int, rows, part, name: str) -> np.ndarray:
        noisy, self.dp = self.policy.noised(part, [self.ids[r] for r in rows], f"{self.version}-{name}-{epoch}",
                                            compositions=self.epochs)
        return noisy

    def sent(self, epoch: int, rows, part, name: str) -> np.ndarray:
        """The part to send for training rows ``rows`` (with the row's noise under DP)."""
        return part if self.policy.epsilon is None else self._noised(epoch, rows, part, name)

    def finish(self, party) -> None:
        """Record the training's releases in the ledger (the final network; its DP budget), and keep the check of
        its final part on the training rows for later predictions."""
        spec = release_spec(party)
        check_model(self.policy.ledger, self.label, self.columns, self.raw, spec, what=_PREDICTED)
        if self.dp is not None:
            dp = dict(self.dp, version=self.version)
            self.policy.ledger.record(self.label, self.version, self.columns, spec, "its parts at training", None, dp)


#: The training rows a feature party checks its parts on, and the directions of their history it keeps.
TRAINING_SAMPLE = 4000
HISTORY_DIRECTIONS = 64
_PREDICTED = "its part of the interactive layer at prediction"


def train_label(ep: Endpoint, data, settings: MLPSettings, roster: Roster, hooks: Hooks = NO_HOOKS) -> Trained:
    """The label party's training run: it keeps the loss curve, the validation scores and the stopping rule.

    Of its ``hooks``: ``start``, ``checkpoints``, and ``on_step(epoch, state)``, which gets the loss, the
    validation score and the state a checkpoint keeps.
    """
    check_settings_for(roster, settings)
    party = label_party(data, ep.role, settings)
    warn_label_leak(settings, len(party.y))
    trained = Trained(party, protocol.train_label(ep, party, settings, roster, hooks.start, hooks.on_step,
                                                  hooks.checkpoints))
    _warn_if_no_better(ep.role, party, trained.record)
    return trained


def _warn_if_no_better(role: str, party: MLPLabelParty, record: dict) -> None:
    """Warn when the fit ended no better than a constant output (the class shares, or the mean): a model that
    learned nothing, usually columns on very different scales (``standardize=False``) or too few epochs."""
    curve = record.get("loss_curve") or []
    if not curve:
        return
    constant = constant_loss(party.task, party.y)
    if curve[-1] >= constant - 1e-3 * max(abs(constant), 1e-12):
        warnings.warn(f"party {role}: the split network ended no better than a constant prediction (training loss "
                      f"{curve[-1]:.4g}; the class shares or the mean alone give {constant:.4g}): it learned nothing "
                      "from the columns — scale them (standardize=True, the default), train longer, or raise "
                      "learning_rate_init", NoBetterThanChanceWarning, stacklevel=2)


def train_coordinator(ep: Endpoint, settings: MLPSettings, roster: Roster, hooks: Hooks = NO_HOOKS) -> dict:
    """The coordinator's training run: it deals masks and Beaver triples (it reads none of its ``hooks``: it
    keeps no state to resume from)."""
    check_settings_for(roster, settings)
    return protocol.train_coordinator(ep, settings, roster)


def training_programs(data: Mapping[str, object], settings: MLPSettings, roster: Roster, *,
                      starts: Mapping[str, object] | None = None, on_step=None, on_steps=None,
                      checkpoints: Mapping[str, Mapping[int, dict]] | None = None,
                      releases: Mapping[str, ReleasePolicy] | None = None) -> dict:
    """Every role's training run as ``{name: program(endpoint)}``, for :func:`vfl.runs.threads.run_in_threads`.

    ``on_step`` goes to the label party; ``on_steps`` (by party name) to any data party, e.g. to save
    checkpoints; ``checkpoints`` (by party name) resume a run: together, each party's :class:`Hooks`.
    """
    starts, on_steps, checkpoints, releases = starts or {}, dict(on_steps or {}), checkpoints or {}, releases or {}
    if on_step is not None:
        on_steps[roster.label] = on_step
    programs = {k: (lambda ep, k=k: train_feature(ep, data[k], settings, roster, Hooks(
        start=starts.get(k), on_step=on_steps.get(k), checkpoints=checkpoints.get(k), release=releases.get(k))))
                for k in roster.features}
    label = roster.label
    programs[label] = lambda ep: train_label(ep, data[label], settings, roster, Hooks(
        start=starts.get(label), on_step=on_steps.get(label), checkpoints=checkpoints.get(label)))
    programs[roster.coordinator] = lambda ep: train_coordinator(ep, settings, roster)
    return programs


def predict_feature(ep: Endpoint, data, party: MLPFeatureParty, settings: MLPSettings, roster: Roster,
                    hooks: Hooks = NO_HOOKS) -> int:
    """A feature party's part of private prediction on its rows ``data``; returns how many rows it scored.

    Before its part leaves it, its release policy (``hooks.release``) checks what the label party could rebuild from it with
    every earlier release (DP noise added if chosen; ``data.ids`` name the rows the noise is drawn for).
    """
    release = hooks.release
    raw = _checked(data, party.role)
    part = None
    if release is not None:
        exact = party.part(party.check_columns(raw))
        part = release.release(roster.label, list(party.columns), raw, release_spec(party), _PREDICTED,
                               ids=getattr(data, "ids", None), values=exact)
    return protocol.predict_feature(ep, party, raw, settings, roster, part=part)


def predict_label(ep: Endpoint, data, party: MLPLabelParty, settings: MLPSettings, roster: Roster,
                  hooks: Hooks = NO_HOOKS) -> np.ndarray:
    """The label party's part of private prediction: the network's outputs on its rows ``data`` (it reads none of
    its ``hooks``)."""
    return protocol.predict_label(ep, party, _checked(data, party.role), settings, roster)


def predict_coordinator(ep: Endpoint, settings: MLPSettings, roster: Roster, hooks: Hooks = NO_HOOKS) -> int:
    """The coordinator's part of private prediction (the masks, with two feature parties or more; it reads none of
    its ``hooks``)."""
    return protocol.predict_coordinator(ep, settings, roster)


def prediction_programs(data: Mapping[str, object], parties: Mapping[str, object], settings: MLPSettings,
                        roster: Roster, releases: Mapping[str, ReleasePolicy] | None = None) -> dict:
    """Every role's prediction run (``parties``: the trained ones, by name; ``releases``: the feature parties'
    release policies); the label party's returns the outputs."""
    releases = releases or {}
    programs = {k: (lambda ep, k=k: predict_feature(ep, data[k], parties[k], settings, roster,
                                                    Hooks(release=releases.get(k))))
                for k in roster.features}
    programs[roster.label] = lambda ep: predict_label(ep, data[roster.label], parties[roster.label], settings, roster)
    programs[roster.coordinator] = lambda ep: predict_coordinator(ep, settings, roster)
    return programs


# --------------------------------------------------------------------------- explanation

def explain_feature(ep: Endpoint, data, party: MLPFeatureParty, settings: MLPSettings, roster: Roster,
                    release: ReleasePolicy | None = None) -> int:
    """A feature party's part of an explanation: its part of every row (the prediction's release, checked and
    noised alike) sent on its own, and its part at its training mean."""
    raw = _checked(data, party.role)
    sent = exact = party.part(party.check_columns(raw))
    if release is not None:
        sent = release.release(roster.label, list(party.columns), raw, release_spec(party), _PREDICTED,
                               ids=getattr(data, "ids", None), values=exact)
    constant = party.part(party.x.mean(axis=0, keepdims=True))
    protocol_inference.send_explained_part(ep, sent, constant, roster)
    return len(raw)


def explain_label(ep: Endpoint, data, party: MLPLabelParty, settings: MLPSettings, roster: Roster) -> dict:
    """The label party's party-level Shapley values: a coalition's value is the network's raw score with every
    party outside it (the label party included) fed its training mean as its bottom input.  Returns
    ``{"players", "shapley" (rows, players), "base" (rows,)}``."""
    players = maths.check_players([roster.label, *roster.features])
    if party.n_outputs != 1:
        raise ConfigurationError(f"party {party.role}: explanations take one output (regression or two classes); "
                                 f"this network has {party.n_outputs}")
    x = party.check_columns(_checked(data, party.role))
    parts = protocol_inference.receive_explained_parts(ep, roster, len(x), settings.units)
    mean = np.broadcast_to(party.x.mean(axis=0), x.shape)
    return party_values(party.margin, x, mean, [parts[k] for k in roster.features], players)


def party_values(margin, x: np.ndarray, mean: np.ndarray, parts: list, players: list) -> dict:
    """The parties' exact Shapley values of a network: ``margin(own rows, sum of the parts)`` is its raw score,
    ``x`` the label party's rows and ``mean`` its training mean (as ``margin`` takes them), ``parts`` per feature
    party ``(its part per row, its part at its training mean)``.  A coalition's value feeds every party outside it
    its training mean.  Returns ``{"players", "shapley" (rows, players), "base" (rows,)}``."""
    values = {}
    for coalition in maths.coalitions(len(players)):
        total = sum(part if i + 1 in coalition else constant[None, :]
                    for i, (part, constant) in enumerate(parts))
        values[coalition] = margin(x if 0 in coalition else mean, total)[:, 0]
    return {"players": players, "shapley": maths.party_shapley(values, len(players)), "base": values[()]}


def explanation_programs(data: Mapping[str, object], parties: Mapping[str, object], settings: MLPSettings,
                         roster: Roster, releases: Mapping[str, ReleasePolicy] | None = None) -> dict:
    """Every role's explanation run (the coordinator deals no mask: each part travels on its own)."""
    releases = releases or {}
    programs = {k: (lambda ep, k=k: explain_feature(ep, data[k], parties[k], settings, roster, releases.get(k)))
                for k in roster.features}
    programs[roster.label] = lambda ep: explain_label(ep, data[roster.label], parties[roster.label], settings, roster)
    programs[roster.coordinator] = lambda ep: 0
    return programs
