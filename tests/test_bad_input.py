"""Bad input gets a clear error naming the party, column or row: never a wrong model, never a hang."""

import numpy as np
import pandas as pd
import pytest

from vertical_data import make_vertical
from vfl import (ConfigurationError, DataError, DivergenceError, FixedPointOverflowError, NotFittedError, VerticalDataset,
                 VerticalLinearRegression, VerticalLogisticRegression)

FAST = dict(key_bits=1024, insecure=True, max_iter=1, solver="gd", standardize=False)


def frames(**kwargs):
    frame_a, frame_b, _, _ = make_vertical(n_rows=30, **kwargs)
    return frame_a, frame_b


def test_row_counts_differ():
    a, b = frames(ids=False)
    with pytest.raises(DataError, match="party A has 29.*party B has 30"):
        VerticalDataset({"A": a.iloc[:29], "B": b}, label="y")


def test_ids_differ_names_the_rows():
    a, b = frames()
    b.loc[4, "id"] = -1
    with pytest.raises(DataError, match=r"row 4: 1004 vs -1"):
        VerticalDataset({"A": a, "B": b}, label="y", id_column="id")


def test_ids_in_another_order():
    a, b = frames()
    with pytest.raises(DataError, match="same ids, same order"):
        VerticalDataset({"A": a, "B": b.iloc[::-1]}, label="y", id_column="id")


def test_missing_or_duplicate_ids():
    a, b = frames()
    with pytest.raises(DataError, match="party B: the id column 'id' is missing"):
        VerticalDataset({"A": a, "B": b.drop(columns="id")}, label="y", id_column="id")
    a.loc[3, "id"] = a.loc[2, "id"]
    with pytest.raises(DataError, match="party A: id 1002 appears twice"):
        VerticalDataset({"A": a, "B": b}, label="y", id_column="id")
    a, b = frames()
    b["id"] = b["id"].astype(float)
    b.loc[6, "id"] = np.nan
    with pytest.raises(DataError, match="party B: id column 'id', row 6: the id is missing"):
        VerticalDataset({"A": a, "B": b}, label="y", id_column="id")


def test_fit_without_a_label_column_named():
    a, b = frames()
    with pytest.raises(DataError, match="fit needs labels"):
        VerticalLogisticRegression(**FAST).fit(VerticalDataset({"A": a, "B": b}, id_column="id"))


def test_prediction_values_outside_the_range(vertical_frames):
    a, b, _, _ = vertical_frames
    model = VerticalLinearRegression(tol=None, packing=False, **{**FAST, "key_bits": 512}).fit(
        VerticalDataset({"A": a, "B": b}, label="y", id_column="id"))
    huge = a.assign(a0=a["a0"] * 1e200)
    test = VerticalDataset({"A": huge, "B": b.drop(columns="y")}, id_column="id")
    # the prediction rows get the parties' feature check (the training rows are not kept)...
    with pytest.raises(FixedPointOverflowError, match="party A, column 'a0': value .* at row 0 is outside"):
        model.predict(test)
    # ...and scores beyond the prediction bound are refused before encryption
    model.coef_["A"] = model.coef_["A"] * 1e150
    with pytest.raises(FixedPointOverflowError, match="party A: partial scores reach .*scale the prediction data"):
        model.predict(VerticalDataset({"A": a, "B": b.drop(columns="y")}, id_column="id"))


def test_infinity_names_party_column_row():
    a, b = frames()
    a.loc[7, "a1"] = np.inf
    with pytest.raises(DataError, match=r"party A, column 'a1': infinity at row 7 \(id 1007\)"):
        VerticalDataset({"A": a, "B": b}, label="y", id_column="id")


def test_a_missing_value_is_kept_by_the_data_and_refused_by_linear_models():
    """Gradient boosting takes gaps as they are; a linear model names the first gap and says what to do."""
    a, b = frames()
    a.loc[7, "a1"] = np.nan
    data = VerticalDataset({"A": a, "B": b}, label="y", id_column="id")
    assert np.isnan(data.features("A")[7, list(a.columns).index("a1") - 1])
    message = (r"party A, column 'a1': NaN at row 7 \(id 1007\); linear models and neural networks need every "
               r"value.*gradient-boosting")
    with pytest.raises(DataError, match=message):
        VerticalLogisticRegression(max_iter=2, key_bits=1024, insecure=True).fit(data)
    model = VerticalLogisticRegression(max_iter=2, key_bits=1024, insecure=True)
    model.fit(VerticalDataset({"A": frames()[0], "B": b}, label="y", id_column="id"))
    with pytest.raises(DataError, match=message):
        model.predict(VerticalDataset({"A": a, "B": b.drop(columns="y")}, id_column="id"))


def test_nan_label():
    a, b = frames()
    b["y"] = b["y"].astype(float)
    b.loc[2, "y"] = np.nan
    with pytest.raises(DataError, match="party B, column 'y': NaN at row 2"):
        VerticalDataset({"A": a, "B": b}, label="y", id_column="id")


def test_non_numeric_column():
    a, b = frames()
    a["city"] = "Lausanne"
    with pytest.raises(DataError, match="party A, column 'city': not numeric"):
        VerticalDataset({"A": a, "B": b}, label="y", id_column="id")


def test_label_not_binary_for_logistic():
    a, b = frames(task="linear")
    data = VerticalDataset({"A": a, "B": b}, label="y", id_column="id")
    with pytest.raises(DataError, match="party B: logistic regression needs class labels, but the label is a "
                                        "continuous target \\(30 distinct values"):
        VerticalLogisticRegression(**FAST).fit(data)


def test_no_frames_and_label_placement():
    a, b = frames()
    with pytest.raises(DataError, match="no frames"):
        VerticalDataset({}, label="y")
    with pytest.raises(DataError, match="two or more parties"):
        VerticalDataset({"A": a}, label="y")
    with pytest.raises(DataError, match="in the frames of A and B"):
        VerticalDataset({"A": a.assign(y=1), "B": b}, label="y")
    data = VerticalDataset({"A": a, "B": b}, label="target", id_column="id")
    with pytest.raises(DataError, match="no party holds the label column 'target'"):
        VerticalLogisticRegression(**FAST).fit(data)


def test_a_misspelt_label_is_named_as_missing_not_as_a_feature():
    """label='diagnosys' when B holds 'diagnosis' (text): not "'diagnosis' is not numeric", but that no party
    holds 'diagnosys', with the close match and every party's columns; a numeric label misspelt is refused at fit."""
    from vfl.ensemble import VerticalGradientBoostingClassifier

    a, b = frames()
    text = b.assign(diagnosis=np.where(b["y"] == 1, "benign", "malignant")).drop(columns="y")
    with pytest.raises(DataError, match=r"no party holds the label column 'diagnosys' \(did you mean 'diagnosis'\?\); "
                                        r"the columns are party A: a0, .*; party B: b0, .*diagnosis"):
        VerticalDataset({"A": a, "B": text}, label="diagnosys", id_column="id")
    data = VerticalDataset({"A": a, "B": b}, label="Y", id_column="id")
    for model in (VerticalLogisticRegression(**FAST), VerticalGradientBoostingClassifier(max_iter=1)):
        with pytest.raises(DataError, match=r"no party holds the label column 'Y' \(did you mean 'y'\?\)"):
            model.fit(data)


def test_empty_frame():
    a, b = frames()
    with pytest.raises(DataError, match="party A: the frame is empty"):
        VerticalDataset({"A": a.iloc[:0], "B": b}, label="y")


def test_duplicate_columns():
    a, b = frames()
    a.columns = ["id", "a0", "a0", "a2"]
    with pytest.raises(DataError, match=r"party A: duplicate column name\(s\) \['a0'\]"):
        VerticalDataset({"A": a, "B": b}, label="y", id_column="id")


def test_short_key_without_flag(vertical_data):
    with pytest.raises(ConfigurationError, match="insecure=True"):
        VerticalLogisticRegression(key_bits=1024).fit(vertical_data)


@pytest.mark.parametrize("param,value", [("learning_rate", 0), ("max_iter", 0), ("alpha", -1), ("batch_size", 0),
                                         ("tol", -1.0), ("frac_bits", 4), ("max_iter", 2.5)])
def test_bad_hyperparameters(vertical_data, param, value):
    with pytest.raises(ConfigurationError, match=param):
        VerticalLogisticRegression(**{**FAST, param: value}).fit(vertical_data)


@pytest.mark.filterwarnings("error::RuntimeWarning")        # one clear error, no numpy warning before it
@pytest.mark.parametrize("init", ["zeros", "random"])
def test_overflowing_values_name_the_cell(init):
    a, b = frames()
    a.loc[5, "a2"] = 1e300
    data = VerticalDataset({"A": a, "B": b}, label="y", id_column="id")
    with pytest.raises(FixedPointOverflowError, match=r"party A, column 'a2': value 1e\+300 at row 5 \(id 1005\)"):
        VerticalLogisticRegression(**{**FAST, "init": init}).fit(data)


def test_batch_not_larger_than_feature_count(vertical_data):
    # A learns 3 weights per step; B 2 weights + intercept = 3 values
    with pytest.raises(DataError, match="party A: a batch of 3 rows.*batch_size > 3"):
        VerticalLogisticRegression(batch_size=3, **FAST).fit(vertical_data)
    _, narrow_b = frames(n_a=2, n_b=6)
    wide = VerticalDataset({"A": frames(n_a=2, n_b=6)[0], "B": narrow_b}, label="y", id_column="id")
    with pytest.raises(DataError, match="party B: a batch of 7 rows.*batch_size > 7"):
        VerticalLogisticRegression(batch_size=7, **FAST).fit(wide)
    wide_a = pd.DataFrame(np.random.default_rng(0).normal(size=(30, 40)))
    _, b = frames(ids=False)
    data = VerticalDataset({"bank": wide_a, "B": b}, label="y")
    with pytest.raises(DataError, match=r"party bank: the data set is not larger than the 40"):
        VerticalLogisticRegression(**FAST).fit(data)


@pytest.mark.parametrize("cls,method", [(VerticalLogisticRegression, "predict_proba"),
                                        (VerticalLogisticRegression, "predict"),
                                        (VerticalLogisticRegression, "score"),
                                        (VerticalLogisticRegression, "decision_function"),
                                        (VerticalLinearRegression, "predict"),
                                        (VerticalLinearRegression, "score")])
def test_predict_before_fit(vertical_data, cls, method):
    with pytest.raises(NotFittedError, match="not fitted"):
        getattr(cls(), method)(vertical_data)


def test_shuffled_frames_without_ids_are_refused():
    a, b = frames(ids=False)
    shuffled = b.sample(frac=1.0, random_state=0)        # index labels travel with the rows
    with pytest.raises(DataError, match=r"different index labels at \d+ row\(s\) \(row 0: 0 vs \d+"):
        VerticalDataset({"A": a, "B": shuffled}, label="y")
    VerticalDataset({"A": a, "B": shuffled.reset_index(drop=True)}, label="y")   # the user's word that it is aligned


def test_label_of_mixed_types():
    a, b = frames()
    b["y"] = ["yes" if v else 0 for v in b["y"]]
    data = VerticalDataset({"A": a, "B": b}, label="y", id_column="id")
    with pytest.raises(DataError, match=r"party B: the label mixes value types \(int, str\)"):
        VerticalLogisticRegression(**FAST).fit(data)


def test_label_given_with_arrays_in_both_parties():
    with pytest.raises(DataError, match="give the labelled party as a DataFrame"):
        VerticalDataset({"A": np.zeros((5, 3)), "B": np.ones((5, 3))}, label="x2")


def test_diverging_training_stops_instead_of_wrapping():
    """A learning rate that makes the scores explode ends with a clear error at the party, not a wrong model."""
    rng = np.random.default_rng(0)
    a = pd.DataFrame(rng.normal(size=(40, 2)), columns=["a0", "a1"])
    b = pd.DataFrame(rng.normal(size=(40, 2)), columns=["b0", "b1"]).assign(y=rng.normal(size=40))
    data = VerticalDataset({"A": a, "B": b}, label="y")
    model = VerticalLinearRegression(learning_rate=50.0, max_iter=200, tol=None, key_bits=512, insecure=True,
                                     solver="gd", packing=False)
    with pytest.raises((FixedPointOverflowError, DivergenceError), match=r"diverges"):
        model.fit(data)


def test_a_growing_loss_stops_the_run_with_a_clear_error():
    """A loss that climbs for epochs on end (0.69 to 1e25 once passed silently) stops at C, naming the cause."""
    rng = np.random.default_rng(0)
    a = pd.DataFrame(rng.normal(size=(40, 2)), columns=["a0", "a1"])
    b = pd.DataFrame(rng.normal(size=(40, 2)), columns=["b0", "b1"]).assign(y=rng.integers(0, 2, 40))
    data = VerticalDataset({"A": a, "B": b}, label="y")
    model = VerticalLogisticRegression(learning_rate=12.0, max_iter=40, tol=None, key_bits=1024, insecure=True,
                                       solver="gd", packing=False)
    with pytest.raises(DivergenceError, match=r"C: training diverges: the loss grew for 5 epochs in a row, "
                                              r"from .* to .*; lower learning_rate \(now 12\)"):
        model.fit(data)


def test_diverged_rule():
    from vfl.protocols.linear.training import diverged

    assert diverged([0.7, 0.6, 0.5]) is None
    assert diverged([0.7, 0.8, 0.9, 1.0, 1.1, 1.2]) is None                 # rising, but not yet twice the minimum
    assert "grew for 5 epochs" in diverged([0.7, 0.8, 1.0, 1.3, 1.5, 1.6])
    assert diverged([0.7, 0.8, 1.0, 0.9, 1.5, 1.6, 2.0]) is None             # not five rises in a row
    assert "nan" in diverged([0.7, float("nan")]) and "inf" in diverged([0.7, float("inf")])


def test_not_converging_within_max_iter_warns_like_scikit_learn(vertical_data):
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="reached max_iter=2 epochs before the loss changed by less than tol"):
        VerticalLogisticRegression(max_iter=2, tol=1e-12, key_bits=1024, insecure=True, solver="gd").fit(vertical_data)
    with pytest.warns(ConvergenceWarning, match="reached max_iter=2 steps before the gradient's norm fell to "
                                                "tol=1e-12 times its first; increase max_iter"):
        VerticalLogisticRegression(max_iter=2, tol=1e-12, key_bits=1024, insecure=True).fit(vertical_data)


def test_values_beyond_the_feature_bound_of_a_short_key_are_refused():
    """Features that fit one encoding but exceed the public bound that rules out wrap-around in ``X^T d``.

    (Before the bound, such values trained a wrong model without an error: tests/linear/test_fixed_point_range.py
    shows that values just inside the bound still decrypt exactly.)"""
    rng = np.random.default_rng(1)
    a = pd.DataFrame(rng.normal(size=(30, 2)) * [1e70, 1.0], columns=["big", "a1"])
    b = pd.DataFrame(rng.normal(size=(30, 1)), columns=["b0"]).assign(y=rng.normal(size=30) * 1e30)
    data = VerticalDataset({"A": a, "B": b}, label="y")
    with pytest.raises(FixedPointOverflowError, match=r"party A, column 'big': value .* at row \d+ is outside"):
        VerticalLinearRegression(learning_rate=1e-100, max_iter=1, key_bits=512, insecure=True, standardize=False,
                                 packing=False).fit(data)


def test_prediction_columns_differ(vertical_frames):
    a, b, _, _ = vertical_frames
    model = VerticalLogisticRegression(**FAST).fit(VerticalDataset({"A": a, "B": b}, label="y", id_column="id"))
    renamed = a.rename(columns={"a1": "other"})
    test = VerticalDataset({"A": renamed, "B": b.drop(columns="y")}, id_column="id")
    with pytest.raises(DataError, match=r"party A: prediction columns differ.*missing \['a1'\], unexpected \['other'\]"):
        model.predict(test)
    test = VerticalDataset({"X": a, "B": b}, label="y", id_column="id")
    with pytest.raises(DataError, match="parties"):
        model.predict(test)


def test_fit_takes_a_dataset():
    with pytest.raises(DataError, match="VerticalDataset"):
        VerticalLogisticRegression(**FAST).fit(np.zeros((3, 3)))


@pytest.mark.parametrize("param,value", [("insecure", "false"), ("insecure", 0), ("fit_intercept", "no"),
                                         ("fit_intercept", 1)])
def test_booleans_take_only_booleans(vertical_data, param, value):
    """``insecure="false"`` is a truthy string: it used to allow a 512-bit key."""
    with pytest.raises(ConfigurationError, match=rf"{param} must be True or False, got {value!r}"):
        VerticalLogisticRegression(**{**FAST, "key_bits": 512, param: value}).fit(vertical_data)


def test_key_size_check_takes_only_a_boolean_insecure():
    from vfl.crypto import check_key_bits, generate_keypair
    from vfl.protocols.linear import TrainingSettings

    with pytest.raises(ConfigurationError, match="insecure must be True or False"):
        check_key_bits(512, insecure="false")
    with pytest.raises(ConfigurationError, match="insecure must be True or False"):
        generate_keypair(512, insecure="yes")
    with pytest.raises(ConfigurationError, match="fit_intercept must be True or False"):
        TrainingSettings(key_bits=1024, insecure=True, fit_intercept="false")
    assert check_key_bits(512, insecure=np.bool_(True)) == 512


@pytest.mark.parametrize("param,value", [("inference", "Table3"), ("inference", None), ("engine", "fastest"),
                                         ("engine", 3)])
def test_inference_and_engine_are_checked_in_fit(vertical_data, param, value):
    with pytest.raises(ConfigurationError, match=rf"^{param} must be"):
        VerticalLogisticRegression(**{**FAST, param: value}).fit(vertical_data)


def test_complex_columns_are_refused():
    a, b = frames()
    with pytest.raises(DataError, match=r"party A, column 'a1': complex numbers \(dtype complex128\)"):
        VerticalDataset({"A": a.assign(a1=a["a1"] + 1j), "B": b}, label="y", id_column="id")
    with pytest.raises(DataError, match=r"party B, column 'y': complex numbers"):
        VerticalDataset({"A": a, "B": b.assign(y=b["y"] * (1 + 1j))}, label="y", id_column="id")
    with pytest.raises(DataError, match=r"party A, column 'x0': complex numbers"):
        VerticalDataset({"A": np.ones((30, 2)) * 1j, "B": b}, label="y", id_column=None)


def test_fit_in_scikit_learns_form_says_what_to_pass():
    a, b, x, y = make_vertical(n_rows=30)
    model = VerticalLogisticRegression(**FAST)
    for args in [(x, y), (a, b["y"]), (VerticalDataset({"A": a, "B": b}, label="y", id_column="id"), y)]:
        with pytest.raises(DataError, match=r"fit takes a VerticalDataset.*pass VerticalDataset\(\{.*\}, "
                                            r"label='y'.*\) instead of \(X, y\)"):
            model.fit(*args)


def test_label_that_is_the_id_column():
    a, b = frames()
    with pytest.raises(DataError, match="the label column 'id' is also the id column"):
        VerticalDataset({"A": a, "B": b}, label="id", id_column="id")


# -- one set of checks for the API and the CLI (vfl.datachecks), and the run checks --------------------------
@pytest.mark.parametrize("blank", ["   ", " ", ""])
def test_blank_ids_are_refused(blank):
    a, b = frames()
    a["id"], b["id"] = a["id"].astype(object), b["id"].astype(object)
    a.loc[3, "id"], b.loc[3, "id"] = blank, " "
    with pytest.raises(DataError, match=r"party A: id column 'id', row 3: the id is empty"):
        VerticalDataset({"A": a, "B": b}, label="y", id_column="id")


def test_a_column_every_party_holds_alike_is_an_id_not_a_feature():
    a, b = frames()
    with pytest.raises(DataError, match=r"every party holds a column 'id' with the same values.*id_column='id'"):
        VerticalDataset({"A": a, "B": b}, label="y")
    renamed = VerticalDataset({"A": a.rename(columns={"id": "key"}), "B": b.rename(columns={"id": "key"})},
                              label="y", id_column="key")
    assert "key" not in renamed.columns("A")


def test_multiindex_columns_are_refused_by_name():
    a, b = frames()
    a.columns = pd.MultiIndex.from_tuples([("k", c) for c in a.columns])
    with pytest.raises(DataError, match=r"party A: the columns have 2 levels \(a MultiIndex such as \('k', 'id'\)"):
        VerticalDataset({"A": a, "B": b}, label="y", id_column="id")


def test_all_zero_sample_weights_are_refused():
    data = VerticalDataset(dict(zip("AB", frames())), label="y", id_column="id")
    with pytest.raises(DataError, match="party B: every row's weight is 0"):
        VerticalLogisticRegression(**FAST).fit(data, sample_weight=np.zeros(30))


def test_dp_label_clipping_warns_with_the_count():
    a, b = frames(task="linear")
    b["y"] = b["y"] * 10
    data = VerticalDataset({"A": a, "B": b}, label="y", id_column="id")
    beyond = int((np.abs(b["y"]) > 1.0).sum())
    with pytest.warns(UserWarning, match=rf"party B: {beyond} of 30 labels lie beyond dp_label_bound = 1"):
        VerticalLinearRegression(tol=None, dp_epsilon=1.0, dp_delta=1e-5, dp_label_bound=1.0, **FAST).fit(data)


def test_init_zeros_needs_the_insecure_acknowledgement():
    data = VerticalDataset(dict(zip("AB", frames())), label="y", id_column="id")
    with pytest.raises(ConfigurationError, match=r"init='zeros'.*hands every feature party X\^T y.*insecure=True"):
        VerticalLogisticRegression(init="zeros", max_iter=1).fit(data)
    with pytest.raises(ConfigurationError, match="insecure must be True or False"):
        VerticalLogisticRegression(init="zeros", key_bits=1024, insecure="yes", max_iter=1).fit(data)
    # the shared protocol hands no party a gradient, the first one included: a zero start needs no acknowledgement
    from vfl.protocols.linear import TrainingSettings
    assert TrainingSettings(init="zeros", protocol="shared", solver="gd").init == "zeros"
    with pytest.raises(ConfigurationError, match="init='zeros'"):
        TrainingSettings(init="zeros", protocol="yang", solver="gd")


def inprocess_run(labels=None, names=("A", "B"), key_bits=1024, settings=None):
    from vfl import inprocess
    from vfl.crypto import FixedPoint
    from vfl.parties import Coordinator
    from vfl.parties.linear import PartyA, PartyB
    from vfl.protocols.linear import TrainingSettings

    rng = np.random.default_rng(0)
    y = np.where(rng.integers(0, 2, 30) == 1, 1.0, -1.0) if labels is None else labels
    parties = {names[0]: PartyA(rng.normal(size=(30, 3)), role=names[0]),
               names[1]: PartyB(rng.normal(size=(30, 2)), y, role=names[1])}
    inprocess.train(parties, Coordinator(key_bits, True, FixedPoint(32)),
                    settings or TrainingSettings(key_bits=1024, insecure=True, max_iter=1))


def test_inprocess_train_checks_its_parties_labels_and_key():
    with pytest.raises(DataError, match=r"party B: logistic regression trains on targets -1/\+1, but row 1 holds 2"):
        inprocess_run(labels=np.where(np.arange(30) % 2 == 0, 1.0, 2.0))
    with pytest.raises(ConfigurationError, match=r"the parties given are \['B', 'bank'\].*missing \['A'\]"):
        inprocess_run(names=("bank", "B"))
    from vfl.protocols.linear import TrainingSettings
    with pytest.raises(ConfigurationError, match="the coordinator C makes 1024-bit keys.*key_bits=2048"):
        inprocess_run(settings=TrainingSettings(max_iter=1))


@pytest.mark.parametrize("frame", [pd.DataFrame({"key": ["1", "2"], "x": [1.0, 2.0]}),
                                   pd.DataFrame({"id": ["7", "7.0"], "x": [1.0, 2.0]}),
                                   pd.DataFrame({"id": ["1", "2"]})],
                         ids=["no id column", "an id twice", "no feature column"])
def test_the_api_and_the_csv_reader_word_a_table_s_problems_alike(tmp_path, frame):
    """One set of checks (vfl.datachecks): the same words through VerticalDataset (or a fit) and vfl party's reader."""
    from vfl.deploy.data import load_csv

    frame.to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(DataError) as by_csv:
        load_csv(tmp_path / "a.csv", "A")
    b = pd.DataFrame({"id": ["1", "2"], "b": [0.5, 1.5], "y": [0, 1]})
    with pytest.raises(DataError) as by_api:
        VerticalLogisticRegression(**FAST).fit(VerticalDataset({"A": frame, "B": b}, label="y", id_column="id"))
    api, csv = str(by_api.value), str(by_csv.value)
    assert api.startswith("party A: ") and csv.startswith(f"party A ({tmp_path / 'a.csv'}): ")
    assert csv.split("): ", 1)[1].split(";")[0] == api.split(": ", 1)[1].split(";")[0], (api, csv)


def test_names_with_a_trailing_newline_and_ports_out_of_range_are_refused_by_name():
    from vfl.deploy.serving_settings import VERSION
    from vfl.transport.network import parse_address
    from vfl.transport.tls import ROLE_PATTERN

    assert VERSION.match("v1") and not VERSION.match("v1\n") and not ROLE_PATTERN.match("bank\n")
    with pytest.raises(ConfigurationError, match=r"port 99999 is out of range \(1 to 65535\)"):
        parse_address("127.0.0.1:99999")
    with pytest.raises(ConfigurationError, match=r"port '8o80' is not a number"):
        parse_address("127.0.0.1:8o80")
