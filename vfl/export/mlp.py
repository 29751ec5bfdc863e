"""Split neural networks as ONNX: every party's standardization and bottom layers, the top model (issue 47).

The network these files compute is the one vfl's split network computes (:mod:`vfl.parties.mlp.split`):
party ``P`` standardizes its columns (its shard's ``standardize``, when it scaled them), runs its bottom
layers (``f(x W + b)`` each, ``f`` the hidden activation) and multiplies the result by its block of the
interactive weights; the label party adds every party's part and the intercept, applies the hidden
activation, then its top layers, the last one with the task's output activation::

    z = sum over parties P of bottom_P((x_P - mean_P) / scale_P) . block_P  +  intercept
    output = top(f(z))          logistic output (two classes), softmax (more), identity (regression)

**Inputs.** One input per raw column, named as the column, a double of shape ``[rows, 1]`` (ONNX
``tensor(double)``) — every party's columns, the feature parties' first.

**Outputs**: a classifier's ``probability`` ``[rows, classes]`` (``predict_proba``: two classes give
``[1 - p, p]``) and ``label`` ``[rows, 1]`` (``predict``: the class of the largest probability; int64 for
integer classes, double for other numbers, text otherwise), a regressor's ``prediction`` ``[rows, outputs]``
(``predict``).  Everything is computed in double precision, as vfl computes it.

**Split** (:func:`split`): each party with columns gets ``<party>.onnx``, its own columns in and its ``part``
out (``[rows, units]``: its bottom's output times its block, what it sends in a private prediction), built from
its own shard alone, and the label party ``combiner.json``, from its own shard and the roster: the intercept,
the activations and the top layers (:func:`combine`).

PMML is not offered for split networks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vfl.errors import DataError
from vfl.export import blocks
from vfl.parties.mlp.activations import activate
from vfl.parties.mlp.losses import OUTPUT_ACTIVATION

#: Every output name a split network's files may have (no column may take one of them).
OUTPUTS = ("probability", "label", "prediction", "part")
#: The ONNX operator of each activation.
_OPERATORS = {"identity": "Identity", "logistic": "Sigmoid", "tanh": "Tanh", "relu": "Relu"}


@dataclass
class _Party(blocks.ScaledParty):
    """One party's share of the network: its columns, standardization, bottom layers and block."""

    bottom: list            # of (W, b)
    block: np.ndarray       # (bottom's output width, units)


@dataclass
class _Network:
    parties: list           # of _Party with columns, the feature parties first
    activation: str
    intercept: np.ndarray   # (units,)
    top: list               # of (W, b), the output layer last
    task: str
    classes: list
    fingerprint: str

    @property
    def columns(self) -> list:
        return [c for p in self.parties for c in p.columns]

    @property
    def units(self) -> int:
        return len(self.intercept)

    @property
    def n_outputs(self) -> int:
        return self.top[-1][0].shape[1]

    @property
    def output_name(self) -> str:
        return "prediction" if self.task == "regression" else "probability"

    @property
    def width(self) -> int:
        return 2 if self.task == "binary" else self.n_outputs


def network(shards: dict) -> _Network:
    """Check every party's shard and return the network they make up (what every writer here starts from).

    Raises
    ------
    DataError
        A shard missing, of another model, or not fitting the others (named by party).
    """
    label, features = blocks.check_whole(shards, "split-network", OUTPUTS, lambda head: head["data_parties"])
    head = shards[label]
    parties = [_party(name, shards[name], head) for name in blocks.party_order(label, features)]
    return _Network([p for p in parties if p is not None], head["activation"],
                    np.asarray(head["intercept"], dtype=np.float64),
                    [(np.asarray(w, dtype=np.float64), np.asarray(b, dtype=np.float64)) for w, b in head["top"]],
                    head["task"], list(head["classes"]), head["trained_with"])


def _party(name: str, shard: dict, head: dict | None) -> _Party | None:
    """Party ``name``'s share of the network from its own shard (None: it holds no column), checked against the
    label party's shard ``head`` when that is given."""
    if head is not None and shard["activation"] != head["activation"]:
        raise DataError(f"party {name}: its bottom uses the activation {shard['activation']!r}, the label "
                        f"party {head['party']}'s network {head['activation']!r}")
    if not shard["columns"]:
        return None                     # the label party may hold no column: no bottom, no block
    block = np.asarray(shard["block"], dtype=np.float64)
    if head is not None and block.shape[1] != head["units"]:
        raise DataError(f"party {name}: its block has {block.shape[1]} units, the label party {head['party']}'s "
                        f"interactive layer {head['units']}")
    mean, scale, kept = blocks.scaler_parts(shard.get("scaler"), len(shard["columns"]))
    bottom = [(np.array(w, dtype=np.float64), np.array(b, dtype=np.float64)) for w, b in shard["bottom"]]
    if bottom:                          # a constant column left out at training: its first weights act on 0
        bottom[0] = (bottom[0][0] * kept[:, None], bottom[0][1])
    else:
        block = block * kept[:, None]
    return _Party(name, list(shard["columns"]), mean, scale, bottom, block)


# --------------------------------------------------------------------------- ONNX

def _part(graph: blocks.OnnxGraph, party: _Party, activation: str) -> str:
    """A party's bottom output times its block, ``[rows, units]``."""
    h = blocks.standardized(graph, graph.columns(party.columns), party.mean, party.scale, f"{party.name}.scaled")
    for i, (w, b) in enumerate(party.bottom):
        h = graph.op(_OPERATORS[activation], [graph.dense(h, w, b, f"{party.name}.bottom{i}")], activation)
    return graph.dense(h, party.block, hint=f"{party.name}.part")


def _top(graph: blocks.OnnxGraph, net: _Network, z: str) -> None:
    """The label party's model from the interactive pre-activation ``z``: the network's output."""
    a = graph.op(_OPERATORS[net.activation], [z], net.activation)
    for i, (w, b) in enumerate(net.top):
        a = graph.dense(a, w, b, f"top{i}")
        if i < len(net.top) - 1:
            a = graph.op(_OPERATORS[net.activation], [a], net.activation)
    if net.task == "binary":
        p = graph.op("Sigmoid", [a], "sigmoid")
        a = graph.op("Concat", [graph.op("Sub", [graph.const([[1.0]], "one"), p], "complement"), p], "proba", axis=1)
    elif net.task == "multiclass":
        a = graph.op("Softmax", [a], "softmax", axis=1)
    graph.output(a, net.output_name, net.width)
    if net.task != "regression":
        graph.label(graph.op("ArgMax", [a], "index", axis=1, keepdims=1), net.classes)


def onnx_bytes(shards: dict) -> bytes:
    """The whole network as a serialized ONNX model (see the module docstring for its inputs and outputs)."""
    net = network(shards)
    graph = blocks.OnnxGraph("vfl_split_network", [*net.columns, *OUTPUTS])
    parts = [_part(graph, p, net.activation) for p in net.parties]
    z = graph.op("Add", [graph.total(parts, "join"), graph.const(net.intercept, "intercept")], "join")
    _top(graph, net, z)
    return graph.to_bytes(f"vfl split network ({net.task}) of the parties {[p.name for p in net.parties]}, raw "
                          "columns in", {"vfl.family": "mlp", "vfl.task": net.task,
                                         "vfl.trained_with": net.fingerprint, "vfl.classes": json.dumps(net.classes)})


def write_onnx(shards: dict, path) -> Path:
    """Write the network as ONNX to ``path`` (whole, or nothing); returns ``path``."""
    return blocks.write_file(path, onnx_bytes(shards))


#: The formats a split network exports to: format name -> writer(shards by party name, path) -> path written.
FORMATS = {"onnx": write_onnx}


# --------------------------------------------------------------------------- split

def part_bytes(party: _Party, activation: str, fingerprint: str) -> bytes:
    """A party's own part as ONNX: its columns in, its ``part`` ``[rows, units]`` out, only its weights."""
    graph = blocks.OnnxGraph(f"vfl_split_network_part_{party.name}", [*party.columns, *OUTPUTS])
    graph.output(_part(graph, party, activation), "part", party.block.shape[1])
    return graph.to_bytes(f"party {party.name}'s part of a vfl split network: its bottom's output times its block",
                          {"vfl.family": "mlp", "vfl.party": party.name, "vfl.trained_with": fingerprint})


def combiner(head: dict, parts) -> dict:
    """What the label party keeps to combine the parts, from its own shard ``head`` alone: the parts (``parts``,
    the parties with columns), the intercept, the activations, the top layers."""
    task = head["task"]
    top = [[np.asarray(w, dtype=np.float64).tolist(), np.asarray(b, dtype=np.float64).tolist()]
           for w, b in head["top"]]
    intercept = np.asarray(head["intercept"], dtype=np.float64)
    return {"family": "mlp", "task": task, "trained_with": head["trained_with"],
            "parts": blocks.combiner_parts(parts, "part", len(intercept), ".onnx"),
            "combine": "z = sum of the parts' part + intercept; a = activation(z); then each top layer a W + b, "
                       "the hidden activation between them and the output activation after the last",
            "intercept": intercept.tolist(), "activation": head["activation"],
            "output_activation": OUTPUT_ACTIVATION[task], "top": top, "classes": list(head["classes"]),
            "outputs": ["prediction" if task == "regression" else "probability"]
            + ([] if task == "regression" else ["label"])}


def combine(combining: dict, parts: dict) -> dict:
    """The network's output from every part's ``part`` (``{party: [rows, units]}``), as ``combiner.json`` says."""
    missing = [p for p in combining["parts"] if p not in parts]
    if missing:
        raise DataError(f"the part of party {missing[0]} is missing")
    z = sum(np.asarray(parts[p], dtype=np.float64) for p in combining["parts"]) + np.asarray(combining["intercept"])
    a = activate(combining["activation"], z)
    top = combining["top"]
    for i, (w, b) in enumerate(top):
        last = i == len(top) - 1
        a = activate(combining["output_activation"] if last else combining["activation"],
                     a @ np.asarray(w) + np.asarray(b))
    if combining["task"] == "regression":
        return {"prediction": a}
    if combining["task"] == "binary":
        a = np.column_stack([1 - a[:, 0], a[:, 0]])
    return {"probability": a, "label": np.asarray(combining["classes"])[np.argmax(a, axis=1)][:, None]}


def split(shards: dict, folder, roles: dict | None = None) -> dict[str, Path]:
    """Write each given party's part (``<party>.onnx``) and, given the label party's shard, its ``combiner.json``
    into ``folder`` (made if missing).

    ``roles``: every data party of the model and its role, in the model's order (None: the shards', every
    party's shard given).  A party's part is made from its own shard alone (its bottom and block), the combiner
    from the label party's (the top model) and ``roles``.  A label party with no column has no part (the combiner
    is its whole share); every feature party has one.  Every file is written whole, or none.  Returns
    ``{party: path}``, and ``"combiner"``'s.
    """
    label, features = blocks.split_roster(shards, roles, "split-network", OUTPUTS)
    order = blocks.party_order(label, features)
    head = shards.get(label)
    if len(shards) == len(order):
        net = network(shards)                                       # every party's: the whole model's checks
        held = {name: next((p for p in net.parties if p.name == name), None) for name in order}
    else:
        held = {name: _party(name, shard, head) for name, shard in shards.items()}
        if head is not None:
            blocks.check_listed(roles, label, head["data_parties"], "split-network")
    first = next(iter(shards.values()))
    parts = {name: part_bytes(held[name], first["activation"], first["trained_with"]) for name in order
             if held.get(name) is not None}
    with_part = [name for name in order if name not in held or held[name] is not None]
    return blocks.write_split(folder, parts, combiner(head, with_part) if head is not None else None, ".onnx")
