"""The narration (vfl.deploy.narration): one line per message, and what each party saw, as a table.

Every message of real runs of every family is described by its family's table, by sender.  Each family's
protocols declare what each message they send carries (``vfl/protocols/*/messages.py``,
:mod:`vfl.protocols.psi`, :mod:`vfl.protocols.messages`); the narration and the board read only those.  Here
small in-process fits and predictions of every family, and a private set intersection, keep every message,
and each ``(sender's role, name)`` must have a description: a message a table misses fails, it is not shown
under its own name.  The descriptions are checked against the kind of what crossed: a ciphertext is said to
be encrypted, a masked value never is.
"""

import ast
import io
from pathlib import Path
import re
import warnings

import numpy as np
import pytest

from credit_data import credit_frames
from vertical_data import make_vertical, every_message
from vfl import (inprocess, VerticalDataset, VerticalGradientBoostingClassifier, VerticalLogisticRegression,
                 VerticalMLPClassifier)
from vfl.deploy.narration import NOT_DESCRIBED, message_table, Narrator, FAMILIES, SHARED, describe, description
from vfl.parties import Coordinator
from vfl.parties.linear import PartyA, PartyB
from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE
from vfl.protocols.linear import TrainingSettings
from vfl.transport import Transcript, BigInts, Message


@pytest.fixture(scope="module")
def run():
    """Two logistic iterations and a private and a Table 3 prediction, every message kept."""
    _, _, x, y = make_vertical(n_rows=24, task="logistic", seed=5)
    a, b = PartyA(x[:, :3]), PartyB(x[:, 3:], np.where(y == 1, 1.0, -1.0))
    c = Coordinator(1024, insecure=True)
    transcript = Transcript(keep_payloads=True)
    settings = TrainingSettings(objective="logistic", max_iter=2, tol=None, key_bits=1024, insecure=True, packing=False)
    inprocess.train({"A": a, "B": b}, c, settings, transcript)
    features = {"A": x[:10, :3], "B": x[:10, 3:]}
    inprocess.predict({"A": a, "B": b}, c, features, transcript=transcript)
    inprocess.predict({"A": a, "B": b}, c, features, mode="table3", transcript=transcript)
    return transcript, a, b


def test_every_message_is_described_with_its_count_of_values(run):
    transcript, a, b = run
    table = message_table(transcript)
    assert list(table.columns) == ["iteration", "sender", "receiver", "name", "kind", "values", "bytes", "what"]
    assert len(table) == len(transcript.records)
    assert (table["what"] != NOT_DESCRIBED).all() and (table["what"] != table["name"]).all()
    counts = table.groupby(["sender", "receiver", "name", "kind"])["values"].unique()
    assert list(counts["A", "B", "scores", "ciphertext"]) == [24, 10]       # training rows, then prediction rows
    assert list(counts["A", "C", "masked_gradient", "ciphertext"]) == [a.n_gradient_values]
    assert list(counts["C", "B", "gradient", "masked"]) == [b.n_gradient_values]
    assert list(counts["B", "C", "loss", "ciphertext"]) == [1]
    assert list(counts["A", "C", "partial_scores", "plaintext"]) == [10]
    assert list(counts["C", "A", "public_key", "public"]) == [0]
    assert table.loc[(table["name"] == "scores") & (table["kind"] == "masked"), "what"].str.contains("masked").all()
    # the coordinator's reply is masked, not encrypted; the feature party's scores are
    by_sender = table.drop_duplicates(["sender", "name"]).set_index(["sender", "name"])["what"]
    assert "encrypted" not in by_sender["C", "scores"] and "encrypted" in by_sender["A", "scores"]


def test_the_board_names_a_training_run_s_scoring_round_for_what_it_is():
    from vfl.board.runs import step_of

    assert step_of("masked_packed_scores", "train") == "training metrics"
    assert step_of("masked_packed_scores", "predict") == "prediction"
    assert step_of("masked_validation", "train") == step_of("validation_scores", "train") == "validation"


def test_the_board_describes_a_message_by_its_family_and_sender():
    from vfl.board.learned import received

    groups = {("control", "B", "public"): [3, 300], ("packed_scores", "C", "masked"): [1, 900],
              ("packed_scores", "A", "ciphertext"): [1, 900], ("hello", "C", "public"): [1, 100],
              ("psi_hello", "A", "public"): [1, 200], ("mystery", "C", "public"): [1, 10]}
    parties = {"A": "feature", "B": "label", "C": "coordinator"}
    trees = {row["name"]: row["what"] for row in received(groups, "trees", parties)}
    assert "conjugate" not in trees["control"] and "validation score" in trees["control"]
    linear = {(row["name"], row["peer"]): row for row in received(groups, "linear", parties)}
    assert "encrypted" not in linear["packed_scores", "C"]["what"] and "masked" in linear["packed_scores", "C"]["what"]
    assert "encrypted" in linear["packed_scores", "A"]["what"]
    assert "salt" not in linear["hello", "C"]["what"] and "row" not in linear["hello", "C"]["what"]
    assert linear["psi_hello", "A"]["what"] != "psi_hello" and "salt" in linear["psi_hello", "A"]["what"]
    assert linear["mystery", "C"]["what"] == "not described"


def test_one_party_s_view_is_what_it_received(run):
    transcript, _, _ = run
    table = message_table(transcript)
    for party in ("A", "B", "C"):
        view = message_table(transcript, receiver=party)
        assert set(view["receiver"]) == {party}
        assert view.drop(columns="receiver").equals(
            table[table["receiver"] == party].drop(columns="receiver").reset_index(drop=True))


def test_a_transcript_without_payloads_is_refused():
    with pytest.raises(ValueError, match="keep_payloads=True"):
        message_table(Transcript())


def test_every_message_of_a_run_gets_a_time(run):
    transcript, _, _ = run
    seconds = transcript.timings()["seconds"]
    assert len(seconds) == len(transcript.records)
    assert np.isfinite(seconds).all() and (seconds >= 0).all()


def test_narrator_one_line_per_message():
    out = io.StringIO()
    narrator = Narrator("telco", total_epochs=3, stream=out, family="linear", kind="feature")
    coordinator = Narrator("hub", total_epochs=3, stream=out, family="linear", kind="coordinator")
    message = Message("masked_gradient", "ciphertext", 1, {"ciphertexts": BigInts.from_ints([1, 2, 3], 256),
                                                           "exponent": 4})
    narrator("->", "hub", message, 1234)
    narrator("<-", "hub", message, 1234)  # received messages are narrated by their sender
    narrator("->", "bank", Message("loss_part", "ciphertext", 1, {"ciphertexts": BigInts.from_ints([5], 256)}), 300)
    coordinator.batch_loss(1, 0, 0.25)
    coordinator.loss(1, 0.5)
    lines = out.getvalue().splitlines()
    assert lines == [
        "[telco] epoch 2/3  telco -> hub  masked_gradient: encrypted gradient plus its mask [[X_k^T d + R]]  "
        "[ciphertext, 3 values, 1,234 bytes]",
        "[telco] epoch 2/3  telco -> bank  loss_part: encrypted loss part [[a u_k.d + penalty]]  "
        "[ciphertext, 1 value, 300 bytes]",
        "[hub] epoch 2/3  hub decrypts [[L]] of batch 1: loss 0.250000",
        "[hub] epoch 2/3 done: hub's decrypted loss over the epoch: 0.500000",
    ]


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
