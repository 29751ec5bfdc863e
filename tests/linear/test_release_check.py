"""What the label party rebuilds from a feature party's partial scores, and the release check that stops it.

B learns the score of every row it predicts; minus its own part that is A's partial score
``u = x_A w_A + c``.  The attacks are run here from B's real view (the scores the estimator gives
it, minus its own part), knowing a few of A's rows, as in docs/threat_model.md: a rank is no
bound — discrete columns and columns derived from each other decode from one projection.  Each
case is then refused by A's release check at the defaults (naming the attack, the share and the
opt-in), and goes through with the opt-in or differential privacy.
"""

import json

import numpy as np
import pandas as pd
import pytest

from vfl import ConfigurationError, DataError, VerticalDataset, VerticalLogisticRegression
from vfl.protocols.release import (MIN_ROWS, ReleaseLedger, ReleasePolicy, ReleaseWarning, assess, check_release,
                                   linear_attack, linear_release, neighbour_attack)

FAST = dict(key_bits=1024, insecure=True, max_iter=4, tol=None)


def federation(x_a, seed, n_classes=2):
    """A's columns ``x_a``; B two normal columns; a label that depends on both."""
    rng = np.random.default_rng(seed)
    n = len(x_a)
    x_b = rng.normal(size=(n, 2))
    z_a = (x_a - x_a.mean(axis=0)) / np.where(x_a.std(axis=0) > 0, x_a.std(axis=0), 1)
    z = np.hstack([z_a, x_b]) @ rng.normal(size=(x_a.shape[1] + 2, n_classes))
    label = np.argmax(z, axis=1) if n_classes > 2 else (z[:, 0] > 0).astype(int)
    frames = {"A": pd.DataFrame(x_a).add_prefix("a").assign(id=range(n)),
              "B": pd.DataFrame(x_b).add_prefix("b").assign(id=range(n), y=label)}
    data = VerticalDataset(frames, label="y", id_column="id")
    data.tables = frames
    return data, x_b


def partial_scores(model, data, x_b):
    """What B holds after predicting ``data``: every score minus its own part, one column per model."""
    z = np.atleast_2d(model.decision_function(data).T).T
    own = (x_b - model.mean_["B"]) / model.scale_["B"] @ np.atleast_2d(model.coef_["B"]).T + model.intercept_
    return z - own


def income(n, rng):
    values = rng.lognormal(10, 0.8, n)
    return np.column_stack([values, np.log(values)])


CASES = {
    # name: (A's columns, known rows, the attack B runs, share of A's values it must rebuild exactly / closely)
    "three 0/1 columns": (lambda n, rng: rng.integers(0, 2, (n, 3)).astype(float), 8, "neighbour"),
    "a one-hot category of 4 levels": (lambda n, rng: np.eye(4)[rng.integers(0, 4, n)], 4, "neighbour"),
    "income and log(income)": (income, 3, "monotone"),
    "a near-duplicate column": (lambda n, rng: (lambda v: np.column_stack([v, v + 1e-3 * rng.normal(size=n)]))(
        rng.normal(size=n)), 3, "linear"),
}


def run_attack(kind, s, x_a, known):
    """B's attack from the partial scores ``s`` with A's rows ``known`` known; its estimate of every row."""
    if kind == "linear":
        return linear_attack(s[known], x_a[known], s)
    if kind == "neighbour":         # rows with equal partial scores have equal rows
        return neighbour_attack(s[known], x_a[known], s)
    # a curve: B knows A holds v and log(v); three known rows give s = a v + b log v + c, solved for every row
    # (monotone in v where a and b have one sign: bisection on log v)
    a, b, c = np.linalg.solve(np.column_stack([x_a[known], np.ones(len(known))]), s[known, 0])
    low, high = np.full(len(s), np.log(x_a[:, 0].min()) - 5), np.full(len(s), np.log(x_a[:, 0].max()) + 5)
    sign = np.sign(a * np.exp(high[0]) + b * high[0] - a * np.exp(low[0]) - b * low[0])
    for _ in range(200):
        middle = (low + high) / 2
        above = sign * (a * np.exp(middle) + b * middle + c - s[:, 0]) > 0
        high, low = np.where(above, middle, high), np.where(above, low, middle)
    v = np.exp((low + high) / 2)
    return np.column_stack([v, np.log(v)])


def known_rows(x_a, kind, count):
    """The rows B knows: ``count`` distinct patterns (discrete), or the smallest, median and largest (a curve)."""
    if kind == "neighbour":
        _, first = np.unique(x_a, axis=0, return_index=True)
        return np.sort(first)[:count]
    return np.argsort(x_a[:, 0])[np.linspace(0, len(x_a) - 1, count).astype(int)]


@pytest.mark.parametrize("case", list(CASES))
def test_one_binary_model_gives_a_party_s_rows_away_and_the_check_refuses_it(case):
    make, count, kind = CASES[case]
    rng = np.random.default_rng(5)
    x_a = make(400, rng)
    data, x_b = federation(x_a, seed=6)
    with pytest.warns(ReleaseWarning, match="party A: releasing its partial scores"):
        model = VerticalLogisticRegression(**FAST).fit(data)
    with pytest.raises(ConfigurationError, match=r"party A: releasing its partial scores at prediction would let the "
                                                 r"label party B rebuild column 'a\d' for \d+% of rows .* "
                                                 r"allow_reconstruction=\['A'\]"):
        model.predict_proba(data)
    # the opt-in lets the scores out; B, knowing `count` of A's rows, then rebuilds every row
    model.set_params(allow_reconstruction=["A"])
    s = partial_scores(model, data, x_b)
    known = known_rows(x_a, kind, count)
    estimate = run_attack(kind, s, x_a, known)
    if kind == "monotone":
        recovered = np.abs(estimate[:, 0] / x_a[:, 0] - 1) < 1e-3                    # within 0.1%
    elif kind == "linear":
        recovered = np.all(np.abs(estimate - x_a) < 1e-3, axis=1)                   # within 1e-3 sd
    else:
        recovered = np.all(estimate == x_a, axis=1)                                 # exactly
    assert recovered.mean() >= (0.7 if kind == "linear" else 0.97), (case, recovered.mean())


def test_an_ordinary_party_s_partial_scores_pass_and_give_no_row_away():
    """Five continuous columns, one score: the check lets it through and B's attacks rebuild nothing."""
    rng = np.random.default_rng(7)
    x_a = rng.normal(size=(600, 5))
    data, x_b = federation(x_a, seed=8)
    model = VerticalLogisticRegression(**FAST).fit(data)
    s = partial_scores(model, data, x_b)
    known = np.arange(300)
    for attack in (linear_attack, neighbour_attack):
        estimate = attack(s[known], x_a[known], s[300:])
        assert (np.abs(estimate - x_a[300:]) < 0.01).mean() < 0.03            # about what a constant guess gets


def test_as_many_scores_as_columns_give_every_row_and_are_refused():
    """One-vs-rest with 3 classes on A's 3 columns: a linear image of full rank (the old span rule's case)."""
    rng = np.random.default_rng(9)
    x_a = rng.normal(size=(300, 3))
    data, x_b = federation(x_a, seed=10, n_classes=3)
    model = VerticalLogisticRegression(allow_reconstruction=["A"], **FAST).fit(data)
    s = partial_scores(model, data, x_b)
    estimate = linear_attack(s[:10], x_a[:10], s)                  # a few known rows solve 3 weights and an offset
    assert np.mean(np.abs(estimate - x_a) < 1e-3) > 0.99
    model.set_params(allow_reconstruction=None)
    with pytest.raises(ConfigurationError, match="known-row linear regression"):
        model.predict(data)


def test_every_model_released_counts_together():
    """Two binary models over A's 2 continuous columns each pass alone; the second's scores with the first's give
    both columns away, so the ledger refuses the second."""
    rng = np.random.default_rng(11)
    x_a = rng.normal(size=(300, 2))
    first_data, _ = federation(x_a, seed=12)
    second_data, _ = federation(x_a, seed=13)
    first = VerticalLogisticRegression(**FAST).fit(first_data)
    first.predict(first_data)
    second = VerticalLogisticRegression(**FAST)
    second.fit(second_data)
    second._release_scopes = first._release_scopes       # the same party, the same rows: one ledger
    with pytest.raises(ConfigurationError, match="rebuild column"):
        second.predict(second_data)


def test_too_few_rows_use_the_training_check_and_without_one_are_refused():
    rng = np.random.default_rng(14)
    x_a = rng.normal(size=(200, 4))
    data, _ = federation(x_a, seed=15)
    model = VerticalLogisticRegression(**FAST).fit(data)
    few = VerticalDataset({"A": data.tables["A"].iloc[:5], "B": data.tables["B"].iloc[:5].drop(columns="y")},
                          id_column="id")
    assert model.predict(few).shape == (5,)               # the verdict on the training rows applies
    model._release_scopes = {}                            # a copy elsewhere: no training check in its ledger
    with pytest.raises(DataError, match=rf"party A: 5 row\(s\) are too few to check .* at least {MIN_ROWS}"):
        model.predict(few)


def test_differential_privacy_hides_the_rows_and_repeats_the_same_noise():
    rng = np.random.default_rng(16)
    x_a = rng.integers(0, 2, (400, 3)).astype(float)
    data, x_b = federation(x_a, seed=17)
    model = VerticalLogisticRegression(release_epsilon=1.0, **FAST).fit(data)
    first, again = partial_scores(model, data, x_b), partial_scores(model, data, x_b)
    np.testing.assert_array_equal(first, again)              # the same row, the same version: the same noise
    estimate = neighbour_attack(first[:200], x_a[:200], first[200:])
    assert np.all(estimate == x_a[200:], axis=1).mean() < 0.3    # exact without noise (above); about chance here
    model.set_params(release_epsilon=0.5, release_clip=4.0)       # a new noise level: a new version, counted
    partial_scores(model, data, x_b)


def test_the_dp_budget_over_versions_is_kept_and_refused_beyond():
    rng = np.random.default_rng(18)
    x_a = rng.normal(size=(100, 3))
    policy = ReleasePolicy.in_process("A", "budget-test", epsilon=4.0, budget=8.0)
    released = 0
    with pytest.raises(ConfigurationError, match=r"epsilon \d+\.?\d* over (\d) version\(s\), beyond its budget 8"):
        for released in range(1, 20):
            policy.release("B", ["a0", "a1", "a2"], x_a, linear_release(rng.normal(size=(1, 3))), "scores")
    kept = [e["dp"]["epsilon"] for e in policy.ledger.releases("B")]
    assert 2 <= released <= 4 and kept == [4.0] * (released - 1)       # Gaussian versions compose sub-linearly


def test_a_missing_or_damaged_ledger_is_an_error_naming_the_file(tmp_path):
    x = np.random.default_rng(19).normal(size=(100, 2))
    ledger = ReleaseLedger.at(tmp_path, "A")
    check_release(ledger, "B", ["a0", "a1"], x, linear_release([[1.0, 0.5]]), what="scores", allowed=False, how="-")
    entry = json.loads((tmp_path / "release_ledger.json").read_text())["releases"][0]
    assert entry["label_party"] == "B" and entry["spec"]["kind"] == "linear" and entry["checked"]["rows"] == 100
    (tmp_path / "release_ledger.json").write_text('{"format": "vfl-release-ledger/1", "releases": [{"x": 1}]}')
    with pytest.raises(DataError, match=r"release_ledger.json is not a release ledger .* restore it"):
        check_release(ledger, "B", ["a0", "a1"], x, linear_release([[0.0, 1.0]]), what="scores", allowed=False,
                      how="-")
    (tmp_path / "release_ledger.json").write_text("{")
    with pytest.raises(DataError, match="release_ledger.json cannot be read"):
        ReleaseLedger.at(tmp_path, "A").releases("B")


def test_the_check_s_attacks_on_their_own():
    """The assessment itself: discrete columns, a curve and a duplicate are found; continuous columns in one
    projection are not; a small sample's chance hits do not count."""
    rng = np.random.default_rng(20)
    bits = rng.integers(0, 2, (2000, 3)).astype(float)
    assert not assess(bits, bits @ rng.normal(size=3), ["a", "b", "c"]).passes()
    x = rng.normal(size=(2000, 6))
    assert assess(x, x @ rng.normal(size=6), list("abcdef")).passes()
    tiny = rng.normal(size=(24, 3))
    assert assess(tiny, tiny @ rng.normal(size=3), list("abc")).passes()
    assert not assess(tiny, tiny @ rng.normal(size=(3, 3)), list("abc")).passes()   # full rank: every row
