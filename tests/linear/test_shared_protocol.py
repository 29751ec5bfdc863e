"""The shared protocol (protocol="shared"): the same model as centralized gradient descent, and its options.

What each party receives, and the label-inference attack, are in tests/linear/test_shared_privacy.py.
"""

import pickle
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from vfl import ConfigurationError, DataError, VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression
from vfl.centralized import fit_gradient_descent
from vfl.errors import FixedPointOverflowError, LabelLeakWarning
from vfl.parties import row_weights
from vfl.parties.linear.shares import SharedBounds, UpdateRule, WeightShare, draw_masks, from_fixed, mask_bits, to_fixed

SHARED = dict(key_bits=1024, insecure=True, standardize=False, protocol="shared")
ATOL = 1e-7


def k_party_data(k, n_rows=64, task="logistic", seed=0, columns=2):
    """``k`` feature parties ("p0", ...) with ``columns`` columns each, and the label party "bank" with 3."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, columns * k + 3))
    z = x @ rng.normal(size=x.shape[1]) + 0.3
    y = (z + rng.normal(scale=0.5, size=n_rows) > 0).astype(int) if task == "logistic" else z
    return split(x, y, k, columns), x, y


def split(x, y, k, columns=2):
    frames = {f"p{j}": pd.DataFrame(x[:, columns * j: columns * (j + 1)]).add_prefix(f"p{j}_") for j in range(k)}
    frames["bank"] = pd.DataFrame(x[:, columns * k:]).add_prefix("bank_").assign(y=y)
    return VerticalDataset(frames, label="y")


def reference(model, x, y, **kwargs):
    """Centralized gradient descent from the federated run's start (in-process, every party's start is here)."""
    names = (*model.feature_parties_, model.label_party_)
    start = np.concatenate([model.initial_coef_[n] for n in names]), model.initial_intercept_
    target = np.where(y == model.classes_[1], 1.0, -1.0) if hasattr(model, "classes_") else y
    return fit_gradient_descent(x, target, model._settings(), start=start, **kwargs)


def assert_equal_to(model, ref):
    coef = np.concatenate([model.coef_[n] for n in (*model.feature_parties_, model.label_party_)])
    np.testing.assert_allclose(coef, ref["coef"], atol=ATOL, rtol=0)
    assert model.intercept_ == pytest.approx(ref["intercept"], abs=ATOL)
    assert model.n_iter_ == ref["n_iter"]
    np.testing.assert_allclose(model.loss_curve_, ref["loss_curve"], atol=ATOL, rtol=0)


@pytest.mark.parametrize("k,task,options", [
    (1, "logistic", dict(alpha=0.05)),                                                    # full batch, SGD, L2
    (1, "linear", dict(optimizer="nesterov", batch_size=20, fit_intercept=False, alpha=0.0, penalty="none")),
    (2, "linear", dict(optimizer="momentum", batch_size=16, learning_rate_schedule="invscaling")),
    (2, "logistic", dict(optimizer="nesterov", momentum=0.5, alpha=0.1, learning_rate_schedule="step",
                         decay_steps=2)),
    (3, "logistic", dict(optimizer="momentum", batch_size=21, init="zeros")),
    (3, "linear", dict(alpha=0.02)),
])
@pytest.mark.parametrize("packing", [False, "auto"])
def test_shared_training_equals_centralized_gradient_descent(k, task, options, packing):
    data, x, y = k_party_data(k, task=task, seed=k)
    cls = VerticalLogisticRegression if task == "logistic" else VerticalLinearRegression
    model = cls(**{"learning_rate": 0.1, "max_iter": 4, "tol": None, "random_state": 3, **SHARED, **options},
                packing=packing).fit(data)
    assert model.solver_ == "gd"
    assert ("packed_residual" in set(model.transcript_["name"])) == (packing == "auto")
    assert_equal_to(model, reference(model, x, y))


@pytest.mark.parametrize("k,options", [(1, dict(alpha=0.05)),
                                       (2, dict(optimizer="momentum", batch_size=21, early_stopping=True))])
def test_packed_and_unpacked_shared_training_agree_to_the_shares_rounding(k, options):
    """The same gradients, exactly; the shares then round apart by at most a unit ``2^-f`` each per step.

    Not bit-identical, and no two unpacked runs are either: each holder rounds its own
    share's update, and where the two roundings fall depends on the random masks.
    """
    data, _, _ = k_party_data(k, n_rows=90, seed=20 + k)
    fits = [VerticalLogisticRegression(learning_rate=0.2, max_iter=3, tol=None, init="zeros", random_state=4,
                                       packing=packing, **SHARED, **options).fit(data) for packing in (False, True)]
    unpacked, packed = fits
    assert "packed_gradient_share" in set(packed.transcript_["name"])
    assert "packed_gradient_share" not in set(unpacked.transcript_["name"])
    units = 2.0 ** -32 * 4 * 3 * 5          # frac_bits 32; a unit per holder per step, momentum, 3 epochs of <= 5 steps
    for name in (*unpacked.feature_parties_, unpacked.label_party_):
        np.testing.assert_allclose(packed.coef_[name], unpacked.coef_[name], atol=units, rtol=0)
    assert packed.intercept_ == pytest.approx(unpacked.intercept_, abs=units)
    np.testing.assert_allclose(packed.loss_curve_, unpacked.loss_curve_, atol=1e-8, rtol=0)
    if "early_stopping" in options:
        assert len(packed.validation_scores_) == 3
        np.testing.assert_allclose(packed.validation_scores_, unpacked.validation_scores_, atol=1e-8, rtol=0)


def test_a_label_beyond_the_packed_slots_is_refused_by_name():
    data, x, y = k_party_data(1, task="linear", seed=6)
    big = split(x, y * 20.0, 1)
    with pytest.raises(FixedPointOverflowError, match="party bank: label .* beyond the declared feature_bound"):
        VerticalLinearRegression(max_iter=2, tol=None, packing=True, feature_bound=16.0, **SHARED).fit(big)
    VerticalLinearRegression(max_iter=2, tol=None, packing=False, feature_bound=16.0, **SHARED).fit(big)


def test_weighted_rows_early_stopping_and_one_vs_rest_equal_centralized():
    data, x, y = k_party_data(2, n_rows=90, seed=5)
    weighted = VerticalLogisticRegression(learning_rate=0.2, max_iter=3, tol=None, random_state=1,
                                          class_weight="balanced", **SHARED).fit(data)
    assert_equal_to(weighted, reference(weighted, x, y, sample_weight=row_weights(y, "balanced", None, "bank")))
    stopped = VerticalLogisticRegression(learning_rate=0.6, max_iter=25, tol=1e-3, random_state=2, batch_size=27,
                                         optimizer="momentum", early_stopping=True, n_iter_no_change=2,
                                         **SHARED).fit(data)
    ref = reference(stopped, x, y)
    assert_equal_to(stopped, ref)
    assert stopped.best_iteration_ == ref["best_epoch"] + 1 and stopped.n_iter_ < 25
    np.testing.assert_allclose(stopped.validation_scores_, ref["validation_scores"], atol=ATOL, rtol=0)
    # three classes: one model each, under C's one key pair
    rng = np.random.default_rng(0)
    three = np.digitize(x @ rng.normal(size=x.shape[1]), [-0.5, 0.5])
    ovr = VerticalLogisticRegression(learning_rate=0.2, max_iter=2, tol=None, random_state=1,
                                     allow_score_span=["p0", "p1"], **SHARED).fit(
        split(x, three, 2))
    for index, cls in enumerate(ovr.classes_):
        names = (*ovr.feature_parties_, ovr.label_party_)
        start = np.concatenate([ovr.initial_coef_[n][index] for n in names]), ovr.initial_intercept_[index]
        ref = fit_gradient_descent(x, np.where(three == cls, 1.0, -1.0), ovr._settings(), start=start)
        np.testing.assert_allclose(np.concatenate([ovr.coef_[n][index] for n in names]), ref["coef"], atol=ATOL)


def test_a_model_that_stays_shared_predicts_the_same_scores_and_no_party_gets_its_weights():
    data, x, y = k_party_data(2, seed=8)
    options = dict(learning_rate=0.2, max_iter=3, tol=None, random_state=1, **SHARED)
    revealed = VerticalLogisticRegression(**options).fit(data)
    kept = VerticalLogisticRegression(reveal="never", **options).fit(data)
    assert "model_share" in set(revealed.transcript_["name"]) and "model_share" not in set(kept.transcript_["name"])
    assert_equal_to(kept, reference(kept, x, y))        # in-process the estimator holds every share
    scores = kept.decision_function(data)
    assert {"weight_share", "scores", "masked_scores"} <= set(kept.predict_transcript_["name"])
    names = (*kept.feature_parties_, kept.label_party_)
    np.testing.assert_allclose(scores, x @ np.concatenate([kept.coef_[n] for n in names]) + kept.intercept_,
                               atol=1e-8)
    # pickled, it keeps the shares (not C's key): a fresh key pair scores the same
    np.testing.assert_allclose(pickle.loads(pickle.dumps(kept)).decision_function(data), scores, atol=1e-12)
    with pytest.raises(ConfigurationError, match="warm_start .* reveal='never'"):   # (p0's 2 columns: a second
        VerticalLogisticRegression(reveal="never", warm_start=True, allow_score_span=["p0", "p1"],  # model spans them)
                                   **options).fit(data).fit(data)


@pytest.mark.parametrize("options,message", [
    (dict(optimizer="adam"), "linear rules only.*adagrad, rmsprop and adam"),
    (dict(penalty="l1"), "L1 needs the weights' signs"),
    (dict(solver="cg"), "use solver='gd'"),
    (dict(dp_epsilon=1.0, dp_delta=1e-5, tol=None), "they learn none"),
    (dict(early_stopping=True, scoring="roc_auc"), "use scoring='loss'"),
    (dict(protocol="caesar"), "protocol must be one of"),
    (dict(protocol="yang", reveal="never"), "only protocol='shared' does"),
    (dict(reveal=False), "reveal must be one of"),
])
def test_settings_the_shared_protocol_cannot_run_are_refused_by_name(options, message):
    data, _, _ = k_party_data(1)
    with pytest.raises(ConfigurationError, match=message):
        VerticalLogisticRegression(**{**SHARED, **options}).fit(data)


def test_mini_batches_need_no_gradient_rules_in_the_shared_protocol():
    """No party learns a gradient, so batches of any size and any number of epochs, and no leak warning."""
    import warnings

    data, x, y = k_party_data(1, n_rows=40, columns=6, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = VerticalLogisticRegression(batch_size=5, max_iter=3, tol=None, learning_rate=0.05, random_state=0,
                                           **SHARED).fit(data)
    assert_equal_to(model, reference(model, x, y))
    with pytest.warns(LabelLeakWarning, match="infer the label party's labels"):
        with pytest.raises(DataError, match="could solve for the per-sample residuals"):    # Yang's refuses them
            VerticalLogisticRegression(batch_size=5, max_iter=3, tol=None, key_bits=1024, insecure=True,
                                       standardize=False, solver="gd").fit(data)


# -- the share arithmetic (vfl.parties.linear.shares) -------------------------------------------------------------
def test_fixed_point_shares_round_trip_and_add_up():
    values = np.array([0.0, -1.5, 3.25, 1e-3, -123.456])
    assert from_fixed(to_fixed(values, 32), 32) == pytest.approx(values, abs=2.0 ** -33)
    mask = draw_masks(5, 40)
    share = WeightShare([a - r for a, r in zip(to_fixed(values, 32), mask)], [True] * 5)
    other = WeightShare(mask, [True] * 5)
    assert from_fixed([a + c for a, c in zip(share.values, other.values)], 32) == pytest.approx(values, abs=2.0 ** -33)


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "nesterov"])
def test_each_holder_updating_its_own_share_follows_the_float_rule(optimizer):
    """Two shares, each stepped with its share of the gradient, add up to the float update within 2^-f a step each."""
    from vfl.parties.linear.optim import Optimizer, Penalty, penalised_step

    rng = np.random.default_rng(1)
    f, frac = 4, 32
    w = rng.normal(size=f)
    masks = draw_masks(f, 60)
    a = WeightShare([x - r for x, r in zip(to_fixed(w, frac), masks)], [True, True, True, False])
    c = WeightShare(masks, [True, True, True, False])
    rule = UpdateRule(optimizer, 0.9, 0.05)
    reference = Optimizer(optimizer, f, momentum=0.9)
    params = from_fixed(to_fixed(w, frac), frac)
    scale = Fraction(1, 1 << 64)            # integer gradients at 2^96, weights at 2^32
    for step in range(20):
        gradient = rng.normal(size=f)
        exact = to_fixed(gradient, 96)
        split = draw_masks(f, 100)
        a.step([g - r for g, r in zip(exact, split)], scale, rule, 0.1)
        c.step(split, scale, rule, 0.1)
        params, _ = penalised_step(reference, params, from_fixed(exact, 96), np.array([1.0, 1, 1, 0]),
                                   Penalty(0.05), 0.1)
    total = from_fixed([x + y for x, y in zip(a.values, c.values)], frac)
    np.testing.assert_allclose(total, params, atol=20 * 3 * 2.0 ** -frac * (10 if optimizer != "sgd" else 1))


def test_masks_are_sized_from_public_bounds_80_bits_and_more_above_any_gradient():
    bounds = SharedBounds(32, 569, 2, 2.0 ** 8, 2.0 ** 12)
    # |X^T d| <= 569 * 2^8 * 2 * 2^12 at 2^96: below 2^value_bits
    assert 569 * 2 ** 8 * 2 * 2 ** 12 * 2 ** 96 < 2 ** bounds.value_bits
    assert mask_bits(bounds.value_bits) == bounds.value_bits + 1 + 80 + 16
    assert all(0 <= r < 2 ** mask_bits(bounds.value_bits) for r in draw_masks(100, bounds.value_bits))
    assert bounds.loss_within(bounds.residual_limit ** 2) and not bounds.loss_within(4 * bounds.residual_limit ** 2)
    weighted = SharedBounds(32, 569, 2, 2.0 ** 8, 2.0 ** 12, weighted=True)
    assert weighted.residual_exponent == 96 and weighted.value_bits == bounds.value_bits + 32 + 16


# -- packed passes: what the coordinator reads, and what it refuses -------------------------------------------------
def _packed_product(layout, values, masks):
    """A product's plaintext: ``values[p] + 2^V' + masks[p]`` at every position ``p`` (signed, exact)."""
    return sum((v + layout.offset + r) << (layout.slot_bits * p) for p, (v, r) in enumerate(zip(values, masks)))


def test_the_coordinator_keeps_position_s_minus_1_and_refuses_a_slot_that_overflowed():
    """C reads ``G + rho`` from position ``s - 1``; a position past its guard bit, or a borrow, stops the run.

    Without the guard, a value below ``-2^V'`` at position ``s - 2`` would borrow one unit from
    position ``s - 1`` and C would keep a wrong share silently.
    """
    from vfl.crypto import EncryptedVector, packing
    from vfl.errors import FixedPointOverflowError
    from vfl.parties import Coordinator
    from vfl.parties.linear.shareholders import CoordinatorShares

    coordinator = Coordinator(1024, True)
    coordinator.generate_keys()
    context = coordinator.context
    shares = CoordinatorShares(context)
    shares.begin({"A": [True]})
    bounds = SharedBounds(32, 64, 2, 256.0, 4096.0)
    layout = bounds.layout(1024)
    assert layout.mask_bits == mask_bits(bounds.value_bits) and layout.slots >= 2
    positions = 2 * layout.slots - 1
    masks = draw_masks(positions, bounds.value_bits)
    gradient = -(1 << bounds.value_bits) + 12345
    values = [7] * positions
    values[layout.slots - 1] = gradient

    def send(values):
        plain = _packed_product(layout, values, masks) % int(context.public_key.n)
        vector = EncryptedVector(context, context.engine.encrypt(context.public_key, [plain]), bounds.gradient_exponent)
        return shares.receive_packed_gradient("A", vector, bounds, layout)

    returned = send(values)
    assert shares._gradients["A"] == [gradient + masks[layout.slots - 1]]
    assert [int(v) for v in context.decrypt_residues(returned)] == [gradient + masks[layout.slots - 1]]
    guard = 1 << (layout.slot_bits - 1)
    for position, value in [(layout.slots - 2, -(layout.offset + masks[layout.slots - 2]) - 1),   # a borrow
                            (0, guard - layout.offset - masks[0]),                                # the guard bit
                            (positions - 1, 1 << layout.slot_bits)]:                              # past the top
        bad = list(values)
        bad[position] = value
        with pytest.raises(FixedPointOverflowError, match="party A's packed gradient overflowed its slots"):
            send(bad)
    assert packing.guarded_position_value(_packed_product(layout, values, masks), layout, layout.slots - 1) \
        == gradient + layout.offset + masks[layout.slots - 1]
