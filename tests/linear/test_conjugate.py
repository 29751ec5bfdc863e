"""Conjugate gradient (``solver="cg"``): equal to centralized CG step for step, and at the optimum in few passes."""

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import roc_auc_score

from vertical_data import make_vertical
from vfl import VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression
from vfl.centralized import fit_gradient_descent
from vfl.errors import ConfigurationError
from vfl.protocols.linear import TrainingSettings

ATOL = 1e-7
FAST = dict(key_bits=1024, insecure=True)


def split_columns(x, y, sizes, label_party):
    """Columns of ``x`` split between parties of the given sizes; the label party (last) gets ``y``."""
    frames, start = {}, 0
    for name, size in sizes.items():
        frames[name] = pd.DataFrame(x[:, start:start + size], columns=[f"{name}{j}" for j in range(size)])
        start += size
    frames[label_party]["y"] = y
    return VerticalDataset(frames, label="y")


def reference(model, x, y, sample_weight=None):
    names = (*model.feature_parties_, model.label_party_)
    start = np.concatenate([model.initial_coef_[n] for n in names]), model.initial_intercept_
    target = np.where(y == model.classes_[1], 1.0, -1.0) if hasattr(model, "classes_") else y
    return fit_gradient_descent(x, target, model._settings(), start=start, sample_weight=sample_weight)


def coef_of(model):
    return np.concatenate([model.coef_[n] for n in (*model.feature_parties_, model.label_party_)])


@pytest.mark.parametrize("sizes", [{"A": 3, "B": 2}, {"A": 2, "C": 2, "B": 1}, {"A1": 2, "A2": 2, "A3": 2, "B": 1}],
                         ids=["K=1", "K=2", "K=3"])     # K feature parties beside the label party B
@pytest.mark.parametrize("task,packing", [("logistic", True), ("linear", False), ("logistic", False)])
def test_federated_cg_equals_centralized_cg(sizes, task, packing):
    """Every step of the parties' CG equals CG on the pooled data from the same start (tol=None: all steps).

    Conjugate gradient's last steps divide by ever smaller gradient norms, so the
    fixed-point rounding (2**-frac_bits per value) grows step by step: at the default
    32 bits by about 10x a step (see the next test).  With 48 fractional bits every
    step of the whole run agrees within 1e-7: the protocol adds nothing but rounding.
    """
    n_columns = sum(sizes.values())
    _, _, x, y = make_vertical(n_rows=70, n_a=n_columns - 1, n_b=1, task=task, seed=11)
    cls = VerticalLogisticRegression if task == "logistic" else VerticalLinearRegression
    model = cls(solver="cg", standardize=False, tol=None, max_iter=n_columns, alpha=0.05, packing=packing,
                frac_bits=48, **FAST).fit(split_columns(x, y, sizes, "B"))
    ref = reference(model, x, y)
    assert model.solver_ == "cg" and model.n_iter_ == ref["n_iter"] == n_columns
    np.testing.assert_allclose(coef_of(model), ref["coef"], atol=ATOL, rtol=0)
    assert model.intercept_ == pytest.approx(ref["intercept"], abs=ATOL)
    np.testing.assert_allclose(model.loss_curve_, ref["loss_curve"], atol=ATOL, rtol=0)


def test_one_vs_rest_cg_equals_centralized_cg_per_class():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(90, 6))
    y = np.argmax(x[:, :3] + rng.normal(scale=0.5, size=(90, 3)), axis=1)
    model = VerticalLogisticRegression(solver="cg", standardize=False, tol=None, max_iter=4, frac_bits=48,
                                       class_weight="balanced", **FAST).fit(split_columns(x, y, {"A": 4, "B": 2}, "B"))
    names = (*model.feature_parties_, model.label_party_)
    for k, label in enumerate(model.classes_):
        start = np.concatenate([model.initial_coef_[n][k] for n in names]), model.initial_intercept_[k]
        weights = len(y) / (3 * np.bincount(y))[y]
        ref = fit_gradient_descent(x, np.where(y == label, 1.0, -1.0), model._settings(), start=start,
                                   sample_weight=weights)
        np.testing.assert_allclose(np.concatenate([model.coef_[n][k] for n in names]), ref["coef"], atol=ATOL)


def test_default_precision_first_steps_equal_and_both_reach_the_same_optimum():
    """At 32 fractional bits: the first steps agree within 1e-7, and with the default tol both runs stop at the optimum."""
    _, _, x, y = make_vertical(n_rows=70, n_a=4, n_b=1, seed=11)
    data = split_columns(x, y, {"A": 3, "B": 2}, "B")
    model = VerticalLogisticRegression(solver="cg", standardize=False, tol=None, max_iter=3, alpha=0.05,
                                       **FAST).fit(data)
    np.testing.assert_allclose(coef_of(model), reference(model, x, y)["coef"], atol=ATOL, rtol=0)
    model = VerticalLogisticRegression(solver="cg", standardize=False, alpha=0.05, **FAST).fit(data)
    ref = reference(model, x, y)
    assert model.converged_ and abs(model.n_iter_ - ref["n_iter"]) <= 1
    np.testing.assert_allclose(coef_of(model), ref["coef"], atol=1e-5, rtol=0)
    assert model.loss_curve_[-1] == pytest.approx(ref["loss_curve"][-1], abs=1e-8)


def test_cg_with_row_weights_and_early_stopping_equals_centralized():
    _, _, x, y = make_vertical(n_rows=90, n_a=3, n_b=2, seed=5)
    weights = np.linspace(0.5, 2.0, len(y))
    data = split_columns(x, y, {"A": 3, "B": 2}, "B")
    model = VerticalLogisticRegression(solver="cg", standardize=False, max_iter=6, early_stopping=True,
                                       scoring="roc_auc", random_state=3, frac_bits=48, **FAST).fit(
                                           data, sample_weight=weights)
    ref = reference(model, x, y, sample_weight=weights)
    np.testing.assert_allclose(coef_of(model), ref["coef"], atol=ATOL, rtol=0)
    np.testing.assert_allclose(model.validation_scores_, ref["validation_scores"], atol=1e-6)
    assert model.best_iteration_ == ref["best_epoch"] + 1


def taylor_optimum(x, y, alpha):
    """The exact minimiser of the Taylor logistic objective on standardized columns (a linear system)."""
    xs = (x - x.mean(axis=0)) / x.std(axis=0)
    n, f = xs.shape
    design = np.hstack([xs, np.ones((n, 1))])
    hessian = design.T @ design / (4 * n) + alpha * np.diag(np.r_[np.ones(f), 0.0])
    w = np.linalg.solve(hessian, design.T @ y / (2 * n))
    z = design @ w
    return float(np.mean(np.log(2) - y * z / 2 + z * z / 8) + alpha / 2 * w[:f] @ w[:f]), w


def test_defaults_reach_the_optimum_from_raw_columns_in_few_passes():
    """Breast cancer in its own units (areas in the thousands, smoothness near 0.1), every default but the key.

    Standardized by each party, conjugate gradient reaches the objective's exact optimum
    (loss within 1e-6 relative) in at most (number of weights + 10) encrypted passes,
    and two secret random starts give the same model.
    """
    x, y = load_breast_cancer(return_X_y=True)
    data = split_columns(x, y, {"A": 20, "B": 10}, "B")
    best, w = taylor_optimum(x, np.where(y == 1, 1.0, -1.0), alpha=0.01)
    aucs = []
    for _ in range(2):
        model = VerticalLogisticRegression(**FAST).fit(data)
        passes = model.transcript_.query("sender == 'B' and name.str.startswith('masked')", engine="python")
        assert model.solver_ == "cg" and len(passes) == model.n_iter_ + 1 <= 31 + 10
        assert abs(model.loss_curve_[-1] - best) / best < 1e-6
        assert model.converged_
        np.testing.assert_allclose(coef_of(model), w[:-1], atol=2e-3)
        aucs.append(roc_auc_score(y, model.predict_proba(data)))
    assert abs(aucs[0] - aucs[1]) < 1e-4


def test_what_each_party_receives_in_conjugate_gradient():
    """Feature parties get ciphertexts, their own masked products and C's public scalars; C gets ciphertexts only.

    C decrypts three kinds of value: masked products (uniform residues), the pass losses
    and the summed squared gradient norm: aggregates over every party and row.
    """
    frame_a, frame_b, _, _ = make_vertical(n_rows=60)
    data = VerticalDataset({"A": frame_a, "B": frame_b}, label="y", id_column="id")
    for packing in (False, True):
        t = VerticalLogisticRegression(max_iter=3, tol=None, packing=packing, **FAST).fit(data).transcript_
        to_a = t[t.receiver == "A"]
        assert set(to_a[to_a.sender == "B"]["kind"]) == {"ciphertext", "public"}
        assert set(to_a[to_a.sender == "C"]["kind"]) == {"public", "masked"}
        assert set(to_a[to_a.kind == "masked"]["name"]) == {"gradient"}
        assert {"step", "control"} <= set(to_a[to_a.kind == "public"]["name"])
        to_c = t[t.receiver == "C"]
        assert set(to_c[to_c.kind != "public"]["kind"]) == {"ciphertext"}
        assert set(to_c[to_c.name.str.contains("norm")]["sender"]) == {"B"}     # A's part reaches C only summed
        assert set(t[t.name == "norm_part"]["receiver"]) == {"B"}



@pytest.mark.parametrize("packing", [False, True])
def test_what_c_decrypts_in_conjugate_gradient_is_masked_or_summed_over_every_party_and_row(packing):
    """Decrypted, as C decrypts it: every gradient value C gets is masked (far from any small number), and the
    only small values are the batch loss and the step's few scalars (sums over every party and row)."""
    from vfl import inprocess
    from vfl.parties import Coordinator
    from vfl.parties.linear import PartyA, PartyB
    from vfl.transport import BigInts, Transcript

    _, _, x, y = make_vertical(n_rows=40, task="logistic", seed=2)
    settings = TrainingSettings(objective="logistic", max_iter=3, tol=None, key_bits=1024, insecure=True, alpha=0.01,
                                solver="cg", packing=packing)
    coordinator, transcript = Coordinator(1024, insecure=True), Transcript(keep_payloads=True)
    inprocess.train({"A": PartyA(x[:, :3]), "B": PartyB(x[:, 3:], np.where(y == 1, 1.0, -1.0))}, coordinator,
                    settings, transcript)
    context = coordinator.context
    n = int(context.public_key.n)
    seen = {}
    for sender, receiver, message in transcript.messages():
        for value in message.fields.values():
            if receiver == "C" and isinstance(value, BigInts):
                plain = [int(v) for v in context.engine.decrypt(context.private_key, value.to_ints())]
                small = sum(min(v, n - v).bit_length() < 200 for v in plain)
                seen.setdefault(message.name, []).append((len(plain), small))
    gradients = [k for k in seen if "gradient" in k]
    assert len(gradients) == 1 and all(small == 0 for _, small in seen[gradients[0]])       # masked: none small
    # step t's 2t + 1 scalars (the squared norm and its products with the earlier directions), each a sum
    assert [count for count, _ in seen["norm"]] == [2 * t + 1 for t in range(len(seen["norm"]))]
    assert set(seen) == {gradients[0], "norm", "packed_loss" if packing else "loss"}

def test_solver_choice():
    assert TrainingSettings().conjugate
    assert not TrainingSettings(batch_size=32).conjugate
    assert not TrainingSettings(penalty="l1").conjugate
    assert not TrainingSettings(dp_epsilon=1.0, dp_delta=1e-5, tol=None).conjugate
    assert not TrainingSettings(solver="gd").conjugate
    for bad, needle in ((dict(batch_size=32), "batch_size=None"), (dict(penalty="elasticnet"), "penalty='l2'"),
                        (dict(dp_epsilon=1.0, dp_delta=1e-5, tol=None), "differential privacy")):
        with pytest.raises(ConfigurationError, match=needle):
            TrainingSettings(solver="cg", **bad)
    with pytest.raises(ConfigurationError, match="solver must be one of"):
        TrainingSettings(solver="newton")


def test_mini_batches_keep_the_first_order_optimizers():
    frame_a, frame_b, _, _ = make_vertical(n_rows=80)
    data = VerticalDataset({"A": frame_a, "B": frame_b}, label="y", id_column="id")
    model = VerticalLogisticRegression(batch_size=30, max_iter=3, tol=None, random_state=1, **FAST).fit(data)
    assert model.solver_ == "gd" and model.n_iter_ == 3
