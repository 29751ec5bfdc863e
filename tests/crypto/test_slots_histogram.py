"""Encrypted bucket sums and signed slots: exact against plain integer arithmetic, on every compute path."""

import gmpy2
import numpy as np
import pytest

from vfl import FixedPointOverflowError
from vfl.crypto import compute, get_engine
from vfl.crypto.histogram import bucket_products, running_products
from vfl.crypto.slots import Group, Lanes, _task_combine, combine


@pytest.fixture(scope="module")
def keys(keypair_1024):
    return keypair_1024


def test_signed_slots_round_trip_negative_values_and_borrows(keys):
    public, private = keys
    group = Group((12, 10, 6))
    rng = np.random.default_rng(0)
    values = np.column_stack([rng.integers(-2047, 2048, 40), rng.integers(-511, 512, 40), rng.integers(-31, 32, 40)])
    engine = get_engine()
    ciphertexts = engine.encrypt(public, group.pack(values))
    combined = combine(public, engine, ciphertexts, group)
    per = group.per_plaintext(public.key_bits)
    assert len(combined) == -(-40 // per)
    decoded = group.unpack(engine.decrypt(private, combined), public.n, 40, per)
    np.testing.assert_array_equal(decoded, values)


def test_a_value_outside_its_slot_is_refused_and_an_overflowed_plaintext_is_detected(keys):
    public, private = keys
    group = Group((8, 8))
    with pytest.raises(FixedPointOverflowError, match="8-bit signed slot"):
        group.pack(np.array([[128, 0]]))
    engine = get_engine()
    too_big = engine.encrypt(public, [gmpy2.mpz(1) << 20])             # more than two 8-bit slots hold
    with pytest.raises(FixedPointOverflowError, match="overflowed"):
        group.unpack(engine.decrypt(private, too_big), public.n, 1, group.per_plaintext(public.key_bits))


@pytest.mark.parametrize("widths", [(27, 25), (27, 25, 11), (20, 20, 20, 20, 9, 9)])
def test_lanes_round_trip_sums_at_their_bounds_with_borrows(keys, widths):
    """Items summed from rows, combined many to a plaintext (one shift of max(widths) bits each), decoded exactly;
    every value at its extremes (+-(2^(w-1) - 1)) and signs alternating, so that borrows cross lanes."""
    public, private = keys
    lanes = Lanes(widths, public.key_bits)
    per = lanes.per_plaintext(public.key_bits)
    assert lanes.width == max(widths) and per == (1022 // len(widths)) // max(widths)
    count = 3 * per + 2                                          # a last plaintext only partly filled
    top = np.array([(1 << (w - 1)) - 1 for w in widths])
    rng = np.random.default_rng(len(widths))
    values = np.where(rng.random((count, len(widths))) < 0.5, top, -top)
    values[::3] = rng.integers(-top, top + 1, size=(len(values[::3]), len(widths)))
    values[1] = 0
    # each item the sum of two rows' items, as a feature party's bucket sums are
    halves = values // 2
    engine = get_engine()
    rows = engine.encrypt(public, lanes.pack(halves) + lanes.pack(values - halves))
    items = [a * b % public.nsquare for a, b in zip(rows[:count], rows[count:])]
    combined = combine(public, engine, items, lanes)
    assert len(combined) == -(-count // per)
    decoded = lanes.unpack(engine.decrypt(private, combined), public.n, count, per)
    np.testing.assert_array_equal(decoded, values)


def test_lanes_refuse_what_does_not_fit_and_detect_an_overflowed_plaintext(keys):
    public, private = keys
    lanes = Lanes((8, 6), public.key_bits)
    with pytest.raises(FixedPointOverflowError, match="8-bit signed slot"):
        lanes.pack(np.array([[128, 0]]))
    with pytest.raises(FixedPointOverflowError, match="6-bit signed slot"):
        lanes.pack(np.array([[0, -32]]))
    with pytest.raises(FixedPointOverflowError, match="do not fit"):
        Lanes((600, 600), public.key_bits)
    with pytest.raises(ValueError, match="laid out for"):
        lanes.per_plaintext(2048)
    engine = get_engine()
    per = lanes.per_plaintext(public.key_bits)
    # a digit in the gap between the lane of one item and the next lane; a value above the last lane
    for stray in (gmpy2.mpz(1) << 100, gmpy2.mpz(1) << (2 * lanes.lane_bits + 3)):
        with pytest.raises(FixedPointOverflowError, match="overflowed"):
            lanes.unpack(engine.decrypt(private, engine.encrypt(public, [stray])), public.n, 1, per)


def test_combined_ciphertexts_are_rerandomized(keys):
    """The key holder made the ciphertexts: unless re-randomized, it could tell which rows a sum took."""
    public, private = keys
    group = Group((16, 16))
    engine = get_engine()
    ciphertexts = engine.encrypt(public, group.pack(np.arange(20).reshape(10, 2)))
    per = group.per_plaintext(public.key_bits)
    raw = _task_combine(int(public.nsquare), ciphertexts, group.width, per)
    sent = combine(public, engine, ciphertexts, group)
    assert not set(map(int, raw)) & set(map(int, sent))
    assert engine.decrypt(private, raw) == engine.decrypt(private, sent)


@pytest.mark.parametrize("plan", ["inline", "local"])
def test_bucket_products_equal_per_bucket_sums(keys, plan):
    public, private = keys
    engine = get_engine()
    rng = np.random.default_rng(1)
    rows, features, size = 700, 3, 12
    values = rng.integers(-1000, 1000, rows)
    flat = np.column_stack([rng.integers(0, 4, rows) + 4 * f for f in range(features)])
    ciphertexts = engine.encrypt(public, [int(v) for v in values])
    with compute.use(compute.INLINE if plan == "inline" else compute.capture(2)):
        buckets = bucket_products(public, ciphertexts, flat, size)
    sums = [(r if r <= public.n // 2 else r - public.n) for r in engine.decrypt(private, buckets)]
    expected = np.zeros(size, dtype=np.int64)
    for f in range(features):
        np.add.at(expected, flat[:, f], values)
    assert sums == expected.tolist()
    prefix = [(r if r <= public.n // 2 else r - public.n)
              for r in engine.decrypt(private, running_products(public, buckets[:4]))]
    assert prefix == np.cumsum(expected[:4]).tolist()


def test_bucket_products_refuse_an_index_out_of_range(keys):
    public, _ = keys
    with pytest.raises(ValueError, match="outside"):
        bucket_products(public, [gmpy2.mpz(1)] * 2, np.array([[0], [5]]), 5)
