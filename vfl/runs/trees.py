"""Gradient-boosted trees (SecureBoost): one run per role, for the estimators and ``vfl party`` alike.

:class:`vfl.VerticalGradientBoostingClassifier` / ``Regressor`` run every role in
threads (:func:`vfl.runs.threads.run_in_threads`); ``vfl party`` / ``vfl predict``
with ``model = "gradient_boosting"`` (:mod:`vfl.federation.boosting`) run one
role over the endpoint of its TLS session.  Both call the functions here, so a
party is built, checked and trained the same way, and bad data is refused with
the same error, on both paths.

``data`` is any object with ``columns`` (list of str), ``features`` (rows ×
columns, aligned, NaN a missing value) and, at the label party, ``labels``
(:class:`vfl.deploy.data.PartyData` has them; the estimators build a
:class:`vfl.runs.data.RoleData` from their :class:`vfl.VerticalDataset`).  Hooks are plain
callables: ``checkpoints`` (a completed iteration -> the party's saved state),
``on_iteration(iteration, state)`` after every completed iteration (progress bars,
checkpoint saving), the crypto ``engine``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from vfl.errors import DataError
from vfl.parties.trees.feature_party import TreeFeatureParty
from vfl.parties.trees.label_party import TreeLabelParty
from vfl.protocols import Roster
from vfl.protocols import trees as protocol
from vfl.protocols.trees import BoostingSettings
from vfl.transport import Endpoint


@dataclass
class Boosted:
    """What a party's training run ends with.

    Attributes
    ----------
    party : TreeFeatureParty or TreeLabelParty
        The trained party: its bins and trees (the label party: also the leaf values and the loss).
    n_iter : int or None
        Boosting iterations run (the label party; None at a feature party).
    validation_scores : list of float
        The validation score after each iteration, when early stopping held rows out (the label party).
    seed : int or None
        The seed of the validation split (the label party).
    """

    party: TreeFeatureParty | TreeLabelParty
    n_iter: int | None = None
    validation_scores: list = field(default_factory=list)
    seed: int | None = None


def min_rows(settings: BoostingSettings) -> int:
    """The fewest aligned rows a boosting run takes: a split leaves ``min_samples_leaf`` rows on each side."""
    return 2 * settings.min_samples_leaf


def check_rows(role: str, n_rows: int, settings: BoostingSettings) -> None:
    """Refuse a table too small for any split (every tree would be a single leaf), naming the party.

    Raises
    ------
    DataError
        Fewer than :func:`min_rows` rows.
    """
    need = min_rows(settings)
    if n_rows < need:
        raise DataError(f"party {role}: {n_rows} rows, fewer than the {need} a split needs (min_samples_leaf="
                        f"{settings.min_samples_leaf} on each side): every tree would be a single leaf; bring more "
                        "rows or lower min_samples_leaf")


def feature_party(data, role: str, settings: BoostingSettings) -> TreeFeatureParty:
    """A feature party built from its data: its columns binned with ``settings.max_bins``.

    The row count is the label party's to check (:func:`label_party`): the rows are aligned, and one
    party refusing gives the same error on both paths (its peers stop on its abort).
    """
    return TreeFeatureParty(np.asarray(data.features, dtype=np.float64), role, data.columns,
                            max_bins=settings.max_bins)


def label_party(data, role: str, settings: BoostingSettings) -> TreeLabelParty:
    """The label party built from its data and labels: the rows checked (:func:`check_rows`) first.

    The labels are checked when its program starts (one class only, targets that are not numbers:
    :meth:`~vfl.parties.trees.label_party.TreeLabelParty.start`).
    """
    features = np.asarray(data.features, dtype=np.float64)
    if data.labels is None:
        raise DataError(f"party {role}: the label party has no labels")
    check_rows(role, len(features), settings)
    return TreeLabelParty(features, data.labels, role, data.columns, max_bins=settings.max_bins)


def train_feature(ep: Endpoint, data, settings: BoostingSettings, roster: Roster, *, role: str,
                  checkpoints: Mapping[int, dict] | None = None, on_iteration=None, engine=None) -> Boosted:
    """A feature party's training run: build the party from ``data``, run its program, return it trained."""
    party = feature_party(data, role, settings)
    protocol.train_feature(ep, party, settings, roster.without_coordinator(), checkpoints or None, on_iteration,
                           engine)
    return Boosted(party)


def train_label(ep: Endpoint, data, settings: BoostingSettings, roster: Roster, *, role: str,
                checkpoints: Mapping[int, dict] | None = None, on_iteration=None, on_party=None,
                engine=None) -> Boosted:
    """The label party's training run: build the party from ``data``, run its program (it holds the key).

    ``on_party(party)`` is called with the party once it is built (a progress bar reads its training loss).
    """
    party = label_party(data, role, settings)
    if on_party:
        on_party(party)
    result = protocol.train_label(ep, party, settings, roster.without_coordinator(), checkpoints or None,
                                  on_iteration, engine)
    return Boosted(party, result["n_iter"], list(result["validation_scores"]), result["seed"])


def training_loss(label) -> float:
    """The label party's loss on its training rows (what progress shows after each iteration)."""
    rows = label.train_rows
    return float(label.loss.loss(label.raw[rows], label.y[rows]))


def predict_feature(ep: Endpoint, data, party: TreeFeatureParty, roster: Roster) -> int:
    """A feature party's part of private prediction: its rows binned with its training thresholds.

    Returns how many rows it scored.
    """
    return protocol.predict_feature(ep, party, party.bin_new(data.features), roster.without_coordinator())


def predict_label(ep: Endpoint, data, party: TreeLabelParty, roster: Roster) -> np.ndarray:
    """The label party's part of private prediction: the raw scores (rows, trees per iteration) of its rows."""
    return protocol.predict_label(ep, party, party.bin_new(data.features), roster.without_coordinator())


def training_programs(data: Mapping[str, object], settings: BoostingSettings, roster: Roster, *, engine=None,
                      on_iteration=None, on_party=None) -> dict:
    """Every role's training run as ``{name: program(endpoint)}``, for :func:`vfl.runs.threads.run_in_threads`.

    ``data`` holds every data party's data by name; ``on_iteration`` goes to the label party.
    """
    roster = roster.without_coordinator()
    programs = {k: (lambda ep, k=k: train_feature(ep, data[k], settings, roster, role=k, engine=engine))
                for k in roster.features}
    programs[roster.label] = lambda ep: train_label(ep, data[roster.label], settings, roster, role=roster.label,
                                                    on_iteration=on_iteration, on_party=on_party, engine=engine)
    return programs


def prediction_programs(data: Mapping[str, object], parties: Mapping[str, object], roster: Roster) -> dict:
    """Every role's prediction run as ``{name: program(endpoint)}`` (``parties``: the trained ones, by name)."""
    roster = roster.without_coordinator()
    programs = {k: (lambda ep, k=k: predict_feature(ep, data[k], parties[k], roster)) for k in roster.features}
    programs[roster.label] = lambda ep: predict_label(ep, data[roster.label], parties[roster.label], roster)
    return programs
