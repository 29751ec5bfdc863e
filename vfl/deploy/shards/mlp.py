"""Split networks: a party's model shard, and the party it describes for prediction.

A feature party's shard holds its columns, its standardization (``standardize``: means and scales, when it
scaled its columns), its bottom layers (``[[W, b], ...]``,
``W`` of shape inputs x outputs) and its block of the interactive layer; the
label party's also its bottom and block (none when it holds no column), the
interactive layer's intercept, the top layers up to the output, the task, the
classes, the hidden activation and the run's record (epochs, loss curve,
validation scores).  No party's shard holds another party's weights.  Plain
JSON, never a pickle; every array a prediction uses is checked (shapes that
chain, finite values within the range of a model parameter).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vfl.crypto.encoding import MAX_PARAMETER
from vfl.deploy.jsonfile import read_json, write_json
from vfl.deploy.shards.fields import check_head, short
from vfl.errors import DataError
from vfl.parties.mlp.activations import HIDDEN
from vfl.parties.mlp.feature_party import MLPFeatureParty
from vfl.parties.mlp.label_party import MLPLabelParty
from vfl.parties.mlp.losses import OUTPUT_ACTIVATION
from vfl.parties.scaling import Standardizer

#: The format of a split network's model shard.
FORMAT = "vfl-mlp-shard/1"


def _layers(layers) -> list:
    return [[np.asarray(w).tolist(), np.asarray(b).tolist()] for w, b in layers]


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def write_shard(path, party, role: str, fingerprint: str, label: str | None = None, feature_parties=(),
                record: dict | None = None) -> Path:
    """Write a split-network party's shard (``record``: the label party's run record, for the file's reader)."""
    shard = {"format": FORMAT, "party": party.role, "role": role, "columns": list(party.columns),
             "trained_with": fingerprint, "activation": party.activation, "bottom": _layers(party.bottom),
             "block": None if party.block is None else party.block.tolist()}
    if getattr(party, "scaler", None) is not None:
        shard["standardize"] = party.scaler.to_dict()
    if role == "label":
        record = record or {}
        shard.update(label=label, data_parties=[*feature_parties, party.role], task=party.task,
                     classes=[] if party.classes is None else [_plain(c) for c in party.classes],
                     hidden_layer_sizes=list(party.hidden_layer_sizes), intercept=party.bias.tolist(),
                     top=_layers(party.top), n_iter=int(record.get("n_iter", 0)),
                     loss_curve=[float(v) for v in record.get("loss_curve", [])],
                     validation_scores=[float(v) for v in record.get("validation_scores", [])])
    return write_json(path, shard, private=True)


def _array(path, field: str, value, shape) -> np.ndarray:
    """A weight array of the expected shape (``None`` in ``shape``: any size), finite, within range."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{path}: {field} must be an array of numbers, got {short(value)}") from None
    if array.ndim != len(shape) or any(want is not None and got != want for got, want in zip(array.shape, shape)):
        raise DataError(f"{path}: {field} has shape {array.shape}, expected "
                        f"{tuple('any' if w is None else w for w in shape)}: the layers do not chain")
    if not np.all(np.isfinite(array)) or (array.size and np.abs(array).max() > MAX_PARAMETER):
        raise DataError(f"{path}: {field} holds a value that is not a finite number within 2**256: the shard is "
                        "corrupt")
    return array


def _stack(path, field: str, layers, width: int) -> tuple[list, int]:
    """Layers ``[[W, b], ...]`` starting at ``width`` inputs; returns them and the output width."""
    if not isinstance(layers, list):
        raise DataError(f"{path}: '{field}' must be a list of [weights, intercepts] layers, got {short(layers)}")
    out = []
    for i, layer in enumerate(layers):
        if not isinstance(layer, list) or len(layer) != 2:
            raise DataError(f"{path}: {field}[{i}] must be [weights, intercepts], got {short(layer)}")
        w = _array(path, f"{field}[{i}] weights", layer[0], (width, None))
        width = w.shape[1]
        out.append((w, _array(path, f"{field}[{i}] intercepts", layer[1], (width,))))
    return out, width


def read_shard(path, party: str, role: str) -> dict:
    """Read and check party ``party``'s split-network shard (``role``: ``"feature"`` or ``"label"``).

    Returns the shard with its arrays as numpy arrays (``bottom``, ``block``, and at the
    label party ``intercept`` and ``top``) and ``units``, the interactive layer's width.

    Raises
    ------
    DataError
        Naming the file and the field, for a shard that is not this party's or whose layers do not chain.
    """
    shard = read_json(path, "model shard")
    columns = check_head(path, shard, party, role, FORMAT, "split-network shard")
    if not isinstance(shard.get("trained_with"), str):
        raise DataError(f"{path}: 'trained_with' (the training settings' fingerprint) is missing")
    if shard.get("activation") not in HIDDEN:
        raise DataError(f"{path}: 'activation' must be one of {sorted(HIDDEN)}, got {short(shard.get('activation'))}")
    shard["bottom"], width = _stack(path, "bottom", shard.get("bottom"), len(columns))
    shard["scaler"] = (Standardizer.from_dict(shard["standardize"], len(columns), str(path))
                       if "standardize" in shard else None)
    if role == "label" and not columns:
        if shard.get("block") is not None or shard["bottom"]:
            raise DataError(f"{path}: a label party with no column has no bottom and no block")
    else:
        shard["block"] = _array(path, "block", shard.get("block"), (width, None))
    if role == "feature":
        shard["units"] = shard["block"].shape[1]
        return shard
    return _check_label(path, shard)


def _check_label(path, shard: dict) -> dict:
    task, classes = shard.get("task"), shard.get("classes")
    if task not in OUTPUT_ACTIVATION:
        raise DataError(f"{path}: 'task' must be one of {sorted(OUTPUT_ACTIVATION)}, got {short(task)}")
    need = {"binary": 2, "multiclass": None, "regression": 0}[task]
    if not isinstance(classes, list) or (len(classes) != need if need is not None else len(classes) < 2):
        raise DataError(f"{path}: 'classes' does not fit task {task!r}: {short(classes)}")
    hidden = shard.get("hidden_layer_sizes")
    if not isinstance(hidden, list) or not hidden or not all(isinstance(h, int) and h >= 1 for h in hidden):
        raise DataError(f"{path}: 'hidden_layer_sizes' must be a list of positive widths, got {short(hidden)}")
    units = hidden[0]
    if shard["block"] is not None and shard["block"].shape[1] != units:
        raise DataError(f"{path}: block has {shard['block'].shape[1]} units, hidden_layer_sizes says {units}")
    shard["intercept"] = _array(path, "intercept", shard.get("intercept"), (units,))
    shard["top"], out = _stack(path, "top", shard.get("top"), units)
    widths = [w.shape[1] for w, _ in shard["top"]]
    outputs = {"binary": 1, "multiclass": len(classes), "regression": out}[task]
    if widths[:-1] != hidden[1:] or len(widths) != len(hidden) or out != outputs:
        raise DataError(f"{path}: the top layers' widths {widths} do not fit hidden_layer_sizes {hidden} and "
                        f"{outputs} output(s)")
    parties = shard.get("data_parties")
    if not isinstance(parties, list) or not parties or parties[-1] != shard["party"]:
        raise DataError(f"{path}: 'data_parties' must list the feature parties, then this party")
    shard["units"] = units
    return shard


def shard_party(shard: dict, role: str):
    """The party a (checked) shard describes, ready for :func:`vfl.runs.mlp.prediction_programs`.

    It holds no rows: prediction gives it the rows to score.  The label party is built
    with its classes as its labels (prediction reads no label; they give it its outputs).
    """
    columns = shard["columns"]
    bottom_sizes = tuple(w.shape[1] for w, _ in shard["bottom"])
    if shard["role"] == "feature":
        party = MLPFeatureParty(role, np.zeros((0, len(columns))), columns, bottom_sizes, shard["activation"])
    else:
        classes = shard["classes"]
        n_out = shard["top"][-1][0].shape[1]
        labels = np.asarray(classes) if classes else np.zeros((1, n_out))
        party = MLPLabelParty(role, np.zeros((len(labels), len(columns))), columns, labels, shard["task"],
                              bottom_sizes, tuple(shard["hidden_layer_sizes"]), shard["activation"])
        party.bias, party.top = shard["intercept"], shard["top"]
    party.bottom, party.block = shard["bottom"], shard["block"]
    party.scaler = shard.get("scaler")
    return party
