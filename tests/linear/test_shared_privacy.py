"""What each party receives in the shared protocol, and the audit's label-inference attack run against it.

The transcript tests read every message of a run (payloads kept) and, holding the
coordinator's key, decrypt what the coordinator decrypts: no party receives a
plaintext gradient, score or residual, and every gradient value the coordinator
decrypts is masked.  The attack test runs tests/linear/test_label_leak.py's mini-batch
attack (the minimum-norm solution of each step's gradient equation, summed per row)
on everything the feature party holds after a shared run, where against Yang's
protocol it guesses 86-94% of the labels.
"""

import warnings

import numpy as np
import pytest

from test_label_leak import leak_data, minimum_norm_attack
from test_shared_protocol import SHARED, k_party_data
from vertical_data import every_message
from vfl import VerticalLogisticRegression
from vfl.parties.linear import shareholders
from vfl.parties.linear.shares import SharedBounds
from vfl.transport import BigInts


@pytest.fixture(scope="module")
def run():
    """Two feature parties, mini-batches and early stopping: every message of training and of a prediction."""
    data, x, y = k_party_data(2, n_rows=70, seed=11)
    model = VerticalLogisticRegression(max_iter=3, tol=None, batch_size=20, random_state=1, early_stopping=True,
                                       learning_rate=0.2, **SHARED)
    _, messages = every_message(lambda: model.fit(data))
    return {"model": model, "messages": messages, "x": x, "data": data}


def received(run, name):
    return [(sender, m) for sender, to, m in run["messages"] if to == name]


def test_data_parties_receive_ciphertexts_and_public_values_only_then_their_own_share(run):
    model = run["model"]
    for name in (*model.feature_parties_, model.label_party_):
        messages = received(run, name)
        for sender, message in messages[:-1]:
            assert message.kind in ("public", "ciphertext"), (name, message.name, message.kind)
            if (sender, message.name) == ("bank", "columns"):   # every data party's column count: public
                assert message["counts"].tolist() == [len(model.coef_[n]) for n in
                                                      (*model.feature_parties_, model.label_party_)]
            elif message.kind == "public":     # counts, seeds, epochs, stop flags: never a vector
                assert not any(isinstance(v, (np.ndarray, BigInts)) for v in message.fields.values()), message.name
        # the last: C's share of this party's own parameters (reveal="respectively"), one value per parameter
        sender, last = messages[-1]
        assert (sender, last.name, last.kind) == ("C", "model_share", "masked")
        assert len(last["residues"]) == len(model.coef_[name]) + (name == model.label_party_)
        names = {m.name for _, m in messages}
        assert not names & {"gradient", "partial_scores", "masked_gradient"}, names


def test_feature_parties_hear_only_from_the_label_party_and_the_coordinator(run):
    for name in run["model"].feature_parties_:
        assert {sender for sender, _ in received(run, name)} == {"bank", "C"}


def test_every_gradient_value_the_coordinator_decrypts_is_masked(run):
    """C decrypts ``G + 2^V + rho``: every value, less the offset, is beyond any gradient's bound ``2^V``.

    (A mask falls below ``2^V`` with probability ``2^-97``.)  The only other value it
    decrypts is one loss per batch.
    """
    model = run["model"]
    context = model._coordinator.context
    settings = model._settings()
    decrypted, losses = 0, 0
    for sender, message in received(run, "C"):
        assert message.kind in ("public", "ciphertext"), message.name
        if message.name.endswith("gradient_share"):
            ciphertexts = message["ciphertexts"]
            assert len(ciphertexts) == len(model.coef_[sender]) + (sender == model.label_party_)
            vector = context.from_bytes(ciphertexts.data, message["exponent"])
            # the largest gradient bound any pass of this run has (the full training set: 63 rows)
            bounds = SharedBounds(settings.frac_bits, 63, 3, settings.feature_bound, settings.score_bound)
            for value in context.decrypt_residues(vector):
                assert int(value) >= 2 ** bounds.value_bits        # offset 2^V' + mask: never a gradient
                decrypted += 1
        elif message.name.endswith("loss"):
            assert sender == model.label_party_ and len(message["ciphertexts"]) == 1
            losses += 1
        else:
            assert message.name in ("models", "resume", "schedule", "parameters"), message.name
    # 3 epochs of 3 batches and a validation pass each; 2 + 2 + 4 parameters
    assert decrypted == 3 * 4 * 8 and losses == 3 * 4


def test_the_residual_is_re_randomized_and_scores_stay_encrypted(run):
    """B's ``[[d]]`` shares no ciphertext with any ``[[u_k]]`` sent to it; no score travels in clear."""
    sent = {bytes(m["ciphertexts"].data) for s, _, m in run["messages"] if m.name.endswith("scores")}
    for _, _, message in run["messages"]:
        assert message.kind != "plaintext", message.name
        if message.name.endswith("residual"):
            width = message["ciphertexts"].width
            cts = {message["ciphertexts"].data[i:i + width] for i in range(0, len(message["ciphertexts"].data), width)}
            for s in sent:
                assert not cts & {s[i:i + width] for i in range(0, len(s), width)}


# -- the audit's attack ----------------------------------------------------------------------------------------
def shares_seen_by_a(monkeypatch, model, data):
    """Fit; every step's (rows, A's share of its gradient) in gradient units: all A holds about any gradient."""
    steps, last = [], {}
    gradient_share, update = shareholders.DataShares.gradient_share, shareholders.DataShares.update

    def spy_gradient(self, d, bounds, rows=None, features=None, extra_columns=None):
        if self.party.role == "A" and rows is not None:
            last["rows"] = np.asarray(rows)
        return gradient_share(self, d, bounds, rows, features, extra_columns)

    def spy_update(self, bounds, objective, rule, eta):
        if self.party.role == "A":
            _, masks = self._pending             # A's share of X_b^T d is -rho: the only one it ever holds
            scale = float(bounds.gradient_scale(objective.grad_scale)) / 2 ** bounds.frac_bits
            steps.append((last["rows"], -scale * np.array([float(r) for r in masks])))
        return update(self, bounds, objective, rule, eta)

    monkeypatch.setattr(shareholders.DataShares, "gradient_share", spy_gradient)
    monkeypatch.setattr(shareholders.DataShares, "update", spy_update)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no LabelLeakWarning: there is no gradient to leak
        model.fit(data)
    return steps


def test_the_mini_batch_attack_is_left_at_the_majority_class(monkeypatch):
    """The attack that guesses 86-94% against Yang's protocol (tests/linear/test_label_leak.py), on A's shared run.

    Per step A holds only its own share of the gradient (its mask), so the attack
    guesses at the majority class.  Its final weights (``reveal="respectively"``) are
    one equation over all rows: the attack on them says what its own columns say,
    as a full-batch run does.
    """
    x_a, y, data = leak_data(0)
    model = VerticalLogisticRegression(key_bits=1024, insecure=True, random_state=1, batch_size=16, max_iter=10,
                                       tol=None, protocol="shared")
    steps = shares_seen_by_a(monkeypatch, model, data)
    assert len(steps) == 10 * 10
    majority = max(y.mean(), 1 - y.mean())
    accuracy = float(np.mean(minimum_norm_attack(x_a, steps) == y))
    assert accuracy - majority <= 0.1, (accuracy, majority)
    scaled = (x_a - model.mean_["A"]) / model.scale_["A"]
    final = [(np.arange(len(y)), model.initial_coef_["A"] - model.coef_["A"])]
    assert float(np.mean(minimum_norm_attack(scaled, final) == y)) - majority <= 0.12
