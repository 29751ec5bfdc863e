"""Each party standardizes its own columns: raw tables just work, and the model reads in their units too."""

import numpy as np
import pandas as pd
import pytest

from vfl import DataError, FixedPointOverflowError, VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression
from vfl.centralized import fit_gradient_descent
from vfl.errors import ConstantColumnWarning
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
    # telco's 'code' is a discrete column: from some secret starts its partial score decodes it and the release
    # check refuses (38% of rows seen); this test is about units, so telco opts in
    model = VerticalLogisticRegression(allow_reconstruction=["telco"], **FAST).fit(data)
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


def test_a_constant_column_is_dropped_with_a_warning_naming_party_and_column():
    """A blank border pixel: scikit-learn accepts it, and so does vfl, leaving it out of the model with a warning.
    The model equals centralized training with the same standardization (the column is 0 in every row), the
    column's weight in its own units is 0, and new rows with another value in it score the same."""
    bank, telco = raw_tables()
    telco.insert(1, "country", 44.0)
    data = VerticalDataset({"bank": bank, "telco": telco}, label="default", id_column="id")
    with pytest.warns(ConstantColumnWarning, match=r"party telco, column 'country': holds 44 in every training row"):
        # telco's two integer columns (a code, an age): its partial score gives both away, so it opts in
        model = VerticalLogisticRegression(tol=None, max_iter=4, alpha=0.01, allow_reconstruction=["telco"],
                                           **FAST).fit(data)
    assert model.coef_["telco"].shape == (3,) and model.unscaled_coef_["telco"][0] == 0.0
    x = np.column_stack([telco[["country", "code", "age"]], bank[["amount", "bill"]]])
    scaled = np.column_stack([np.zeros(len(x)), (x[:, 1:] - x[:, 1:].mean(axis=0)) / x[:, 1:].std(axis=0)])
    start = np.concatenate([model.initial_coef_["telco"], model.initial_coef_["bank"]]), model.initial_intercept_
    ref = fit_gradient_descent(scaled, np.where(bank["default"] == 1, 1.0, -1.0), model._settings(), start=start)
    np.testing.assert_allclose(np.concatenate([model.coef_["telco"], model.coef_["bank"]]), ref["coef"], atol=1e-7)
    other = VerticalDataset({"bank": bank.iloc[:5].drop(columns="default"), "telco": telco.iloc[:5].assign(country=7.0)},
                            id_column="id")
    np.testing.assert_allclose(model.decision_function(other), model.decision_function(data)[:5], atol=1e-6)
    # what cannot be scaled is still refused (one row: no spread to measure)
    with pytest.raises(DataError, match=r"party bank: only one row to train on"):
        Standardizer.fit(np.array([[3.0]]), "bank", ["a"])
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
    with pytest.warns(ConstantColumnWarning):
        constant = Standardizer.fit(np.column_stack([x, np.full(3, 9.0)]), "bank", ["a", "b", "c"])
    table = constant.to_dict()
    assert table["dropped"] == [2] and table["scale"][2] == 1.0      # a JSON number; the index says it is dropped
    restored = Standardizer.from_dict(table, 3, "shard")
    np.testing.assert_array_equal(restored.scale, constant.scale)
    np.testing.assert_array_equal(restored.transform([[1.0, 10.0, 5.0]])[:, 2], [0.0])
    with pytest.raises(DataError, match="'dropped' must list column indices below 3"):
        Standardizer.from_dict(dict(table, dropped=[3]), 3, "shard")
    coef, offset = scaler.unscale(np.array([2.0, -1.0]))
    np.testing.assert_allclose(x @ coef + offset, scaler.transform(x) @ [2.0, -1.0])
    for bad in ({"mean": [0.0], "scale": [1.0]}, {"mean": [0.0, 1.0], "scale": [1.0, 0.0]}, {"mean": 3}):
        with pytest.raises(DataError, match="shard"):
            Standardizer.from_dict(bad, 2, "shard")


@pytest.mark.parametrize("huge", [1e200, 1e300, -1.5e308])
def test_a_column_whose_scaling_overflows_is_refused_not_zeroed(huge):
    """One huge finite value makes the standard deviation infinite: the column would be scaled to zeros."""
    bank, telco = raw_tables()
    telco.loc[5, "age"] = huge
    data = VerticalDataset({"bank": bank, "telco": telco}, label="default", id_column="id")
    with pytest.raises(DataError, match=r"party telco, column 'age': cannot be standardized, its values are too "
                                        r"large .* at row 5"):
        VerticalLogisticRegression(**FAST).fit(data)


def test_scaled_values_that_overflow_are_refused_at_training_and_prediction():
    x = np.array([[1e308, 1.0], [-1e308, 2.0], [0.0, 3.0]])      # mean and std finite, x - mean overflows
    with pytest.raises(DataError, match=r"party A, column 'a': cannot be standardized"):
        Standardizer.fit(x, "A", ["a", "b"])
    scaler = Standardizer(np.array([-1e308, 0.0]), np.array([0.5, 1.0]))
    with pytest.raises(DataError, match=r"party A, column 'a': .*value 1e\+308 at row 1"):
        scaler.transform(np.array([[0.0, 1.0], [1e308, 1.0]]), "party A", ["a", "b"])
    assert np.isinf(scaler.apply(np.array([[1e308, 1.0]]))[0, 0])    # a service rates such a row on its own


def test_one_row_is_refused_as_one_row_not_as_a_constant_column():
    bank, telco = raw_tables()
    data = VerticalDataset({"bank": bank.iloc[:1].assign(default=0.5), "telco": telco.iloc[:1]}, label="default",
                           id_column="id")
    with pytest.raises(DataError, match=r"only one row to train on") as caught:
        VerticalLinearRegression(**FAST).fit(data)
    assert "every row" not in str(caught.value)
