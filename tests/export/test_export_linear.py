"""Linear and logistic regression exported to ONNX and PMML give vfl's own predictions on raw rows.

Each model is fitted in-process on generated data and its shards (``_shards()``) exported; the files run in
onnxruntime and in pypmml (JPMML-Evaluator on Java) on raw rows, new rows among them, and must agree with the
estimator's own ``decision_function`` / ``predict_proba`` / ``predict`` (private prediction) within 1e-6.
The split parts combine to the same outputs and hold no other party's weights; a model whose weights stay
shared, or shards that do not make up one model, are refused with nothing written.
"""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from export_helpers import onnx_inputs, onnx_numbers, onnx_run, pmml_run
from vfl import VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression
from vfl.deploy.jsonfile import write_json
from vfl.deploy.shards.linear import read_shard
from vfl.errors import ConfigurationError, DataError
from vfl.export import linear

pytest.importorskip("onnxruntime")

KEYS = dict(key_bits=1024, insecure=True, max_iter=15, allow_reconstruction=["A"])
TOL = 1e-6


def frames(task: str, n: int = 80, seed: int = 0, units=(250.0, 4000.0)):
    """Party A: a column in large units, two plain ones and a constant one (left out by standardization);
    party B: two columns and the label ``y``.  Then 12 new rows, the constant column not constant in them."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n + 12, 5))
    z = x @ np.array([1.0, -0.8, 0.5, 0.7, -0.4])
    if task == "logistic":
        y = (z + rng.normal(scale=0.5, size=len(z)) > 0).astype(int)
    elif task == "three":
        y = np.array(["low", "mid", "high"])[np.digitize(z + rng.normal(scale=0.3, size=len(z)), [-0.6, 0.6])]
    else:
        y = z + rng.normal(scale=0.1, size=len(z))
    a = pd.DataFrame({"id": np.arange(len(z)), "a0": x[:, 0] * units[0] + units[1], "a1": x[:, 1], "a2": x[:, 2],
                      "flat": 3.0})
    a.loc[n:, "flat"] = rng.normal(size=12) + 3.0
    b = pd.DataFrame({"id": np.arange(len(z)), "b0": x[:, 3], "b1": x[:, 4], "y": y})
    train = VerticalDataset({"A": a.iloc[:n], "B": b.iloc[:n]}, label="y", id_column="id")
    every = VerticalDataset({"A": a, "B": b}, label="y", id_column="id")
    return train, every, a.merge(b, on="id")


def fitted(estimator, task: str, units=(250.0, 4000.0), **options):
    train, every, table = frames(task, units=units)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = estimator(**KEYS, **options).fit(train)
    return model, every, table


@pytest.fixture(scope="module")
def binary():
    return fitted(VerticalLogisticRegression, "logistic")


@pytest.fixture(scope="module")
def regression():
    return fitted(VerticalLinearRegression, "linear")


@pytest.fixture(scope="module")
def three():
    return fitted(VerticalLogisticRegression, "three")


def test_the_shards_are_what_read_shard_reads_from_the_parties_files(binary, tmp_path):
    model, _, _ = binary
    shards = model._shards()
    assert {name: s["role"] for name, s in shards.items()} == {"A": "feature", "B": "label"}
    assert len({s["trained_with"] for s in shards.values()}) == 1
    assert shards["A"]["trained_with"].startswith("in-process:sha256:")
    for name, shard in shards.items():
        write_json(tmp_path / f"{name}.json", shard)
        assert read_shard(tmp_path / f"{name}.json", name, shard["role"]) == shard
    assert shards["A"]["columns"] == ["a0", "a1", "a2", "flat"] and "intercept" not in shards["A"]
    assert shards["B"]["classes"] == [0, 1] and shards["B"]["intercept"] == pytest.approx(float(model.intercept_))


def test_logistic_regression_onnx_gives_vfl_decision_and_probability_on_raw_rows(binary, tmp_path):
    model, every, table = binary
    path = linear.write_onnx(model._shards(), tmp_path / "model.onnx")
    assert onnx_inputs(path) == ["a0", "a1", "a2", "flat", "b0", "b1"]
    out = onnx_run(path, table)
    assert out["decision"].shape == out["probability"].shape == (len(table), 1)
    assert np.abs(out["decision"][:, 0] - model.decision_function(every)).max() < TOL
    assert np.abs(out["probability"][:, 0] - model.predict_proba(every)).max() < TOL
    assert out["label"].dtype == np.int64 and np.array_equal(out["label"][:, 0], model.predict(every))


def test_the_constant_column_left_out_by_standardization_counts_for_nothing(binary, tmp_path):
    model, every, table = binary
    path = linear.write_onnx(model._shards(), tmp_path / "model.onnx")
    moved = table.assign(flat=table["flat"] + 50.0)
    assert np.abs(onnx_run(path, moved)["decision"] - onnx_run(path, table)["decision"]).max() == 0.0


def test_linear_regression_onnx_and_pmml_give_vfl_predictions(regression, tmp_path):
    model, every, table = regression
    shards = model._shards()
    expected = model.predict(every)
    out = onnx_run(linear.write_onnx(shards, tmp_path / "model.onnx"), table)
    assert out["prediction"].shape == (len(table), 1)
    assert np.abs(out["prediction"][:, 0] - expected).max() < TOL
    pmml = pmml_run(linear.write_pmml(shards, tmp_path / "model.pmml"), table, ["a0", "a1", "a2", "flat", "b0", "b1"])
    assert np.abs(pmml["prediction"].astype(float) - expected).max() < TOL


def test_logistic_regression_pmml_gives_vfl_probability_and_class(binary, tmp_path):
    model, every, table = binary
    path = linear.write_pmml(model._shards(), tmp_path / "model.pmml")
    out = pmml_run(path, table, ["a0", "a1", "a2", "flat", "b0", "b1"])
    assert np.abs(out["probability"].astype(float) - model.predict_proba(every)).max() < TOL
    assert [str(v) for v in out["label"]] == [str(v) for v in model.predict(every)]


def test_one_vs_rest_exports_every_class_normalised_as_vfl(three, tmp_path):
    model, every, table = three
    shards = model._shards()
    assert len(shards["B"]["intercept"]) == 3
    out = onnx_run(linear.write_onnx(shards, tmp_path / "model.onnx"), table)
    assert out["decision"].shape == (len(table), 3)
    assert np.abs(out["decision"] - model.decision_function(every)).max() < TOL
    assert np.abs(out["probability"] - model.predict_proba(every)).max() < TOL
    assert list(out["label"][:, 0]) == list(model.predict(every))          # text classes: text labels
    pmml = pmml_run(linear.write_pmml(shards, tmp_path / "model.pmml"), table, ["a0", "a1", "a2", "flat", "b0", "b1"])
    got = np.column_stack([pmml[f"probability({c})"].astype(float) for c in model.classes_])
    assert np.abs(got - model.predict_proba(every)).max() < TOL
    assert list(pmml["label"]) == list(model.predict(every))


def test_a_model_without_standardization_or_intercept_exports_its_weights_as_they_are(tmp_path):
    model, every, table = fitted(VerticalLogisticRegression, "logistic", units=(1.0, 2.0), standardize=False,
                                 fit_intercept=False)
    shards = model._shards()
    assert "standardize" not in shards["A"] and shards["B"]["intercept"] == 0.0
    out = onnx_run(linear.write_onnx(shards, tmp_path / "model.onnx"), table)
    assert np.abs(out["decision"][:, 0] - model.decision_function(every)).max() < TOL


@pytest.mark.parametrize("case", ["binary", "three", "regression"])
def test_the_split_parts_combine_to_the_model_and_hold_only_their_own_weights(case, request, tmp_path):
    model, every, table = request.getfixturevalue(case)
    shards = model._shards()
    whole = onnx_run(linear.write_onnx(shards, tmp_path / "model.onnx"), table)
    folder = tmp_path / "parts"
    folder.mkdir()
    files = linear.split(shards, folder)
    assert set(files) == {"A", "B", "combiner"}
    combining = json.loads(files["combiner"].read_text())
    assert combining["intercept"] == list(np.atleast_1d(shards["B"]["intercept"]))
    weights = {p.name: np.abs(p.weights).ravel() for p in linear.model(shards).parties}   # the files' weights
    partials = {}
    for party in ("A", "B"):
        assert onnx_inputs(files[party]) == shards[party]["columns"]
        partials[party] = onnx_run(files[party], table)["partial"]
        own, other = weights[party], weights["B" if party == "A" else "A"]
        held = np.abs(onnx_numbers(files[party]))
        assert not np.isin(other[other != 0], held).any()          # no weight of the other party
        assert np.isin(own[own != 0], held).all()
        assert not np.isin(np.abs(np.atleast_1d(shards["B"]["intercept"])), held).any()    # the intercept neither
    combined = linear.combine(combining, partials)
    assert set(combined) == set(whole)
    for name, value in combined.items():
        if name == "label":
            assert list(value[:, 0]) == list(whole[name][:, 0]) == list(model.predict(every))
        else:
            assert np.abs(value - whole[name]).max() < 1e-12
    expected = model.predict(every) if case == "regression" else model.predict_proba(every)
    got = combined["prediction"][:, 0] if case == "regression" else combined["probability"]
    assert np.abs((got[:, 0] if case == "binary" else got) - expected).max() < TOL


def test_a_model_whose_weights_stay_shared_is_refused(tmp_path):
    train, _, _ = frames("logistic", units=(1.0, 2.0))
    model = VerticalLogisticRegression(key_bits=1024, insecure=True, standardize=False, protocol="shared",
                                       reveal="never", max_iter=2, tol=None,
                                       allow_reconstruction=["A"]).fit(train)
    shards = model._shards()
    assert "share" in shards["A"]
    for write in (*linear.FORMATS.values(), linear.split):
        with pytest.raises(ConfigurationError, match="reveal='never'"):
            write(shards, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_shards_that_do_not_make_one_model_are_refused_naming_the_party_and_nothing_is_written(binary, tmp_path):
    model, _, _ = binary
    shards = model._shards()
    target = tmp_path / "model.onnx"
    target.write_bytes(b"the previous export")
    cases = [
        ({"B": shards["B"]}, DataError, "at least one feature party"),
        ({"A": shards["A"]}, DataError, "one label party"),
        ({"A": shards["B"], "B": shards["B"]}, DataError, "party A: the shard given under its name is party 'B'"),
        ({**shards, "A": dict(shards["A"], trained_with="another run")}, DataError, "party A: .*another run"),
        ({**shards, "A": dict(shards["A"], columns=["a0", "a1", "a2", "b0"])}, DataError, "'b0' is also party A"),
        ({**shards, "A": dict(shards["A"], columns=["a0", "a1", "a2", "probability"])}, DataError, "outputs"),
        ({**shards, "A": dict(shards["A"], objective="linear")}, DataError, "party A: .*linear model"),
    ]
    for given, error, message in cases:
        for write in linear.FORMATS.values():
            with pytest.raises(error, match=message):
                write(given, target)
            assert target.read_bytes() == b"the previous export"
        with pytest.raises(error, match=message):
            linear.split(given, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]       # no temporary file left either


def test_a_shard_lists_the_model_s_parties_so_a_missing_one_is_named_and_an_older_shard_still_reads(binary,
                                                                                                   tmp_path):
    model, every, table = binary
    shards = model._shards()
    assert all(shard["data_parties"] == ["A", "B"] for shard in shards.values())
    listed = {**shards, "B": dict(shards["B"], data_parties=["A", "C", "B"])}      # a party C whose shard is not here
    for write in linear.FORMATS.values():
        with pytest.raises(DataError, match="the shard of party C is missing"):
            write(listed, tmp_path / "model.out")
    with pytest.raises(DataError, match=r"the label party B's shard lists .* party C is in one only"):
        linear.split({"B": listed["B"]}, tmp_path / "parts", {"A": "feature", "B": "label"})
    assert list(tmp_path.iterdir()) == []
    older = {}
    for name, shard in shards.items():              # a shard written before the field: read, and exported alike
        write_json(tmp_path / f"{name}.json", {k: v for k, v in shard.items() if k != "data_parties"})
        older[name] = read_shard(tmp_path / f"{name}.json", name, shard["role"])
        assert "data_parties" not in older[name]
    out = onnx_run(linear.write_onnx(older, tmp_path / "model.onnx"), table)
    assert np.abs(out["decision"][:, 0] - model.decision_function(every)).max() < TOL
    write_json(tmp_path / "bad.json", dict(shards["A"], data_parties=["B"]))
    with pytest.raises(DataError, match="'data_parties' must list the model's data parties once each, A among"):
        read_shard(tmp_path / "bad.json", "A", "feature")
