"""Party-level Shapley values of split networks: equal to a pooled brute force; what the label party receives."""

import itertools
from math import factorial

import numpy as np
import pandas as pd
import pytest

from vfl import ConfigurationError, VerticalDataset, VerticalMLPClassifier, VerticalMLPRegressor
from vfl import neural_network
from vfl.runs.threads import run_in_threads

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
PARTIES = {"bank": slice(0, 2), "telco": slice(2, 4), "shop": slice(4, 6)}


def data(n=240, regression=False, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)) * [1, 2, 3, 1, 5, 1] + [0, 1, 10, 0, 3, 0]
    z = (x - x.mean(axis=0)) / x.std(axis=0) @ np.array([1.0, -1.0, 0.5, 2.0, -0.3, 0.7])
    y = z + 0.1 * rng.normal(size=n) if regression else (z + rng.normal(size=n) > 0).astype(int)
    return VerticalDataset({"bank": pd.DataFrame(x[:, :2], columns=["b0", "b1"]).assign(y=y),
                            "telco": pd.DataFrame(x[:, 2:4], columns=["t0", "t1"]),
                            "shop": pd.DataFrame(x[:, 4:], columns=["s0", "s1"])}, label="y"), x


def pooled(model, x):
    """The pooled network's raw score on pooled raw rows ``x`` (every party's scaling, bottom and block)."""
    parties = model._parties
    parts = sum(parties[k].part(parties[k].check_columns(x[:, PARTIES[k]])) for k in ("telco", "shop"))
    label = parties["bank"]
    return label.margin(label.check_columns(x[:, PARTIES["bank"]]), parts)[:, 0]


def brute_force(model, x, x_train):
    """Shapley values over every ordering; an absent party's columns at their raw training means."""
    players = list(PARTIES)
    mean = x_train.mean(axis=0)

    def value(present):
        rows = np.broadcast_to(mean, x.shape).copy()
        for p in present:
            rows[:, PARTIES[p]] = x[:, PARTIES[p]]
        return pooled(model, rows)

    out = np.zeros((len(x), len(players)))
    for order in itertools.permutations(players):
        before = set()
        for p in order:
            out[:, players.index(p)] += value(before | {p}) - value(before)
            before.add(p)
    return out / factorial(len(players)), value(set())


@pytest.mark.parametrize("estimator", [VerticalMLPClassifier, VerticalMLPRegressor])
def test_party_shapley_values_equal_the_pooled_brute_force(estimator):
    d, x = data(regression=estimator is VerticalMLPRegressor)
    model = estimator(hidden_layer_sizes=(8, 4), max_iter=8, random_state=0,
                      allow_reconstruction=["telco", "shop"]).fit(d)
    explained = model.explain(d)
    assert list(explained.columns) == ["bank", "telco", "shop", "base_value"]
    if estimator is VerticalMLPClassifier:
        p = model.predict_proba(d)[:, 1]
        raw = np.log(p / (1 - p))
    else:
        raw = model.predict(d)
    np.testing.assert_allclose(explained.sum(axis=1), raw, atol=1e-6)
    expected, base = brute_force(model, x, x)
    np.testing.assert_allclose(explained[list(PARTIES)].to_numpy(), expected, atol=1e-6)
    np.testing.assert_allclose(explained["base_value"], base, atol=1e-6)


def test_the_label_party_receives_each_party_s_part_once_and_it_is_checked(monkeypatch):
    d, _ = data()
    model = VerticalMLPClassifier(hidden_layer_sizes=(8,), max_iter=4, random_state=0,
                                  allow_reconstruction=["telco", "shop"]).fit(d)
    seen = []

    def recording(roster, programs, transcript=None, n_jobs=None):
        return run_in_threads(roster, programs, transcript, n_jobs=n_jobs,
                              on_message=lambda direction, peer, message, size: seen.append((direction, peer,
                                                                                             message)))
    monkeypatch.setattr(neural_network, "run_in_threads", recording)
    model.explain(d)
    to_label = [m for direction, peer, m in seen if direction == "->" and peer == "bank"]
    assert sorted(m.name for m in to_label) == ["explained_part", "explained_part"]
    for m in to_label:
        assert set(m.fields) == {"part", "constant"} and np.shape(m["part"]) == (d.n_rows, 8)
    assert not [m for direction, peer, m in seen if direction == "->" and peer not in ("bank",)]
    rng = np.random.default_rng(1)
    flag = rng.integers(0, 2, 240).astype(float)
    one = VerticalDataset({"bank": pd.DataFrame(rng.normal(size=(240, 2)), columns=["b0", "b1"]).assign(
        y=(flag + rng.normal(size=240) > 0.5).astype(int)), "telco": pd.DataFrame({"flag": flag})}, label="y")
    model = VerticalMLPClassifier(hidden_layer_sizes=(4,), bottom_sizes={"telco": ()}, max_iter=2,
                                  random_state=0, allow_reconstruction=["telco"]).fit(one)
    model.set_params(allow_reconstruction=None)
    with pytest.raises(ConfigurationError, match="party telco: .*'flag'"):
        model.explain(one)
