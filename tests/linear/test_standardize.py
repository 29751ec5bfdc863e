"""Each party standardizes its own columns: raw tables just work, and the model reads in their units too."""

import numpy as np
import pandas as pd
import pytest

from vfl import DataError, FixedPointOverflowError, VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression
from vfl.centralized import fit_gradient_descent
from vfl.parties.scaling import Standardizer

FAST = dict(key_bits=1024, insecure=True)


def raw_tables(n_rows=120, seed=2):
    """Columns in their own units: amounts in the hundreds of thousands, codes from -2 to 8, ages."""
    rng = np.random.default_rng(seed)
    amount = rng.gamma(2.0, 80_000.0, n_rows)
    code = rng.integers(-2, 9, n_rows).astype(float)
    age = rng.integers(21, 75, n_rows).astype(float)
    bill = rng.normal(50_000, 30_000, n_rows)
    z = (amount - 160_000) / 110_000 - 0.4 * code + 0.03 * (age - 45) + rng.normal(0, 0.7, n_rows)
    bank = pd.DataFrame({"id": range(n_rows), "amount": amount, "bill": bill, "default": (z > 0).astype(int)})
    telco = pd.DataFrame({"id": range(n_rows), "code": code, "age": age})
    return bank, telco


def test_raw_columns_train_and_equal_centralized_training_on_standardized_columns():
    bank, telco = raw_tables()
    data = VerticalDataset({"bank": bank, "telco": telco}, label="default", id_column="id")
    model = VerticalLogisticRegression(tol=None, max_iter=4, **FAST).fit(data)
    x = np.column_stack([telco[["code", "age"]], bank[["amount", "bill"]]])
    scaled = (x - x.mean(axis=0)) / x.std(axis=0)
    np.testing.assert_allclose(np.concatenate([model.mean_["telco"], model.mean_["bank"]]), x.mean(axis=0))
    start = np.concatenate([model.initial_coef_["telco"], model.initial_coef_["bank"]]), model.initial_intercept_
    ref = fit_gradient_descent(scaled, np.where(bank["default"] == 1, 1.0, -1.0), model._settings(), start=start)
    np.testing.assert_allclose(np.concatenate([model.coef_["telco"], model.coef_["bank"]]), ref["coef"], atol=1e-7)


def test_the_model_in_the_columns_own_units_gives_the_same_scores():
    bank, telco = raw_tables()
    data = VerticalDataset({"bank": bank, "telco": telco}, label="default", id_column="id")
    model = VerticalLogisticRegression(**FAST).fit(data)
    by_hand = (telco[["code", "age"]].to_numpy() @ model.unscaled_coef_["telco"]
               + bank[["amount", "bill"]].to_numpy() @ model.unscaled_coef_["bank"] + model.unscaled_intercept_)
    np.testing.assert_allclose(model.decision_function(data), by_hand, atol=1e-6)
    np.testing.assert_allclose(model.unscaled_coef_["bank"], model.coef_["bank"] / model.scale_["bank"])


def test_prediction_reuses_the_training_scaling():
    """Scoring a few rows scales them with the training means, not with their own."""
    bank, telco = raw_tables()
    data = VerticalDataset({"bank": bank, "telco": telco}, label="default", id_column="id")
    model = VerticalLinearRegression(**FAST).fit(
        VerticalDataset({"bank": bank.assign(default=bank["amount"] / 1e5), "telco": telco}, label="default",
                        id_column="id"))
    few = VerticalDataset({"bank": bank.iloc[:7].drop(columns="default"), "telco": telco.iloc[:7]}, id_column="id")
    np.testing.assert_allclose(model.predict(few), model.predict(data)[:7], atol=1e-6)


def test_a_constant_column_is_refused_naming_party_and_column():
    bank, telco = raw_tables()
    telco["country"] = 44.0
    data = VerticalDataset({"bank": bank, "telco": telco}, label="default", id_column="id")
    with pytest.raises(DataError, match=r"party telco, column 'country': cannot be standardized, it holds 44"):
        VerticalLogisticRegression(**FAST).fit(data)
    # without standardizing, amounts in the hundreds of thousands are refused before anything is encrypted
    with pytest.raises(FixedPointOverflowError, match=r"party bank, column 'amount': value .* feature_bound 256"):
        VerticalLogisticRegression(standardize=False, **FAST).fit(data.__class__(
            {"bank": bank, "telco": telco.drop(columns="country")}, label="default", id_column="id"))


def test_standardizer_round_trip_and_checks():
    x = np.array([[1.0, 10.0], [3.0, 30.0], [5.0, 20.0]])
    scaler = Standardizer.fit(x, "bank", ["a", "b"])
    np.testing.assert_allclose(scaler.transform(x).mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(scaler.transform(x).std(axis=0), 1.0)
    again = Standardizer.from_dict(scaler.to_dict(), 2, "shard")
    np.testing.assert_array_equal(again.transform(x), scaler.transform(x))
    coef, offset = scaler.unscale(np.array([2.0, -1.0]))
    np.testing.assert_allclose(x @ coef + offset, scaler.transform(x) @ [2.0, -1.0])
    for bad in ({"mean": [0.0], "scale": [1.0]}, {"mean": [0.0, 1.0], "scale": [1.0, 0.0]}, {"mean": 3}):
        with pytest.raises(DataError, match="shard"):
            Standardizer.from_dict(bad, 2, "shard")
