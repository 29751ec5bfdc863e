"""What each party saw, as a table: the narration's descriptions of a real run's messages."""

import numpy as np
import pytest

from vertical_data import make_vertical
from vfl import inprocess
from vfl.deploy.narration import NOT_DESCRIBED, message_table
from vfl.parties import Coordinator
from vfl.parties.linear import PartyA, PartyB
from vfl.protocols.linear import TrainingSettings
from vfl.transport import Transcript


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
