"""The trees' export: XGBoost and onnxruntime load it and predict what vfl predicts; the split parts combine to it.

The models are fitted on generated data over three parties (two feature parties and the label party, gaps in
every party's first column) and every party consents in-process, with keys ``vfl certs`` would make.
"""

import json

import numpy as np
import pandas as pd
import pytest

from tree_data import make_tree_data, opted_in
from vfl import DataError, VerticalDataset
from vfl.ensemble import VerticalGradientBoostingClassifier, VerticalGradientBoostingRegressor
from vfl.export import trees as exported
from vfl.transport.tls import write_federation_certs

xgb = pytest.importorskip("xgboost")
ort = pytest.importorskip("onnxruntime")

PARTIES = ("A", "B", "C")          # C holds the label
FAST = dict(key_bits=1024, insecure=True, early_stopping=False, min_samples_leaf=5)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return write_federation_certs(tmp_path_factory.mktemp("certs"), PARTIES)


def _fit(task, **params):
    data, _ = make_tree_data(400, parties=PARTIES, task=task, seed=5)
    estimator = VerticalGradientBoostingRegressor if task == "regression" else VerticalGradientBoostingClassifier
    return estimator(**{"max_iter": 6, "max_depth": 3, **FAST, **opted_in(data), **params}).fit(data), data


@pytest.fixture(scope="module", params=["binary", "multiclass", "regression", "best-first"])
def fitted(request):
    if request.param == "best-first":            # trees grown highest gain first, hidden membership
        return _fit("binary", max_leaf_nodes=7, max_depth=None, hide_membership=True)
    return _fit(request.param)


def _export(model, certs, path, fmt):
    consents = [model.consent(p, key=certs[p].key, certificate=certs[p].certificate, format=fmt)
                for p in model.feature_parties_]
    return model.export(path, format=fmt, consents=consents, ca=certs["C"].ca)


def _table(model, data):
    """The whole model's columns, party by party as the export numbers them (feature parties, then the label)."""
    return np.column_stack([data.features(p) for p in (*model.feature_parties_, model.label_party_)])


def _vfl_raw(model, data):
    raw = model.decision_function(data) if hasattr(model, "decision_function") else model.predict(data)
    return raw.reshape(len(raw), -1)


def _agrees(model, got, expected) -> bool:
    """Float32 margins against vfl's: a classifier's within 1e-5; a regressor's, whose outputs near 100 are
    float32 numbers 7.6e-6 apart, within 1e-6 of their size beyond 1 (docs/export.md, "Measured")."""
    error = np.abs(got - expected)
    if hasattr(model, "classes_"):
        return float(error.max()) < 1e-5
    return float((error / np.maximum(1.0, np.abs(expected))).max()) < 1e-6


def test_xgboost_loads_the_model_and_reaches_the_same_leaves(fitted, certs, tmp_path):
    model, data = fitted
    booster = xgb.Booster()
    booster.load_model(str(_export(model, certs, tmp_path / "model.json", "xgboost-json")))
    x = _table(model, data)
    assert np.isnan(x).any()                                          # missing values take their learned side
    matrix = xgb.DMatrix(x, feature_names=booster.feature_names)
    whole = exported.whole_model(model._shards())
    assert (booster.predict(matrix, pred_leaf=True).reshape(len(x), -1) == exported.leaves(whole, x)).all()
    margin = booster.predict(matrix, output_margin=True).reshape(len(x), -1)
    assert _agrees(model, margin, _vfl_raw(model, data))
    assert np.allclose(exported.raw_scores(whole, x), _vfl_raw(model, data), rtol=0, atol=1e-12)
    if hasattr(model, "predict_proba"):
        proba = booster.predict(matrix).reshape(len(x), -1)
        expected = model.predict_proba(data)
        assert np.abs(proba - (expected[:, 1:] if expected.shape[1] == 2 else expected)).max() < 1e-5


def test_onnxruntime_runs_the_model_with_vfls_predictions(fitted, certs, tmp_path):
    import onnx

    model, data = fitted
    path = _export(model, certs, tmp_path / "model.onnx", "onnx")
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    session = ort.InferenceSession(str(path))
    outputs = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"X": _table(model, data)})))
    assert _agrees(model, outputs["margin"], _vfl_raw(model, data))
    if hasattr(model, "predict_proba"):
        assert np.abs(outputs["probabilities"] - model.predict_proba(data)).max() < 1e-5


def test_the_split_parts_combine_to_the_model(fitted, certs, tmp_path):
    model, data = fitted
    folder = _export(model, certs, tmp_path / "split", "split")
    parts = {p: json.loads((folder / f"{p}.json").read_text()) for p in PARTIES}
    combiner = json.loads((folder / "combiner.json").read_text())
    answers = {p: exported.part_leaves(parts[p], data.features(p)) for p in PARTIES}
    assert np.array_equal(exported.combine(combiner, parts, answers), _vfl_raw(model, data))


def test_no_part_holds_another_partys_thresholds(certs, tmp_path):
    model, data = _fit("binary")
    shards = model._shards()
    folder = _export(model, certs, tmp_path / "split", "split")
    combiner = (folder / "combiner.json").read_text()
    for p in PARTIES:
        part = json.loads((folder / f"{p}.json").read_text())
        own = {t for column in shards[p]["binning"]["thresholds"] for t in column}
        used = {s[2] for tree in part["trees"] for s in tree["splits"] if s[2] is not None}
        assert used and used <= own
        assert part["columns"] == shards[p]["columns"] and "value" not in json.dumps(part)
        for other in set(PARTIES) - {p}:
            foreign = {t for column in shards[other]["binning"]["thresholds"] for t in column} - own
            assert not foreign & used
    assert '"splits"' not in combiner and "binning" not in combiner


def _edge_rows(model, data):
    """Rows of the first test row's values, one split column at a time set at a threshold ``t``, one float64 step
    below it, at the float32 just below ``float32(t)`` when it is below ``t``, at the float32 cut (the next
    float32 above ``float32(t)``), and missing."""
    whole = exported.whole_model(model._shards())
    base = _table(model, data)[0]
    rows = []
    for tree in whole["trees"]:
        for node in np.flatnonzero((tree["left"] >= 0) & np.isfinite(tree["threshold"])).tolist():
            column, t = int(tree["feature"][node]), float(tree["threshold"][node])
            below32 = float(np.nextafter(np.float32(t), np.float32(-np.inf)))
            for value in (t, np.nextafter(t, -np.inf), below32, exported.float32_cut(t), np.nan):
                row = base.copy()
                row[column] = value
                rows.append(row)
    return whole, np.array(rows)


def _as_data(model, data, x):
    frames, at = {}, 0
    for p in (*model.feature_parties_, model.label_party_):
        columns = data.columns(p)
        frame = pd.DataFrame(x[:, at:at + len(columns)], columns=columns)
        frame.insert(0, "id", np.arange(len(x)))
        frames[p], at = frame, at + len(columns)
    return VerticalDataset(frames, id_column="id")


def test_values_at_and_around_every_threshold_go_where_vfl_sends_them(certs, tmp_path):
    model, data = _fit("binary")
    whole, x = _edge_rows(model, data)
    assert len(x) >= 40 and exported.float32_ambiguous(whole, x) == 0
    booster = xgb.Booster()
    booster.load_model(str(_export(model, certs, tmp_path / "model.json", "xgboost-json")))
    matrix = xgb.DMatrix(x, feature_names=booster.feature_names)
    assert (booster.predict(matrix, pred_leaf=True) == exported.leaves(whole, x)).all()
    vfl_raw = _vfl_raw(model, _as_data(model, data, x))
    assert np.abs(booster.predict(matrix, output_margin=True) - vfl_raw[:, 0]).max() < 1e-5
    session = ort.InferenceSession(str(_export(model, certs, tmp_path / "model.onnx", "onnx")))
    assert np.abs(session.run(["margin"], {"X": x})[0] - vfl_raw).max() < 1e-5


def test_float32_cannot_tell_a_value_just_above_a_threshold_and_says_so(certs, tmp_path):
    """One float64 step above ``t``: vfl sends it right, XGBoost's float32 compares it as ``float32(t)`` and sends
    it left; :func:`float32_ambiguous` counts exactly the rows where the two may differ (ONNX keeps float64)."""
    model, data = _fit("binary")
    whole = exported.whole_model(model._shards())
    base = _table(model, data)[0]
    tree = whole["trees"][0]
    column, t = int(tree["feature"][0]), float(tree["threshold"][0])
    row = base.copy()
    row[column] = np.nextafter(t, np.inf)
    if np.float32(row[column]) != np.float32(t):
        pytest.skip("this threshold is a float32 number's neighbour")
    x = row[None, :]
    assert exported.float32_ambiguous(whole, x) == 1
    booster = xgb.Booster()
    booster.load_model(str(_export(model, certs, tmp_path / "model.json", "xgboost-json")))
    xgb_root = booster.predict(xgb.DMatrix(x, feature_names=booster.feature_names), pred_leaf=True).reshape(1, -1)
    vfl_leaf = exported.leaves(whole, x)
    assert xgb_root[0, 0] != vfl_leaf[0, 0]            # the documented band: XGBoost went left, vfl right
    session = ort.InferenceSession(str(_export(model, certs, tmp_path / "model.onnx", "onnx")))
    assert np.abs(session.run(["margin"], {"X": x})[0][:, 0] - exported.raw_scores(whole, x)[:, 0]).max() < 1e-5


def test_a_split_on_missing_values_alone_sends_every_present_value_left():
    tree = {"left": np.array([1, -1, -1]), "right": np.array([2, -1, -1]), "feature": np.array([0, 0, 0]),
            "threshold": np.array([np.inf, 0, 0]), "missing_left": np.array([False, False, False]),
            "value": np.array([0.0, 1.0, 2.0]), "gain": np.zeros(3), "cover": np.zeros(3), "target": 0}
    whole = {"trees": [tree], "baseline": [0.0]}
    x = np.array([[3e38], [-1e30], [np.nan]])
    assert exported.leaves(whole, x)[:, 0].tolist() == [1, 1, 2]
    document = exported._xgboost_tree(0, tree, 1)
    assert document["split_conditions"][0] == exported.FLOAT32_MAX and document["default_left"][0] == 0


def test_xgboost_explains_the_exported_model_by_column(certs, tmp_path):
    """The recipient's XGBoost computes per-column TreeSHAP values from the cover the export keeps (sum_hessian):
    they sum to the margin, and a column no split uses gets nothing."""
    model, data = _fit("binary")
    booster = xgb.Booster()
    booster.load_model(str(_export(model, certs, tmp_path / "model.json", "xgboost-json")))
    x = _table(model, data)
    matrix = xgb.DMatrix(x, feature_names=booster.feature_names)
    contributions = booster.predict(matrix, pred_contribs=True)
    assert np.abs(contributions.sum(axis=1) - booster.predict(matrix, output_margin=True)).max() < 1e-4
    used = {int(f) for tree in exported.whole_model(model._shards())["trees"]
            for f, left in zip(tree["feature"], tree["left"]) if left >= 0}
    unused = sorted(set(range(x.shape[1])) - used)
    assert np.abs(contributions[:, unused]).max(initial=0) == 0 and np.abs(contributions[:, sorted(used)]).max() > 0


def test_a_threshold_beyond_float32_is_refused_for_xgboost_and_kept_by_onnx():
    tree = {"left": np.array([1, -1, -1]), "right": np.array([2, -1, -1]), "feature": np.array([0, 0, 0]),
            "threshold": np.array([1e39, 0, 0]), "missing_left": np.array([True, False, False]),
            "value": np.array([0.0, 1.0, 2.0]), "gain": np.zeros(3), "cover": np.zeros(3), "target": 0}
    whole = {"trees": [tree], "baseline": [0.5], "features": ["far"], "parties": ["B"], "columns": {"B": ["far"]},
             "loss": {"name": "squared_error", "n_trees": 1, "value_scale": 1.0}, "classes": [], "trained_with": "x"}
    with pytest.raises(DataError, match="threshold 1e\\+39 of column 'far' is beyond float32's range"):
        exported.xgboost_document(whole)
    with pytest.raises(DataError, match="rename the column 'a<b'"):
        exported.xgboost_document(dict(whole, features=["a<b"], trees=[dict(tree, threshold=np.array([1.0, 0, 0]))]))
    session = ort.InferenceSession(exported.onnx_model(whole).SerializeToString())
    x = np.array([[1e39], [2e39], [np.nan]])
    assert session.run(["margin"], {"X": x})[0][:, 0].tolist() == [1.5, 2.5, 1.5]


def test_a_part_sends_present_values_left_at_a_split_on_missing_values_alone():
    part = {"party": "A", "columns": ["a"], "trees": [{"index": 0, "left": [1, -1, -1], "right": [2, -1, -1],
                                                       "splits": [[0, 0, None, False]]}]}
    masks = exported.part_leaves(part, np.array([[1e300], [-5.0], [np.nan]]))
    assert masks[0].tolist() == [[True, False], [True, False], [False, True]]


def test_shards_that_do_not_make_one_model_are_refused_naming_the_party():
    import copy

    model, _ = _fit("binary")
    shards = model._shards()
    with pytest.raises(DataError, match=r"the whole model needs every data party's shard; missing \['A'\]"):
        exported.whole_model({p: s for p, s in shards.items() if p != "A"})
    other = copy.deepcopy(shards)
    other["B"]["trained_with"] = "another/run"
    with pytest.raises(DataError, match="party B's shard is of another training than party C's"):
        exported.whole_model(other)
    other = copy.deepcopy(shards)
    other["A"]["trees"][0]["index"] = 99
    with pytest.raises(DataError, match=r"party A's shard holds a tree \(index 99\) that is not the label party's"):
        exported.whole_model(other)
