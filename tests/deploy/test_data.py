"""The data files a party reads (vfl.deploy.data): CSVs sorted by id, errors naming party, column and row."""

import io

import numpy as np
import pandas as pd
import pytest

from vfl.deploy.data import load_csv
from vfl.errors import DataError
from vfl.parties import targets


def test_csv_rows_sorted_by_id_and_digest_ignores_order(tmp_path):
    frame = pd.DataFrame({"id": ["c", "a", "b"], "x": [3.0, 1.0, 2.0], "label": ["n", "y", "y"]})
    frame.to_csv(tmp_path / "one.csv", index=False)
    frame.iloc[[2, 0, 1]].to_csv(tmp_path / "two.csv", index=False)
    one = load_csv(tmp_path / "one.csv", "B", label="label")
    two = load_csv(tmp_path / "two.csv", "B", label="label")
    assert one.ids == ["a", "b", "c"] and one.features[:, 0].tolist() == [1.0, 2.0, 3.0]
    assert one.ids_digest(["s1", "s2"]) == two.ids_digest(["s2", "s1"]) and one.columns == ["x"]
    (labels,), classes = targets(one.labels, "logistic")
    assert labels.tolist() == [1.0, 1.0, -1.0] and classes.tolist() == ["n", "y"]


@pytest.mark.parametrize("csv, kwargs, message", [
    ("id,x\n1,2\n1,3\n", {}, "id '1' appears twice"),
    ("key,x\n1,2\n", {}, "id column 'id' is missing"),
    ("id,x\n1,abc\n2,3\n", {}, r"column 'x': not numeric \(dtype \w+\): row 0 \(id '1'\) holds 'abc'"),
    ("id,x\n1,\n2,3\n", {}, r"column 'x': NaN at row 0 \(id '1'\)"),
    ("id,x\n1,inf\n2,3\n", {}, r"column 'x': infinity at row 0 \(id '1'\)"),
    ('id,x\n"   ",2\n2,3\n', {}, r"id column 'id', row 0: the id is empty \(only whitespace"),
    ("id,x\n7,2\n7.0,3\n", {}, r"id '7.0' appears twice \(rows 0 and 1; .*7 and 7.0 are one id"),
    ("id,x,y\n1,2,0\n2,3,1\n", {"foreign": ("y", None)}, r"holds the column 'y', the label party's.*feature party"),
    ("id,x,w\n1,2,0\n2,3,1\n", {"foreign": ("y", "w")}, r"holds the column 'w', the label party's"),
    ("id,x,y\n1,2,\n2,3,1\n", {"label": "y"}, r"column 'y': NaN at row 0 \(id '1'\)"),
    ("id,x,y\nz9,1,0\nb2,2,1\na1,,1\n", {"label": "y"}, r"column 'x': NaN at row 2 \(id 'a1'\)"),   # the file's row,
    ("id,x,y\nz9,1,\nb2,2,1\na1,3,1\n", {"label": "y"}, r"column 'y': NaN at row 0 \(id 'z9'\)"),   # not the sorted
    ("id,x\n1,2\n", {"label": "y"}, "there is no label column 'y'; its columns are x"),
    ("id,x,diagnosis\n1,2,a\n", {"label": "diagnosys"},
     r"d.csv\): there is no label column 'diagnosys' \(did you mean 'diagnosis'\?\); its columns are x, diagnosis"),
    ("id,x,z\n1,2,3\n", {"columns": ["x"]}, r"unexpected \['z'\]"),
    ("id\n1\n", {}, "no feature columns"),
])
def test_csv_errors_name_party_column_and_row(tmp_path, csv, kwargs, message):
    (tmp_path / "d.csv").write_text(csv)
    with pytest.raises(DataError, match=message):
        load_csv(tmp_path / "d.csv", "A", **kwargs)


def test_a_csv_read_is_sorted_by_id_with_its_labels_and_weights():
    import io

    data = load_csv(io.StringIO("id,x,y,w\nz9,1,0,1\nb2,2,1,2\na1,3,1,3\n"), "B", label="y", weight="w")
    assert data.ids == ["a1", "b2", "z9"] and data.features[:, 0].tolist() == [3.0, 2.0, 1.0]
    assert data.labels.tolist() == [1, 1, 0] and data.weights.tolist() == [3.0, 2.0, 1.0]


def test_the_cli_and_the_api_refuse_the_same_data_alike(tmp_path):
    """One set of checks (vfl.datachecks): the same bad table gets the same reason on both paths."""
    from vfl import VerticalDataset

    cases = [({"id": ["1", "   "], "x": [1.0, 2.0]}, "the id is empty"),
             ({"id": ["1", "2"], "x": [1.0, float("nan")]}, "column 'x': NaN at row"),
             ({"id": ["1", "2"], "x": ["a", "b"]}, "column 'x': not numeric")]
    for columns, reason in cases:
        frame = pd.DataFrame(columns)
        frame.to_csv(tmp_path / "a.csv", index=False)
        with pytest.raises(DataError, match=reason):
            load_csv(tmp_path / "a.csv", "A")                     # a linear model's table
        other = pd.DataFrame({"id": frame["id"], "b": [0.0, 1.0], "y": [0, 1]})
        with pytest.raises(DataError, match=reason):
            VerticalDataset({"A": frame, "B": other}, label="y", id_column="id").require_complete()
    # a missing value: kept for gradient boosting on both paths, refused for a linear model on both
    frame = pd.DataFrame({"id": ["1", "2"], "x": [1.0, float("nan")]})
    frame.to_csv(tmp_path / "a.csv", index=False)
    assert np.isnan(load_csv(tmp_path / "a.csv", "A", missing=True).features[1, 0])
    other = pd.DataFrame({"id": frame["id"], "b": [0.0, 1.0], "y": [0, 1]})
    assert np.isnan(VerticalDataset({"A": frame, "B": other}, label="y", id_column="id").features("A")[1, 0])


def test_missing_csv(tmp_path):
    with pytest.raises(DataError, match="party A: data file .* does not exist"):
        load_csv(tmp_path / "none.csv", "A")
