"""The credit scorecard as ONNX and PMML: every party's binning, its WOE values or bin indicators, the logistic
model and the points (issue 47).

The pipeline these files compute is the one vfl's :class:`~vfl.preprocessing.VerticalPipeline` computes
(:mod:`vfl.parties.credit.scorecard`): each party bins its selected columns (bin ``k`` holds
``t_(k-1) < x <= t_k``: a value exactly at a threshold falls in the lower bin; a missing value, NaN, in the
column's missing bin), codes the bins as their WOE values (``"woe"`` coding) or as indicators of its bins but the
reference one (``"bins"``), standardizes them with the model's means and scales, and multiplies them by the
model's weights; the label party adds the intercept::

    decision = sum over parties P of ((coded_P - mean_P) / scale_P) . w_P  +  intercept     (log-odds of the event)
    score    = offset - factor * decision       (factor = pdo / ln 2, offset = base_score - factor ln(base_odds))

which is also the base points plus every selected column's points of the row's bin (the shards' ``points``).

**Inputs.** One input per raw column the scorecard reads (every party's selected columns, the feature parties'
first), named as the column, a double of shape ``[rows, 1]`` (ONNX ``tensor(double)``; PMML a continuous
``double`` field).  NaN is a missing value.  vfl refuses an infinite value; these files put ``+inf`` in the
column's last bin and ``-inf`` in its first.  The columns are numeric: there is no category to be unseen.

**Outputs.** ONNX (``[rows, 1]``): ``score`` (the points, ``predict_score``), ``decision`` (the log-odds of the
event ``classes[1]``, ``decision_function``), ``probability`` (of the event, ``predict_proba``), doubles, and
``label`` (``predict``: the event where its probability is at least 0.5; int64 for integer classes, double for
other numbers, text otherwise).
PMML: a ``Scorecard`` (one ``Characteristic`` per selected column, one ``Attribute`` per bin with its points,
the base points as ``initialScore``) with the output fields ``score``, ``decision``, ``probability`` and
``label`` (as text).

**Split** (:func:`split`): each party with a selected column gets ``<party>.onnx``, its own columns in and its
``partial`` out (its part of the decision: its coded, standardized columns times its weights; minus ``factor``
times it, its part of the score), built from its own shard alone, and the label party ``combiner.json``, from
its own shard and the roster: the intercept, the scorecard's anchors and the link (:func:`combine`).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vfl.errors import DataError
from vfl.export import blocks
from vfl.parties.credit.scorecard import ScorecardScale

#: Every output name a scorecard's files may have (no column may take one of them).
OUTPUTS = ("score", "decision", "probability", "label", "partial")


@dataclass
class _Column:
    """One selected column: its thresholds, how its bins are coded, and the points of each bin (missing last)."""

    name: str
    thresholds: np.ndarray
    coding: str             # "woe" or "bins"
    woe: np.ndarray | None  # "woe": the WOE of each bin (missing last)
    levels: list | None     # "bins": the bins that have an indicator
    points: np.ndarray

    @property
    def missing_code(self) -> int:
        return len(self.thresholds) + 1


@dataclass
class _Party:
    name: str
    columns: list           # of _Column, the selected ones in the party's order
    mean: np.ndarray        # the model's standardization of the party's model columns
    scale: np.ndarray
    weights: np.ndarray     # (model columns,), 0 where the model left a constant column out


@dataclass
class _Scorecard:
    parties: list           # of _Party with a selected column, the feature parties first
    intercept: float
    classes: list
    base_points: float
    scale: ScorecardScale   # the points' anchors, as training set them (its factor and offset)
    fingerprint: str

    @property
    def columns(self) -> list:
        return [c.name for p in self.parties for c in p.columns]


def _party(name: str, shard: dict) -> _Party | None:
    """A party's selected columns and its share of the model (None: no selected column)."""
    coding, model = shard["coding"], shard["model"]
    if not shard["selected"]:
        return None
    columns = []
    levels = iter(coding.get("levels") or [])
    woe = iter(coding.get("woe") or [])
    for j, points in zip(shard["selected"], shard["points"]):
        columns.append(_Column(shard["columns"][j], np.asarray(shard["binning"]["thresholds"][j], dtype=np.float64),
                               coding["coding"], np.asarray(next(woe), dtype=np.float64)
                               if coding["coding"] == "woe" else None,
                               list(next(levels)) if coding["coding"] == "bins" else None,
                               np.asarray(points, dtype=np.float64)))
    weights = np.asarray(model["coef"], dtype=np.float64)
    if len(weights) != sum(1 if c.coding == "woe" else len(c.levels) for c in columns):
        raise DataError(f"party {name}: its model has {len(weights)} weights, its coding "
                        f"{len(model['columns'])} model columns")
    kept = np.ones(len(weights))
    kept[[int(j) for j in model.get("dropped", [])]] = 0.0
    return _Party(name, columns, np.asarray(model["mean"], dtype=np.float64),
                  np.asarray(model["scale"], dtype=np.float64), weights * kept)


def scorecard(shards: dict) -> _Scorecard:
    """The scorecard every party's shard makes up, its parties with a selected column (what every writer here
    starts from); a :class:`DataError` naming the party whose shard is missing, of another run or not fitting."""
    label, features = blocks.check_whole(shards, "scorecard", OUTPUTS, lambda head: head.get("iv") or {})
    parties = [p for p in (_party(name, shards[name]) for name in blocks.party_order(label, features)) if p]
    if not parties:
        raise DataError("no party of this scorecard has a selected column: there is nothing to score")
    return _Scorecard(parties, *_anchors(shards[label]))


def _anchors(head: dict) -> tuple:
    """What the label party's shard alone says of the whole scorecard: the intercept, the classes, the base points,
    the points' scale and the run."""
    card, model = head["scorecard"], head["model"]
    return (float(model["intercept"]), list(model["classes"]), float(card["base_points"]),
            ScorecardScale(float(card["base_score"]), float(card["base_odds"]), float(card["pdo"])),
            head["trained_with"])


# --------------------------------------------------------------------------- ONNX

def _code(graph: blocks.OnnxGraph, x: str, column: _Column) -> str:
    """Each row's bin of ``x`` (``[rows, 1]`` int64): the thresholds below it, the missing bin for NaN."""
    missing = graph.const([[column.missing_code]], "missing", np.int64)
    if len(column.thresholds):
        below = graph.op("Less", [graph.const(column.thresholds[None, :], f"{column.name}.thresholds"), x], "below")
        counted = graph.op("ReduceSum", [graph.op("Cast", [below], "below", to=7),
                                         graph.const([1], "axis", np.int64)], "bin", keepdims=1)
    else:
        counted = graph.const([[0]], "bin", np.int64)
    return graph.op("Where", [graph.op("IsNaN", [x], "missing"), missing, counted], "bin")


def _coded(graph: blocks.OnnxGraph, column: _Column) -> list[str]:
    """A selected column's model columns: its bin's WOE, or one indicator per coded bin."""
    code = _code(graph, graph.column(column.name), column)
    if column.coding == "woe":
        return [graph.op("Gather", [graph.const(column.woe, f"{column.name}.woe"), code], "woe", axis=0)]
    return [graph.op("Cast", [graph.op("Equal", [code, graph.const([[k]], "level", np.int64)], "is")], "indicator",
                     to=11) for k in column.levels]


def _partial(graph: blocks.OnnxGraph, party: _Party) -> str:
    """A party's part of the decision, ``[rows, 1]``."""
    coded = [c for column in party.columns for c in _coded(graph, column)]
    x = coded[0] if len(coded) == 1 else graph.op("Concat", coded, f"{party.name}.coded", axis=1)
    return graph.dense(blocks.standardized(graph, x, party.mean, party.scale, f"{party.name}.scaled"),
                       party.weights[:, None], hint=f"{party.name}.partial")


def onnx_bytes(shards: dict) -> bytes:
    """The whole scorecard as a serialized ONNX model (see the module docstring for its inputs and outputs)."""
    card = scorecard(shards)
    graph = blocks.OnnxGraph("vfl_scorecard", [*card.columns, *OUTPUTS])
    partials = [_partial(graph, p) for p in card.parties]
    decision = graph.op("Add", [graph.total(partials, "decision"), graph.const([card.intercept], "intercept")],
                        "decision")
    scaled = graph.op("Mul", [graph.const([card.scale.factor], "factor"), decision], "scaled")
    score = graph.op("Sub", [graph.const([card.scale.offset], "offset"), scaled], "score")
    graph.output(score, "score", 1)
    graph.output(decision, "decision", 1)
    probability = graph.op("Sigmoid", [decision], "probability")
    graph.output(probability, "probability", 1)
    graph.label(graph.op("Cast", [graph.op("GreaterOrEqual", [probability, graph.const([0.5], "half")], "event")],
                         "index", to=7), card.classes)
    return graph.to_bytes(f"vfl credit scorecard of the parties {[p.name for p in card.parties]}: binning, "
                          "coding, logistic model, points; raw columns in",
                          {"vfl.family": "credit", "vfl.trained_with": card.fingerprint,
                           "vfl.classes": json.dumps(card.classes)})


def write_onnx(shards: dict, path) -> Path:
    """Write the scorecard as ONNX to ``path`` (whole, or nothing); returns ``path``."""
    return blocks.write_file(path, onnx_bytes(shards))


# --------------------------------------------------------------------------- PMML

def _predicate(parent: ET.Element, column: str, thresholds: np.ndarray, k: int) -> None:
    """The bin ``k`` of ``column``: ``t_(k-1) < x <= t_k`` (the first bin unbounded below, the last above)."""
    above = blocks.add(ET.Element("x"), "SimplePredicate", field=column, operator="greaterThan",
                       value=blocks.number(thresholds[k - 1])) if k > 0 else None
    below = blocks.add(ET.Element("x"), "SimplePredicate", field=column, operator="lessOrEqual",
                       value=blocks.number(thresholds[k])) if k < len(thresholds) else None
    if above is not None and below is not None:
        both = blocks.add(parent, "CompoundPredicate", booleanOperator="and")
        both.extend([above, below])
    elif above is not None or below is not None:
        parent.append(above if above is not None else below)
    else:
        blocks.add(parent, "True")


def pmml_bytes(shards: dict) -> bytes:
    """The scorecard as a PMML 4.4 ``Scorecard``, with the output fields score, decision, probability and label."""
    card = scorecard(shards)
    root, _ = blocks.pmml_inputs(f"vfl credit scorecard of the parties {[p.name for p in card.parties]} "
                                 f"(trained_with {card.fingerprint})", card.columns)
    model = blocks.add(root, "Scorecard", modelName="vfl-scorecard", functionName="regression",
                       useReasonCodes="false", initialScore=blocks.number(card.base_points))
    schema = blocks.add(model, "MiningSchema")
    for column in card.columns:
        blocks.add(schema, "MiningField", name=column, missingValueTreatment="asIs")
    output = blocks.add(model, "Output")
    blocks.add(output, "OutputField", name="score", optype="continuous", dataType="double", feature="predictedValue")
    decision = blocks.add(output, "OutputField", name="decision", optype="continuous", dataType="double",
                          feature="transformedValue")
    decision.append(blocks.apply("/", blocks.apply("-", card.scale.offset, "score"), card.scale.factor))
    probability = blocks.add(output, "OutputField", name="probability", optype="continuous", dataType="double",
                             feature="transformedValue")
    probability.append(blocks.apply("/", 1.0, blocks.apply("+", 1.0, blocks.apply("exp", blocks.apply(
        "*", -1.0, "decision")))))
    label = blocks.add(output, "OutputField", name="label", optype="categorical", dataType="string",
                       feature="transformedValue")
    choice = blocks.apply("if", blocks.apply("greaterOrEqual", "probability", 0.5))
    for value in (card.classes[1], card.classes[0]):        # the event where its probability is at least 0.5
        blocks.add(choice, "Constant", dataType="string").text = str(value)
    label.append(choice)
    characteristics = blocks.add(model, "Characteristics")
    for party in card.parties:
        for column in party.columns:
            characteristic = blocks.add(characteristics, "Characteristic", name=f"{party.name}:{column.name}")
            missing = blocks.add(characteristic, "Attribute", partialScore=blocks.number(column.points[-1]))
            blocks.add(missing, "SimplePredicate", field=column.name, operator="isMissing")
            for k, points in enumerate(column.points[:-1]):
                _predicate(blocks.add(characteristic, "Attribute", partialScore=blocks.number(points)), column.name,
                           column.thresholds, k)
    return blocks.pmml_bytes(root)


def write_pmml(shards: dict, path) -> Path:
    """Write the scorecard as PMML 4.4 to ``path`` (whole, or nothing); returns ``path``."""
    return blocks.write_file(path, pmml_bytes(shards))


#: The formats a scorecard exports to: format name -> writer(shards by party name, path) -> path written.
FORMATS = {"onnx": write_onnx, "pmml": write_pmml}


# --------------------------------------------------------------------------- split

def part_bytes(party: _Party, fingerprint: str) -> bytes:
    """A party's own part as ONNX: its selected columns in, its ``partial`` ``[rows, 1]`` out."""
    graph = blocks.OnnxGraph(f"vfl_scorecard_part_{party.name}", [*[c.name for c in party.columns], *OUTPUTS])
    graph.output(_partial(graph, party), "partial", 1)
    return graph.to_bytes(f"party {party.name}'s part of a vfl scorecard: its part of the log-odds",
                          {"vfl.family": "credit", "vfl.party": party.name, "vfl.trained_with": fingerprint})


def combiner(head: dict, parts) -> dict:
    """What the label party keeps to combine the parts, from its own shard ``head`` alone: the parts (``parts``,
    the parties with a selected column), the intercept, the anchors, the link."""
    intercept, classes, _, scale, fingerprint = _anchors(head)
    return {"family": "credit", "trained_with": fingerprint,
            "parts": blocks.combiner_parts(parts, "partial", 1, ".onnx"),
            "combine": "decision = sum of the parts' partial + intercept; score = offset - factor * decision; "
                       "probability = 1 / (1 + exp(-decision))",
            "intercept": intercept, "offset": scale.offset, "factor": scale.factor, **scale.to_dict(),
            "link": "logistic", "classes": classes, "outputs": ["score", "decision", "probability", "label"]}


def combine(combining: dict, partials: dict) -> dict:
    """The scorecard's outputs from every part's ``partial`` (``{party: [rows, 1]}``), as ``combiner.json`` says."""
    missing = [p for p in combining["parts"] if p not in partials]
    if missing:
        raise DataError(f"the partial of party {missing[0]} is missing")
    decision = sum(np.asarray(partials[p], dtype=np.float64) for p in combining["parts"]) + combining["intercept"]
    probability = 1.0 / (1.0 + np.exp(-decision))
    return {"score": combining["offset"] - combining["factor"] * decision, "decision": decision,
            "probability": probability,
            "label": np.asarray(combining["classes"])[(probability[:, 0] >= 0.5).astype(int)][:, None]}


def split(shards: dict, folder, roles: dict | None = None) -> dict[str, Path]:
    """Write each given party's part (``<party>.onnx``) and, given the label party's shard, its ``combiner.json``
    into ``folder`` (made if missing).

    ``roles``: every data party of the model and its role, in the model's order (None: the shards', every
    party's shard given).  A party's part is made from its own shard alone, the combiner from the label party's
    and ``roles``.  Only a party with a selected column has a part (``vfl party`` keeps one at every feature
    party: a feature party whose shard is not given is counted as having one).  Every file is written whole,
    or none.  Returns ``{party: path}``, and ``"combiner"``'s.
    """
    label, features = blocks.split_roster(shards, roles, "scorecard", OUTPUTS)
    order = blocks.party_order(label, features)
    if len(shards) == len(order):
        card = scorecard(shards)                                    # every party's: the whole model's checks
        held = {name: next((p for p in card.parties if p.name == name), None) for name in order}
    else:
        held = {name: _party(name, shard) for name, shard in shards.items()}
        if label in shards:
            blocks.check_listed(roles, label, shards[label].get("iv"), "scorecard")
    own = [name for name in order if name in shards]
    if len(own) == 1 and held[own[0]] is None and label not in shards:
        raise DataError(f"party {own[0]} has no selected column in this scorecard: it has no part")
    fingerprint = next(iter(shards.values()))["trained_with"]
    parts = {name: part_bytes(held[name], fingerprint) for name in order if held.get(name) is not None}
    with_part = [name for name in order if name not in held or held[name] is not None]
    return blocks.write_split(folder, parts, combiner(shards[label], with_part) if label in shards else None,
                              ".onnx")
