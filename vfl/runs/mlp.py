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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from vfl.datachecks import check_complete
from vfl.errors import DataError
from vfl.parties.mlp.feature_party import MLPFeatureParty
from vfl.parties.mlp.label_party import MLPLabelParty
from vfl.protocols import Roster
from vfl.protocols import mlp as protocol
from vfl.protocols.mlp import MLPSettings
from vfl.protocols.mlp.settings import warn_label_leak
from vfl.protocols.mlp.training import schedule, check_settings_for, validation_count
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


def feature_party(data, role: str, settings: MLPSettings) -> MLPFeatureParty:
    """A feature party built from its data (every value finite; its bottom from ``settings``)."""
    features = _checked(data, role)
    if features.shape[1] == 0:
        raise DataError(f"party {role}: a feature party with no column has nothing to bring to the network")
    return MLPFeatureParty(role, features, data.columns, settings.bottom_of(role), settings.activation)


def label_party(data, role: str, settings: MLPSettings) -> MLPLabelParty:
    """The label party built from its data and labels (it may hold no column at all)."""
    if data.labels is None:
        raise DataError(f"party {role}: the label party has no labels")
    features = _checked(data, role)
    if len(features) < MIN_ROWS:
        raise DataError(f"party {role}: {len(features)} rows, fewer than the {MIN_ROWS} a network needs")
    if data.weights is not None:
        raise DataError(f"party {role}: the split network does not take row weights (sample_weight) yet")
    return MLPLabelParty(role, features, data.columns, data.labels, settings.task, settings.bottom_of(role),
                         settings.hidden_layer_sizes, settings.activation,
                         settings.dp_label_bound if settings.dp else None)


def train_feature(ep: Endpoint, data, settings: MLPSettings, roster: Roster, *, role: str, start=None,
                  on_epoch=None, checkpoints: Mapping[int, dict] | None = None) -> Trained:
    """A feature party's training run (``checkpoints``: its saved states by epoch, to resume)."""
    check_settings_for(roster, settings)
    party = feature_party(data, role, settings)
    record = protocol.train_feature(ep, party, settings, roster, start, on_epoch, checkpoints)
    return Trained(party, record)


def train_label(ep: Endpoint, data, settings: MLPSettings, roster: Roster, *, role: str, start=None,
                on_epoch=None, checkpoints: Mapping[int, dict] | None = None) -> Trained:
    """The label party's training run: it keeps the loss curve, the validation scores and the stopping rule.

    ``on_epoch(epoch, state)`` gets the loss, the validation score and the state a checkpoint keeps.
    """
    check_settings_for(roster, settings)
    party = label_party(data, role, settings)
    warn_label_leak(settings, len(party.y))
    return Trained(party, protocol.train_label(ep, party, settings, roster, start, on_epoch, checkpoints))


def train_coordinator(ep: Endpoint, settings: MLPSettings, roster: Roster) -> dict:
    """The coordinator's training run: it deals masks and Beaver triples."""
    check_settings_for(roster, settings)
    return protocol.train_coordinator(ep, settings, roster)


def training_programs(data: Mapping[str, object], settings: MLPSettings, roster: Roster, *,
                      starts: Mapping[str, object] | None = None, on_epoch=None, hooks=None,
                      checkpoints: Mapping[str, Mapping[int, dict]] | None = None) -> dict:
    """Every role's training run as ``{name: program(endpoint)}``, for :func:`vfl.runs.threads.run_in_threads`.

    ``on_epoch`` goes to the label party; ``hooks`` (by party name) to any data party, e.g. to save
    checkpoints; ``checkpoints`` (by party name) resume a run.
    """
    starts, hooks, checkpoints = starts or {}, dict(hooks or {}), checkpoints or {}
    if on_epoch is not None:
        hooks[roster.label] = on_epoch
    programs = {k: (lambda ep, k=k: train_feature(ep, data[k], settings, roster, role=k, start=starts.get(k),
                                                  on_epoch=hooks.get(k), checkpoints=checkpoints.get(k)))
                for k in roster.features}
    programs[roster.label] = lambda ep: train_label(ep, data[roster.label], settings, roster, role=roster.label,
                                                    start=starts.get(roster.label), on_epoch=hooks.get(roster.label),
                                                    checkpoints=checkpoints.get(roster.label))
    programs[roster.coordinator] = lambda ep: train_coordinator(ep, settings, roster)
    return programs


def predict_feature(ep: Endpoint, data, party: MLPFeatureParty, settings: MLPSettings, roster: Roster) -> int:
    """A feature party's part of private prediction on its rows ``data``; returns how many rows it scored."""
    return protocol.predict_feature(ep, party, _checked(data, party.role), settings, roster)


def predict_label(ep: Endpoint, data, party: MLPLabelParty, settings: MLPSettings, roster: Roster) -> np.ndarray:
    """The label party's part of private prediction: the network's outputs on its rows ``data``."""
    return protocol.predict_label(ep, party, _checked(data, party.role), settings, roster)


def predict_coordinator(ep: Endpoint, settings: MLPSettings, roster: Roster) -> int:
    """The coordinator's part of private prediction (the masks, with two feature parties or more)."""
    return protocol.predict_coordinator(ep, settings, roster)


def prediction_programs(data: Mapping[str, object], parties: Mapping[str, object], settings: MLPSettings,
                        roster: Roster) -> dict:
    """Every role's prediction run (``parties``: the trained ones, by name); the label party's returns the outputs."""
    programs = {k: (lambda ep, k=k: predict_feature(ep, data[k], parties[k], settings, roster))
                for k in roster.features}
    programs[roster.label] = lambda ep: predict_label(ep, data[roster.label], parties[roster.label], settings, roster)
    programs[roster.coordinator] = lambda ep: predict_coordinator(ep, settings, roster)
    return programs
