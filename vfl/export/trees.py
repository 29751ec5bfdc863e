"""Gradient-boosted trees exported: the whole model as XGBoost JSON or ONNX, or split by party.

The whole model is read from every data party's shard (:mod:`vfl.deploy.shards.trees`): the label party's gives
each tree's shape, the owner of every split, the leaf values, the baseline and the loss; each party's own shard
gives the column, threshold and missing-value direction of the splits it owns.  Columns are numbered party by
party in the label shard's ``data_parties`` order (the feature parties, then the label party), each party's
columns in its shard's order; :func:`feature_names` says which is which.

**The split rule.**  vfl sends a row left at a split on column ``x`` with threshold ``t`` when ``x <= t``
(compared in float64), and a missing value (NaN) the way the split learned.  A split on missing values alone
(every present value left) has no threshold: ``t`` is infinite.

* ONNX (``TreeEnsembleRegressor`` of ``ai.onnx.ml``, opset 3) has the rule ``BRANCH_LEQ`` and keeps float64
  thresholds and float64 inputs, so the ONNX model sends every row where vfl does.
* XGBoost compares ``float32(x) < c`` with a float32 ``c``.  The export takes ``c`` = the next float32 above
  ``float32(t)``: every ``x <= t`` then goes left (``float32`` rounding never decreases past ``float32(t)``),
  and every ``x`` above ``t`` goes right unless ``float32(x) == float32(t)``, that is unless ``x`` is within
  half a float32 step (a relative 6e-8) of ``t`` — a value float32 cannot tell from the threshold.  An
  infinite ``t`` becomes float32's largest number (values beyond float32's range are infinite in XGBoost).
  :func:`float32_ambiguous` counts the rows in that band.

The split export gives each party a part holding its own splits only: given its raw columns, the part says for
every tree it splits in which leaves its splits allow (:func:`part_leaves`); the label party's combiner holds
the trees' shapes, leaf values and baseline, and intersects the parts' answers (:func:`combine`), as the private
prediction of :mod:`vfl.protocols.trees.inference` does.  No part holds another party's threshold, and the
combiner holds none.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from vfl.deploy.commands import check_installed
from vfl.errors import DataError, ProtocolError
from vfl.export import blocks
from vfl.export.consent import shard_digest
from vfl.export.files import written
from vfl.parties.trees.tree import allowed_leaves, leaf_of

#: The format of one party's part of a split export, and of the label party's combiner.
PART_FORMAT, COMBINER_FORMAT = "vfl-export-part/1", "vfl-export-combiner/1"
#: XGBoost's objective of each vfl loss.
OBJECTIVES = {"binary_log_loss": "binary:logistic", "multinomial_log_loss": "multi:softprob",
              "squared_error": "reg:squarederror"}
#: The float32 that stands for an infinite threshold in XGBoost (every finite float32 is below or at it).
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: The parents' entry of a root in XGBoost's JSON.
_NO_PARENT = 2147483647


# -- the whole model, from the shards --------------------------------------------------------------------------

def whole_model(shards: dict[str, dict]) -> dict:
    """Every tree with its splits' columns and thresholds, from every data party's checked shard.

    Returns ``{"parties", "columns", "features", "loss", "classes", "baseline", "trained_with", "trees"}``;
    each tree is ``{"left", "right", "feature", "threshold", "missing_left", "value", "gain", "cover",
    "target"}`` (arrays over its nodes; ``threshold`` infinite for a split on missing values alone; ``target``:
    the raw-score column it adds to).

    Raises
    ------
    DataError
        A data party's shard missing, shards of two trainings, or a split no shard holds.
    """
    label = _label_shard(shards)
    parties = list(label["data_parties"])
    missing = [p for p in parties if p not in shards]
    if missing:
        raise DataError(f"the whole model needs every data party's shard; missing {missing}'s")
    for party in parties:
        if shards[party]["trained_with"] != label["trained_with"]:
            raise DataError(f"party {party}'s shard is of another training than party {label['party']}'s "
                            f"({shards[party]['trained_with']!r}, not {label['trained_with']!r})")
    splits = {p: _own_splits(shards[p], label) for p in parties}
    thresholds = {p: shards[p]["binning"]["thresholds"] for p in parties}
    offsets = dict(zip(parties, np.cumsum([0] + [len(shards[p]["columns"]) for p in parties]).tolist()))
    n_targets = int(label["loss"]["n_trees"])
    trees = []
    for i, entry in enumerate(label["trees"]):
        shape = entry["tree"]
        left, right = np.asarray(shape["left"], np.int64), np.asarray(shape["right"], np.int64)
        owner = np.asarray(shape["owner"], np.int64)
        feature = np.zeros(len(left), np.int64)
        threshold = np.zeros(len(left), np.float64)
        missing_left = np.zeros(len(left), bool)
        for node in np.flatnonzero(left >= 0).tolist():
            party = parties[int(owner[node])]
            split = splits[party].get(i, {}).get(node)
            if split is None:
                raise DataError(f"tree {i}, node {node}: party {party} owns the split, but its shard holds none "
                                "there; the shards do not come from the same training")
            column, bin_, ml = split
            cuts = thresholds[party][column]
            feature[node] = offsets[party] + column
            threshold[node] = cuts[bin_] if bin_ < len(cuts) else math.inf
            missing_left[node] = ml
        trees.append({"left": left, "right": right, "feature": feature, "threshold": threshold,
                      "missing_left": missing_left, "value": np.asarray(shape["value"], np.float64),
                      "gain": np.asarray(shape["gain"], np.float64), "cover": _cover(left, right, entry.get("counts")),
                      "target": i % n_targets})
    columns = {p: list(shards[p]["columns"]) for p in parties}
    return {"parties": parties, "columns": columns, "features": feature_names(columns), "loss": label["loss"],
            "classes": list(label["classes"]), "baseline": [float(b) for b in label["baseline"]],
            "trained_with": label["trained_with"], "trees": trees}


def feature_names(columns: dict[str, list]) -> list[str]:
    """The whole model's column names, party by party: the parties' own names, or ``party.column`` for all when
    two parties name a column alike."""
    names = [c for cs in columns.values() for c in cs]
    if len(set(names)) == len(names):
        return names
    return [f"{p}.{c}" for p, cs in columns.items() for c in cs]


def _label_shard(shards: dict[str, dict]) -> dict:
    labels = [s for s in shards.values() if s["role"] == "label"]
    if len(labels) != 1:
        raise DataError(f"the trees' export needs the label party's shard (found {len(labels)} label shards among "
                        f"the shards of {sorted(shards)})")
    return labels[0]


def _own_splits(shard: dict, label: dict) -> dict[int, dict[int, tuple]]:
    """A party's own splits, ``{tree index: {node: (column, bin, missing_left)}}``, its trees' shapes checked
    against the label party's."""
    if shard is label:
        return {i: {int(s[0]): (int(s[1]), int(s[2]), bool(s[3])) for s in t["splits"]}
                for i, t in enumerate(label["trees"])}
    out = {}
    for tree in shard["trees"]:
        i = tree.get("index")
        shape = label["trees"][i]["tree"] if isinstance(i, int) and 0 <= i < len(label["trees"]) else None
        if shape is None or tree["left"] != shape["left"] or tree["right"] != shape["right"]:
            raise DataError(f"party {shard['party']}'s shard holds a tree (index {i!r}) that is not the label party's; "
                            "the shards do not come from the same training")
        out[i] = {int(s[0]): (int(s[1]), int(s[2]), bool(s[3])) for s in tree["splits"]}
    return out


def _cover(left: np.ndarray, right: np.ndarray, counts) -> np.ndarray:
    """Training rows per node (leaves: the label party's counts; a split: its children's sum), or zeros."""
    cover = np.zeros(len(left), np.float64)
    if counts is None:
        return cover
    cover[np.flatnonzero(left < 0)] = counts
    for node in reversed(range(len(left))):            # children have higher ids than their parent
        if left[node] >= 0:
            cover[node] = cover[left[node]] + cover[right[node]]
    return cover


def leaves(model: dict, x) -> np.ndarray:
    """The node id of each row's leaf in every tree (rows, trees), by vfl's rule on raw columns ``x`` (float64, NaN
    missing): XGBoost's ``pred_leaf`` numbers the leaves alike."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros((len(x), len(model["trees"])), np.int64)
    for i, tree in enumerate(model["trees"]):
        node = out[:, i]
        while True:
            inner = tree["left"][node] >= 0
            if not inner.any():
                break
            rows, at = np.flatnonzero(inner), node[inner]
            value = x[rows, tree["feature"][at]]
            left = np.where(np.isnan(value), tree["missing_left"][at], value <= tree["threshold"][at])
            node[rows] = np.where(left, tree["left"][at], tree["right"][at])
    return out


def raw_scores(model: dict, x) -> np.ndarray:
    """The raw scores (rows, trees per iteration) of the whole model on raw columns ``x``, by vfl's rule: what
    vfl's own prediction gives."""
    at = leaves(model, x)
    raw = np.tile(np.asarray(model["baseline"]), (len(at), 1))
    for i, tree in enumerate(model["trees"]):
        raw[:, tree["target"]] += tree["value"][at[:, i]]
    return raw


def float32_ambiguous(model: dict, x) -> int:
    """How many rows of ``x`` hold, at a column some split uses, a value above a threshold ``t`` of that column
    whose float32 equals ``float32(t)``: the rows XGBoost's float32 comparison may send left where vfl sends
    them right (see the module's docstring)."""
    x = np.asarray(x, dtype=np.float64)
    hit = np.zeros(len(x), bool)
    for tree in model["trees"]:
        inner = np.flatnonzero((tree["left"] >= 0) & np.isfinite(tree["threshold"]))
        for column, t in zip(tree["feature"][inner].tolist(), tree["threshold"][inner].tolist()):
            values = x[:, column]
            with np.errstate(over="ignore"):
                hit |= (values > t) & (values.astype(np.float32) == np.float32(t))
    return int(hit.sum())


# -- XGBoost JSON --------------------------------------------------------------------------------------------

def float32_cut(threshold: float) -> float:
    """XGBoost's ``split_condition`` for vfl's ``x <= threshold``: the next float32 above ``float32(threshold)``
    (float32's largest number for an infinite threshold)."""
    if not math.isfinite(threshold):
        return FLOAT32_MAX
    return float(np.nextafter(np.float32(threshold), np.float32(np.inf)))


def xgboost_document(model: dict) -> dict:
    """The whole model as XGBoost's JSON model (the schema of XGBoost 3.1 and later), as a dict."""
    loss, n_targets = model["loss"]["name"], int(model["loss"]["n_trees"])
    baseline = model["baseline"]
    if loss == "binary_log_loss":       # XGBoost keeps a logistic model's intercept as a probability
        base = [1.0 / (1.0 + math.exp(-baseline[0]))]
        objective = {"name": OBJECTIVES[loss], "reg_loss_param": {"scale_pos_weight": "1"}}
    elif loss == "multinomial_log_loss":
        base = list(baseline)
        objective = {"name": OBJECTIVES[loss], "softmax_multiclass_param": {"num_class": str(n_targets)}}
    elif loss == "squared_error":
        base = list(baseline)
        objective = {"name": OBJECTIVES[loss], "reg_loss_param": {"scale_pos_weight": "1"}}
    else:
        raise DataError(f"the trees' loss {loss!r} has no XGBoost objective; exportable: {sorted(OBJECTIVES)}")
    _check_float32(model)
    odd = [name for name in model["features"] if any(c in name for c in "[]<")]
    if odd:
        raise DataError(f"XGBoost's feature names may not hold '[', ']' or '<': rename the column {odd[0]!r} "
                        "(or export to onnx)")
    n_features = len(model["features"])
    trees = [_xgboost_tree(i, tree, n_features) for i, tree in enumerate(model["trees"])]
    n_iter = -(-len(trees) // n_targets)
    return {
        "version": [3, 1, 0],
        "learner": {
            "attributes": {"vfl_trained_with": model["trained_with"], "vfl_classes": json.dumps(model["classes"]),
                           "vfl_parties": json.dumps(model["parties"])},
            "feature_names": list(model["features"]),
            "feature_types": ["float"] * n_features,
            "gradient_booster": {"name": "gbtree", "model": {
                "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": str(len(trees))},
                "iteration_indptr": [min(k * n_targets, len(trees)) for k in range(n_iter + 1)],
                "tree_info": [tree["target"] for tree in model["trees"]],
                "trees": trees}},
            "learner_model_param": {"base_score": "[" + ",".join(repr(float(b)) for b in base) + "]",
                                    "boost_from_average": "0",
                                    "num_class": str(n_targets if loss == "multinomial_log_loss" else 0),
                                    "num_feature": str(n_features), "num_target": "1"},
            "objective": objective}}


def _check_float32(model: dict) -> None:
    """Refuse a model XGBoost's float32 cannot hold: a threshold, leaf value or baseline beyond float32's range."""
    for i, tree in enumerate(model["trees"]):
        inner = tree["left"] >= 0
        beyond = inner & np.isfinite(tree["threshold"]) & (np.abs(tree["threshold"]) > FLOAT32_MAX)
        if beyond.any():
            node = int(np.flatnonzero(beyond)[0])
            raise DataError(f"tree {i}: the threshold {tree['threshold'][node]:.6g} of column "
                            f"{model['features'][tree['feature'][node]]!r} is beyond float32's range (3.4e38), "
                            "which XGBoost computes in; export to onnx (float64) instead")
        if (np.abs(tree["value"][~inner]) > FLOAT32_MAX).any():
            raise DataError(f"tree {i}: a leaf value is beyond float32's range (3.4e38), which XGBoost computes in; "
                            "export to onnx (float64) instead")
    if any(abs(b) > FLOAT32_MAX for b in model["baseline"]):
        raise DataError("the baseline is beyond float32's range (3.4e38), which XGBoost computes in; export to "
                        "onnx (float64) instead")


def _xgboost_tree(index: int, tree: dict, n_features: int) -> dict:
    left, right = tree["left"], tree["right"]
    inner = left >= 0
    parents = np.full(len(left), _NO_PARENT, np.int64)
    parents[left[inner]] = np.flatnonzero(inner)
    parents[right[inner]] = np.flatnonzero(inner)
    conditions = [float32_cut(t) if split else float(v)
                  for split, t, v in zip(inner.tolist(), tree["threshold"].tolist(), tree["value"].tolist())]
    n = len(left)
    return {"id": index, "tree_param": {"num_deleted": "0", "num_feature": str(n_features), "num_nodes": str(n),
                                        "size_leaf_vector": "1"},
            "left_children": left.tolist(), "right_children": right.tolist(), "parents": parents.tolist(),
            "split_indices": np.where(inner, tree["feature"], 0).tolist(), "split_conditions": conditions,
            "split_type": [0] * n, "default_left": tree["missing_left"].astype(int).tolist(),
            "base_weights": np.where(inner, 0.0, tree["value"]).tolist(),
            "loss_changes": np.where(inner, tree["gain"], 0.0).tolist(), "sum_hessian": tree["cover"].tolist(),
            "categories": [], "categories_nodes": [], "categories_segments": [], "categories_sizes": []}


def write_xgboost(shards: dict[str, dict], path: Path) -> Path:
    """Write the whole model as an XGBoost JSON model (``xgboost.Booster().load_model(path)`` loads it)."""
    document = xgboost_document(whole_model(shards))
    with written(path) as tmp:
        tmp.write_text(json.dumps(document, allow_nan=False))
    return Path(path)


# -- ONNX ----------------------------------------------------------------------------------------------------

#: The ONNX opsets the graph uses: the default domain's, and ai.onnx.ml's (TreeEnsembleRegressor 3 takes
#: float64 thresholds and leaf values as tensors).
ONNX_OPSET, ONNX_ML_OPSET, ONNX_IR_VERSION = 17, 3, 8


def onnx_model(model: dict):
    """The whole model as an ONNX ``ModelProto``: input ``X`` (float64, rows by :func:`feature_names`), output
    ``margin`` (float32, rows by trees per iteration) and, for a classifier, ``probabilities`` (rows by classes)."""
    check_installed("the ONNX export", ["onnx"], "export")
    from onnx import TensorProto, helper, numpy_helper

    nodes = {k: [] for k in ("treeids", "nodeids", "featureids", "modes", "values", "truenodeids", "falsenodeids",
                             "missing_value_tracks_true")}
    targets = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
    for t, tree in enumerate(model["trees"]):
        for node in range(len(tree["left"])):
            split = bool(tree["left"][node] >= 0)
            nodes["treeids"].append(t)
            nodes["nodeids"].append(node)
            nodes["featureids"].append(int(tree["feature"][node]) if split else 0)
            nodes["modes"].append("BRANCH_LEQ" if split else "LEAF")
            nodes["values"].append(float(tree["threshold"][node]) if split else 0.0)
            nodes["truenodeids"].append(int(tree["left"][node]) if split else 0)
            nodes["falsenodeids"].append(int(tree["right"][node]) if split else 0)
            nodes["missing_value_tracks_true"].append(int(tree["missing_left"][node]) if split else 0)
            if not split:
                targets["treeids"].append(t)
                targets["nodeids"].append(node)
                targets["ids"].append(int(tree["target"]))
                targets["weights"].append(float(tree["value"][node]))
    n_targets = int(model["loss"]["n_trees"])
    ensemble = helper.make_node(
        "TreeEnsembleRegressor", ["X"], ["margin"], domain="ai.onnx.ml", name="vfl_trees",
        n_targets=n_targets, aggregate_function="SUM", post_transform="NONE",
        base_values_as_tensor=numpy_helper.from_array(np.asarray(model["baseline"], np.float64)),
        nodes_treeids=nodes["treeids"], nodes_nodeids=nodes["nodeids"], nodes_featureids=nodes["featureids"],
        nodes_modes=nodes["modes"], nodes_truenodeids=nodes["truenodeids"],
        nodes_falsenodeids=nodes["falsenodeids"], nodes_missing_value_tracks_true=nodes["missing_value_tracks_true"],
        nodes_values_as_tensor=numpy_helper.from_array(np.asarray(nodes["values"], np.float64)),
        target_treeids=targets["treeids"], target_nodeids=targets["nodeids"], target_ids=targets["ids"],
        target_weights_as_tensor=numpy_helper.from_array(np.asarray(targets["weights"], np.float64)))
    graph_nodes, outputs = [ensemble], [helper.make_tensor_value_info("margin", TensorProto.FLOAT, [None, n_targets])]
    loss = model["loss"]["name"]
    if loss == "binary_log_loss":
        graph_nodes += [helper.make_node("Sigmoid", ["margin"], ["p"]),
                        helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(
                            np.ones((1, 1), np.float32))),
                        helper.make_node("Sub", ["one", "p"], ["q"]),
                        helper.make_node("Concat", ["q", "p"], ["probabilities"], axis=1)]
    elif loss == "multinomial_log_loss":
        graph_nodes.append(helper.make_node("Softmax", ["margin"], ["probabilities"], axis=1))
    if loss != "squared_error":
        outputs.append(helper.make_tensor_value_info("probabilities", TensorProto.FLOAT,
                                                     [None, max(2, n_targets)]))
    graph = helper.make_graph(graph_nodes, "vfl_trees",
                              [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [None, len(model["features"])])],
                              outputs)
    onnx_proto = helper.make_model(graph, producer_name="vfl", ir_version=ONNX_IR_VERSION,
                                   opset_imports=[helper.make_opsetid("", ONNX_OPSET),
                                                  helper.make_opsetid("ai.onnx.ml", ONNX_ML_OPSET)])
    meta = {"vfl_trained_with": model["trained_with"], "vfl_features": json.dumps(model["features"]),
            "vfl_classes": json.dumps(model["classes"])}
    helper.set_model_props(onnx_proto, meta)
    return onnx_proto


def write_onnx(shards: dict[str, dict], path: Path) -> Path:
    """Write the whole model as an ONNX graph (onnxruntime runs it; ``pip install -e ".[export]"``)."""
    proto = onnx_model(whole_model(shards))
    with written(path) as tmp:
        tmp.write_bytes(proto.SerializeToString())
    return Path(path)


#: The whole-model formats (the contract of :mod:`vfl.export`).
FORMATS = {"xgboost-json": write_xgboost, "onnx": write_onnx}


# -- the split export ----------------------------------------------------------------------------------------

def split(shards: dict[str, dict], folder: Path, roles: dict[str, str] | None = None) -> dict[str, Path]:
    """Write each given party's part (``<party>.json``) and, with the label party's shard, ``combiner.json``.

    A part holds the party's columns and, per tree it splits in, the tree's shape and its own splits
    (``[node, column, threshold, missing_left]``; threshold ``None``: every present value goes left).  The
    combiner holds per tree the shape, the leaf values and the raw-score column, the baseline, the loss, the
    classes and the SHA-256 of each given party's shard (a part must come from it).  ``roles``: every data party
    of the model and its role (None: the shards'); each shard must be of its party's role, and the label party's
    list of the model's parties the roster's.
    """
    if roles is not None:
        for party, shard in shards.items():
            if roles.get(party) != shard["role"]:
                raise DataError(f"party {party}: the shard given is a {shard['role']} party's, but {party} is "
                                f"{'the ' + roles[party] if party in roles else 'not a data'} party of this model: "
                                f"give {party}'s own shard")
        for shard in shards.values():
            if shard["role"] == "label":
                blocks.check_listed(roles, shard["party"], shard["data_parties"], "trees")
    folder = Path(folder)
    written_paths = {}
    for party, shard in shards.items():
        written_paths[party] = _write_json(folder / f"{party}.json", _part(shard))
    labels = [s for s in shards.values() if s["role"] == "label"]
    if labels:
        written_paths["combiner.json"] = _write_json(folder / "combiner.json", _combiner(labels[0], shards))
    return written_paths


def _part(shard: dict) -> dict:
    cuts = shard["binning"]["thresholds"]

    def threshold(column: int, bin_: int):
        return float(cuts[column][bin_]) if bin_ < len(cuts[column]) else None

    if shard["role"] == "label":
        trees = [(i, t["tree"]["left"], t["tree"]["right"], t["splits"]) for i, t in enumerate(shard["trees"])]
    else:
        trees = [(t["index"], t["left"], t["right"], t["splits"]) for t in shard["trees"]]
    return {"format": PART_FORMAT, "family": "trees", "party": shard["party"], "columns": list(shard["columns"]),
            "trained_with": shard["trained_with"], "shard_sha256": shard_digest(shard),
            "trees": [{"index": int(i), "left": list(left), "right": list(right),
                       "splits": [[int(n), int(c), threshold(int(c), int(b)), bool(ml)] for n, c, b, ml in splits]}
                      for i, left, right, splits in trees if splits]}


def _combiner(label: dict, shards: dict[str, dict]) -> dict:
    n_targets = int(label["loss"]["n_trees"])
    return {"format": COMBINER_FORMAT, "family": "trees", "party": label["party"],
            "trained_with": label["trained_with"], "parties": list(label["data_parties"]), "loss": label["loss"],
            "classes": list(label["classes"]), "baseline": [float(b) for b in label["baseline"]],
            "shards": {p: shard_digest(s) for p, s in shards.items()},
            "trees": [{"left": t["tree"]["left"], "right": t["tree"]["right"], "target": i % n_targets,
                       "leaves": [float(v) for v, l in zip(t["tree"]["value"], t["tree"]["left"]) if l < 0]}
                      for i, t in enumerate(label["trees"])]}


def _write_json(path: Path, obj: dict) -> Path:
    with written(path) as tmp:
        tmp.write_text(json.dumps(obj, allow_nan=False))
    return path


def part_leaves(part: dict, x) -> dict[int, np.ndarray]:
    """What a party's part answers for its raw columns ``x`` (rows by its columns, float64, NaN missing): per
    tree it splits in, the leaves its splits allow (bool, rows by the tree's leaves in ascending node id)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(part["columns"]):
        raise DataError(f"party {part['party']}'s part takes {len(part['columns'])} columns {part['columns']}, "
                        f"got shape {x.shape}")
    out = {}
    for tree in part["trees"]:
        sides = {}
        for node, column, threshold, ml in tree["splits"]:
            values = x[:, column]
            present = values <= threshold if threshold is not None else ~np.isnan(values)
            sides[int(node)] = np.where(np.isnan(values), bool(ml), present)
        out[int(tree["index"])] = allowed_leaves(np.asarray(tree["left"]), np.asarray(tree["right"]), len(x), sides)
    return out


def combine(combiner: dict, parts: dict[str, dict], answers: dict[str, dict[int, np.ndarray]]) -> np.ndarray:
    """The raw scores (rows, trees per iteration) from every party's part (``parts``, by party) and its answers
    (:func:`part_leaves`), at the label party.  Each part must come from the shard the combiner names for its
    party: the label party's own, or the one the party consented to (``consented``, which the export adds).

    Raises
    ------
    DataError
        A party's part missing, or not made from the shard the combiner was made with (consented to).
    """
    made_with = {**{p: c["shard_sha256"] for p, c in combiner.get("consented", {}).items()}, **combiner["shards"]}
    for party in combiner["parties"]:
        part = parts.get(party)
        if part is None or party not in answers:
            raise DataError(f"the combiner needs party {party}'s part and its answers")
        if made_with.get(party) != part["shard_sha256"]:
            raise DataError(f"party {party}'s part was not made from the shard the combiner was made with "
                            "(another training, or a shard the party did not consent to)")
    n_rows = max((len(m) for a in answers.values() for m in a.values()), default=0)
    raw = np.tile(np.asarray(combiner["baseline"], np.float64), (n_rows, 1))
    for i, tree in enumerate(combiner["trees"]):
        masks = [answers[p][i] for p in combiner["parties"] if i in answers[p]]
        if not masks:
            masks = [np.ones((n_rows, len(tree["leaves"])), bool)]
        try:
            leaves = leaf_of(masks, f"tree {i}")
        except ProtocolError as exc:
            raise DataError(str(exc)) from None
        raw[:, tree["target"]] += np.asarray(tree["leaves"])[leaves]
    return raw
