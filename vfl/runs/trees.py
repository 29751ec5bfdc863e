"""Gradient-boosted trees (SecureBoost): one run per role, for the estimators and ``vfl party`` alike.

:class:`vfl.VerticalGradientBoostingClassifier` / ``Regressor`` run every role in
threads (:func:`vfl.runs.threads.run_in_threads`); ``vfl party`` / ``vfl predict``
with ``model = "gradient_boosting"`` (:mod:`vfl.federation.trees`) run one
role over the endpoint of its TLS session.  Both call the functions here, so a
party is built, checked and trained the same way, and bad data is refused with
the same error, on both paths.

``data`` is any object with ``columns`` (list of str), ``features`` (rows ×
columns, aligned, NaN a missing value) and, at the label party, ``labels``
(:class:`vfl.deploy.data.PartyData` has them; the estimators build a
:class:`vfl.runs.data.RoleData` from their :class:`vfl.VerticalDataset`).  Of the
run's :class:`~vfl.runs.hooks.Hooks` it reads ``checkpoints`` (a completed iteration ->
the party's saved state), ``on_step(iteration, state)`` after every completed iteration
(progress bars, checkpoint saving), the crypto ``engine``, a feature party's ``release``
policy and the label party's ``on_party``.

At prediction the label party learns, per row, the side of every split a feature
party owns (its leaf masks are made of them): a release
(:mod:`vfl.protocols.release`).  A feature party with a release policy checks
it on its training rows after training (:func:`check_trained`: a
:class:`~vfl.protocols.release.ReleaseWarning` now when a prediction would be
refused) and before any prediction's masks leave it (:func:`predict_feature`),
with :func:`release_spec` (its splits in its raw units, exactly as it routes a
row) and the real sides; under DP the masks are made of randomized sides.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from vfl.errors import ConfigurationError, DataError
from vfl.parties.trees.feature_party import TreeFeatureParty
from vfl.parties.trees.label_party import TreeLabelParty
from vfl.protocols import Roster
from vfl.parties import explain as maths
from vfl.protocols import trees as protocol
from vfl.protocols.trees import inference
from vfl.protocols.release import ReleasePolicy, ReleaseWarning, check_model, refuse, split_release
from vfl.protocols.trees import TreeSettings
from vfl.runs.hooks import NO_HOOKS, Hooks
from vfl.transport import Endpoint


@dataclass
class Trained:
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


def min_rows(settings: TreeSettings) -> int:
    """The fewest aligned rows a boosting run takes: a split leaves ``min_samples_leaf`` rows on each side."""
    return 2 * settings.min_samples_leaf


def check_rows(role: str, n_rows: int, settings: TreeSettings) -> None:
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


def feature_party(data, role: str, settings: TreeSettings) -> TreeFeatureParty:
    """A feature party built from its data: its columns binned with ``settings.max_bins``.

    The row count is the label party's to check (:func:`label_party`): the rows are aligned, and one
    party refusing gives the same error on both paths (its peers stop on its abort).
    """
    return TreeFeatureParty(np.asarray(data.features, dtype=np.float64), role, data.columns,
                            max_bins=settings.max_bins)


def label_party(data, role: str, settings: TreeSettings) -> TreeLabelParty:
    """The label party built from its data and labels: the rows checked (:func:`check_rows`) first.

    The labels are checked when its program starts (one class only, targets that are not numbers:
    :meth:`~vfl.parties.trees.label_party.TreeLabelParty.start`).
    """
    features = np.asarray(data.features, dtype=np.float64)
    if data.labels is None:
        raise DataError(f"party {role}: the label party has no labels")
    check_rows(role, len(features), settings)
    return TreeLabelParty(features, data.labels, role, data.columns, max_bins=settings.max_bins)


def train_feature(ep: Endpoint, data, settings: TreeSettings, roster: Roster, hooks: Hooks = NO_HOOKS) -> Trained:
    """A feature party's training run: build the party from ``data``, run its program, return it trained.

    Of its ``hooks``: ``checkpoints``, ``on_step``, ``engine``, and ``release``, its release policy: the
    sides of its splits are then checked on its training rows (:func:`check_trained`).
    """
    party = feature_party(data, ep.role, settings)
    protocol.train_feature(ep, party, settings, roster.without_coordinator(), hooks.checkpoints or None,
                           hooks.on_step, hooks.engine)
    if hooks.release is not None:
        check_trained(hooks.release, roster.label, data, party)
    return Trained(party)


#: What a feature party's prediction releases, in words.
RELEASED = "the side of each of its splits per row (its leaf masks) at prediction"


def release_spec(party: TreeFeatureParty) -> dict:
    """The release function of a feature party's leaf masks: the side of each of its splits, in its raw units
    (:func:`vfl.protocols.release.split_release`; the order of
    :meth:`~vfl.parties.trees.feature_party.TreeFeatureParty.split_bits`)."""
    return split_release(party.raw_splits())


def check_trained(release: ReleasePolicy, label_party: str, data, party: TreeFeatureParty) -> None:
    """A feature party, after training: assess on its training rows what the sides of its splits would let the
    label party rebuild, keep the verdict in its ledger (a later prediction of too few rows to assess uses it), and
    warn now if a prediction would be refused (nothing more is released yet)."""
    if not party.own_splits():
        return
    assessment = check_model(release.ledger, label_party, list(party.columns), data.features, release_spec(party),
                             what=RELEASED)
    if not release.allowed and release.epsilon is None and not assessment.passes():
        try:
            refuse(release.party, label_party, RELEASED, assessment, release.how)
        except ConfigurationError as exc:
            warnings.warn(f"{exc} (checked on its training rows; prediction will refuse)", ReleaseWarning,
                          stacklevel=2)


def released_bits(release: ReleasePolicy | None, label_party: str, party: TreeFeatureParty, features,
                  codes: np.ndarray, ids=None, version: str | None = None, what: str = RELEASED) -> np.ndarray:
    """The sides of ``party``'s splits it may send for these rows: the exact ones checked by ``release`` (refused
    with a ConfigurationError where the check says no), randomized under its DP; without a policy, the exact ones."""
    exact = party.split_bits(codes)
    if release is None or exact.shape[1] == 0:
        return exact
    sent = release.release(label_party, list(party.columns), features, release_spec(party), what, ids=ids,
                           values=exact.astype(np.float64), bits=True, version=version)
    return np.asarray(sent) > 0.5


def train_label(ep: Endpoint, data, settings: TreeSettings, roster: Roster, hooks: Hooks = NO_HOOKS) -> Trained:
    """The label party's training run: build the party from ``data``, run its program (it holds the key).

    Of its ``hooks``: ``checkpoints``, ``on_step``, ``engine``, and ``on_party(party)``, called with the
    party once it is built (a progress bar reads its training loss).
    """
    party = label_party(data, ep.role, settings)
    if hooks.on_party:
        hooks.on_party(party)
    result = protocol.train_label(ep, party, settings, roster.without_coordinator(), hooks.checkpoints or None,
                                  hooks.on_step, hooks.engine)
    return Trained(party, result["n_iter"], list(result["validation_scores"]), result["seed"])


def training_loss(label) -> float:
    """The label party's loss on its training rows (what progress shows after each iteration)."""
    rows = label.train_rows
    return float(label.loss.loss(label.raw[rows], label.y[rows]))


def predict_feature(ep: Endpoint, data, party: TreeFeatureParty, roster: Roster, hooks: Hooks = NO_HOOKS) -> int:
    """A feature party's part of private prediction: its rows binned with its training thresholds.

    Before any mask leaves it, its release policy (``hooks.release``) checks what the label party could rebuild from the sides
    of its splits with every earlier release (:func:`released_bits`; ``data.ids`` name the rows the DP noise is
    drawn for); the masks are made of the sides it may send.  Returns how many rows it scored.
    """
    release = hooks.release
    codes = party.bin_new(data.features)
    sides = None
    if release is not None:
        sides = released_bits(release, roster.label, party, np.asarray(data.features, dtype=np.float64), codes,
                              ids=getattr(data, "ids", None))
    return protocol.predict_feature(ep, party, codes, roster.without_coordinator(), split_bits=sides)


def predict_label(ep: Endpoint, data, party: TreeLabelParty, roster: Roster, hooks: Hooks = NO_HOOKS) -> np.ndarray:
    """The label party's part of private prediction: the raw scores (rows, trees per iteration) of its rows.

    It reads none of its ``hooks`` (its masks are its own; it encrypts nothing at prediction)."""
    return protocol.predict_label(ep, party, party.bin_new(data.features), roster.without_coordinator())


def training_programs(data: Mapping[str, object], settings: TreeSettings, roster: Roster, *, engine=None,
                      on_step=None, on_party=None, releases: Mapping[str, ReleasePolicy] | None = None) -> dict:
    """Every role's training run as ``{name: program(endpoint)}``, for :func:`vfl.runs.threads.run_in_threads`.

    ``data`` holds every data party's data by name; ``on_step`` goes to the label party; ``releases``: the
    feature parties' release policies.
    """
    roster = roster.without_coordinator()
    releases = releases or {}
    programs = {k: (lambda ep, k=k: train_feature(ep, data[k], settings, roster,
                                                  Hooks(engine=engine, release=releases.get(k))))
                for k in roster.features}
    programs[roster.label] = lambda ep: train_label(ep, data[roster.label], settings, roster,
                                                    Hooks(on_step=on_step, on_party=on_party, engine=engine))
    return programs


def prediction_programs(data: Mapping[str, object], parties: Mapping[str, object], roster: Roster,
                        releases: Mapping[str, ReleasePolicy] | None = None) -> dict:
    """Every role's prediction run as ``{name: program(endpoint)}`` (``parties``: the trained ones, by name;
    ``releases``: the feature parties' release policies)."""
    roster = roster.without_coordinator()
    releases = releases or {}
    programs = {k: (lambda ep, k=k: predict_feature(ep, data[k], parties[k], roster,
                                                    Hooks(release=releases.get(k))))
                for k in roster.features}
    programs[roster.label] = lambda ep: predict_label(ep, data[roster.label], parties[roster.label], roster)
    return programs


# --------------------------------------------------------------------------- explanation

def explain_label(ep: Endpoint, data, party: TreeLabelParty, roster: Roster) -> dict:
    """The label party's explanation inside private prediction: every feature party sends its leaf masks exactly
    as it does to predict (the same release, checked the same way, :func:`predict_feature`); the label party adds
    its own masks and each tree's training cover (the training rows of each leaf, which it learnt growing the
    tree) and computes the parties' exact Shapley values (:func:`vfl.parties.explain.party_shapley`).

    The players are the label party then the feature parties (in roster order); a party outside a coalition is
    marginalised at each of its splits by the training share of rows going each way.  Returns ``{"players",
    "shapley" (rows, players), "base" (rows,)}``: the values sum, with the base, to the raw score.
    """
    return predict_and_explain_label(ep, data, party, roster)[1]


def predict_and_explain_label(ep: Endpoint, data, party: TreeLabelParty, roster: Roster) -> tuple:
    """One private prediction of the label party's rows, and their explanation from the same leaf masks: the raw
    scores (as :func:`predict_label` gives them) and the parties' Shapley values (:func:`explain_label`)."""
    roster = roster.without_coordinator()
    check_explainable(party, roster.features)
    codes = party.bin_new(data.features)
    owners, masks = inference.ask_masks(ep, party, len(codes), roster)
    return (inference.raw_scores(party, codes, owners, masks),
            party_values(party, codes, owners, masks, roster.features))


def check_explainable(party: TreeLabelParty, features) -> list:
    """The players of an explanation of ``party``'s trees (the label party, then ``features``); refused (naming
    what to do) for more than :data:`~vfl.parties.explain.MAX_PLAYERS` parties, a tree per class, or trees without
    their training cover."""
    players = maths.check_players([party.role, *features])
    if party.n_trees != 1:
        raise ConfigurationError(f"party {party.role}: explanations take one tree per iteration (regression or two "
                                 f"classes); this model has {party.n_trees} per iteration (one per class)")
    missing = [i for i, t in enumerate(party.trees) if t.get("counts") is None]
    if missing:
        raise DataError(f"party {party.role}: tree {missing[0]} holds no training cover (a model saved before "
                        "explanations); train it again to explain it")
    return players


def party_values(party: TreeLabelParty, codes: np.ndarray, owners: dict, masks: dict, features) -> dict:
    """The parties' exact Shapley values from what private prediction gives the label party: its own splits'
    ``codes`` and each feature party's leaf masks ``masks[k]`` (side by side over the trees ``owners[k]``, as
    :func:`vfl.protocols.trees.inference.raw_scores` takes them), with each tree's training cover.  Returns
    ``{"players", "shapley" (rows, players), "base" (rows,)}``, the label party first."""
    players = check_explainable(party, features)
    n_rows = len(codes)
    per_tree = inference.tree_masks(party, owners, masks, n_rows)
    player_of = {j: j + 1 for j in range(len(features))}             # a feature party's owner index -> player
    player_of[len(features)] = 0                                      # the label party's (the last data party)
    values = {c: np.full(n_rows, float(party.baseline[0])) for c in maths.coalitions(len(players))}
    for i, entry in enumerate(party.trees):
        tree = entry["tree"]
        owner = np.array([player_of.get(int(o), -1) for o in tree.owner])
        covers = maths.cover_products(tree.left, tree.right, owner, entry["counts"], len(players))
        tree_masks = [party.own_masks(i, codes), *(per_tree[i][k] for k in features)]
        for coalition, value in maths.tree_coalition_values(tree.value[tree.leaves], tree_masks, covers).items():
            values[coalition] += value
    return {"players": players, "shapley": maths.party_shapley(values, len(players)), "base": values[()]}


def explanation_programs(data: Mapping[str, object], parties: Mapping[str, object], roster: Roster,
                         releases: Mapping[str, ReleasePolicy] | None = None) -> dict:
    """Every role's explanation run: the feature parties' are their prediction runs (nothing else leaves them)."""
    programs = prediction_programs(data, parties, roster, releases)
    programs[roster.label] = lambda ep: explain_label(ep, data[roster.label], parties[roster.label], roster)
    return programs
