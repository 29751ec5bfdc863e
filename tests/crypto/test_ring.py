"""Shares over Z_2^256, fixed point, local truncation and Beaver products with a dealer (vfl.crypto.ring)."""

from __future__ import annotations

import numpy as np
import pytest

from vfl.crypto import ring
from vfl.errors import FixedPointOverflowError, ProtocolError


def test_encode_decode_round_trip_within_half_a_unit():
    x = np.array([[0.0, -1.5, 3.25e-7], [1e11, -2.0 ** 39, 0.1]])
    np.testing.assert_allclose(ring.decode(ring.encode(x, 40), 40), x, rtol=0, atol=2.0 ** -41)


@pytest.mark.parametrize("bad", [np.inf, np.nan, 2.0 ** 40, -2.0 ** 41])
def test_values_outside_the_range_are_refused(bad):
    with pytest.raises(FixedPointOverflowError, match="not below 2\\^40"):
        ring.encode(np.array([1.0, bad]), 40)


def test_shares_add_up_and_one_share_is_uniform():
    x = ring.encode(np.linspace(-3, 3, 4000), 40)
    first, second = ring.split(x)
    assert (ring.reduce(first + second) == x).all()
    # the top byte of either share alone is uniform, whatever the (small) values are
    for share in (first, second):
        top = np.array([int(v) >> (ring.RING_BITS - 8) for v in share])
        counts = np.bincount(top, minlength=256)
        chi2 = ((counts - len(top) / 256) ** 2 / (len(top) / 256)).sum()
        assert chi2 < 400          # 255 degrees of freedom: p < 1e-7 above 400


def test_local_truncation_is_off_by_at_most_one_unit():
    values = np.concatenate([np.linspace(-2.0 ** 30, 2.0 ** 30, 2001), [0.0, -1e-12, 1e-12]])
    x = ring.encode(values, 40)
    x2 = ring.reduce(x * (1 << 40))                      # as a product at 2^80
    first, second = ring.split(x2)
    back = ring.reduce(ring.truncate(first, 40, True) + ring.truncate(second, 40, False))
    diff = np.array([int(v) for v in ring.signed(ring.reduce(back - x))])
    assert np.abs(diff).max() <= 1


@pytest.mark.parametrize("operation, left_shape, right_shape", [("matmul", (3, 7), (7, 2)), ("mul", (5, 4), (5, 4))])
def test_a_beaver_product_with_a_dealer_gives_shares_of_the_product(operation, left_shape, right_shape):
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=left_shape), rng.normal(size=right_shape)
    x, y = ring.encode(a, 40), ring.encode(b, 40)
    left, right = ring.deal(operation, left_shape, right_shape)
    e, f = ring.opening(x, left), ring.opening(y, right)
    shares = ring.left_share(operation, x, f, left), ring.right_share(operation, e, right)
    out = ring.reduce(ring.truncate(shares[0], 40, True) + ring.truncate(shares[1], 40, False))
    expected = a @ b if operation == "matmul" else a * b
    np.testing.assert_allclose(ring.decode(out, 40), expected, atol=1e-10)


def test_an_opening_does_not_depend_on_the_factor():
    """The same mask distribution hides 0 and a large factor alike: the openings' top bytes are uniform."""
    zero, big = ring.encode(np.zeros((50, 40)), 40), ring.encode(np.full((50, 40), 2.0 ** 39), 40)
    for factor in (zero, big):
        left, _ = ring.deal("mul", factor.shape, factor.shape)
        top = np.array([int(v) >> (ring.RING_BITS - 4) for v in ring.opening(factor, left).flat])
        counts = np.bincount(top, minlength=16)
        assert ((counts - 125) ** 2 / 125).sum() < 60    # 15 degrees of freedom


def test_uniform_draws_from_the_csprng_and_leaves_numpys_generator_alone():
    state = np.random.get_state()[1].copy()
    draws = ring.uniform((3, 3))
    assert (np.random.get_state()[1] == state).all()
    assert len({int(v) for v in draws.flat}) == 9


def test_bytes_round_trip_and_a_wrong_size_is_refused():
    values = ring.uniform((4, 3))
    data = ring.to_bytes(values)
    assert len(data) == 12 * ring.RING_BYTES
    assert (ring.from_bytes(data, (4, 3)) == values).all()
    with pytest.raises(ProtocolError, match="bytes for 12 ring elements"):
        ring.from_bytes(data[:-1], (4, 3))


def test_a_triple_dealt_by_seeds_gives_shares_of_the_product():
    rng = np.random.default_rng(9)
    a, b = rng.normal(size=(6, 5)), rng.normal(size=(5, 4))
    x, y = ring.encode(a, 40), ring.encode(b, 40)
    left_seed, right_seed, right_share = ring.deal_seeded("matmul", x.shape, y.shape)
    left, right = ring.seeded_half(left_seed, x.shape, (6, 4)), ring.seeded_half(right_seed, y.shape, (6, 4),
                                                                                   right_share)
    shares = (ring.left_share("matmul", x, ring.opening(y, right), left),
              ring.right_share("matmul", ring.opening(x, left), right))
    out = ring.reduce(ring.truncate(shares[0], 40, True) + ring.truncate(shares[1], 40, False))
    np.testing.assert_allclose(ring.decode(out, 40), a @ b, atol=1e-10)


def test_expanding_a_seed_is_deterministic_per_stream_and_checks_the_seed():
    seed = ring.new_seed()
    assert (ring.expand(seed, (3, 2), 0) == ring.expand(seed, (3, 2), 0)).all()
    assert not (ring.expand(seed, (3, 2), 0) == ring.expand(seed, (3, 2), 1)).any()
    with pytest.raises(ProtocolError, match="a seed of 31 bytes"):
        ring.expand(seed[:31], (2,), 0)
