"""Split networks exported to ONNX give vfl's own predictions on raw rows (onnxruntime, double precision).

Networks are fitted in-process for a few epochs on generated data (every hidden activation, bottoms of one and
two layers, a label party with and without columns, a column that standardization leaves out) and compared
with the estimator's own private prediction (``predict_proba`` / ``predict``) within 1e-6; the split parts
combine to the same outputs and hold no other party's weights; shards that do not make up one network are
refused with nothing written.
"""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from export_helpers import onnx_inputs, onnx_numbers, onnx_run
from vfl import VerticalDataset, VerticalMLPClassifier, VerticalMLPRegressor
from vfl.deploy.jsonfile import write_json
from vfl.deploy.shards.mlp import read_shard
from vfl.errors import DataError
from vfl.export import mlp

pytest.importorskip("onnxruntime")

TOL = 1e-6
FIT = dict(max_iter=4, batch_size=50, random_state=0, verbose=False, learning_rate_init=0.05,
           allow_reconstruction=["A", "C"])


def frames(task: str, n: int = 100, seed: int = 1, label_columns: bool = True):
    """Parties A (a column in large units, two plain ones, a constant one), C (two columns) and the label party
    B (two columns, or none); then 10 new rows in which the constant column moves."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n + 10, 7))
    z = x[:, 1] - x[:, 3] + 0.5 * x[:, 5] - 0.4 * x[:, 6]
    y = {"binary": (z > 0).astype(int), "multiclass": np.array(["r", "g", "b"])[np.digitize(z, [-0.5, 0.5])],
         "regression": z}[task]
    ids = np.arange(len(z))
    a = pd.DataFrame({"id": ids, "a0": x[:, 0] * 40 + 700, "a1": x[:, 1], "a2": x[:, 2], "flat": -2.0})
    a.loc[n:, "flat"] = rng.normal(size=10)
    c = pd.DataFrame({"id": ids, "c0": x[:, 3], "c1": x[:, 4]})
    b = pd.DataFrame({"id": ids, "b0": x[:, 5], "b1": x[:, 6]} if label_columns else {"id": ids})
    b["y"] = y
    parts = {"A": a, "C": c, "B": b}
    train = VerticalDataset({k: f.iloc[:n] for k, f in parts.items()}, label="y", id_column="id")
    every = VerticalDataset(parts, label="y", id_column="id")
    return train, every, a.merge(c, on="id").merge(b, on="id")


def fitted(task: str, label_columns: bool = True, **options):
    train, every, table = frames(task, label_columns=label_columns)
    estimator = VerticalMLPRegressor if task == "regression" else VerticalMLPClassifier
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = estimator(**{**FIT, **options}).fit(train)
    expected = model.predict(every) if task == "regression" else model.predict_proba(every)
    return model, every, table, expected


CASES = {
    "binary-relu": dict(task="binary", hidden_layer_sizes=(4,), activation="relu"),
    "binary-tanh-deep": dict(task="binary", hidden_layer_sizes=(5, 3), activation="tanh",
                             bottom_sizes={"A": (3, 2), "C": (2,), "B": (2,)}),
    "multiclass-logistic": dict(task="multiclass", hidden_layer_sizes=(4, 3), activation="logistic"),
    "regression-identity": dict(task="regression", hidden_layer_sizes=(3,), activation="identity",
                                bottom_sizes={"A": (), "C": ()}),
    "binary-label-without-columns": dict(task="binary", hidden_layer_sizes=(4,), label_columns=False),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    return fitted(**CASES[request.param])


def test_the_shards_are_what_read_shard_reads_from_the_parties_files(tmp_path):
    model, _, _, _ = fitted(**CASES["binary-relu"])
    shards = model._shards()
    assert {k: s["role"] for k, s in shards.items()} == {"A": "feature", "C": "feature", "B": "label"}
    assert len({s["trained_with"] for s in shards.values()}) == 1
    for name, shard in shards.items():
        raw = {k: v for k, v in shard.items() if k not in ("scaler", "units")}
        for key in ("bottom", "top"):
            if key in raw:
                raw[key] = [[w.tolist(), b.tolist()] for w, b in raw[key]]
        for key in ("block", "intercept"):
            if raw.get(key) is not None:
                raw[key] = raw[key].tolist()
        write_json(tmp_path / f"{name}.json", raw)
        again = read_shard(tmp_path / f"{name}.json", name, shard["role"])
        assert again.keys() == shard.keys() and np.array_equal(again["block"], shard["block"])


def test_the_network_in_onnx_gives_vfl_outputs_on_raw_rows(case, tmp_path):
    model, every, table, expected = case
    shards = model._shards()
    path = mlp.write_onnx(shards, tmp_path / "model.onnx")
    columns = [c for name in ("A", "C", "B") for c in shards[name]["columns"]]
    assert onnx_inputs(path) == columns
    out = onnx_run(path, table)
    if isinstance(model, VerticalMLPRegressor):
        assert out["prediction"].shape == (len(table), 1)
        assert np.abs(out["prediction"][:, 0] - expected).max() < TOL
    else:
        assert out["probability"].shape == expected.shape
        assert np.abs(out["probability"] - expected).max() < TOL
        assert list(out["label"][:, 0]) == list(model.predict(every))


def test_the_column_standardization_left_out_counts_for_nothing(tmp_path):
    model, _, table, _ = fitted(**CASES["binary-relu"])
    path = mlp.write_onnx(model._shards(), tmp_path / "model.onnx")
    moved = table.assign(flat=table["flat"] * 3 + 9)
    assert np.abs(onnx_run(path, moved)["probability"] - onnx_run(path, table)["probability"]).max() == 0.0


def test_the_split_parts_combine_to_the_network_and_hold_only_their_own_weights(case, tmp_path):
    model, every, table, expected = case
    shards = model._shards()
    whole = onnx_run(mlp.write_onnx(shards, tmp_path / "model.onnx"), table)
    folder = tmp_path / "parts"
    folder.mkdir()
    files = mlp.split(shards, folder)
    combining = json.loads(files["combiner"].read_text())
    with_columns = [k for k in ("A", "C", "B") if shards[k]["columns"]]
    assert set(files) == {*with_columns, "combiner"} and list(combining["parts"]) == with_columns
    label_numbers = np.abs(np.concatenate([shards["B"]["intercept"]] + [a.ravel() for layer in shards["B"]["top"]
                                                                          for a in layer]))
    parts = {}
    for party in with_columns:
        assert onnx_inputs(files[party]) == shards[party]["columns"]
        parts[party] = onnx_run(files[party], table)["part"]
        held = np.abs(onnx_numbers(files[party]))
        for other in with_columns:
            if other != party:
                theirs = np.abs(np.concatenate([shards[other]["block"].ravel()] + [
                    a.ravel() for layer in shards[other]["bottom"] for a in layer]))
                assert not np.isin(theirs[theirs != 0], held).any()
        assert not np.isin(label_numbers[label_numbers != 0], held).any()      # no top, no intercept
    combined = mlp.combine(combining, parts)
    assert set(combined) == set(whole) == set(combining["outputs"])
    name = combining["outputs"][0]
    assert np.abs(combined[name] - whole[name]).max() < 1e-12
    if "label" in combined:
        assert list(combined["label"][:, 0]) == list(whole["label"][:, 0]) == list(model.predict(every))
    got = combined[name][:, 0] if name == "prediction" else combined[name]
    assert np.abs(got - expected).max() < TOL


def test_shards_that_do_not_make_one_network_are_refused_naming_the_party_and_nothing_is_written(tmp_path):
    model, _, _, _ = fitted(**CASES["binary-relu"])
    shards = model._shards()
    target = tmp_path / "model.onnx"
    cases = [
        ({k: v for k, v in shards.items() if k != "C"}, "party C is missing"),
        ({**shards, "C": dict(shards["C"], trained_with="in-process:sha256:0")}, "party C: .*another run"),
        ({**shards, "C": dict(shards["C"], activation="tanh")}, "party C: .*activation 'tanh'"),
        ({**shards, "C": dict(shards["C"], block=np.zeros((2, 7)))}, "party C: its block has 7 units"),
        ({**shards, "C": dict(shards["C"], columns=["c0", "a1"])}, "'a1' is also party A"),
    ]
    for given, message in cases:
        for write in (mlp.write_onnx, mlp.split):
            with pytest.raises(DataError, match=message):
                write(given, target if write is mlp.write_onnx else tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert set(mlp.FORMATS) == {"onnx"}
