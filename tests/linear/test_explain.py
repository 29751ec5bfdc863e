"""Explanations and reason codes of the linear models: equal to the pooled reference, and what each party sent."""


import numpy as np
import pandas as pd
import pytest

from vfl import ConfigurationError, VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression
from vfl import linear_model
from vfl.runs.threads import run_in_threads

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
KEYS = dict(key_bits=1024, insecure=True, max_iter=15)
#: data()'s feature parties hold two continuous columns each: whether their release check refuses their totals
#: depends on the weights a secret random start leads to, so the tests of values opt in (the refusal itself runs
#: in test_a_total_that_gives_a_column_away_is_refused_unless_the_party_opts_in, on one column)
OPTED_IN = dict(allow_reconstruction=["telco", "shop"])
WEIGHTS = np.array([1.0, -1.0, 0.5, 2.0, -0.3, 0.7])


def data(n=240, seed=0, target=None):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)) * [1, 3, 4, 1, 0.5, 5] + [0, 5, 20, 0, 1, 20]
    z = ((x - x.mean(axis=0)) / x.std(axis=0)) @ WEIGHTS
    bank = pd.DataFrame(x[:, :2], columns=["b0", "b1"]).assign(
        y=(z + rng.normal(size=n) > 0).astype(int) if target is None else target(z, rng))
    return VerticalDataset({"bank": bank, "telco": pd.DataFrame(x[:, 2:4], columns=["t0", "t1"]),
                            "shop": pd.DataFrame(x[:, 4:], columns=["s0", "s1"])}, label="y"), x


def reference(model, x):
    """The pooled computation: every column's w_j (x_j - mean_j) in the model's units, summed per party."""
    coef = np.concatenate([np.ravel(model.coef_[p]) for p in ("bank", "telco", "shop")])
    mean = np.concatenate([model.training_mean_[p] for p in ("bank", "telco", "shop")])
    if model.standardize:
        scale = np.concatenate([model.scale_[p] for p in ("bank", "telco", "shop")])
        per_column = (x - mean) / scale * coef
    else:
        per_column = (x - mean) * coef
    return per_column, {"b0": per_column[:, 0], "b1": per_column[:, 1], "telco": per_column[:, 2:4].sum(axis=1),
                        "shop": per_column[:, 4:].sum(axis=1)}


@pytest.mark.parametrize("standardize", [True, False])
def test_explanation_equals_the_pooled_reference_and_sums_to_the_score(standardize):
    d, x = data()
    model = VerticalLogisticRegression(standardize=standardize, **OPTED_IN, **KEYS).fit(d)
    explained = model.explain(d)
    assert list(explained.columns) == ["b0", "b1", "telco", "shop", "base_value"]
    _, expected = reference(model, x)
    for column, values in expected.items():
        np.testing.assert_allclose(explained[column], values, atol=1e-6)
    np.testing.assert_allclose(explained.sum(axis=1), model.decision_function(d), atol=1e-6)
    assert explained["base_value"].nunique() == 1


def test_explanation_equals_shap_grouped_by_party():
    shap = pytest.importorskip("shap")
    d, x = data(target=lambda z, rng: z + 0.1 * rng.normal(size=len(z)))
    model = VerticalLinearRegression(allow_reconstruction=["telco", "shop"], **KEYS).fit(d)
    scale = np.concatenate([model.scale_[p] for p in ("bank", "telco", "shop")])
    mean = np.concatenate([model.training_mean_[p] for p in ("bank", "telco", "shop")])
    coef = np.concatenate([np.ravel(model.coef_[p]) for p in ("bank", "telco", "shop")])
    # the pooled model on the raw columns, explained by shap against the training data (interventional)
    explainer = shap.LinearExplainer((coef / scale, float(model.intercept_) - float((coef / scale) @ mean)),
                                     shap.maskers.Independent(x, max_samples=len(x)))
    values = explainer.shap_values(x)
    got = model.explain(d)
    np.testing.assert_allclose(got["b0"], values[:, 0], atol=1e-6)
    np.testing.assert_allclose(got["telco"], values[:, 2:4].sum(axis=1), atol=1e-6)
    np.testing.assert_allclose(got["shop"], values[:, 4:].sum(axis=1), atol=1e-6)
    np.testing.assert_allclose(got["base_value"], explainer.expected_value, atol=1e-6)


def test_the_label_party_receives_one_total_per_row_from_each_feature_party(monkeypatch):
    d, _ = data()
    model = VerticalLogisticRegression(**OPTED_IN, **KEYS).fit(d)
    seen = []

    def recording(roster, programs, transcript=None, n_jobs=None):
        return run_in_threads(roster, programs, transcript, n_jobs=n_jobs,
                              on_message=lambda direction, peer, message, size: seen.append((direction, peer,
                                                                                             message)))
    monkeypatch.setattr(linear_model, "run_in_threads", recording)
    model.explain(d)
    to_label = [m for direction, peer, m in seen if direction == "->" and peer == "bank"]
    assert [m.name for m in to_label] == ["contributions", "contributions"]
    for message in to_label:
        assert set(message.fields) == {"totals", "constant"}      # no column's contribution, no code
        assert np.shape(message["totals"]) == (d.n_rows,)
    from_label = [m for direction, peer, m in seen if direction == "->" and peer != "bank"]
    assert {m.name for m in from_label} == {"explain"} and all(set(m.fields) == {"n_rows", "sign"}
                                                                for m in from_label)


def test_a_total_that_gives_a_column_away_is_refused_unless_the_party_opts_in():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 3))
    frames = {"bank": pd.DataFrame(x[:, :2], columns=["b0", "b1"]).assign(y=(x.sum(axis=1) > 0).astype(int)),
              "telco": pd.DataFrame(x[:, 2:], columns=["only"])}
    d = VerticalDataset(frames, label="y")
    model = VerticalLogisticRegression(**KEYS).fit(d)
    with pytest.raises(ConfigurationError, match=r"party telco: .*rebuild column 'only'.*allow_reconstruction"):
        model.explain(d)
    model.set_params(allow_reconstruction=["telco"])
    np.testing.assert_allclose(model.explain(d).sum(axis=1), model.decision_function(d), atol=1e-6)


def test_with_release_noise_the_totals_carry_the_prediction_s_noise():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 3))
    d = VerticalDataset({"bank": pd.DataFrame(x[:, :2], columns=["b0", "b1"]).assign(
        y=(x.sum(axis=1) > 0).astype(int)), "telco": pd.DataFrame(x[:, 2:], columns=["only"])}, label="y")
    model = VerticalLogisticRegression(release_epsilon=1.0, **KEYS).fit(d)
    explained = model.explain(d)
    z = model.decision_function(d)
    np.testing.assert_allclose(explained.sum(axis=1), z, atol=1e-6)      # the same noisy scores
    exact = (x[:, 2] - model.training_mean_["telco"][0]) / model.scale_["telco"][0] * model.coef_["telco"][0]
    assert np.abs(explained["telco"] - exact).max() > 1e-3               # not the exact totals


def test_reasons_name_consented_columns_and_parties_otherwise():
    d, x = data()
    model = VerticalLogisticRegression(reason_columns={"telco": {"t0": "T-ZERO", "t1": "T-ONE"}}, **OPTED_IN,
                                       **KEYS).fit(d)
    per_column, expected = reference(model, x)
    reasons = model.predict_reasons(d, k=3)
    assert list(reasons.columns) == ["reason_1", "reason_2", "reason_3"]
    units = np.column_stack([expected[c] for c in ("b0", "b1", "telco", "shop")])
    for row in range(d.n_rows):
        order = [j for j in np.argsort(-units[row], kind="stable")[:3] if units[row, j] > 0]
        want = []
        for j in order:
            if j == 2:
                top = int(np.argmax(per_column[row, 2:4]))
                want.append(["T-ZERO", "T-ONE"][top] if per_column[row, 2 + top] > 0 else "information from telco")
            else:
                want.append(["b0", "b1", None, "information from shop"][j])
        got = [r for r in reasons.iloc[row] if isinstance(r, str)]
        assert got == want, row
    flat = {v for v in reasons.stack().tolist() if isinstance(v, str)}
    assert "T-ZERO" in flat and "information from shop" in flat and "s0" not in flat
    low = model.predict_reasons(d, k=1, adverse=model.classes_[0])["reason_1"]
    assert (low[(units.argmin(axis=1) == 0) & (units.min(axis=1) < 0)] == "b0").all()
    assert low[units.min(axis=1) > 0].isna().all()


def test_bad_reason_columns_name_the_party_and_the_column():
    d, _ = data()
    model = VerticalLogisticRegression(reason_columns={"telco": ["nope"]}, **KEYS).fit(d)
    with pytest.raises(ConfigurationError,
                       match="party telco: its reason_columns names 'nope', a column its model does not have"):
        model.predict_reasons(d)
    model.set_params(reason_columns={"bank": ["b0"]})
    with pytest.raises(ConfigurationError, match="'bank', which is not a feature party"):
        model.predict_reasons(d)
    with pytest.raises(ConfigurationError, match="adverse must be one of the classes"):
        model.set_params(reason_columns=None).predict_reasons(d, adverse="maybe")


def test_reason_codes_are_a_release_kept_in_the_party_s_ledger_and_match_its_function():
    from vfl.protocols.release import ReleaseLedger, evaluate

    d, x = data()
    model = VerticalLogisticRegression(reason_columns={"telco": ["t1"]}, **OPTED_IN, **KEYS).fit(d)
    reasons = model.predict_reasons(d, k=4)
    ledger = ReleaseLedger.in_memory("telco", model._release_scopes["telco"])
    specs = [e["spec"] for e in ledger.releases("bank") if e["spec"]["kind"] == "reasons"]
    assert len(specs) == 1 and specs[0]["named"] == [1] and specs[0]["sign"] == 1.0
    named = evaluate(specs[0], x[:, 2:4])[:, 0] > 0           # the rows whose code the label party received
    said = reasons.isin(["t1"]).any(axis=1).to_numpy()
    assert said.any() and not (said & ~named).any()           # t1 is named only where telco's function says so
    assert model.explain_transcript_["bytes"].sum() > 0
