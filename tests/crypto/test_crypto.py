"""The crypto layer: keys, fixed-point encoding and vector operations, checked against phe."""

import numpy as np
import pytest

from vfl.crypto import Context, EncryptedVector, FixedPoint, PublicKey, generate_keypair, get_engine
from vfl.errors import ConfigurationError, FixedPointOverflowError


@pytest.fixture(scope="module", params=["simple", "fast"])
def ctx(request, keypair_1024):
    pk, sk = keypair_1024
    return Context(pk, private_key=sk, engine=request.param)


def test_short_key_refused_without_flag():
    with pytest.raises(ConfigurationError, match="insecure=True"):
        generate_keypair(1024)
    with pytest.raises(ConfigurationError):
        generate_keypair(256, insecure=True)


def test_round_trip_and_phe_agrees(ctx):
    x = np.array([1.5, -2.25, 0.0, 1e-9, -123456.789])
    enc = ctx.encrypt(x)
    assert enc.fresh
    np.testing.assert_allclose(ctx.decrypt(enc), x, atol=ctx.precision.resolution)
    phe_sk = ctx.private_key.to_phe()
    n = int(ctx.public_key.n)
    for c, v in zip(enc.ciphertexts, x):
        residue = phe_sk.raw_decrypt(int(c))
        signed = residue - n if residue > n // 2 else residue
        assert abs(signed / 2 ** 32 - v) <= 2 ** -32


def test_homomorphic_operations(ctx):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=7), rng.normal(size=7)
    m = rng.normal(size=(3, 7))
    ex, ey = ctx.encrypt(x), ctx.encrypt(y)
    tol = 1e-8
    np.testing.assert_allclose(ctx.decrypt(ex + ey), x + y, atol=tol)
    np.testing.assert_allclose(ctx.decrypt(ex + y), x + y, atol=tol)
    np.testing.assert_allclose(ctx.decrypt(ex - y), x - y, atol=tol)
    np.testing.assert_allclose(ctx.decrypt(ex * 0.25), x * 0.25, atol=tol)
    np.testing.assert_allclose(ctx.decrypt(ex * y), x * y, atol=tol)
    np.testing.assert_allclose(ctx.decrypt(m @ ex), m @ x, atol=tol)
    np.testing.assert_allclose(ctx.decrypt(y @ ex), [y @ x], atol=tol)
    np.testing.assert_allclose(ctx.decrypt(ex.sum()), [x.sum()], atol=tol)
    # mixed exponents are aligned exactly
    np.testing.assert_allclose(ctx.decrypt(ex * 2.0 + ey), 2 * x + y, atol=tol)
    both = EncryptedVector.concat([m @ ex, ex])
    np.testing.assert_allclose(ctx.decrypt(both), np.concatenate([m @ x, x]), atol=tol)
    assert not (ex + ey).fresh and (ex + ey).rerandomize().fresh


def test_rerandomize_changes_ciphertext_not_plaintext(ctx):
    enc = ctx.encrypt([3.0, -4.0])
    again = enc.rerandomize()
    assert all(a != b for a, b in zip(enc.ciphertexts, again.ciphertexts))
    np.testing.assert_allclose(ctx.decrypt(again), [3.0, -4.0])


def test_mask_is_uniform_residue_and_unmasks(ctx):
    x = np.array([0.5, -0.75, 2.0])
    masked, mask = ctx.mask(ctx.encrypt(x))
    residues = ctx.decrypt_residues(masked)
    n = ctx.public_key.n
    # the coordinator sees residues that are not the encoded values
    encoded = [v % n for v in ctx.encode(x)]
    assert all(r != e for r, e in zip(residues, encoded))
    np.testing.assert_allclose(ctx.unmask(residues, mask, masked.exponent), x)
    # masks come from the whole of Z_n: their top bits are used
    assert max(int(m).bit_length() for m in mask) > int(n).bit_length() - 16


def test_wire_form_is_fixed_width(ctx):
    enc = ctx.encrypt([1.0, 2.0, 3.0])
    data = enc.to_bytes()
    assert len(data) == 3 * ctx.public_key.ciphertext_bytes
    back = ctx.from_bytes(data, enc.exponent)
    np.testing.assert_allclose(ctx.decrypt(back), [1.0, 2.0, 3.0])
    assert PublicKey.from_bytes(ctx.public_key.to_bytes()) == ctx.public_key


def test_overflow_raises_not_wraps(ctx):
    with pytest.raises(FixedPointOverflowError, match="position 1"):
        ctx.encrypt([1.0, 1e300])
    with pytest.raises(FixedPointOverflowError):
        ctx.encrypt([np.nan])
    # a residue in the middle third of Z_n is what a wrapped computation leaves behind
    middle = ctx.public_key.n // 2
    wrapped = EncryptedVector(ctx, ctx.engine.encrypt(ctx.public_key, [middle]), 32)
    with pytest.raises(FixedPointOverflowError, match="overflowed"):
        ctx.decrypt(wrapped)


def test_precision_validated():
    with pytest.raises(ValueError):
        FixedPoint(2)
    assert FixedPoint(40).resolution == 2.0 ** -40


def test_unknown_engine():
    with pytest.raises(ValueError, match="unknown crypto engine"):
        get_engine("nope")
