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


@pytest.fixture(scope="module", params=[False, True], ids=["unpacked", "packed"])
def run(request):
    """Two feature parties, mini-batches and early stopping: every message of training and of a prediction."""
    data, x, y = k_party_data(2, n_rows=70, seed=11)
    model = VerticalLogisticRegression(max_iter=3, tol=None, batch_size=20, random_state=1, early_stopping=True,
                                       learning_rate=0.2, packing=request.param, **SHARED)
    _, messages = every_message(lambda: model.fit(data))
    return {"model": model, "messages": messages, "x": x, "data": data, "packed": request.param}


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

    (A mask falls below ``2^V`` with probability ``2^-97``.)  Packed, it decrypts
    products whose every slot position holds such a masked value, below its guard bit
    (the label party's label term rides as one more, masked alike).  The only other
    value it decrypts is one loss per batch.
    """
    model = run["model"]
    context = model._coordinator.context
    settings = model._settings()
    decrypted, losses, pending = 0, 0, []
    for sender, message in received(run, "C"):
        assert message.kind in ("public", "ciphertext"), message.name
        if message.name.endswith("gradient_share"):
            assert message.name.endswith("packed_gradient_share") == run["packed"], message.name
            ciphertexts = message["ciphertexts"]          # B's: its intercept too (and its label term, packed)
            assert len(ciphertexts) == len(model.coef_[sender]) + (sender == model.label_party_) * (1 + run["packed"])
            pending.append(context.decrypt_residues(context.from_bytes(ciphertexts.data, message["exponent"])))
        elif message.name.endswith("loss"):
            assert sender == model.label_party_ and len(message["ciphertexts"]) == 1
            # the pass's bounds: its rows, 3 data parties, the declared bounds
            bounds = SharedBounds(settings.frac_bits, message["n"], 3, settings.feature_bound, settings.score_bound)
            for value in (v for values in pending for v in values):
                for slot in _positions(value, bounds, run["packed"]):
                    assert 2 ** bounds.value_bits <= slot      # offset 2^V' + mask: never a gradient
                decrypted += 1
            losses += 1
            pending = []
        else:
            assert message.name in ("models", "resume", "schedule", "parameters"), message.name
    # 3 epochs of 3 batches and a validation pass each; 2 + 2 + 4 parameters (and B's label term, packed)
    assert decrypted == 3 * 4 * (9 if run["packed"] else 8) and losses == 3 * 4


def _positions(value, bounds: SharedBounds, packed: bool) -> list[int]:
    """The masked values of one decrypted gradient value: itself, or every slot position of a packed product."""
    if not packed:
        return [int(value)]
    layout = bounds.layout(1024)        # the run's key
    w = layout.slot_bits
    count = 2 * layout.slots - 1
    assert 0 <= int(value) < 2 ** (w * count)
    slots = [(int(value) >> (w * p)) % 2 ** w for p in range(count)]
    assert all(slot < 2 ** (w - 1) for slot in slots)       # the guard bit is clear
    return slots


def test_the_coordinator_returns_its_packed_share_only_encrypted_afresh(run):
    """Packed, C sends each data party ``[[G + rho]]``: ciphertexts it never received, one per value it read."""
    returned_names = {m.name for s, _, m in run["messages"] if s == "C" and m.name.endswith("returned_gradient_share")}
    assert bool(returned_names) == run["packed"]
    received_by_c = {bytes(m["ciphertexts"].data) for _, to, m in run["messages"] if to == "C" and
                     m.kind == "ciphertext"}
    model = run["model"]
    returned = [(to, m) for s, to, m in run["messages"] if s == "C" and m.name.endswith("returned_gradient_share")]
    assert len(returned) == (3 * 4 * 3 if run["packed"] else 0)
    for to, message in returned:
        assert message.kind == "ciphertext" and bytes(message["ciphertexts"].data) not in received_by_c
        assert len(message["ciphertexts"]) == len(model.coef_[to]) + 2 * (to == model.label_party_)


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
    packed_share = shareholders.DataShares.packed_gradient_share

    def spy_gradient(self, d, bounds, rows=None, features=None, extra_columns=None):
        if self.party.role == "A" and rows is not None:
            last["rows"] = np.asarray(rows)
        return gradient_share(self, d, bounds, rows, features, extra_columns)

    def spy_packed(self, d, bounds, layout, rows=None, features=None, extra_columns=None):
        if self.party.role == "A" and rows is not None:
            last["rows"] = np.asarray(rows)
        return packed_share(self, d, bounds, layout, rows, features, extra_columns)

    def spy_update(self, bounds, objective, rule, eta):
        if self.party.role == "A":
            _, masks = self._pending             # A's share of X_b^T d is -rho: the only one it ever holds
            scale = float(bounds.gradient_scale(objective.grad_scale)) / 2 ** bounds.frac_bits
            steps.append((last["rows"], -scale * np.array([float(r) for r in masks])))
        return update(self, bounds, objective, rule, eta)

    monkeypatch.setattr(shareholders.DataShares, "gradient_share", spy_gradient)
    monkeypatch.setattr(shareholders.DataShares, "packed_gradient_share", spy_packed)
    monkeypatch.setattr(shareholders.DataShares, "update", spy_update)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no LabelLeakWarning: there is no gradient to leak
        model.fit(data)
    return steps


@pytest.mark.parametrize("packing", [False, True])
def test_the_mini_batch_attack_is_left_at_the_majority_class(monkeypatch, packing):
    """The attack that guesses 86-94% against Yang's protocol (tests/linear/test_label_leak.py), on A's shared run.

    Per step A holds only its own share of the gradient (its mask), so the attack
    guesses at the majority class.  Its final weights (``reveal="respectively"``) are
    one equation over all rows: the attack on them says what its own columns say,
    as a full-batch run does.
    """
    x_a, y, data = leak_data(0)
    model = VerticalLogisticRegression(key_bits=1024, insecure=True, random_state=1, batch_size=16, max_iter=10,
                                       tol=None, protocol="shared", packing=packing)
    steps = shares_seen_by_a(monkeypatch, model, data)
    assert len(steps) == 10 * 10
    majority = max(y.mean(), 1 - y.mean())
    accuracy = float(np.mean(minimum_norm_attack(x_a, steps) == y))
    assert accuracy - majority <= 0.1, (accuracy, majority)
    scaled = (x_a - model.mean_["A"]) / model.scale_["A"]
    final = [(np.arange(len(y)), model.initial_coef_["A"] - model.coef_["A"])]
    assert float(np.mean(minimum_norm_attack(scaled, final) == y)) - majority <= 0.12
