"""Linear and logistic regression as ONNX and PMML, each party's standardization included (issue 47).

The model these files compute is the one vfl's estimators compute: every party standardizes its own columns
(``(x - mean) / scale``, its shard's ``standardize``), multiplies them by its weights, and the label party adds
the intercept::

    decision = sum over parties P of ((x_P - mean_P) / scale_P) . w_P  +  intercept

**Inputs.** One input per raw column, named as the column, a double of shape ``[rows, 1]`` (ONNX
``tensor(double)``; PMML a continuous ``double`` field) — every party's columns, the feature parties' first.
A constant column that training left out (infinite scale) is still an input; its weight is 0.

**Outputs.**

======================= ============================================== =========================================
model                   ONNX (doubles, ``[rows, k]``)                  PMML (output fields)
======================= ============================================== =========================================
linear regression       ``prediction`` (k = 1): ``predict``            ``prediction``
logistic, two classes   ``decision`` (log-odds of ``classes[1]``),     ``probability`` (of ``classes[1]``),
                        ``probability`` of ``classes[1]`` (k = 1),     ``label`` (the predicted class, as text)
                        ``label`` (the class, ``[rows, 1]``)
logistic, one-vs-rest   ``decision`` and ``probability`` (k classes,   ``probability(<class>)`` per class,
                        each class's sigmoid normalised to sum to 1),  ``label``
                        ``label``
======================= ============================================== =========================================

as ``decision_function``, ``predict_proba`` and ``predict`` compute them (``label``, ``predict``: the class of the
largest decision; two classes: ``classes[1]`` where the decision is at least 0).  The ONNX ``label`` is int64 for
integer classes, double for other numbers, text otherwise.

**Split** (:func:`split`): each party with columns gets ``<party>.onnx``, its own columns in and its ``partial`` out
(``[rows, k]``: its standardized columns times its weights, no other party's weight), built from its own shard
alone, and the label party ``combiner.json``, from its own shard and the roster: the intercept, the link and the
classes, to add the parties' partials (:func:`combine`).

A model trained with ``reveal = "never"`` keeps its weights shared: no party holds them, and it is refused.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vfl.deploy.shards.linear import shard_scaler
from vfl.errors import ConfigurationError, DataError
from vfl.export import blocks

#: Every output name a linear model may have (no column may take one of them).
OUTPUTS = ("prediction", "decision", "probability", "label", "partial")


@dataclass
class _Party(blocks.ScaledParty):
    """One party's share of the model, ready to compute: its columns, standardization and weights ``(n, k)``."""

    weights: np.ndarray


def _link(objective: str, k: int) -> str:
    """How the decision becomes the output: identity, a sigmoid, or one-vs-rest sigmoids normalised."""
    if objective == "linear":
        return "identity"
    return "logistic" if k == 1 else "logistic-normalized"


@dataclass
class _Model:
    objective: str
    parties: list           # of _Party, the feature parties first
    intercept: np.ndarray   # (k,)
    classes: list
    label: str | None
    fingerprint: str

    @property
    def k(self) -> int:
        return len(self.intercept)

    @property
    def columns(self) -> list:
        return [c for p in self.parties for c in p.columns]

    @property
    def link(self) -> str:
        return _link(self.objective, self.k)


def _party(name: str, shard: dict) -> _Party:
    """Party ``name``'s share of the model from its own shard alone; a model kept shared is refused."""
    if "share" in shard or "coef" not in shard:
        raise ConfigurationError(f"party {name}: this model was trained with reveal='never', its weights stay "
                                 "shared and no party holds them: a model in the clear cannot be exported; "
                                 "train with reveal='respectively' to export it")
    coef = shard["coef"]
    nested = bool(coef) and isinstance(coef[0], list)
    weights = np.asarray(coef if nested else [coef], dtype=np.float64).reshape(-1, len(shard["columns"])).T
    mean, scale, kept = blocks.scaler_parts(shard_scaler(shard), len(shard["columns"]))
    return _Party(name, list(shard["columns"]), mean, scale, weights * kept[:, None])


def _intercept(head: dict, k: int) -> np.ndarray:
    """The label party's intercept(s), checked against ``k`` models of weights and its classes."""
    intercept = np.atleast_1d(np.asarray(head["intercept"], dtype=np.float64))
    if len(intercept) != k:
        raise DataError(f"party {head['party']}: {len(intercept)} intercept(s) for {k} model(s) of weights")
    classes = list(head.get("classes") or [])
    if head.get("objective") == "logistic" and len(classes) != max(2, k):
        raise DataError(f"party {head['party']}: a logistic model of {k} model(s) needs {max(2, k)} classes, its "
                        f"shard names {classes}")
    return intercept


def model(shards: dict) -> _Model:
    """Check every party's shard and return the model they make up (what every writer here starts from).

    Raises
    ------
    DataError
        A shard missing, of another model, or not fitting the others (named by party).
    ConfigurationError
        A model whose weights stay shared (``reveal = "never"``).
    """
    label, features = blocks.check_whole(shards, "linear", OUTPUTS, lambda head: head.get("data_parties"))
    owned = {name: _party(name, shard) for name, shard in shards.items()}
    head = shards[label]
    objective = head.get("objective")
    parties, k = [], None
    for name in blocks.party_order(label, features):
        if shards[name].get("objective") != objective:
            raise DataError(f"party {name}: its shard is of a {shards[name].get('objective')} model, the label "
                            f"party {label}'s of a {objective} one")
        party = owned[name]
        if k is not None and party.weights.shape[1] != k:
            raise DataError(f"party {name}: {party.weights.shape[1]} model(s) of weights, the other parties {k}")
        k = party.weights.shape[1]
        parties.append(party)
    return _Model(objective, parties, _intercept(head, k), list(head.get("classes") or []), head.get("label"),
                  head["trained_with"])


# --------------------------------------------------------------------------- ONNX

def _partial(graph: blocks.OnnxGraph, party: _Party) -> str:
    """A party's standardized columns times its weights, ``[rows, k]``."""
    x = graph.columns(party.columns)
    return graph.dense(blocks.standardized(graph, x, party.mean, party.scale, f"{party.name}.scaled"),
                       party.weights, hint=f"{party.name}.partial")


def _outputs(graph: blocks.OnnxGraph, m: _Model, decision: str) -> None:
    """The model's outputs from its decision ``[rows, k]`` (see the module docstring)."""
    if m.link == "identity":
        graph.output(decision, "prediction", 1)
        return
    graph.output(decision, "decision", m.k)
    probability = graph.op("Sigmoid", [decision], "sigmoid")
    if m.link == "logistic-normalized":
        total = graph.op("ReduceSum", [probability, graph.const([1], "axis", np.int64)], "total", keepdims=1)
        probability = graph.op("Div", [probability, total], "probability")
    graph.output(probability, "probability", m.k)
    if m.k == 1:                # classes[1] where the decision is at least 0
        index = graph.op("Cast", [graph.op("GreaterOrEqual", [decision, graph.const([0.0], "zero")], "positive")],
                         "index", to=7)
    else:
        index = graph.op("ArgMax", [decision], "index", axis=1, keepdims=1)
    graph.label(index, m.classes)


def _metadata(m: _Model) -> dict:
    return {"vfl.family": "linear", "vfl.objective": m.objective, "vfl.trained_with": m.fingerprint,
            "vfl.classes": json.dumps(m.classes), "vfl.parties": json.dumps([p.name for p in m.parties])}


def onnx_bytes(shards: dict) -> bytes:
    """The whole model as a serialized ONNX model (see the module docstring for its inputs and outputs)."""
    m = model(shards)
    graph = blocks.OnnxGraph("vfl_linear", [*m.columns, *OUTPUTS])
    partials = [_partial(graph, p) for p in m.parties if p.columns]
    decision = graph.op("Add", [graph.total(partials, "decision"), graph.const(m.intercept, "intercept")],
                        "decision")
    _outputs(graph, m, decision)
    return graph.to_bytes(f"vfl {m.objective} regression of the parties {[p.name for p in m.parties]}, "
                          "raw columns in", _metadata(m))


def write_onnx(shards: dict, path) -> Path:
    """Write the model as ONNX to ``path`` (whole, or nothing); returns ``path``."""
    return blocks.write_file(path, onnx_bytes(shards))


# --------------------------------------------------------------------------- PMML

def _pmml_table(parent: ET.Element, m: _Model, index: int, names: dict, **attributes) -> None:
    """One model's ``RegressionTable`` (``index``: which of the one-vs-rest models) on the standardized fields."""
    table = blocks.add(parent, "RegressionTable", intercept=blocks.number(m.intercept[index]), **attributes)
    for party in m.parties:
        for column, weight in zip(party.columns, party.weights[:, index]):
            blocks.add(table, "NumericPredictor", name=names[column], coefficient=blocks.number(weight))


def _mining_schema(parent: ET.Element, m: _Model, target: str | None) -> None:
    schema = blocks.add(parent, "MiningSchema")
    for column in m.columns:
        blocks.add(schema, "MiningField", name=column)
    if target is not None:
        blocks.add(schema, "MiningField", name=target, usageType="target")


def _unique(name: str, taken: set) -> str:
    """``name``, primed until no column, output or field already made has it; taken from then on."""
    while name in taken:
        name += "'"
    taken.add(name)
    return name


def pmml_bytes(shards: dict) -> bytes:
    """The whole model as a PMML 4.4 document (a ``RegressionModel``; one-vs-rest: a ``MiningModel`` chain)."""
    m = model(shards)
    root, dictionary = blocks.pmml_inputs(f"vfl {m.objective} regression of the parties "
                                          f"{[p.name for p in m.parties]} (trained_with {m.fingerprint})", m.columns)
    taken = set(m.columns) | set(OUTPUTS)
    target = _unique(m.label or "target", taken)
    classes = [str(c) for c in m.classes]
    if m.objective == "linear":
        blocks.data_field(dictionary, target)
    else:
        blocks.data_field(dictionary, target, "categorical", "string", classes)
    transformations = blocks.add(root, "TransformationDictionary")
    names = {}
    for party in m.parties:
        for column, mean, scale in zip(party.columns, party.mean, party.scale):
            name = names[column] = _unique(f"standardized({column})", taken)
            derived = blocks.add(transformations, "DerivedField", name=name, optype="continuous", dataType="double")
            derived.append(blocks.apply("/", blocks.apply("-", column, float(mean)), float(scale)))
    if m.link == "identity":
        regression = _regression(root, m, target, "vfl-linear", "regression", "none",
                                 [("prediction", "continuous", "double", "predictedValue", None)])
        _pmml_table(regression, m, 0, names)
    elif m.link == "logistic":
        regression = _regression(root, m, target, "vfl-logistic", "classification", "logit",
                                 [("probability", "continuous", "double", "probability", classes[1]),
                                  ("label", "categorical", "string", "predictedValue", None)])
        _pmml_table(regression, m, 0, names, targetCategory=classes[1])
        blocks.add(regression, "RegressionTable", intercept="0.0", targetCategory=classes[0])
    else:
        _one_vs_rest(root, m, names, target, classes, taken)
    return blocks.pmml_bytes(root)


def _regression(root: ET.Element, m: _Model, target: str, name: str, function: str, normalization: str,
                outputs) -> ET.Element:
    """A ``RegressionModel`` with its mining schema and output fields (``(name, optype, dataType, feature,
    value)`` each); its tables are added by the caller."""
    regression = blocks.add(root, "RegressionModel", modelName=name, functionName=function,
                            normalizationMethod=normalization)
    _mining_schema(regression, m, target)
    output = blocks.add(regression, "Output")
    for field, optype, data_type, feature, value in outputs:
        blocks.add(output, "OutputField", name=field, optype=optype, dataType=data_type, feature=feature, value=value)
    return regression


def _one_vs_rest(root: ET.Element, m: _Model, names: dict, target: str, classes: list, taken: set) -> None:
    """One-vs-rest as a model chain: each class's sigmoid, then the sigmoids normalised (``simplemax``)."""
    chain = blocks.add(root, "MiningModel", modelName="vfl-logistic-one-vs-rest", functionName="classification")
    _mining_schema(chain, m, target)
    output = blocks.add(chain, "Output")
    for value in classes:
        blocks.add(output, "OutputField", name=f"probability({value})", optype="continuous", dataType="double",
                   feature="probability", value=value)
    blocks.add(output, "OutputField", name="label", optype="categorical", dataType="string",
               feature="predictedValue")
    segmentation = blocks.add(chain, "Segmentation", multipleModelMethod="modelChain")
    sigmoids = []
    for index, value in enumerate(classes):
        name = _unique(f"sigmoid({value})", taken)
        sigmoids.append(name)
        segment = blocks.add(segmentation, "Segment", id=str(index + 1))
        blocks.add(segment, "True")
        regression = blocks.add(segment, "RegressionModel", functionName="regression", normalizationMethod="logit")
        _mining_schema(regression, m, None)
        out = blocks.add(regression, "Output")
        blocks.add(out, "OutputField", name=name, optype="continuous", dataType="double", feature="predictedValue")
        _pmml_table(regression, m, index, names)
    segment = blocks.add(segmentation, "Segment", id=str(len(classes) + 1))
    blocks.add(segment, "True")
    final = blocks.add(segment, "RegressionModel", functionName="classification", normalizationMethod="simplemax")
    schema = blocks.add(final, "MiningSchema")
    for name in sigmoids:
        blocks.add(schema, "MiningField", name=name)
    blocks.add(schema, "MiningField", name=target, usageType="target")
    for name, value in zip(sigmoids, classes):
        table = blocks.add(final, "RegressionTable", intercept="0.0", targetCategory=value)
        blocks.add(table, "NumericPredictor", name=name, coefficient="1.0")


def write_pmml(shards: dict, path) -> Path:
    """Write the model as PMML 4.4 to ``path`` (whole, or nothing); returns ``path``."""
    return blocks.write_file(path, pmml_bytes(shards))


#: The formats a linear model exports to: format name -> writer(shards by party name, path) -> path written.
FORMATS = {"onnx": write_onnx, "pmml": write_pmml}


# --------------------------------------------------------------------------- split

def part_bytes(party: _Party, fingerprint: str, objective: str) -> bytes:
    """A party's own part as ONNX: its columns in, its ``partial`` ``[rows, k]`` out, only its weights."""
    graph = blocks.OnnxGraph(f"vfl_linear_part_{party.name}", [*party.columns, *OUTPUTS])
    graph.output(_partial(graph, party), "partial", party.weights.shape[1])
    return graph.to_bytes(f"party {party.name}'s part of a vfl {objective} regression: its standardized columns "
                          "times its weights", {"vfl.family": "linear", "vfl.party": party.name,
                                                "vfl.trained_with": fingerprint})


def combiner(head: dict, parts) -> dict:
    """What the label party keeps to combine the parts, from its own shard ``head`` alone: the parts (``parts``,
    the parties with columns in the order they are summed), the intercept, the link, the classes."""
    own = _party(head["party"], head)
    intercept = _intercept(head, own.weights.shape[1])
    link = _link(head["objective"], len(intercept))
    return {"family": "linear", "objective": head["objective"], "trained_with": head["trained_with"],
            "parts": blocks.combiner_parts(parts, "partial", len(intercept), ".onnx"),
            "combine": "sum of the parts' partial, plus the intercept, then the link",
            "intercept": intercept.tolist(), "link": link, "classes": list(head.get("classes") or []),
            "outputs": ["prediction"] if link == "identity" else ["decision", "probability", "label"]}


def combine(combining: dict, partials: dict) -> dict:
    """The model's outputs from every part's ``partial`` (``{party: [rows, k]}``), as ``combiner.json`` says."""
    missing = [p for p in combining["parts"] if p not in partials]
    if missing:
        raise DataError(f"the partial of party {missing[0]} is missing")
    decision = sum(np.asarray(partials[p], dtype=np.float64) for p in combining["parts"]) + np.asarray(
        combining["intercept"])
    if combining["link"] == "identity":
        return {"prediction": decision}
    probability = 1.0 / (1.0 + np.exp(-decision))
    classes = np.asarray(combining["classes"])
    if combining["link"] == "logistic-normalized":
        probability = probability / probability.sum(axis=1, keepdims=True)
        label = classes[np.argmax(decision, axis=1)]
    else:
        label = classes[(decision[:, 0] >= 0).astype(int)]
    return {"decision": decision, "probability": probability, "label": label[:, None]}


def split(shards: dict, folder, roles: dict | None = None) -> dict[str, Path]:
    """Write each given party's part (``<party>.onnx``) and, given the label party's shard, its ``combiner.json``
    into ``folder`` (made if missing).

    ``roles``: every data party of the model and its role, in the model's order (None: the shards', every
    party's shard given).  A party's part is made from its own shard alone, the combiner from the label party's
    and ``roles`` (every feature party has a part).  Every file is written whole, or none.  Returns
    ``{party: path}``, and ``"combiner"``'s.
    """
    label, features = blocks.split_roster(shards, roles, "linear", OUTPUTS)
    if len(shards) == len(features) + 1:
        held = {p.name: p for p in model(shards).parties}          # every party's: the whole model's checks
    else:
        held = {name: _party(name, shard) for name, shard in shards.items()}
        if label in shards:
            blocks.check_listed(roles, label, shards[label].get("data_parties"), "linear")
    fingerprint, objective = next(iter(shards.values()))["trained_with"], next(iter(shards.values()))["objective"]
    other = [name for name, shard in shards.items() if shard["objective"] != objective]
    if other:
        raise DataError(f"party {other[0]}: its shard is of a {shards[other[0]]['objective']} model, party "
                        f"{next(iter(shards))}'s of a {objective} one")
    order = blocks.party_order(label, features)
    parts = {name: part_bytes(held[name], fingerprint, objective) for name in order
             if name in held and held[name].columns}
    with_part = [name for name in order if name not in held or held[name].columns]
    return blocks.write_split(folder, parts, combiner(shards[label], with_part) if label in shards else None,
                              ".onnx")
