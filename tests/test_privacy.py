"""What each party receives, read from every message that crossed the transport."""

import pickle

import gmpy2
import numpy as np
import pytest

from vertical_data import make_vertical
from vfl import inprocess
from vfl.crypto import FixedPoint, vector
from vfl.crypto.randomness import uniform_below
from vfl.parties import LOGISTIC, Coordinator
from vfl.parties.linear import PartyA, PartyB
from vfl.protocols.linear import TrainingSettings
from vfl.transport import BigInts, Transcript
from vfl.transport.message import decode


@pytest.fixture(scope="module")
def run():
    """A logistic run with every payload and every mask kept, plus the parties (C's key to inspect ciphertexts)."""
    _, _, x, y = make_vertical(n_rows=40, task="logistic", seed=2)
    labels = np.where(y == 1, 1.0, -1.0)
    settings = TrainingSettings(objective="logistic", max_iter=2, tol=None, key_bits=1024, insecure=True,
                                learning_rate=0.2, alpha=0.01, solver="gd", packing=False)
    a, b = PartyA(x[:, :3]), PartyB(x[:, 3:], labels)
    c = Coordinator(1024, insecure=True)
    transcript = Transcript(keep_payloads=True)
    masks = []

    def recording_uniform_below(n, count):
        drawn = uniform_below(n, count)
        masks.append((int(n), [int(m) for m in drawn]))
        return drawn

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vector, "uniform_below", recording_uniform_below)
        inprocess.train({"A": a, "B": b}, c, settings, transcript)
        scores = inprocess.predict({"A": a, "B": b}, c, {"A": x[:, :3], "B": x[:, 3:]}, transcript=transcript)
    return {"x": x, "y": labels, "a": a, "b": b, "c": c, "messages": transcript.messages(),
            "payloads": transcript.payloads, "scores": scores, "masks": masks}


def received(run, role):
    return [m for _, to, m in run["messages"] if to == role]


def float_arrays(message):
    return [v for v in message.fields.values() if isinstance(v, np.ndarray)]


def test_every_payload_decodes_to_plain_typed_fields(run):
    """Each frame is the documented format (JSON header, raw numbers), never a pickle."""
    assert run["payloads"]
    for payload in run["payloads"]:
        assert payload[:4] == b"VFL1" and not payload.startswith(b"\x80")
        message = decode(payload)
        for name, value in message.fields.items():
            assert value is None or isinstance(value, (bool, int, float, str, np.ndarray, BigInts, bytes)), name
            if isinstance(value, np.ndarray):
                assert value.dtype in (np.float64, np.int64), name
            if isinstance(value, bytes):   # raw bytes carry only the public modulus, big-endian
                assert (message.name, name) == ("public_key", "key"), (message.name, name)
                assert int.from_bytes(value, "big") == run["c"].context.public_key.n


def test_nothing_is_unpickled_during_a_run(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("something was unpickled")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    _, _, x, y = make_vertical(n_rows=24, task="linear", seed=6)
    a, b, c = PartyA(x[:, :3]), PartyB(x[:, 3:], y), Coordinator(1024, insecure=True)
    settings = TrainingSettings(objective="linear", max_iter=1, tol=None, key_bits=1024, insecure=True)
    inprocess.train({"A": a, "B": b}, c, settings, Transcript())
    inprocess.predict({"A": a, "B": b}, c, {"A": x[:, :3], "B": x[:, 3:]}, transcript=Transcript())


def test_private_prediction_gives_b_the_true_scores(run):
    a, b = run["a"], run["b"]
    expected = a.scores() + b.scores()
    np.testing.assert_allclose(run["scores"], expected, atol=1e-8)


def test_a_receives_no_labels_and_no_plaintext_from_b(run):
    for message in received(run, "A"):
        assert message.kind in ("public", "ciphertext", "masked"), message.name
        assert not float_arrays(message), message.name
        for value in message.fields.values():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert len(np.atleast_1d(value)) == 1  # only scalars: seed, counts, epochs


def test_b_receives_no_plaintext_scores_of_a(run):
    for message in received(run, "B"):
        assert message.kind in ("public", "ciphertext", "masked"), message.name
        assert not float_arrays(message), message.name


def test_c_receives_only_aggregates_and_masked_values(run):
    c, a, b = run["c"], run["a"], run["b"]
    n = c.context.public_key.n
    n_rows = run["x"].shape[0]
    for message in received(run, "C"):
        assert not float_arrays(message), message.name
        if message.name == "masked_gradient":
            ciphertexts = message["ciphertexts"].to_ints()
            assert len(ciphertexts) in (a.n_gradient_values, b.n_gradient_values)  # never per-sample
            residues = [c.context.private_key.raw_decrypt(ct) for ct in ciphertexts]
            # masked: the residues are spread over all of Z_n, not small signed numbers
            assert all(n // 2 ** 40 < r < n - n // 2 ** 40 for r in residues)
        if message.name == "loss":
            assert len(message["ciphertexts"]) == 1
        if message.name == "masked_scores":
            assert len(message["ciphertexts"]) == n_rows
            residues = [c.context.private_key.raw_decrypt(ct) for ct in message["ciphertexts"].to_ints()]
            assert all(n // 2 ** 40 < r < n - n // 2 ** 40 for r in residues)


def test_masks_are_fresh_for_every_message(run):
    """One mask drawn per masked value sent to C, none reused, drawn from all of Z_n."""
    n = int(run["c"].context.public_key.n)
    masked_values = sum(len(m["ciphertexts"]) for m in received(run, "C")
                        if m.name in ("masked_gradient", "masked_scores"))
    masks = [m for modulus, drawn in run["masks"] for m in drawn]
    assert {modulus for modulus, _ in run["masks"]} == {n}
    assert len(masks) == masked_values
    assert len(set(masks)) == len(masks)
    assert all(0 <= m < n for m in masks)
    # uniform over Z_n: a random element's top 8 bits are almost never all zero, its bit length near n's
    assert sum(m.bit_length() > n.bit_length() - 8 for m in masks) >= 0.9 * len(masks)
    # and the residues C decrypts for the gradients are distinct as well
    c = run["c"]
    seen = [c.context.private_key.raw_decrypt(ct) for m in received(run, "C") if m.name == "masked_gradient"
            for ct in m["ciphertexts"].to_ints()]
    assert len(seen) == len(set(seen))


def test_a_cannot_divide_out_its_own_randomness(run):
    """A knows [[u_A]]; dividing B's [[d]] by it must not give (1 + n)^(u_B - 2y) = 1 + (u_B - 2y) n."""
    c = run["c"]
    pk = c.context.public_key
    n, n2 = pk.n, pk.nsquare
    sent = [m for s, to, m in run["messages"] if s == "A" and to == "B" and m.name == "scores" and m.iteration >= 0]
    got = [m for s, to, m in run["messages"] if s == "B" and to == "A" and m.name == "residual"]
    assert sent and len(sent) == len(got)
    # the plaintext B added in the first iteration: its scores at its secret start, minus 2y (one full batch)
    b = run["b"]
    offset = FixedPoint().encode(b.design() @ b.initial_params - LOGISTIC.kappa * run["y"], pk.max_int)
    u_a = [gmpy2.mpz(v) for v in sent[0]["ciphertexts"].to_ints()]
    d = [gmpy2.mpz(v) for v in got[0]["ciphertexts"].to_ints()]
    revealed = [dc * gmpy2.invert(uc, n2) % n2 for dc, uc in zip(d, u_a)]
    plain = [(1 + (o % n) * n) % n2 for o in offset]
    assert all(r != p for r, p in zip(revealed, plain))
    assert all(r % n != 1 for r in revealed)        # not 1 + m n for any m: nothing A could read
    # without the re-randomization the same division would reveal it: the check can fail
    naive = [uc * p % n2 for uc, p in zip(u_a, plain)]
    assert [v * gmpy2.invert(uc, n2) % n2 for v, uc in zip(naive, u_a)] == plain


def test_every_ciphertext_field_is_fixed_width(run):
    width = run["c"].context.public_key.ciphertext_bytes
    for _, _, message in run["messages"]:
        if message.kind == "ciphertext":
            assert isinstance(message["ciphertexts"], BigInts) and message["ciphertexts"].width == width


def test_table3_variant_is_labelled_plaintext():
    _, _, x, y = make_vertical(n_rows=30, seed=4)
    a, b = PartyA(x[:, :3]), PartyB(x[:, 3:], np.where(y == 1, 1.0, -1.0))
    a.params[:] = 0.5
    b.params[:] = -0.25
    c = Coordinator(1024, insecure=True)
    transcript = Transcript(keep_payloads=True)
    scores = inprocess.predict({"A": a, "B": b}, c, {"A": x[:, :3], "B": x[:, 3:]}, mode="table3", transcript=transcript)
    np.testing.assert_allclose(scores, a.scores() + b.scores())
    to_c = [m for _, to, m in transcript.messages() if to == "C"]
    assert {m.kind for m in to_c} == {"plaintext"}
