"""Every message of real runs of every family is described by its family's table, by sender.

Each family's protocols declare what each message they send carries (``vfl/protocols/*/messages.py``,
:mod:`vfl.protocols.psi`, :mod:`vfl.protocols.messages`); the narration and the board read only those.  Here
small in-process fits and predictions of every family, and a private set intersection, keep every message,
and each ``(sender's role, name)`` must have a description: a message a table misses fails, it is not shown
under its own name.  The descriptions are checked against the kind of what crossed: a ciphertext is said to
be encrypted, a masked value never is.
"""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest

from credit_data import credit_frames
from vertical_data import every_message, make_vertical
from vfl import (VerticalDataset, VerticalGradientBoostingClassifier, VerticalLogisticRegression,
                 VerticalMLPClassifier)
from vfl.deploy.narration import FAMILIES, NOT_DESCRIBED, SHARED, describe, description
from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE

KEYS = dict(key_bits=1024, insecure=True)
ROOT = Path(__file__).resolve().parents[2] / "vfl"


def _messages(run, data):
    """``{(role, name, kind): a message}`` of every message ``run()`` sent, the role read from ``data``'s parties."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, sent = every_message(run)
    role = lambda name: ("label" if name == data.label_party else "feature" if name in data.feature_parties
                         else "coordinator")
    return {(role(sender), m.name, m.kind): m for sender, _, m in sent}


def _linear_runs():
    frame_a, frame_b, _, _ = make_vertical(n_rows=60, seed=8)
    data = VerticalDataset({"bank": frame_a, "shop": frame_b}, label="y", id_column="id")
    seen = {}
    for options in ({}, dict(solver="gd", batch_size=16, packing=False, early_stopping=True),
                    dict(protocol="shared", early_stopping=True, solver="gd"), dict(inference="table3"),
                    dict(protocol="shared", packing=False)):
        def run(options=options):
            model = VerticalLogisticRegression(max_iter=2, tol=None, allow_reconstruction=["bank"], **KEYS,
                                               **options).fit(data)
            model.predict_proba(data)
        seen.update(_messages(run, data))
    return seen


def _trees_runs():
    frame_a, frame_b, _, _ = make_vertical(n_rows=120, seed=3)
    data = VerticalDataset({"bank": frame_a, "shop": frame_b}, label="y", id_column="id")
    seen = {}
    for options in (dict(early_stopping=True, validation_fraction=0.3), dict(hide_membership=True)):
        def run(options=options):
            model = VerticalGradientBoostingClassifier(max_iter=2, max_depth=2, allow_reconstruction=["bank"],
                                                       **KEYS, **options).fit(data)
            model.predict_proba(data)
        seen.update(_messages(run, data))
    return seen


def _mlp_runs():
    frame_a, frame_b, _, _ = make_vertical(n_rows=120, n_a=4, seed=4)
    parts = {"bank": frame_a[["id", "a0", "a1"]], "club": frame_a[["id", "a2", "a3"]], "shop": frame_b}
    data = VerticalDataset(parts, label="y", id_column="id")

    def run():
        model = VerticalMLPClassifier(max_iter=2, hidden_layer_sizes=(4,), batch_size=40, early_stopping=True,
                                      allow_reconstruction=["bank", "club"]).fit(data)
        model.predict_proba(data)
    return _messages(run, data)


def _credit_runs():
    telco, bank = credit_frames(n=400)
    data = VerticalDataset({"telco": telco, "bank": bank}, label="default", id_column="id")
    seen = {}
    for share_woe in (False, True):
        def run(share_woe=share_woe):
            pipe = VerticalPipeline([
                ("woe", VerticalWOE(VerticalBinning(max_bins=5), share_woe=share_woe, **KEYS)),
                ("selection", VerticalSelection(max_correlation=0.9)),
                ("scorecard", VerticalScorecard(VerticalLogisticRegression(max_iter=2, **KEYS,
                                                                           allow_reconstruction=["telco"])))])
            pipe.fit(data).predict_proba(data)
        seen.update(_messages(run, data))
    return seen


def _alignment_runs():
    import vfl.psi

    telco, bank = credit_frames(n=120)
    other = telco.rename(columns={"calls": "c2", "tenure": "t2", "noise": "n2"})
    data = VerticalDataset({"telco": telco, "other": other, "bank": bank}, label="default", id_column="id")
    return _messages(lambda: vfl.psi.intersect({"telco": telco.iloc[5:], "other": other.iloc[:-5], "bank": bank},
                                               id_column="id", label="default"), data)


RUNS = {"linear": _linear_runs, "trees": _trees_runs, "mlp": _mlp_runs, "credit": _credit_runs,
        "alignment": _alignment_runs}


@pytest.fixture(scope="module", params=sorted(RUNS))
def family_run(request):
    return request.param, RUNS[request.param]()


def test_every_message_of_a_real_run_is_described_by_its_family_s_table(family_run):
    family, seen = family_run
    assert seen
    missing = sorted({(role, name) for role, name, _ in seen if description(family, role, name) is None})
    assert not missing, f"{family}: no description for {missing}"
    for (role, name, kind), message in seen.items():
        text, _ = describe(message, family, role)
        assert text != NOT_DESCRIBED and text != name


def test_a_description_says_what_kind_of_value_crossed(family_run):
    family, seen = family_run
    for role, name, kind in seen:
        text = description(family, role, name)
        if kind == "masked":
            assert not re.search(r"\bencrypted\b", text), f"{family}: {role}'s masked {name!r} said encrypted: {text}"
        if kind == "ciphertext":
            assert re.search(r"\bencrypted\b", text), f"{family}: {role}'s ciphertext {name!r}: {text}"


def test_the_known_wrong_descriptions_are_gone():
    assert not any("conjugate" in text.lower() for text in FAMILIES["trees"].values())
    assert "conjugate" not in description("trees", "label", "control")
    for task in ("train", "predict", "align"):
        hello = description("linear", "coordinator", "hello", task)
        assert hello and not re.search(r"\brows?\b|\bsalt\b|count", hello)
    assert "salt" in description("linear", "feature", "hello") and "row" in description("linear", "label", "hello")
    assert "training fingerprint" in description("trees", "feature", "hello", "predict")
    assert not re.search(r"\bencrypted\b", description("linear", "coordinator", "packed_scores"))
    assert "encrypted" in description("linear", "feature", "packed_scores")
    assert description("alignment", "feature", "psi_hello") != "psi_hello"
    for family in FAMILIES:
        for role in ("feature", "label", "coordinator"):
            assert description(family, role, "abort")
        for role in ("feature", "label"):
            assert description(family, role, "ids_digest")


def _sent_names() -> set[str]:
    """Every message name the library's code sends as a literal (``ep.send(peer, "name", ...)``)."""
    names = set()
    for folder in ("protocols", "runs", "deploy", "federation"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "send" and len(node.args) >= 3 \
                        and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                    names.add(node.args[1].value)
    return names


def test_every_name_the_code_sends_is_in_some_table():
    """Also the messages of code paths the runs above do not take (resuming a pipeline, SecretFlow's PSI)."""
    described = {key[1] for table in (*FAMILIES.values(), *SHARED) for key in table}
    names = _sent_names()
    assert {"hello", "ids_digest", "pipeline_resume", "model_columns", "sfpsi_done"} <= names
    assert names <= described, sorted(names - described)
