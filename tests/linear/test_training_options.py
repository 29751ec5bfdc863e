"""Every training option: the federated run equals centralized training with the same option and start."""

import numpy as np
import pandas as pd
import pytest

from vfl import ConfigurationError, DataError, VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression
from vfl.centralized import fit_gradient_descent
from vfl.protocols.linear import TrainingSettings

# the first-order protocol (solver="gd"), on the columns as given
FAST = dict(key_bits=1024, insecure=True, solver="gd", standardize=False)
ATOL = 1e-7


def data(task, k=1, n_rows=64, seed=2):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, 2 * k + 2))
    z = x @ rng.normal(size=x.shape[1]) + 0.3
    y = (z + rng.normal(scale=0.5, size=n_rows) > 0).astype(int) if task == "logistic" else z
    frames = {f"f{j}": pd.DataFrame(x[:, 2 * j:2 * j + 2]).add_prefix(f"f{j}_") for j in range(k)}
    frames["lab"] = pd.DataFrame(x[:, 2 * k:]).add_prefix("lab_").assign(y=y)
    return VerticalDataset(frames, label="y"), x, y


def check_against_centralized(model, x, y):
    names = (*model.feature_parties_, model.label_party_)
    start = np.concatenate([model.initial_coef_[n] for n in names]), model.initial_intercept_
    target = np.where(y == model.classes_[1], 1.0, -1.0) if hasattr(model, "classes_") else y
    ref = fit_gradient_descent(x, target, model._settings(), start=start)
    coef = np.concatenate([model.coef_[n] for n in names])
    np.testing.assert_allclose(coef, ref["coef"], atol=ATOL, rtol=0)
    assert model.intercept_ == pytest.approx(ref["intercept"], abs=ATOL)
    np.testing.assert_allclose(model.loss_curve_, ref["loss_curve"], atol=ATOL, rtol=0)
    return ref


OPTIONS = [
    dict(optimizer="momentum"), dict(optimizer="nesterov", momentum=0.5), dict(optimizer="adagrad"),
    dict(optimizer="rmsprop"), dict(optimizer="adam"), dict(optimizer="adam", beta_1=0.8, beta_2=0.99),
    dict(penalty="l1", alpha=0.05), dict(penalty="elasticnet", alpha=0.05, l1_ratio=0.5), dict(penalty="none"),
    dict(learning_rate_schedule="invscaling", power_t=0.25), dict(learning_rate_schedule="step", decay_steps=2),
    dict(optimizer="adam", penalty="elasticnet", alpha=0.02, learning_rate_schedule="invscaling"),
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("task", ["logistic", "linear"])
def test_each_option_equals_centralized(task, options):
    dataset, x, y = data(task)
    cls = VerticalLogisticRegression if task == "logistic" else VerticalLinearRegression
    model = cls(**{"learning_rate": 0.1, "max_iter": 4, "batch_size": 20, "tol": None, "random_state": 5,
                   **FAST, **options}).fit(dataset)
    check_against_centralized(model, x, y)


def test_options_with_three_feature_parties_full_batch():
    dataset, x, y = data("logistic", k=3, seed=7)
    model = VerticalLogisticRegression(learning_rate=0.05, max_iter=3, tol=None, optimizer="adam", penalty="l1",
                                       alpha=0.1, **FAST).fit(dataset)
    check_against_centralized(model, x, y)


def test_l1_zeroes_weights_and_the_decrypted_loss_includes_it():
    dataset, x, y = data("linear", seed=3)
    model = VerticalLinearRegression(learning_rate=0.1, max_iter=6, tol=None, penalty="l1", alpha=1.0, init="zeros",
                                     **FAST).fit(dataset)
    coef = np.concatenate(list(model.coef_.values()))
    assert np.count_nonzero(coef == 0.0) >= 1
    ref = check_against_centralized(model, x, y)
    unpenalised = VerticalLinearRegression(learning_rate=0.1, max_iter=1, tol=None, penalty="none", init="zeros",
                                           **FAST).fit(dataset)
    assert model.loss_curve_[0] == pytest.approx(unpenalised.loss_curve_[0])   # zero start: no penalty yet
    assert ref["loss_curve"][-1] == pytest.approx(model.loss_curve_[-1], abs=ATOL)


@pytest.mark.parametrize("kwargs,message", [
    (dict(optimizer="lbfgs"), "optimizer must be one of"),
    (dict(penalty="l3"), "penalty must be one of"),
    (dict(l1_ratio=1.5), r"l1_ratio must be in \[0, 1\]"),
    (dict(learning_rate_schedule="cosine"), "learning_rate_schedule must be one of"),
    (dict(decay_rate=0.0), r"decay_rate must be in \(0, 1\]"),
    (dict(beta_2=1.0), r"beta_2 must be in \[0, 1\)"),
    (dict(epsilon=0.0), "epsilon must be a positive number"),
])
def test_bad_options_are_refused(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        TrainingSettings(**kwargs)


@pytest.mark.parametrize("task,scoring", [("logistic", "loss"), ("logistic", "roc_auc"), ("logistic", "ks"),
                                          ("logistic", "accuracy"), ("linear", "r2")])
def test_early_stopping_stops_at_the_centralized_epoch_with_its_best_weights(task, scoring):
    dataset, x, y = data(task, n_rows=90, seed=11)
    cls = VerticalLogisticRegression if task == "logistic" else VerticalLinearRegression
    # a learning rate large enough that the validation score turns around within a few epochs
    model = cls(learning_rate=0.9 if task == "logistic" else 0.5, max_iter=25, batch_size=15, tol=1e-3,
                random_state=3, early_stopping=True, validation_fraction=0.2, n_iter_no_change=2, scoring=scoring,
                optimizer="momentum", **FAST).fit(dataset)
    ref = check_against_centralized(model, x, y)
    assert model.n_iter_ == ref["n_iter"] and model.best_iteration_ == ref["best_epoch"] + 1
    np.testing.assert_allclose(model.validation_scores_, ref["validation_scores"], atol=1e-6)
    assert len(model.validation_scores_) == model.n_iter_
    assert model.best_iteration_ < model.n_iter_ < 25     # it did stop early, and went back to a better epoch


def test_early_stopping_on_a_given_validation_set():
    train, x, y = data("logistic", n_rows=70, seed=4)
    held, xv, yv = data("logistic", n_rows=30, seed=5)
    model = VerticalLogisticRegression(learning_rate=0.8, max_iter=12, tol=None, early_stopping=True,
                                       n_iter_no_change=3, scoring="roc_auc", **FAST).fit(train, validation=held)
    names = (*model.feature_parties_, model.label_party_)
    start = np.concatenate([model.initial_coef_[n] for n in names]), model.initial_intercept_
    ref = fit_gradient_descent(x, np.where(y == 1, 1.0, -1.0), model._settings(), start=start,
                               validation=(xv, np.where(yv == 1, 1.0, -1.0)))
    np.testing.assert_allclose(np.concatenate([model.coef_[n] for n in names]), ref["coef"], atol=ATOL)
    assert model.best_iteration_ == ref["best_epoch"] + 1


def test_only_the_label_party_sees_validation_scores():
    dataset, _, _ = data("logistic", k=2, n_rows=80, seed=6)
    model = VerticalLogisticRegression(max_iter=3, tol=None, random_state=1, early_stopping=True,
                                       **FAST).fit(dataset)
    t = model.transcript_
    for name in ("masked_validation", "validation_scores"):
        assert set(t[t.name == name]["kind"]) == {"ciphertext"}
    assert set(t[t.name == "validation"]["receiver"]) == {"lab"} and set(t[t.name == "validation"]["kind"]) == {"masked"}
    assert set(t[t.name == "early_stop"]["receiver"]) == {"C"}


@pytest.mark.parametrize("kwargs,message", [
    (dict(validation_fraction=1.0), r"validation_fraction must be in \(0, 1\)"),
    (dict(scoring="r2"), "scoring for logistic regression must be one of"),
    (dict(n_iter_no_change=0), "n_iter_no_change must be a positive integer"),
    (dict(early_stopping=True, dp_epsilon=1.0, dp_delta=1e-5, tol=None), "use one or the other"),
])
def test_bad_early_stopping_settings(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        TrainingSettings(**kwargs)


def test_validation_data_needs_early_stopping():
    train, _, _ = data("logistic")
    with pytest.raises(ConfigurationError, match="pass early_stopping=True"):
        VerticalLogisticRegression(**FAST).fit(train, validation=train)


def iris_data():
    from sklearn.datasets import load_iris
    from sklearn.preprocessing import StandardScaler

    x, y = load_iris(return_X_y=True)
    x = StandardScaler().fit_transform(x)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    frames = {"shop": pd.DataFrame(x[:, :2], columns=["a", "b"]),
              "bank": pd.DataFrame(x[:, 2:], columns=["c", "d"]).assign(species=names)}
    return VerticalDataset(frames, label="species"), x, names


def test_one_vs_rest_in_one_run_equals_centralized_per_class(monkeypatch):
    import vfl.parties.coordinator as coordinator_module

    made = []
    original = coordinator_module.generate_keypair
    monkeypatch.setattr(coordinator_module, "generate_keypair", lambda *a, **k: made.append(1) or original(*a, **k))
    dataset, x, names = iris_data()
    model = VerticalLogisticRegression(learning_rate=0.3, max_iter=4, tol=None, optimizer="adam",
                                       allow_score_span=["shop"], **FAST)     # shop: 2 columns, 3 scores a row
    model.fit(dataset)
    assert len(made) == 1                                   # one key pair for the whole run
    assert list(model.classes_) == ["setosa", "versicolor", "virginica"]
    assert model.coef_["shop"].shape == (3, 2) and model.intercept_.shape == (3,) and len(model.loss_curve_) == 3
    central = []
    for k, cls in enumerate(model.classes_):
        start = np.concatenate([model.initial_coef_["shop"][k], model.initial_coef_["bank"][k]]), \
            model.initial_intercept_[k]
        ref = fit_gradient_descent(x, np.where(names == cls, 1.0, -1.0), model._settings(), start=start)
        np.testing.assert_allclose(np.concatenate([model.coef_["shop"][k], model.coef_["bank"][k]]), ref["coef"],
                                   atol=ATOL)
        np.testing.assert_allclose(model.loss_curve_[k], ref["loss_curve"], atol=ATOL)
        central.append(x @ ref["coef"] + ref["intercept"])
    proba = model.predict_proba(dataset)
    assert proba.shape == (150, 3) and np.allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(model.decision_function(dataset), np.column_stack(central), atol=1e-6)
    assert (model.predict(dataset) == model.classes_[np.argmax(np.column_stack(central), axis=1)]).all()
    tagged = model.transcript_["model"]
    assert set(tagged.dropna()) == {0, 1, 2}
    # before the models: only the public counts every party agrees on first (``columns``, ``models``)
    assert set(model.transcript_.loc[tagged.isna(), "name"]) == {"columns", "models"}


def test_warm_start_continues_from_the_fitted_weights():
    dataset, x, y = data("logistic", seed=8)
    common = dict(learning_rate=0.2, tol=None, init="zeros", **FAST)
    warm = VerticalLogisticRegression(max_iter=3, warm_start=True, **common).fit(dataset)
    first = {name: c.copy() for name, c in warm.coef_.items()}
    warm.set_params(max_iter=2).fit(dataset)
    whole = VerticalLogisticRegression(max_iter=5, **common).fit(dataset)   # sgd, full batch: 3 + 2 = 5 epochs
    for name in whole.coef_:
        np.testing.assert_allclose(warm.coef_[name], whole.coef_[name], atol=ATOL)
        np.testing.assert_allclose(warm.initial_coef_[name], first[name])
    np.testing.assert_allclose(warm.loss_curve_, whole.loss_curve_[3:], atol=ATOL)


def test_warm_start_on_other_data_is_refused():
    dataset, _, _ = data("logistic", seed=8)
    model = VerticalLogisticRegression(max_iter=1, tol=None, warm_start=True, **FAST).fit(dataset)
    other, _, _ = data("logistic", k=2, seed=8)
    with pytest.raises(DataError, match=r"warm_start continues a model fitted with the parties \['f0', 'lab'\]"):
        model.fit(other)
    renamed = VerticalDataset({"f0": dataset._frames["f0"].rename(columns=lambda c: f"new_{c}"),
                               "lab": dataset._frames["lab"].assign(y=dataset.labels)}, label="y")
    with pytest.raises(DataError, match=r"party f0: warm_start continues weights fitted on the columns .*missing"):
        model.fit(renamed)
    # the same parties and columns, but other classes: the label party refuses, as vfl party does
    relabelled = VerticalDataset({"f0": dataset._frames["f0"],
                                  "lab": dataset._frames["lab"].assign(y=np.where(dataset.labels == 1, "b", "a"))},
                                 label="y")
    with pytest.raises(DataError, match=r"^party lab: warm_start continues 1 model\(s\) \(classes \[0, 1\]\); this "
                                        r"run trains 1 \(classes \['a', 'b'\]\); train without warm_start$"):
        model.fit(relabelled)


@pytest.mark.parametrize("task,k,class_weight,with_sample_weight", [
    ("logistic", 1, {1: 2.5}, False), ("logistic", 2, {0: 3.0}, False), ("logistic", 1, "balanced", True),
    ("linear", 1, None, True), ("linear", 2, None, True)])
def test_weighted_rows_equal_centralized_with_the_same_weights(task, k, class_weight, with_sample_weight):
    from vfl.parties import class_weights

    dataset, x, y = data(task, k=k, n_rows=80, seed=9)
    sample_weight = np.random.default_rng(1).uniform(0.2, 3.0, size=80) if with_sample_weight else None
    cls = VerticalLogisticRegression if task == "logistic" else VerticalLinearRegression
    extra = {"class_weight": class_weight} if class_weight is not None else {}
    model = cls(learning_rate=0.2, max_iter=3, batch_size=20, tol=None, random_state=2, **extra, **FAST)
    model.fit(dataset, sample_weight=sample_weight)
    weights = np.ones(80)
    if class_weight is not None:
        weights = weights * class_weights(y, class_weight)
    if sample_weight is not None:
        weights = weights * sample_weight
    names = (*model.feature_parties_, model.label_party_)
    start = np.concatenate([model.initial_coef_[n] for n in names]), model.initial_intercept_
    target = np.where(y == 1, 1.0, -1.0) if task == "logistic" else y
    ref = fit_gradient_descent(x, target, model._settings(), start=start, sample_weight=weights)
    np.testing.assert_allclose(np.concatenate([model.coef_[n] for n in names]), ref["coef"], atol=ATOL)
    np.testing.assert_allclose(model.loss_curve_, ref["loss_curve"], atol=ATOL)
    unweighted = fit_gradient_descent(x, target, model._settings(), start=start)
    assert not np.allclose(unweighted["coef"], ref["coef"], atol=1e-3)   # the weights did change the model


def test_balanced_class_weights_are_scikit_learns():
    from sklearn.utils.class_weight import compute_sample_weight

    from vfl.parties import class_weights

    labels = np.array(["a", "b", "b", "b", "c", "c"])
    np.testing.assert_allclose(class_weights(labels, "balanced"), compute_sample_weight("balanced", labels))
    np.testing.assert_allclose(class_weights(labels, {"a": 2.0}), [2, 1, 1, 1, 1, 1])


def test_bad_weights_are_refused():
    dataset, _, _ = data("logistic")
    with pytest.raises(DataError, match="class_weight names class 7, which is not among the labels' classes"):
        VerticalLogisticRegression(class_weight={7: 2.0}, **FAST).fit(dataset)
    with pytest.raises(DataError, match="sample_weight has shape"):
        VerticalLogisticRegression(**FAST).fit(dataset, sample_weight=np.ones(3))
    with pytest.raises(DataError, match=r"sample weight -1.0 at row 0 is not a finite number in \[0, 65536\]"):
        VerticalLogisticRegression(**FAST).fit(dataset, sample_weight=np.r_[-1.0, np.ones(63)])
    with pytest.raises(ConfigurationError, match="class_weight must be None, 'balanced' or a dict"):
        TrainingSettings(class_weight="heavy")
    with pytest.raises(ConfigurationError, match="class_weight derives the weights from the labels"):
        TrainingSettings(class_weight="balanced", dp_epsilon=1.0, dp_delta=1e-5, tol=None)


def test_the_weights_never_leave_the_label_party():
    dataset, _, _ = data("logistic", k=2, n_rows=60)
    model = VerticalLogisticRegression(max_iter=1, tol=None, class_weight="balanced", **FAST)
    model.fit(dataset, sample_weight=np.linspace(0.5, 2.0, 60))
    t = model.transcript_
    sent_by_lab = t[t.sender == "lab"]
    assert set(sent_by_lab["kind"]) <= {"public", "ciphertext"}    # nothing per row in clear


def test_credit_scoring_example_runs(capsys):
    import runpy
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "credit_scoring.py"
    runpy.run_path(str(example), run_name="not_main")["main"](["--key-bits", "1024", "--rows", "1500"])
    out = capsys.readouterr().out
    federated, central = (float(line.split()[-2]) for line in out.splitlines()
                          if line.startswith(("federated (vfl)", "centralized, same options")))
    assert federated == pytest.approx(central, abs=1e-4) and federated > 0.7
    assert "largest weight difference federated vs centralized" in out


def test_packed_ciphertexts_with_training_options_give_the_unpacked_model():
    dataset, _, _ = data("logistic", k=2, n_rows=80, seed=12)
    common = dict(learning_rate=0.2, max_iter=6, batch_size=20, tol=1e-4, random_state=3, init="zeros",
                  optimizer="adam", penalty="elasticnet", alpha=0.05, l1_ratio=0.5, early_stopping=True,
                  n_iter_no_change=2, **FAST)
    plain = VerticalLogisticRegression(**common).fit(dataset)
    packed = VerticalLogisticRegression(packing=True, **common).fit(dataset)
    for name in plain.coef_:
        np.testing.assert_allclose(packed.coef_[name], plain.coef_[name], atol=1e-9)
    assert packed.best_iteration_ == plain.best_iteration_ and packed.n_iter_ == plain.n_iter_


def test_packed_ciphertexts_do_not_take_row_weights_yet():
    with pytest.raises(ConfigurationError, match="packed ciphertexts do not take row weights"):
        TrainingSettings(packing=True, class_weight="balanced")


@pytest.mark.parametrize("kwargs,named", [
    (dict(optimizer="adam"), "optimizer='adam'"),
    (dict(learning_rate=0.5), "learning_rate=0.5"),
    (dict(learning_rate_schedule="invscaling", optimizer="momentum"),
     "optimizer='momentum' and learning_rate_schedule='invscaling'"),
])
def test_a_step_setting_asked_for_is_used_or_refused(kwargs, named):
    """solver='auto' runs gradient steps when one is asked for; solver='cg' would ignore it, so it refuses."""
    with pytest.raises(ConfigurationError, match=rf"solver='cg' .* so {named} would go unused"):
        TrainingSettings(solver="cg", **kwargs)
    assert not TrainingSettings(**kwargs).conjugate and TrainingSettings().conjugate
    train, _, _ = data("logistic")
    model = VerticalLogisticRegression(max_iter=2, tol=None, key_bits=1024, insecure=True, **kwargs).fit(train)
    assert model.solver_ == "gd"
    assert VerticalLogisticRegression(max_iter=2, key_bits=1024, insecure=True).fit(train).solver_ == "cg"


@pytest.mark.parametrize("kwargs,message", [
    (dict(validation_fraction=0.99), r"holds out 64 of the 65 rows .* leaves 1 to train on, not more than the 3"),
    (dict(validation_fraction=0.99, protocol="shared"), r"leaves 1 to train on, not the two a model needs"),
    (dict(validation_fraction=0.01), r"holds out 1 of the 65 rows for early stopping, too few to score"),
])
def test_a_validation_split_leaving_too_few_rows_is_refused(kwargs, message):
    train, _, _ = data("logistic", n_rows=65)
    with pytest.raises(ConfigurationError, match=message):
        VerticalLogisticRegression(early_stopping=True, max_iter=2, **FAST, **kwargs).fit(train)


def test_vfl_party_holds_out_rows_under_the_same_rule():
    """Each party of a federation checks the split before holding rows out (vfl party has no fit(validation=))."""
    from vfl.parties.linear import PartyA
    from vfl.protocols.linear.validation import hold_out

    party = PartyA(np.random.default_rng(0).normal(size=(65, 3)), role="A")
    settings = TrainingSettings(early_stopping=True, validation_fraction=0.99, solver="gd")
    with pytest.raises(ConfigurationError, match=r"leaves 1 to train on, not more than the 3 gradient values party A "
                                                 r"learns per step; .* or turn early_stopping off"):
        hold_out(party, settings, seed=1)
    hold_out(party, TrainingSettings(early_stopping=True, validation_fraction=0.2, solver="gd"), seed=1)
    assert party.n_rows == 52
