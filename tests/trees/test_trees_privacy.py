"""What a feature party learns in each mode, read from the transcript, and the instance-space label attack.

In the standard mode (as in FATE's SecureBoost) a feature party is told the
rows of every node; the attack test shows what that costs: knowing the labels
of a tenth of the rows, it guesses most others from the leaves rows share.
With ``hide_membership=True`` nothing it receives is per row in the clear: the
same attack has no leaves to work with, and what its own splits say of each row
guesses no better than its own columns (about the majority class here).
"""

import numpy as np
import pandas as pd
import pytest

from vfl import VerticalDataset
from vfl import ensemble
from vfl.attacks import instance_spaces, leaf_label_attack, own_columns_attack, own_split_patterns
from vfl.ensemble import VerticalGradientBoostingClassifier
from vfl.transport import BigInts, Transcript

N_ROWS = 400


def attack_data(seed):
    """A's four columns predict little; B's two columns and the labels a lot."""
    rng = np.random.default_rng(seed)
    x_a, x_b = rng.normal(size=(N_ROWS, 4)), rng.normal(size=(N_ROWS, 2))
    y = (2.0 * x_b[:, 0] - 1.5 * x_b[:, 1] + 0.3 * x_a[:, 0] + rng.normal(scale=0.5, size=N_ROWS) > 0).astype(int)
    data = VerticalDataset({"A": pd.DataFrame(x_a).add_prefix("a"), "B": pd.DataFrame(x_b).add_prefix("b").assign(y=y)},
                           label="y")
    known = np.sort(rng.choice(N_ROWS, N_ROWS // 10, replace=False))
    return data, x_a, y, known


def fit_recorded(monkeypatch, data, **kwargs):
    """Fit, keeping every message's payload."""
    transcript = Transcript(keep_payloads=True)
    monkeypatch.setattr(ensemble, "Transcript", lambda: transcript)
    model = VerticalGradientBoostingClassifier(max_iter=10, learning_rate=0.3, early_stopping=False, key_bits=1024,
                                               insecure=True, **kwargs).fit(data)
    return model, transcript


@pytest.mark.parametrize("seed", [0, 1])
def test_instance_space_attack_succeeds_in_the_standard_mode_and_has_nothing_with_hidden_membership(
        monkeypatch, seed):
    data, x_a, y, known = attack_data(seed)
    unknown = np.setdiff1d(np.arange(N_ROWS), known)
    accuracy = lambda guess: float(np.mean(guess[unknown] == y[unknown]))
    majority = max(y[unknown].mean(), 1 - y[unknown].mean())
    own = accuracy(own_columns_attack(x_a, known, y))

    standard, transcript = fit_recorded(monkeypatch, data)
    leaves = instance_spaces(transcript, "A", np.arange(N_ROWS))
    assert leaves.shape == (N_ROWS, 9)                   # every tree but the first (the label party's own)
    stolen = accuracy(leaf_label_attack(leaves, known, y))
    assert stolen > 0.85 and stolen > own + 0.25 and stolen > majority + 0.3

    hidden, transcript = fit_recorded(monkeypatch, data, hide_membership=True)
    assert instance_spaces(transcript, "A", np.arange(N_ROWS)).shape[1] == 0
    assert leaf_label_attack(np.empty((N_ROWS, 0)), known, y) is None
    patterns = own_split_patterns(hidden._parties["A"])
    assert patterns.shape == (N_ROWS, 9)
    assert accuracy(leaf_label_attack(patterns, known, y)) < majority + 0.1


def received(transcript, party):
    return [(sender, message) for sender, receiver, message in transcript.messages() if receiver == party]


def test_with_hidden_membership_nothing_a_feature_party_receives_is_per_row_in_the_clear(monkeypatch):
    data, _, _, _ = attack_data(3)
    model, transcript = fit_recorded(monkeypatch, data, hide_membership=True)
    names = set()
    for sender, message in received(transcript, "A"):
        names.add(message.name)
        for field, value in message.fields.items():
            if isinstance(value, BigInts):
                assert message.kind == "ciphertext", (message.name, field)
                continue
            assert not isinstance(value, bytes) or (message.name, field) == ("public_key", "key"), \
                (message.name, field)                                            # no bit per row
            assert not (isinstance(value, np.ndarray) and value.size >= N_ROWS // 4), (message.name, field)
            assert not (isinstance(value, np.ndarray) and value.dtype == np.float64), (message.name, field)
    assert names == {"public_key", "start", "iteration", "round", "round_gradients", "split", "control"}


def test_in_the_standard_mode_a_feature_party_receives_each_nodes_rows_and_no_gradient_in_the_clear(monkeypatch):
    data, _, _, _ = attack_data(4)
    model, transcript = fit_recorded(monkeypatch, data)
    kinds = {}
    for sender, message in received(transcript, "A"):
        kinds.setdefault(message.name, set()).add(message.kind)
        for value in message.fields.values():
            assert not (isinstance(value, np.ndarray) and value.dtype == np.float64), message.name
    assert kinds == {"public_key": {"public"}, "start": {"public"}, "iteration": {"public"},
                     "gradients": {"ciphertext"}, "nodes": {"plaintext"}, "split": {"public"},
                     "control": {"public"}}
    sent = [m for s, r, m in transcript.messages() if s == "A"]
    assert {(m.name, m.kind) for m in sent} == {("resume", "public"), ("candidates", "ciphertext"),
                                                  ("partition", "plaintext")}
    for message in sent:          # no feature value, no threshold: ciphertexts, counts, bits, column indices
        assert all(not (isinstance(v, np.ndarray) and v.dtype.kind == "f") and not isinstance(v, float)
                   for v in message.fields.values()), message.name


def test_every_tree_shuffles_a_feature_partys_candidates_afresh(monkeypatch):
    data, _, _, _ = attack_data(5)
    orders = []
    from vfl.parties.trees.feature_party import BoostingFeatureParty

    start = BoostingFeatureParty.start_tree

    def spy(self, *args, **kwargs):
        start(self, *args, **kwargs)
        orders.append(self._order.copy())

    monkeypatch.setattr(BoostingFeatureParty, "start_tree", spy)
    VerticalGradientBoostingClassifier(max_iter=4, early_stopping=False, key_bits=1024, insecure=True,
                                       label_party_trees=0).fit(data)
    assert len(orders) == 4 and all(sorted(o.tolist()) == list(range(len(o))) for o in orders)
    assert all(np.mean(o == np.arange(len(o))) < 0.2 for o in orders)
    assert all(not np.array_equal(a, b) for a, b in zip(orders, orders[1:]))


@pytest.mark.parametrize("hide_membership", [False, True])
def test_at_prediction_a_feature_party_receives_the_row_count_and_its_trees_only(monkeypatch, hide_membership):
    """What A receives to predict: one public message, the row count and which trees hold its splits; no leaf,
    score or row of any tree (it answers with its own splits' leaf masks, which only B reads)."""
    data, _, _, _ = attack_data(3)
    model, _ = fit_recorded(monkeypatch, data, hide_membership=hide_membership)
    transcript, run = Transcript(keep_payloads=True), ensemble.run_in_threads
    monkeypatch.setattr(ensemble, "run_in_threads",
                        lambda roster, programs, _=None, **kwargs: run(roster, programs, transcript, **kwargs))
    model.predict_proba(data)
    received = [(m.name, m.kind, sorted(m.fields)) for _, to, m in transcript.messages() if to == "A"]
    assert received == [("predict", "public", ["n_rows", "trees"])]
    (_, _, predict), = [item for item in transcript.messages() if item[1] == "A"]
    assert predict["n_rows"] == N_ROWS and set(np.asarray(predict["trees"]).tolist()) <= set(range(model.n_iter_))
