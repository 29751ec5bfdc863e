"""The board shows a prediction's explanations as the party holds them: the label party's contributions and
reasons (a chart of how far each unit moved the scores, how often each reason was given, the first rows); a
feature party only what it sent.  Values from the record are escaped."""

import json

from vfl.board import results


def _record(folder, rows, result):
    folder.mkdir()
    if rows is not None:
        (folder / "explanations.csv").write_text("\n".join(",".join(map(str, r)) for r in rows) + "\n")
    (folder / "result.json").write_text(json.dumps(result))
    return folder


def test_the_label_party_sees_its_explanations_and_the_reasons_it_gave(tmp_path):
    rows = [["id", "income", "telco", "base_value", "reason_1", "reason_2"],
            ["c1", "0.5", "-1.5", "0.25", "income", ""],
            ["c2", "-0.5", "2.5", "0.25", "T01 <b>calls</b>", "income"]]
    folder = _record(tmp_path / "run", rows, {"rows": 2})
    shown = {s["title"]: s["html"] for s in results.sections({"family": "linear", "task": "predict"}, {"rows": 2},
                                                              folder)}
    html = shown["Explanations"]
    assert "mean |contribution| over 2 rows" in html and ">income<" in html and ">telco<" in html
    assert "<td>T01 &lt;b&gt;calls&lt;/b&gt;</td><td>1</td>" in html and "<td>income</td><td>2</td>" in html
    assert "<b>calls</b>" not in html
    assert html.count("<tr>") >= 4          # the reasons' counts and the rows


def test_a_feature_party_sees_only_what_it_sent(tmp_path):
    folder = _record(tmp_path / "run", None, {"rows": 25, "explained": {"rows": 25, "named": {"A-01 usage": 7}}})
    shown = {s["title"]: s["html"] for s in results.sections(
        {"family": "linear", "task": "predict"}, json.loads((folder / "result.json").read_text()), folder)}
    html = shown["Explanations (what it sent)"]
    assert "explanation of 25 rows" in html and "<td>A-01 usage</td><td>7</td>" in html
    assert "Explanations" not in shown
