"""The credit scorecard exported to ONNX and PMML gives vfl's own score and probability on raw rows.

A pipeline (binning, WOE, selection, scorecard) is fitted in-process on generated credit data, with the feature
party's columns coded as bin indicators and (``share_woe``) as WOE values; the files run in onnxruntime and in
pypmml (JPMML-Evaluator on Java) on raw rows with missing values, on values exactly at every threshold and one
step either side, and must agree with ``predict_score`` / ``decision_function`` / ``predict_proba`` within 1e-6.
The split parts combine to the same outputs and hold no other party's thresholds, WOE values or weights.
"""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from credit_data import credit_frames
from export_helpers import onnx_inputs, onnx_numbers, onnx_run, pmml_run
from vfl import VerticalDataset, VerticalLogisticRegression
from vfl.deploy.jsonfile import write_json
from vfl.deploy.shards.credit import read_shard
from vfl.errors import DataError
from vfl.export import credit
from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE

pytest.importorskip("onnxruntime")

KEYS = {"key_bits": 1024, "insecure": True}
TOL = 1e-6
ROWS = 400


def dataset(table: pd.DataFrame) -> VerticalDataset:
    telco = table[["id", "calls", "tenure", "noise"]]
    bank = table[["id", "income", "utilization", "age", "default"]]
    return VerticalDataset({"telco": telco, "bank": bank}, label="default", id_column="id")


def edge_rows(shards: dict, table: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``table``'s first row with one selected column at each of its thresholds, one step below and
    one step above it (the next doubles), and missing."""
    base, rows = table.iloc[0].to_dict(), []
    for shard in shards.values():
        for j in shard["selected"]:
            column = shard["columns"][j]
            for t in shard["binning"]["thresholds"][j]:
                for value in (t, np.nextafter(t, -np.inf), np.nextafter(t, np.inf)):
                    rows.append(dict(base, **{column: value}))
            rows.append(dict(base, **{column: np.nan}))
    out = pd.DataFrame(rows)
    out["id"] = np.arange(len(out)) + 10_000
    return out


def fit(share_woe: bool):
    telco, bank = credit_frames(n=ROWS)
    table = telco.merge(bank, on="id")
    pipe = VerticalPipeline([
        ("woe", VerticalWOE(VerticalBinning(max_bins=6), share_woe=share_woe, **KEYS)),
        ("selection", VerticalSelection(iv_threshold=0.0)),
        ("scorecard", VerticalScorecard(VerticalLogisticRegression(**KEYS, max_iter=10,
                                                                   allow_reconstruction=["telco"]))),
    ])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(dataset(table))
    shards = pipe._shards()
    rows = pd.concat([table, edge_rows(shards, table)], ignore_index=True)
    data = dataset(rows)
    expected = {"score": pipe.predict_score(data), "decision": pipe.decision_function(data),
                "probability": pipe.predict_proba(data)}
    return pipe, shards, rows, dict(expected, label=pipe.predict(data))


@pytest.fixture(scope="module", params=[False, True], ids=["bins", "woe"])
def fitted(request):
    return fit(request.param)


def columns_of(shards: dict) -> list:
    return [s["columns"][j] for name in ("telco", "bank") for s in [shards[name]] for j in s["selected"]]


def test_the_shards_are_what_read_shard_reads_from_the_parties_files(fitted, tmp_path):
    _, shards, _, _ = fitted
    assert {k: s["role"] for k, s in shards.items()} == {"telco": "feature", "bank": "label"}
    assert len({s["trained_with"] for s in shards.values()}) == 1
    for name, shard in shards.items():
        write_json(tmp_path / f"{name}.json", shard)
        assert read_shard(tmp_path / f"{name}.json", name, shard["role"]) == shard


def test_the_scorecard_in_onnx_gives_vfl_score_and_probability_on_raw_rows_and_edges(fitted, tmp_path):
    pipe, shards, rows, expected = fitted
    path = credit.write_onnx(shards, tmp_path / "scorecard.onnx")
    assert onnx_inputs(path) == columns_of(shards)
    out = onnx_run(path, rows)
    assert rows["calls"].isna().sum() >= 20                     # missing values among the rows
    for name, want in expected.items():
        assert out[name].shape == (len(rows), 1)
        if name == "label":
            assert list(out[name][:, 0]) == list(want)
        else:
            assert np.abs(out[name][:, 0] - want).max() < TOL, name


def test_a_value_at_a_threshold_falls_in_the_lower_bin(fitted, tmp_path):
    _, shards, rows, _ = fitted
    out = onnx_run(credit.write_onnx(shards, tmp_path / "scorecard.onnx"), rows)["score"][:, 0]
    edges = out[ROWS:]
    moved = 0
    at = 0
    for shard in shards.values():
        for j in shard["selected"]:
            for _ in shard["binning"]["thresholds"][j]:
                at_edge, below, above = edges[at: at + 3]
                assert at_edge == below                          # t_(k-1) < x <= t_k: t itself is in bin k
                moved += at_edge != above                         # one step above is the next bin
                at += 3
            at += 1
    assert moved > 0


def test_the_scorecard_in_pmml_gives_vfl_score_and_probability(fitted, tmp_path):
    _, shards, rows, expected = fitted
    path = credit.write_pmml(shards, tmp_path / "scorecard.pmml")
    out = pmml_run(path, rows, columns_of(shards))
    for name in ("score", "decision", "probability"):
        assert np.abs(out[name].astype(float) - expected[name]).max() < TOL, name
    assert list(out["label"]) == list(expected["label"])


def test_the_split_parts_combine_to_the_scorecard_and_hold_only_their_own_bins(fitted, tmp_path):
    _, shards, rows, expected = fitted
    whole = onnx_run(credit.write_onnx(shards, tmp_path / "scorecard.onnx"), rows)
    folder = tmp_path / "parts"
    folder.mkdir()
    files = credit.split(shards, folder)
    assert set(files) == {"telco", "bank", "combiner"}
    combining = json.loads(files["combiner"].read_text())
    partials = {}
    for party, other in (("telco", "bank"), ("bank", "telco")):
        assert onnx_inputs(files[party]) == [shards[party]["columns"][j] for j in shards[party]["selected"]]
        partials[party] = onnx_run(files[party], rows)["partial"]
        held = onnx_numbers(files[party])
        theirs = np.concatenate([np.ravel(t) for t in shards[other]["binning"]["thresholds"]]
                                + [np.ravel(w) for w in shards[other]["coding"].get("woe", [])]
                                + [np.ravel(shards[other]["model"]["coef"])])
        assert not np.isin(theirs[theirs != 0], held).any()
        assert not np.isin([shards["bank"]["model"]["intercept"]], held).any()
    combined = credit.combine(combining, partials)
    assert set(combined) == set(whole) == set(combining["outputs"])
    for name, want in expected.items():
        if name == "label":
            assert list(combined[name][:, 0]) == list(whole[name][:, 0]) == list(want)
            continue
        assert np.abs(combined[name] - whole[name]).max() < 1e-9
        assert np.abs(combined[name][:, 0] - want).max() < TOL


def test_shards_that_do_not_make_one_scorecard_are_refused_naming_the_party_and_nothing_is_written(fitted, tmp_path):
    _, shards, _, _ = fitted
    cases = [
        ({"bank": shards["bank"]}, "at least one feature party"),
        ({**shards, "other": dict(shards["telco"], party="other", columns=["x"])}, "party other is not a party"),
        ({**shards, "telco": dict(shards["telco"], trained_with="in-process:sha256:0")}, "party telco: .*another run"),
        ({**shards, "telco": dict(shards["telco"], columns=["calls", "tenure", "age"])}, "'age' is also party telco"),
    ]
    for given, message in cases:
        for write in (*credit.FORMATS.values(), credit.split):
            with pytest.raises(DataError, match=message):
                write(given, tmp_path / "scorecard.out" if write is not credit.split else tmp_path)
    assert list(tmp_path.iterdir()) == []
