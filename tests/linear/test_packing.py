"""Packed ciphertexts: slot arithmetic, packed prediction equal to unpacked, overflow refused, what C sees."""

import math

import gmpy2
import numpy as np
import pytest

from vfl import inprocess
from vfl.crypto import Context, FixedPoint, packing
from vfl.crypto.packing import STATISTICAL_BITS, SlotLayout
from vfl.errors import FixedPointOverflowError
from vfl.parties import Coordinator
from vfl.parties.linear import PartyA, PartyB
from vfl.parties.linear.packed import bound_bits, prediction_slots
from vfl.protocols import Roster
from vfl.transport import BigInts, Transcript


# -- numbers ------------------------------------------------------------------------------
def test_layout_fits_the_plaintext_with_room_for_masks():
    layout = packing.layout_for(2048, 46)
    assert layout.slot_bits == 46 + 2 + STATISTICAL_BITS
    assert layout.slots * layout.slot_bits <= 2046 < (layout.slots + 1) * layout.slot_bits
    product = packing.layout_for(2048, 46, product=True)
    assert (2 * product.slots - 1) * product.slot_bits <= 2046 < (2 * product.slots + 1) * product.slot_bits
    with pytest.raises(FixedPointOverflowError, match="does not fit"):
        packing.layout_for(256, 200)
    with pytest.raises(ValueError):
        SlotLayout(value_bits=40, slot_bits=100, slots=3)       # no room for 80 bits of masking


def test_bound_bits_is_the_least_power_of_two_at_or_above():
    assert [bound_bits(b) for b in (1, 2, 3, 4096, 4097, 0.5)] == [0, 1, 2, 12, 13, -1]


def test_masked_slots_unpack_and_unmask_to_the_values():
    layout = packing.layout_for(1024, 40)
    rng = np.random.default_rng(1)
    values = [int(v) for v in rng.integers(-2 ** 39 + 1, 2 ** 39, size=3 * layout.slots + 2)]
    values[:2] = [-(2 ** 40) + 1, 2 ** 40 - 1]                  # the edges of the range
    masks = packing.slot_masks(len(values), layout)
    # one party packs signed values, another its offsets and masks; the sum is what is decrypted
    own = packing.pack(values, layout)
    other = packing.pack_unsigned(packing.masked_slots([0] * len(values), masks, layout), layout)
    plaintexts = [a + b for a, b in zip(own, other)]
    digits = packing.unpack(plaintexts, layout, len(values))
    assert all(0 <= d < 2 ** layout.slot_bits for d in digits)
    assert packing.unmask(digits, masks, layout) == values


def test_a_value_beyond_its_slot_is_refused_before_packing():
    layout = packing.layout_for(1024, 40)
    with pytest.raises(FixedPointOverflowError, match="does not fit"):
        packing.pack([1, 2 ** 40], layout)
    with pytest.raises(FixedPointOverflowError, match="outside its"):
        packing.unpack([gmpy2.mpz(-1)], layout, 1)


def test_masks_come_from_the_csprng(monkeypatch):
    import secrets

    drawn = []
    monkeypatch.setattr(secrets, "randbits", lambda k: drawn.append(k) or 7)
    layout = packing.layout_for(1024, 40)
    assert packing.slot_masks(3, layout) == [7, 7, 7] and drawn == [layout.mask_bits] * 3


class _FakeKey:
    """Enough of a public key for a layout: the modulus size."""

    def __init__(self, bits):
        self.n = gmpy2.mpz(1) << (bits - 1) | 1
        self.key_bits = bits


# -- packed prediction -----------------------------------------------------------------------
def _parties(k, n=50, seed=3):
    rng = np.random.default_rng(seed)
    names = tuple(f"a{j}" for j in range(k))
    x = {name: rng.normal(size=(n, 2)) for name in names}
    x["B"] = rng.normal(size=(n, 3))
    parties = {name: PartyA(x[name], role=name) for name in names}
    parties["B"] = PartyB(x["B"], np.ones(n))
    for p in parties.values():
        p.params = rng.normal(scale=3, size=p.params.shape)
    return parties, x, Roster(names, "B", "C")


@pytest.mark.parametrize("k", [1, 3])
def test_packed_prediction_equals_unpacked_bit_for_bit(k):
    parties, x, roster = _parties(k, n=37)
    c = Coordinator(1024, insecure=True)
    plain = inprocess.predict(parties, c, x, roster=roster)
    transcript = Transcript()
    packed = inprocess.predict(parties, c, x, roster=roster, packing=True, transcript=transcript)
    assert np.array_equal(plain, packed)
    frame = transcript.to_frame()
    slots = len(prediction_slots(c.context, 2 ** 12, k + 1).widths)
    sent = frame[frame.name == "masked_packed_scores"]
    assert len(sent) == 1 and slots >= 20
    # n / s ciphertexts instead of n
    width = c.context.public_key.ciphertext_bytes
    assert sent.bytes.iloc[0] < (math.ceil(37 / slots) + 1) * width + 400


def test_prediction_slots_at_2048_bits_hold_forty_three_scores():
    group = prediction_slots(Context(_FakeKey(2048), FixedPoint(32)), 2 ** 12, 2)
    assert group.widths == (47,) * 43          # |z| < 2^46 as a signed digit; 43 of them in 2046 bits


def test_a_score_beyond_the_declared_bound_is_refused_before_anything_is_encrypted():
    parties, x, roster = _parties(1)
    parties["a0"].params = np.array([5000.0, 0.0])
    transcript = Transcript(keep_payloads=True)
    with pytest.raises(FixedPointOverflowError, match=r"party a0: partial score .* declared score_bound 4096.*"
                                                      r"raise score_bound"):
        inprocess.predict(parties, Coordinator(1024, insecure=True), x, roster=roster, packing=True,
                          transcript=transcript)
    assert not any(m.name == "packed_scores" for _, _, m in transcript.messages())
    # a larger declared bound takes it
    scores = inprocess.predict(parties, Coordinator(1024, insecure=True), x, roster=roster, packing=True,
                               score_bound=2 ** 16)
    expected = x["a0"] @ parties["a0"].params + x["B"] @ parties["B"].params[:3] + parties["B"].params[3]
    np.testing.assert_allclose(scores, expected, atol=1e-8)


def test_the_label_party_checks_its_own_scores_too():
    parties, x, roster = _parties(1)
    parties["B"].params = np.array([0.0, 0.0, 0.0, -5000.0])
    with pytest.raises(FixedPointOverflowError, match="party B: partial score -5000"):
        inprocess.predict(parties, Coordinator(1024, insecure=True), x, roster=roster, packing=True)


def test_coordinator_sees_packed_scores_only_under_a_mask_uniform_over_z_n():
    parties, x, roster = _parties(2, n=60, seed=5)
    c = Coordinator(1024, insecure=True)
    transcript = Transcript(keep_payloads=True)
    scores = inprocess.predict(parties, c, x, roster=roster, packing=True, transcript=transcript)
    group = prediction_slots(c.context, 2 ** 12, 3)
    per = len(group.widths)
    to_c = [m for _, to, m in transcript.messages() if to == "C"]
    assert [m.name for m in to_c] == ["masked_packed_scores"]
    assert (to_c[0]["slots"], to_c[0]["slot_bits"]) == (per, group.widths[0])
    width = c.context.public_key.ciphertext_bytes
    ciphertexts = to_c[0]["ciphertexts"]
    assert isinstance(ciphertexts, BigInts) and ciphertexts.width == width and len(ciphertexts) == math.ceil(60 / per)
    plaintexts = c.context.engine.decrypt(c.context.private_key, ciphertexts.to_ints())
    exact = [int(v) for v in np.rint(np.ldexp(scores, 32)).astype(np.int64)] + [0] * (-60 % per)
    packed = group.pack(np.array(exact, dtype=object).reshape(-1, per))
    n = int(c.context.public_key.n)
    masks = [(int(p) - int(z)) % n for p, z in zip(plaintexts, packed)]
    # what C decrypts is the packed scores plus a mask as wide as Z_n (none of these draws falls below
    # 2^(key bits - 16) but by a 2^-13 chance), fresh for every ciphertext
    assert all(r.bit_length() > 1024 - 16 for r in masks) and len(set(masks)) == len(masks)
    assert all(int(p).bit_length() > 1024 - 16 for p in plaintexts)
    # the feature parties receive nothing but the key and the row count
    for name in roster.features:
        assert {m.name for _, to, m in transcript.messages() if to == name} == {"public_key", "rows"}


def test_the_label_party_refuses_padding_that_is_not_zero():
    from vfl.parties.linear.packed import mask_scores, unmask_scores

    c = Coordinator(1024, insecure=True)
    c.generate_keys()
    group = prediction_slots(c.context, 2 ** 12, 2)
    masked, masks = mask_scores(c.context, [1.5, -2.25], group)
    residues = c.context.decrypt_residues(masked)
    assert unmask_scores(c.context, residues, masks, group, 2).tolist() == [1.5, -2.25]
    with pytest.raises(FixedPointOverflowError, match="do not hold 1 values and zero padding"):
        unmask_scores(c.context, residues, masks, group, 1)


def test_table3_is_unaffected_by_packing():
    parties, x, roster = _parties(1)
    c = Coordinator(1024, insecure=True)
    a = inprocess.predict(parties, c, x, mode="table3", roster=roster)
    b = inprocess.predict(parties, c, x, mode="table3", roster=roster, packing=True)
    assert np.array_equal(a, b)


def test_estimator_packing_predicts_the_same_scores(vertical_data):
    from vfl import VerticalLogisticRegression

    model = VerticalLogisticRegression(max_iter=2, tol=None, key_bits=1024, insecure=True).fit(vertical_data)
    plain = model.decision_function(vertical_data)
    model.set_params(packing=True)
    assert np.array_equal(model.decision_function(vertical_data), plain)
    assert "masked_packed_scores" in set(model.predict_transcript_.name)


# -- packed training ------------------------------------------------------------------------------
# the first-order protocol (solver="gd"), on the columns as given
FAST = dict(key_bits=1024, insecure=True, solver="gd", standardize=False)


def _fit_both(frames, task, **kwargs):
    """The same model fitted unpacked and packed (from zeros, so both runs are deterministic)."""
    from vfl import VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression

    data = VerticalDataset(frames, label="y", id_column="id")
    cls = VerticalLogisticRegression if task == "logistic" else VerticalLinearRegression
    fits = [cls(learning_rate=0.2, max_iter=3, alpha=0.01, tol=None, random_state=4, init="zeros", packing=packing,
                **kwargs, **FAST).fit(data) for packing in (False, True)]
    return fits, data


def _identical(plain, packed):
    assert set(plain.coef_) == set(packed.coef_)
    for name in plain.coef_:
        assert np.array_equal(plain.coef_[name], packed.coef_[name]), name
    assert plain.intercept_ == packed.intercept_
    assert np.array_equal(plain.loss_curve_, packed.loss_curve_)


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("task,batch_size", [("logistic", None), ("linear", 24), ("logistic", 24), ("linear", None)])
def test_packed_training_equals_unpacked_bit_for_bit(k, task, batch_size):
    from test_k_parties import k_party_data

    frames, _, _ = k_party_data(k, task=task, seed=k)
    (plain, packed), _ = _fit_both(frames, task, batch_size=batch_size)
    _identical(plain, packed)


@pytest.mark.parametrize("task,batch_size", [("logistic", None), ("linear", 20)])
def test_packed_training_with_dp_equals_unpacked_with_the_same_noise(monkeypatch, task, batch_size):
    from test_dp import Recorder, _wrap_init
    from vertical_data import make_vertical

    frame_a, frame_b, _, _ = make_vertical(n_rows=60, task=task, seed=21)
    bound = {} if task == "logistic" else {"dp_label_bound": 1.5}
    fits = []
    for packing in (False, True):
        with monkeypatch.context() as patch:
            patch.setattr(PartyB, "__init__", _wrap_init(PartyB.__init__, Recorder(5)))     # the same draws
            fits.append(_fit(frame_a, frame_b, task, max_iter=4, batch_size=batch_size, random_state=3,
                             dp_epsilon=3.0, dp_delta=1e-5, packing=packing, **bound))
    assert fits[0].dp_noise_std_ > 0
    _identical(*fits)


def _fit(frame_a, frame_b, task, **kwargs):
    from vfl import VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression

    cls = VerticalLogisticRegression if task == "logistic" else VerticalLinearRegression
    data = VerticalDataset({"A": frame_a, "B": frame_b}, label="y", id_column="id")
    return cls(learning_rate=0.2, tol=None, init="zeros", **kwargs, **FAST).fit(data)


def test_packed_training_sends_n_over_s_ciphertexts_per_score_vector():
    from vertical_data import make_vertical

    frame_a, frame_b, _, _ = make_vertical(n_rows=90, seed=2)
    plain = _fit(frame_a, frame_b, "logistic", max_iter=1, packing=False).transcript_
    packed = _fit(frame_a, frame_b, "logistic", max_iter=1, packing=True).transcript_
    sizes = lambda frame, name: int(frame[frame.name == name].bytes.iloc[0])
    slots = 3       # 1024-bit key, 90 rows: 181-bit slots, 5 positions
    assert sizes(packed, "packed_scores") * 2.5 < sizes(plain, "scores")
    assert sizes(packed, "packed_residual") * 2.5 < sizes(plain, "residual")
    assert sizes(plain, "scores") > 90 * 256 > sizes(packed, "packed_scores") > (90 // slots) * 256


def test_packed_training_coordinator_sees_only_masked_slots_and_the_loss():
    """Every slot position C decrypts is masked (the loss's result slot excepted); each party gets its own values."""
    from vertical_data import make_vertical
    from vfl.parties.linear.packed import training_layout
    from vfl.protocols.linear import TrainingSettings

    _, _, x, y = make_vertical(n_rows=40, seed=4)
    settings = TrainingSettings(objective="logistic", max_iter=2, tol=None, learning_rate=0.2, alpha=0.01,
                                packing=True, **FAST)
    a, b, c = PartyA(x[:, :3]), PartyB(x[:, 3:], np.where(y == 1, 1.0, -1.0)), Coordinator(1024, insecure=True)
    transcript = Transcript(keep_payloads=True)
    inprocess.train({"A": a, "B": b}, c, settings, transcript)
    layout = training_layout(c.context, 40, settings.feature_bound, settings.score_bound, 2)
    ctx, w, s = c.context, layout.slot_bits, layout.slots
    low = 2 ** (layout.value_bits + 1)          # an unmasked value + offset stays below this
    checked = 0
    for sender, to, message in transcript.messages():
        if to == "C" and message.kind == "ciphertext":
            assert message.name in ("masked_packed_gradient", "packed_loss")
            for p in ctx.engine.decrypt(ctx.private_key, message["ciphertexts"].to_ints()):
                assert 0 <= p < 2 ** (w * (2 * s - 1))
                digits = [(p >> (w * j)) & (2 ** w - 1) for j in range(2 * s - 1)]
                masked = [d for j, d in enumerate(digits) if not (message.name == "packed_loss" and j == s - 1)]
                # a uniform mask of mask_bits bits falls below 2^(value_bits + 1) with probability 2^-80
                assert all(low <= d < 2 ** w for d in masked)
                checked += len(masked)
        if message.name == "gradient":
            assert message.kind == "masked" and sender == "C"
            values = message["residues"].to_ints()
            assert len(values) == (a if to == "A" else b).params.size       # only its own slot s-1 values
            assert all(low <= v < 2 ** w for v in values)
    assert checked > 2 * (5 + 1) * (2 * s - 1)
    for name in ("A", "B"):
        got = {m.name for _, to, m in transcript.messages() if to == name and m.kind not in ("public",)}
        assert got == ({"packed_residual", "gradient"} if name == "A" else {"packed_scores", "packed_loss_part",
                                                                            "gradient"})


def test_packed_training_refuses_values_beyond_the_declared_bounds():
    from vertical_data import make_vertical

    frame_a, frame_b, _, _ = make_vertical(n_rows=40, seed=4)
    frame_a.loc[7, "a1"] = 300.0
    with pytest.raises(FixedPointOverflowError, match=r"party A, column 'a1': value 300 at row 7 is beyond the "
                                                      r"declared feature_bound 256.*raise feature_bound"):
        _fit(frame_a, frame_b, "logistic", max_iter=1, packing=True)
    _fit(frame_a, frame_b, "logistic", max_iter=1, packing=True, feature_bound=512.0)
    with pytest.raises(FixedPointOverflowError, match=r"party B: partial score minus kappa \* label .* declared "
                                                      r"score_bound 1"):
        _fit(frame_a, frame_b, "logistic", max_iter=1, packing=True, feature_bound=512.0, score_bound=1.0)


def test_packed_training_resumes_exactly():
    from test_estimator_api import _run
    from vertical_data import make_vertical
    from vfl.protocols.linear import TrainingSettings

    _, _, x, y = make_vertical(n_rows=60, seed=12)
    y = np.where(y == 1, 1.0, -1.0)
    settings = TrainingSettings(objective="logistic", max_iter=4, tol=None, batch_size=20, random_state=7,
                                init="zeros", packing=True, **FAST)
    _, _, _, saved = _run(x, y, settings, stop_after=1)
    a, b, c, _ = _run(x, y, settings, checkpoints=saved)
    a0, b0, c0, _ = _run(x, y, settings)
    unpacked = _run(x, y, TrainingSettings(**{**settings.to_dict(), "packing": False}))
    for got in ((a, b, c), unpacked[:3]):
        np.testing.assert_array_equal(got[0].params, a0.params)
        np.testing.assert_array_equal(got[1].params, b0.params)
        assert got[2].loss_curve == c0.loss_curve and len(c0.loss_curve) == 4


def test_coordinator_refuses_a_packed_layout_other_than_the_settings_give():
    from vfl.errors import ProtocolError
    from vfl.protocols.linear import predict_a, predict_b, predict_c
    from vfl.transport import Endpoint, InProcessNetwork, run_roles

    parties, x, roster = _parties(1)
    network = InProcessNetwork(roster.everyone)
    ep = {r: Endpoint(network.transport(r), roster.peers(r)) for r in roster.everyone}
    c = Coordinator(1024, insecure=True)
    with pytest.raises(ProtocolError, match="score_bound or frac_bits differ"):
        run_roles(network, {
            "a0": lambda: predict_a(ep["a0"], parties["a0"], x["a0"], roster=roster, packing=True, score_bound=2 ** 20),
            "B": lambda: predict_b(ep["B"], parties["B"], x["B"], roster=roster, packing=True, score_bound=2 ** 20),
            "C": lambda: predict_c(ep["C"], c, roster=roster, packing=True),
        })


def test_non_finite_scores_are_named_as_such():
    from vfl.parties.linear.packed import check_declared

    with pytest.raises(FixedPointOverflowError, match="party A: partial score at position 1 is not a finite number"):
        check_declared("A", [0.0, float("nan")], 4096.0, "partial score")
