"""The public range bounds of vfl.parties: values right at them decrypt exactly; beyond them, a clear error."""

import numpy as np
import pytest

from vfl.crypto import Context, EncryptedVector, FixedPoint, generate_keypair
from vfl.errors import FixedPointOverflowError
from vfl.parties import LINEAR
from vfl.parties.linear import PartyA, PartyB, loss_part_bound, score_bound
from vfl.parties.objectives import OBJECTIVES
from vfl.parties.linear.optim import Penalty
from vfl.parties.linear.data_party import _product_bits, _score_bits


def test_objectives_meet_the_bounds_assumptions():
    for objective in OBJECTIVES.values():
        assert objective.grad_scale <= 1 and abs(objective.b) <= 1 and objective.kappa <= 2


@pytest.fixture(scope="module")
def short_key():
    return generate_keypair(512, insecure=True)


def parties_at_the_limit(keypair, n_rows, fill=0.99, n_features=1):
    """``n_features`` feature parties and B, every feature just below the feature limit, one column each, labels zero."""
    public_key, _ = keypair
    precision = FixedPoint(8)
    ctx = Context(public_key, precision)
    m = n_features + 1
    limit = 2.0 ** np.floor(_product_bits(ctx) - 1 - np.log2(m * n_rows) - _score_bits(ctx, n_rows, m))
    features = [PartyA(np.full((n_rows, 1), fill * limit), role=f"A{k}") for k in range(n_features)]
    b = PartyB(np.full((n_rows, 1), fill * limit), np.zeros(n_rows), fit_intercept=False)
    for party in (*features, b):
        party.receive_public_key(public_key.to_bytes(), precision, n_parties=m)
    return features, b, limit


@pytest.mark.parametrize("n_features", [1, 3])
@pytest.mark.parametrize("batch", [64, 40, 17])
def test_values_at_the_bounds_decrypt_exactly(short_key, batch, n_features):
    """Every party's scores at 0.99 of the bound, all of one sign (the worst case), with 1 and 3 feature parties."""
    public_key, private_key = short_key
    n_rows = 64
    features, b, limit = parties_at_the_limit(short_key, n_rows, n_features=n_features)
    a = features[0]
    rows = np.arange(batch)
    bound = score_bound(a.context, batch, n_features + 1)
    for party in (*features, b):
        party.params[:] = 0.99 * bound / (0.99 * limit)
    d = b.residual([party.encrypted_scores(rows) for party in features], rows, LINEAR)
    masked, parts = zip(*(party.masked_gradient_and_loss_part(d, rows, LINEAR, Penalty()) for party in features))
    loss = b.batch_loss(list(parts), LINEAR, Penalty())
    residues = [private_key.raw_decrypt(c) for c in masked[0].ciphertexts]
    gradient = a.apply_update(residues, batch, LINEAR, Penalty(), learning_rate=0.0)
    z = np.full(batch, (n_features + 1) * 0.99 * bound)
    expected = a.features[rows].T @ z / batch
    np.testing.assert_allclose(gradient, expected, rtol=1e-9)
    c_ctx = Context(public_key, FixedPoint(8), private_key=private_key)
    total = c_ctx.decrypt(EncryptedVector(c_ctx, loss.ciphertexts, loss.exponent))[0]
    assert total == pytest.approx(0.5 * float(z @ z), rel=1e-9)
    assert abs(float(expected[0]) * batch) > 2.0 ** (_product_bits(a.context) - 3)  # near the range: a real test


def test_scores_beyond_the_bound_are_refused(short_key):
    (a,), _, limit = parties_at_the_limit(short_key, 64)
    a.params[:] = 1.01 * score_bound(a.context, 64) / (0.99 * limit)
    with pytest.raises(FixedPointOverflowError, match="party A0: partial scores reach .* for a batch of 64 rows"):
        a.encrypted_scores(np.arange(64))


def test_labels_beyond_the_bound_are_refused(short_key):
    public_key, _ = short_key
    b = PartyB(np.zeros((10, 1)), np.r_[np.zeros(9), 1e80], fit_intercept=False)
    with pytest.raises(FixedPointOverflowError, match="party B: label 1e\\+80 at row 9 is outside .* scale the label"):
        b.receive_public_key(public_key.to_bytes(), FixedPoint(8))
    assert b.context is None


@pytest.fixture(scope="module")
def secure_key():
    return generate_keypair(2048)


@pytest.mark.parametrize("weight,what", [(1e300, "partial scores reach"), (np.inf, "partial scores are no longer finite"),
                                         (1e200, "its penalty .* no longer finite")])
def test_diverging_weights_with_a_2048_bit_key(secure_key, weight, what):
    """Where doubles overflow before the key's range does, the error still names the party."""
    public_key, _ = secure_key
    a = PartyA(np.ones((8, 2)))
    a.receive_public_key(public_key.to_bytes(), FixedPoint())
    a.params[:] = weight
    rows = np.arange(8)
    with pytest.raises(FixedPointOverflowError, match=f"party A: {what}"):
        a.encrypted_scores(rows)
        a.masked_gradient_and_loss_part(a.context.encrypt(np.zeros(8)), rows, LINEAR, Penalty(0.1))
    assert loss_part_bound(a.context) > 1e300


def test_row_weights_take_their_head_room_in_training(keypair_1024):
    """With row weights, training sizes the label party's bound for the weighted residual: a label that fits
    an unweighted run (and would wrap around Z_n once weighted) is refused before anything is encrypted."""
    from vfl import VerticalDataset, VerticalLinearRegression
    from vfl.parties.linear.data_party import weight_extra_bits

    public_key, _ = keypair_1024                # the size of the key the model makes
    n, context = 40, Context(public_key, FixedPoint(32))
    plain = score_bound(context, n) / 4
    weighted = score_bound(context, n, extra_bits=weight_extra_bits(32)) / 4
    assert weighted < plain / 2 ** 8
    rng = np.random.default_rng(0)
    y = rng.normal(size=n)
    y[7] = np.sqrt(plain * weighted)            # inside the unweighted bound, far outside the weighted one
    import pandas as pd

    data = VerticalDataset({"A": pd.DataFrame(rng.normal(size=(n, 2)), columns=["a0", "a1"]),
                            "B": pd.DataFrame({"b0": rng.normal(size=n), "y": y})}, label="y")
    model = VerticalLinearRegression(key_bits=1024, insecure=True, max_iter=1, tol=None, init="zeros")
    with pytest.raises(FixedPointOverflowError, match="party B: label .* at row 7 is outside"):
        model.fit(data, sample_weight=np.ones(n))
