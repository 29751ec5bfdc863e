"""The estimators behave like scikit-learn's, and the protocol resumes exactly."""

import copy
import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from vertical_data import make_vertical
from vfl import DataError, VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression
from vfl.parties import Coordinator
from vfl.parties.linear import PartyA, PartyB
from vfl.protocols.linear import TrainingSettings, run_a, run_b, run_c
from vfl.transport import Endpoint, InProcessNetwork, run_roles

FAST = dict(key_bits=1024, insecure=True)


@pytest.fixture(scope="module")
def fitted():
    frame_a, frame_b, x, y = make_vertical(n_rows=50, seed=8)
    data = VerticalDataset({"bank": frame_a, "shop": frame_b}, label="y", id_column="id")
    return VerticalLogisticRegression(max_iter=3, tol=None, **FAST).fit(data), data, y


def test_params_follow_scikit_learn(fitted):
    model, _, _ = fitted
    params = model.get_params()
    assert params["learning_rate"] == 0.15 and params["key_bits"] == 1024
    copy = clone(model).set_params(max_iter=7)
    assert copy.max_iter == 7 and not hasattr(copy, "coef_")


def test_fitted_attributes(fitted):
    model, data, y = fitted
    assert set(model.coef_) == {"bank", "shop"}
    assert model.coef_["bank"].shape == (3,) and model.coef_["shop"].shape == (2,)
    assert isinstance(model.intercept_, float) and model.n_iter_ == 3
    assert model.loss_curve_.shape == (3,) and np.isfinite(model.loss_curve_).all()   # the zero start's log 2:
    # test_equivalence.test_zero_start_gives_todays_trajectory
    assert list(model.classes_) == [0, 1]
    t = model.transcript_
    assert list(t.columns) == ["iteration", "sender", "receiver", "name", "kind", "bytes"]
    assert set(t["kind"]) == {"public", "ciphertext", "masked"} and (t["bytes"] > 0).all()
    assert sorted(t.loc[t.iteration >= 0, "iteration"].unique()) == [0, 1, 2]


def test_predictions(fitted):
    model, data, y = fitted
    proba = model.predict_proba(data)
    assert proba.shape == (50,)
    np.testing.assert_array_equal(model.predict(data), (proba >= 0.5).astype(int))
    assert model.score(data) == pytest.approx(np.mean(model.predict(data) == y))
    # test data without the label, in the same party names
    frame_a, frame_b, _, _ = make_vertical(n_rows=50, seed=8)
    unlabeled = VerticalDataset({"bank": frame_a, "shop": frame_b.drop(columns="y")}, id_column="id")
    np.testing.assert_allclose(model.predict_proba(unlabeled), proba)


def test_table3_inference_gives_the_same_scores(fitted):
    model, data, _ = fitted
    private = model.decision_function(data)
    leaky = clone(model).set_params(inference="table3")
    leaky.__dict__.update({k: v for k, v in model.__dict__.items() if k.endswith("_") or k == "_coordinator"})
    leaky.inference = "table3"
    np.testing.assert_allclose(leaky.decision_function(data), private, atol=1e-8)
    assert "plaintext" in set(leaky.predict_transcript_["kind"])
    assert "plaintext" not in set(model.predict_transcript_["kind"])


def test_string_class_labels_and_numpy_frames():
    _, _, x, y = make_vertical(n_rows=40, seed=9, ids=False)
    frame_b = pd.DataFrame(x[:, 3:])
    frame_b["label"] = np.where(y == 1, "malignant", "benign")
    data = VerticalDataset({"A": x[:, :3], "B": frame_b}, label="label")
    model = VerticalLogisticRegression(max_iter=2, **FAST).fit(data)
    assert list(model.classes_) == ["benign", "malignant"]
    assert set(model.predict(data)) <= {"benign", "malignant"}
    # arrays at prediction time are matched to the training columns by position, as in scikit-learn
    test = VerticalDataset({"A": x[:, :3], "B": x[:, 3:]})
    np.testing.assert_allclose(model.predict_proba(test), model.predict_proba(data), atol=1e-8)
    with pytest.raises(DataError, match="party B: prediction columns differ"):
        model.predict_proba(VerticalDataset({"A": x[:, :3], "B": x[:, 2:]}))


@pytest.mark.parametrize("labels", [np.array([False, True]), np.array([3, 7])])
def test_class_labels_keep_their_type(labels):
    frame_a, frame_b, _, y = make_vertical(n_rows=30, seed=12)
    frame_b["y"] = labels[y]
    data = VerticalDataset({"A": frame_a, "B": frame_b}, label="y", id_column="id")
    model = VerticalLogisticRegression(max_iter=2, **FAST).fit(data)
    assert model.classes_.dtype == labels.dtype and list(model.classes_) == list(labels)
    assert model.predict(data).dtype == labels.dtype


def test_linear_regression_score_is_r2():
    frame_a, frame_b, x, y = make_vertical(n_rows=40, task="linear", seed=10)
    data = VerticalDataset({"A": frame_a, "B": frame_b}, label="y", id_column="id")
    model = VerticalLinearRegression(learning_rate=0.5, max_iter=15, alpha=0.0, tol=None, **FAST).fit(data)
    pred = model.predict(data)
    r2 = 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)
    assert model.score(data) == pytest.approx(r2) and r2 > 0.8


def test_verbose_shows_progress(capsys, vertical_data):
    """verbose=True: a bar over the epochs with the loss and the time left (tqdm's elapsed<remaining)."""
    VerticalLogisticRegression(max_iter=2, tol=None, verbose=True, **FAST).fit(vertical_data)
    err = capsys.readouterr().err
    assert "vfl training" in err and "2/2" in err and "loss=" in err and "<" in err


def test_the_bar_shows_by_default_on_a_terminal_or_in_a_notebook_only(capsys, monkeypatch, vertical_data):
    """verbose="auto" (the default of every estimator): a bar on a terminal or in a notebook, none in captured
    output, pipes and CI; True and False force it; anything else is refused."""
    import io

    import vfl.progressbar as progressbar
    from vfl import ConfigurationError
    from vfl.ensemble import VerticalGradientBoostingClassifier, VerticalGradientBoostingRegressor

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for model in (VerticalLogisticRegression(), VerticalLinearRegression(), VerticalGradientBoostingClassifier(),
                  VerticalGradientBoostingRegressor()):       # the scorecard's model is a VerticalLogisticRegression
        assert model.get_params()["verbose"] == "auto"
    assert progressbar.progress_enabled("auto", Terminal()) is True
    assert progressbar.progress_enabled("auto", io.StringIO()) is False
    assert progressbar.progress_enabled(True, io.StringIO()) is True
    assert progressbar.progress_enabled(False, Terminal()) is False
    monkeypatch.setattr(progressbar, "in_notebook", lambda: True)
    assert progressbar.progress_enabled("auto", io.StringIO()) is True
    monkeypatch.undo()
    with pytest.raises(ConfigurationError, match="verbose must be True, False or 'auto', got 'yes'"):
        progressbar.progress_enabled("yes")
    VerticalLogisticRegression(max_iter=2, tol=None, **FAST).fit(vertical_data)        # pytest captures stderr
    assert "vfl training" not in capsys.readouterr().err
    terminal = Terminal()
    bar = progressbar.ProgressBar("auto", 3, "vfl training", "epoch", stream=terminal)
    bar.step(0.5)
    bar.close()
    assert "vfl training" in terminal.getvalue() and "loss=0.50000" in terminal.getvalue()


def test_the_trees_bar_shows_the_training_loss(capsys, vertical_data):
    from vfl.ensemble import VerticalGradientBoostingClassifier

    VerticalGradientBoostingClassifier(max_iter=2, max_depth=2, verbose=True, **FAST).fit(vertical_data)
    err = capsys.readouterr().err
    assert "vfl boosting" in err and "2/2" in err and "loss=0." in err



def test_pickle_keeps_the_model_and_never_the_private_key(fitted):
    """A pickle holds what the parties' shards hold; the unpickled model predicts with a fresh key pair."""
    model, data, _ = fitted
    proba = model.predict_proba(data)
    key = model._coordinator.context.private_key
    blob = pickle.dumps(model)
    for prime in (key.p, key.q):
        assert int(prime).to_bytes((int(prime).bit_length() + 7) // 8, "big") not in blob
        assert str(int(prime)).encode() not in blob
    restored = pickle.loads(blob)
    assert "_coordinator" not in vars(restored)
    assert restored.get_params() == model.get_params() and list(restored.classes_) == list(model.classes_)
    for name in ("bank", "shop"):
        np.testing.assert_array_equal(restored.coef_[name], model.coef_[name])
    assert restored.intercept_ == model.intercept_ and restored.feature_names_ == model.feature_names_
    np.testing.assert_allclose(restored.predict_proba(data), proba, atol=1e-8)
    assert restored._coordinator.context.public_key != model._coordinator.context.public_key
    # a copy is the same: the model, not the key
    copied = copy.deepcopy(model)
    assert "_coordinator" not in vars(copied)
    np.testing.assert_allclose(copied.predict_proba(data), proba, atol=1e-8)
    # the original keeps predicting with its own key
    np.testing.assert_allclose(model.predict_proba(data), proba, atol=1e-8)


def test_a_fitted_model_keeps_no_training_rows(fitted):
    """Prediction needs the weights and C's key, not A's and B's training rows (nor B's labels)."""
    model, data, _ = fitted
    from vfl.protocols import Roster

    held = [x for v in vars(model).values() for x in (v if isinstance(v, (tuple, list)) else [v])]
    assert not any(hasattr(x, "features") or hasattr(x, "labels") for x in held if not isinstance(x, Roster))
    assert model._roster.features == ("bank",)      # the roster names the parties: no rows
    assert not any(isinstance(x, np.ndarray) and x.ndim == 2 and x.shape[0] == data.n_rows for x in held)


def test_pickle_of_an_unfitted_model_round_trips():
    model = VerticalLinearRegression(max_iter=4, **FAST)
    assert pickle.loads(pickle.dumps(model)).get_params() == model.get_params()


def _run(x, y, settings, checkpoints=None, stop_after=None, starts=None):
    """Run the role programs; record every party's state after each epoch.

    ``starts`` gives A and B the secret starts of an earlier run (instead of fresh ones).
    """
    saved = {"A": {}, "B": {}, "C": {}}
    a, b, c = PartyA(x[:, :3]), PartyB(x[:, 3:], y), Coordinator(1024, insecure=True)
    for party, start in zip((a, b), starts or ()):
        party.start = lambda *args, party=party, start=start: setattr(party, "params", start.copy())
    network = InProcessNetwork("ABC")
    ep = {r: Endpoint(network.transport(r), [p for p in "ABC" if p != r]) for r in "ABC"}

    def keep(role):
        def on_epoch(epoch, state):
            saved[role][epoch] = state
            if stop_after is not None and epoch == stop_after and role == "C":
                raise KeyboardInterrupt("killed")
        return on_epoch

    ck = checkpoints or {"A": None, "B": None, "C": None}
    try:
        run_roles(network, {
            "A": lambda: run_a(ep["A"], a, settings, ck["A"], keep("A")),
            "B": lambda: run_b(ep["B"], b, settings, ck["B"], keep("B")),
            "C": lambda: run_c(ep["C"], c, settings, ck["C"], keep("C")),
        })
    except KeyboardInterrupt:
        pass
    return a, b, c, saved


def test_resume_after_a_kill_equals_an_uninterrupted_run():
    _, _, x, y = make_vertical(n_rows=60, seed=12)
    y = np.where(y == 1, 1.0, -1.0)
    settings = TrainingSettings(objective="logistic", max_iter=5, tol=None, batch_size=20, random_state=None,
                                key_bits=1024, insecure=True)
    # the run dies in epoch 2 after C has checkpointed epoch 2 but maybe before the others did
    killed_a, killed_b, _, saved = _run(x, y, settings, stop_after=2)
    saved["A"].pop(2, None)  # A had not written epoch 2 yet: all resume after epoch 1
    a, b, c, _ = _run(x, y, settings, checkpoints=saved)
    seed = saved["B"][1]["seed"]
    fresh_settings = TrainingSettings(**{**settings.to_dict(), "random_state": seed})
    # uninterrupted, from the same secret starts the killed run drew
    a0, b0, c0, _ = _run(x, y, fresh_settings, starts=(killed_a.initial_params, killed_b.initial_params))
    assert np.count_nonzero(killed_a.initial_params) == 3
    np.testing.assert_array_equal(a.params, a0.params)
    np.testing.assert_array_equal(b.params, b0.params)
    assert c.loss_curve == c0.loss_curve and len(c.loss_curve) == 5


@pytest.mark.parametrize("tol", [None, 0.5])
def test_resuming_a_run_every_party_had_completed_trains_no_further(tol):
    """All checkpoints at the last epoch (a party killed before writing its shard): resume takes back the result.

    With a ``tol`` that stops training early, resuming must not train past the stop.
    """
    _, _, x, y = make_vertical(n_rows=60, seed=12)
    y = np.where(y == 1, 1.0, -1.0)
    settings = TrainingSettings(objective="logistic", max_iter=6, tol=tol, batch_size=20, random_state=3,
                                key_bits=1024, insecure=True)
    a, b, c, saved = _run(x, y, settings)
    epochs = len(c.loss_curve)
    assert (epochs < 6) == (tol is not None)
    a2, b2, c2, again = _run(x, y, settings, checkpoints=saved)
    np.testing.assert_array_equal(a2.params, a.params)
    np.testing.assert_array_equal(b2.params, b.params)
    assert c2.loss_curve == c.loss_curve
    assert all(not epochs for epochs in again.values())     # no epoch trained again
