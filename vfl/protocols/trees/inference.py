"""Private prediction with boosted trees: only the label party learns each row's leaves and scores.

::

    Step  Feature party k                                 Label party
    1     <- rows to score, and the trees holding k's splits
    2     per row and tree, the leaves its own splits
          allow (a bit per leaf) -> label                 intersects every party's masks: one leaf per row
                                                          and tree; adds the leaf values to the baseline

A feature party learns nothing about which leaf a row reaches.  The label party
learns, for every row scored, the side of every feature-party split of every
tree that the party's splits above it leave reachable (not only the splits on
the row's path): that is what the masks say.  So a
feature party first runs its release check on those sides
(:func:`vfl.runs.trees.predict_feature`, :mod:`vfl.protocols.release`) and sends
masks made of the sides it may release.
"""

from __future__ import annotations

import numpy as np

from vfl.errors import DataError
from vfl.parties.trees.feature_party import BoostingFeatureParty
from vfl.parties.trees.label_party import BoostingLabelParty
from vfl.protocols.fields import bits, ints, unbits
from vfl.protocols.roster import Roster
from vfl.transport import Endpoint


def predict_feature(ep: Endpoint, party: BoostingFeatureParty, codes: np.ndarray, roster: Roster,
                    split_bits: np.ndarray | None = None) -> int:
    """A feature party scores its binned rows ``codes``; returns how many rows it scored.

    ``split_bits`` are the sides of its splits it may release (its release check's answer,
    :meth:`~vfl.parties.trees.feature_party.TreeFeatureParty.split_bits`, randomized under DP); the masks
    sent are made of them.  Default: the exact sides.
    """
    b = roster.label
    message = ep.recv(b, "predict")
    n_rows = message["n_rows"]
    if n_rows != len(codes):
        raise DataError(f"party {party.role} has {len(codes)} rows to score but party {b} has {n_rows}; the "
                        "parties' rows must be aligned")
    trees = ints(message, "trees")
    masks = (party.leaf_masks(trees.tolist(), codes) if split_bits is None
             else party.masks_from_bits(trees.tolist(), split_bits))
    ep.send(b, "leaf_masks", "plaintext", **bits(masks.ravel()))
    return len(codes)


def predict_label(ep: Endpoint, party: BoostingLabelParty, codes: np.ndarray, roster: Roster) -> np.ndarray:
    """The label party's raw scores (rows, trees per iteration) of its binned rows ``codes``."""
    owners, masks = ask_masks(ep, party, len(codes), roster)
    return raw_scores(party, codes, owners, masks)


def ask_masks(ep: Endpoint, party: BoostingLabelParty, n_rows: int, roster: Roster) -> tuple[dict, dict]:
    """Steps 1-2 at the label party: every feature party's leaf masks of ``n_rows`` rows, and which trees they
    cover (:func:`tree_owners`)."""
    owners = tree_owners(party, roster.features)
    for k in roster.features:
        ep.send(k, "predict", "public", n_rows=n_rows, trees=np.asarray(owners[k], dtype=np.int64))
    widths = mask_widths(party, owners)
    masks = {k: unbits(ep.recv(k, "leaf_masks"), n_rows * widths[k]).reshape(n_rows, widths[k])
             for k in roster.features}
    return owners, masks


def tree_masks(party: BoostingLabelParty, owners: dict, masks: dict, n_rows: int) -> list[dict]:
    """Per tree, each feature party's mask (rows, the tree's leaves), cut from the masks side by side; a party
    with no split in the tree allows every leaf."""
    out = [{} for _ in party.trees]
    for k, trees in owners.items():
        at = 0
        for i in trees:
            width = len(party.trees[i]["tree"].leaves)
            out[i][k] = masks[k][:, at:at + width]
            at += width
    for i, entry in enumerate(out):
        for k in owners:
            entry.setdefault(k, np.ones((n_rows, len(party.trees[i]["tree"].leaves)), dtype=bool))
    return out


def tree_owners(party: BoostingLabelParty, features) -> dict[str, list[int]]:
    """For each feature party (in the order of ``features``), the trees holding one of its splits."""
    return {k: [i for i, t in enumerate(party.trees) if (t["tree"].owner == j).any()]
            for j, k in enumerate(features)}


def mask_widths(party: BoostingLabelParty, owners: dict[str, list[int]]) -> dict[str, int]:
    """How many leaf bits per row each feature party sends: the leaves of the trees it owns splits in."""
    return {k: sum(len(party.trees[i]["tree"].leaves) for i in trees) for k, trees in owners.items()}


def raw_scores(party: BoostingLabelParty, codes: np.ndarray, owners: dict[str, list[int]],
               masks: dict[str, np.ndarray]) -> np.ndarray:
    """The raw scores (rows, trees per iteration) from the label party's own splits and every feature
    party's leaf masks ``masks[k]`` (rows, :func:`mask_widths`), the trees side by side as ``owners`` lists them."""
    n_rows = len(codes)
    per_tree: dict[int, list] = {}
    for k, trees in owners.items():
        at = 0
        for i in trees:
            width = len(party.trees[i]["tree"].leaves)
            per_tree.setdefault(i, []).append(masks[k][:, at:at + width])
            at += width
    raw = np.tile(party.baseline, (n_rows, 1))
    per_iteration = party.n_trees
    for i in range(len(party.trees)):
        raw[:, i % per_iteration] += party.leaf_values(i, codes, per_tree.get(i, []))
    return raw
