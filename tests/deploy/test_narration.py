"""What each party saw, as a table: the narration's descriptions of a real run's messages."""

import numpy as np
import pytest

from vertical_data import make_vertical
from vfl import inprocess
from vfl.deploy.narration import DESCRIPTIONS, message_table
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
    assert set(table["name"]) <= set(DESCRIPTIONS)
    assert (table["what"] != table["name"]).all()
    counts = table.groupby(["sender", "receiver", "name", "kind"])["values"].unique()
    assert list(counts["A", "B", "scores", "ciphertext"]) == [24, 10]       # training rows, then prediction rows
    assert list(counts["A", "C", "masked_gradient", "ciphertext"]) == [a.n_gradient_values]
    assert list(counts["C", "B", "gradient", "masked"]) == [b.n_gradient_values]
    assert list(counts["B", "C", "loss", "ciphertext"]) == [1]
    assert list(counts["A", "C", "partial_scores", "plaintext"]) == [10]
    assert list(counts["C", "A", "public_key", "public"]) == [0]
    assert table.loc[(table["name"] == "scores") & (table["kind"] == "masked"), "what"].str.contains("masked").all()


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
