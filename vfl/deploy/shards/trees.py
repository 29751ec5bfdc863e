"""Gradient-boosted trees: a party's model shard, and the party it describes for prediction."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vfl.crypto.encoding import MAX_PARAMETER
from vfl.deploy.jsonfile import read_json, write_json
from vfl.deploy.shards.fields import check_head, short as _short
from vfl.errors import DataError, ProtocolError
from vfl.parties.binning import Binner
from vfl.parties.trees import Tree, check_shape, loss_from_dict
from vfl.parties.trees.feature_party import TreeFeatureParty
from vfl.parties.trees.label_party import TreeLabelParty

#: The format of a gradient-boosting model shard.
FORMAT = "vfl-boosting-shard/1"


def write_shard(path, party, role: str, fingerprint: str, label: str | None = None,
                         feature_parties=(), n_iter: int = 0, validation_scores=()) -> Path:
    """Write a boosting party's shard: its columns, its own bin thresholds and its share of every tree.

    A feature party's shard holds, per tree it took part in, the tree's shape and
    its own splits (``[node, column, bin, missing_left]``: rows with
    ``x <= thresholds[column][bin]``, and missing values if ``missing_left``, go
    left).  The label party's holds the loss, classes, baseline and, per tree, the
    shape, the owner of every split (an index into ``data_parties``), the leaf
    values, the split gains, its own splits, for each feature party's split,
    that party's column index, and its training rows per leaf (the cover an explanation marginalises by).  No party's shard holds another's thresholds.
    """
    shard = {"format": FORMAT, "party": party.role, "role": role, "columns": list(party.columns),
             "binning": party.binner.to_dict(), "trained_with": fingerprint}
    if role == "feature":
        shard["trees"] = party.state()["trees"]
    else:
        state = party.state()
        shard.update(label=label, data_parties=[*feature_parties, party.role], loss=state["loss"],
                     classes=[] if party.classes is None else [_plain(c) for c in party.classes],
                     baseline=state["baseline"], n_iter=int(n_iter), trees=state["trees"],
                     validation_scores=[float(v) for v in validation_scores])
    return write_json(path, shard, private=True)


def read_shard(path, party: str, role: str) -> dict:
    """Read and check party ``party``'s boosting shard (``role``: ``"feature"`` or ``"label"``).

    Raises
    ------
    DataError
        Naming the file and the field, for a shard that is not this party's, or
        whose trees, splits, thresholds or values do not hold together.
    """
    shard = read_json(path, "model shard")
    columns = check_head(path, shard, party, role, FORMAT, "gradient-boosting shard")
    if not isinstance(shard.get("trained_with"), str):
        raise DataError(f"{path}: 'trained_with' (the training settings' fingerprint) is missing")
    try:
        binner = Binner.from_dict(shard["binning"])
        if len(binner.thresholds_) != len(columns) or any(
                not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0) for t in binner.thresholds_):
            raise ValueError("thresholds must be ascending finite numbers, one list per column")
        trees = shard["trees"]
        if not isinstance(trees, list):
            raise ValueError("'trees' must be a list")
        if role == "label":
            loss_from_dict(shard["loss"])
            parties = shard.get("data_parties")
            if not isinstance(parties, list) or not parties or parties[-1] != party:
                raise ValueError("'data_parties' must list the feature parties, then this party")
        for i, tree in enumerate(trees):
            shape = Tree.from_dict(tree["tree"]) if role == "label" else tree
            left, right = check_shape(shape["left"] if role == "feature" else shape.left,
                                      shape["right"] if role == "feature" else shape.right, f"tree {i}")
            for split in tree["splits"]:
                node, column, bin_, missing_left = split
                if not (isinstance(missing_left, bool) and 0 <= node < len(left) and left[node] >= 0
                        and 0 <= column < len(columns) and 0 <= bin_ < binner.n_bins_[column]):
                    raise ValueError(f"tree {i}: split {_short(split)} does not fit its tree and columns")
            if role == "label" and (not np.all(np.abs(shape.value) <= MAX_PARAMETER)
                                    or len(shape.owner) != len(left)
                                    or shape.owner.max() >= len(parties) or shape.owner.min() < -1):
                raise ValueError(f"tree {i}: leaf values must be finite numbers within 2**256 and owners data "
                                 "parties")
    except (KeyError, TypeError, ValueError, ProtocolError) as exc:
        raise DataError(f"{path}: not a valid gradient-boosting shard: {exc}") from None
    return shard


def shard_party(shard: dict, features, role: str):
    """The party a (checked) shard describes, holding ``features`` (its rows to score) binned with its thresholds."""
    binner = Binner.from_dict(shard["binning"])
    if shard["role"] == "feature":
        party = TreeFeatureParty(features, role, shard["columns"], binner=binner)
        party.load_state({"trees": shard["trees"]})
        return party
    party = TreeLabelParty(features, None, role, shard["columns"], binner=binner)
    party.trees = [{"tree": Tree.from_dict(t["tree"]),
                    "splits": {int(s[0]): (int(s[1]), int(s[2]), bool(s[3])) for s in t["splits"]},
                    "foreign": {int(n): int(c) for n, c in t["foreign"]},
                    "counts": np.asarray(t["counts"], dtype=np.int64) if "counts" in t else None}
                   for t in shard["trees"]]
    party.baseline = np.asarray(shard["baseline"], dtype=np.float64)
    party.loss = loss_from_dict(shard["loss"])
    party.classes = np.asarray(shard["classes"], dtype=object) if shard["classes"] else None
    return party


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def board_view(model: dict, result: dict) -> list[dict]:
    """What the board shows of a recorded shard (``model.json`` of a training run): plain data, drawn by the board.

    Every tree (the reader picks one) with this party's own splits in its words and the others' as "party k,
    split j"; at the label party, the gain of the splits on each column (a feature party's columns summed into
    one bar: it knows their gains, not their names).  ``result`` is not needed.  The views' kinds are those of
    :mod:`vfl.deploy.shards`.
    """
    trees = model.get("trees") or []
    if not trees:
        return []
    columns = model.get("columns", [])
    thresholds = (model.get("binning") or {}).get("thresholds", [])
    label = model.get("role") == "label"
    parties = model.get("data_parties", [])
    views = [{"kind": "trees", "title": "Trees", "id": "trees",
              "trees": [{"name": f"tree {k + 1} of {len(trees)}",
                         "nodes": _tree_nodes(tree, label, parties, columns, thresholds)}
                        for k, tree in enumerate(trees)],
              "caption": "blue: this party's splits, with its thresholds; grey: another party's split, known here "
                         "only as that party's split number"}]
    if label:
        ranked = _gains(trees, parties, columns)
        views.append({"kind": "bars", "title": "Gain importances", "id": "importances",
                      "labels": [k for k, _ in ranked], "values": [v for _, v in ranked],
                      "chart": "total gain of the splits on each column", "axis": "gain",
                      "caption": "a feature party's columns are summed into one bar: the label party knows their "
                                 "splits' gains, not their names"})
    return views


def _split_text(columns, thresholds, column: int, bin_: int, missing_left: bool) -> str:
    name = columns[column] if 0 <= column < len(columns) else f"column {column}"
    cut = thresholds[column][bin_] if column < len(thresholds) and 0 <= bin_ < len(thresholds[column]) else None
    text = f"{name} ≤ {cut:.4g}" if cut is not None else f"{name}: bin {bin_}"
    return text + ("\nmissing go left" if missing_left else "")


def _tree_nodes(tree: dict, label: bool, parties, columns, thresholds) -> list[dict]:
    """One tree's nodes as the board draws them (``{"text", "left", "right", "leaf"/"own"}``, children by index)."""
    if label:
        shape = tree["tree"]
        left, right, owner, value = shape["left"], shape["right"], shape["owner"], shape["value"]
    else:
        left, right = tree["left"], tree["right"]
        owner, value = None, None
    own = {int(s[0]): s[1:] for s in tree.get("splits", [])}
    counted: dict[int, int] = {}
    nodes = []
    for i in range(len(left)):
        if left[i] < 0:
            text = f"leaf\n{value[i]:.4f}" if value is not None else "leaf"
            nodes.append({"text": text, "leaf": True})
        elif i in own:
            nodes.append({"text": _split_text(columns, thresholds, *own[i]), "left": left[i], "right": right[i],
                          "own": True})
        elif owner is None:                 # a feature party knows only that the split is not its own
            nodes.append({"text": "another party's\nsplit", "left": left[i], "right": right[i], "own": False})
        else:
            counted[owner[i]] = counted.get(owner[i], 0) + 1
            party = parties[owner[i]] if 0 <= owner[i] < len(parties) else "?"
            nodes.append({"text": f"party {party}\nsplit {counted[owner[i]]}", "left": left[i], "right": right[i],
                          "own": False})
    return nodes


def _gains(trees, parties, columns) -> list[tuple[str, float]]:
    """The label party's total gain per column (a feature party's columns as one), the 20 largest first."""
    gains: dict[str, float] = {}
    for tree in trees:
        shape = tree["tree"]
        own = {int(s[0]): int(s[1]) for s in tree.get("splits", [])}
        for i, (owner, gain) in enumerate(zip(shape["owner"], shape["gain"])):
            if owner < 0:
                continue
            name = (columns[own[i]] if i in own and own[i] < len(columns) else
                    f"party {parties[owner]} (all its columns)" if 0 <= owner < len(parties) else "another party")
            gains[name] = gains.get(name, 0.0) + float(gain)
    return sorted(gains.items(), key=lambda kv: -kv[1])[:20]
