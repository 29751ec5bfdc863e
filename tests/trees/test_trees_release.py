"""The trees' release check: what the label party B receives per row at prediction, and what it rebuilds from it.

At prediction a feature party sends, per row and tree, the leaves its own splits
allow: B learns the side of every one of its splits (not only those on the row's
path).  A 0/1 flag or a code the trees split on between each pair of its values is
then read back exactly by any B that knows some of the party's rows: rows with the
same masks share their values.  These tests measure it on the masks B actually
received (a spy on its side of the protocol), show the party's release check
refusing it by default (warned at training), passing it with
``allow_reconstruction`` and DP bringing it down to a constant guess.
"""

import warnings
import numpy as np
import pandas as pd
import pytest

from vfl import ConfigurationError, VerticalDataset
from vfl.ensemble import VerticalGradientBoostingClassifier
from vfl.protocols.release import ReleaseWarning, assess, evaluate
from vfl.protocols.trees import inference
from vfl.runs.trees import release_spec

N_ROWS = 600
FAST = dict(max_iter=10, learning_rate=0.3, early_stopping=False, key_bits=1024, insecure=True, verbose=False)


def credit_like(seed=0, continuous_only=False):
    """A holds a 0/1 flag, a 4-level grade (both drive the label) and an income with gaps; B one column."""
    rng = np.random.default_rng(seed)
    flag = (rng.random(N_ROWS) < 0.4).astype(float)
    grade = rng.integers(0, 4, N_ROWS).astype(float)
    income = rng.lognormal(3, 0.5, N_ROWS)
    tenure = rng.normal(size=N_ROWS)
    b0 = rng.normal(size=N_ROWS)
    z = 0.8 * b0 + 0.3 * np.log(income) + rng.normal(scale=0.5, size=N_ROWS)
    z += tenure if continuous_only else 2 * flag - 0.9 * grade
    y = (z > np.median(z)).astype(int)
    a = pd.DataFrame({"income": income, "tenure": tenure} if continuous_only else
                     {"flag": flag, "grade": grade, "income": income})
    a.loc[rng.random(N_ROWS) < 0.1, "income"] = np.nan
    return VerticalDataset({"A": a, "B": pd.DataFrame({"b0": b0, "y": y})}, label="y"), a


@pytest.fixture
def received(monkeypatch):
    """The leaf masks B received from each feature party at its last prediction, by party (as B decoded them)."""
    got = {}
    original = inference.raw_scores

    def spy(party, codes, owners, masks):
        got.clear()
        got.update({k: np.asarray(m).copy() for k, m in masks.items()})
        return original(party, codes, owners, masks)

    monkeypatch.setattr(inference, "raw_scores", spy)
    return got


def decoded_share(masks, values, seed=1):
    """B knowing half the rows' values decodes the others: a least-squares fit from the masks to the column on the
    rows it knows, rounded to the nearest value the column takes; the share of the other rows decoded exactly."""
    known = np.random.default_rng(seed).random(len(values)) < 0.5
    design = np.column_stack([masks.astype(float), np.ones(len(masks))])
    coef, *_ = np.linalg.lstsq(design[known], values[known], rcond=None)
    levels = np.unique(values[known])
    guess = levels[np.abs((design[~known] @ coef)[:, None] - levels[None, :]).argmin(axis=1)]
    return float(np.mean(guess == values[~known]))


def commonest(values):
    return float(pd.Series(values).value_counts(normalize=True).iloc[0])


def test_the_spec_routes_every_row_as_the_party_does_missing_values_and_thresholds_included():
    data, a = credit_like()
    model = VerticalGradientBoostingClassifier(**FAST, allow_reconstruction=["A"]).fit(data)
    party = model._parties["A"]
    spec = release_spec(party)
    assert len(spec["splits"]) == len(party.own_splits()) > 5
    thresholds = np.array([t for _, t, _ in party.raw_splits() if np.isfinite(t)])
    rng = np.random.default_rng(3)
    rows = a.to_numpy().copy()
    extra = rows[rng.choice(len(rows), 200)]
    extra[:, 2] = rng.choice(thresholds, 200) if len(thresholds) else extra[:, 2]   # exactly at a threshold: left
    extra[:40, 0] = np.nan                              # missing where training had none: the party's default side
    extra[40:80, 1] = np.nan
    extra[80:120, 2] = np.nan
    extra[120:140] = [1e9, 99, 1e12]                    # beyond every threshold
    extra[140:160] = [-1e9, -99, -1e12]
    for x in (rows, extra):
        codes = party.bin_new(x)
        bits = party.split_bits(codes)
        np.testing.assert_array_equal(evaluate(spec, x), bits)
        trees = [t["index"] for t in party.trees]
        np.testing.assert_array_equal(party.masks_from_bits(trees, bits), party.leaf_masks(trees, codes))


def test_a_flag_and_a_code_decode_exactly_from_the_masks_b_received_when_the_party_opts_in(received):
    data, a = credit_like()
    model = VerticalGradientBoostingClassifier(**FAST, allow_reconstruction=["A"]).fit(data)
    model.predict_proba(data)
    masks = received["A"]
    assert masks.shape[0] == N_ROWS
    assert decoded_share(masks, a["flag"].to_numpy()) == 1.0 > commonest(a["flag"]) + 0.3      # every row
    # the grade's splits sit under the flag's: a side B cannot see where a split of A's above sends the row away;
    # measured 91-100% of the rows B did not know, by which rows it knew (a constant guess: 27%)
    shares = [decoded_share(masks, a["grade"].to_numpy(), seed) for seed in range(5)]
    assert min(shares) > 0.9 and max(shares) == 1.0 and commonest(a["grade"]) < 0.3
    findings = {f.column: f for f in assess(a.to_numpy(), masks.astype(float), list(a.columns)).findings}
    assert findings["flag"].share == 1.0 and findings["grade"].share > 0.9
    assert findings["income"].gain < 0.05              # a continuous column: its bins only, not its values


def test_refused_at_defaults_warned_at_training_and_nothing_leaves(received):
    data, _ = credit_like()
    with pytest.warns(ReleaseWarning, match=r"party A: releasing the side of each of its splits .* rebuild column "
                                            r"'(flag|grade)' .*allow_reconstruction=\['A'\].*prediction will refuse"):
        model = VerticalGradientBoostingClassifier(**FAST).fit(data)
    with pytest.raises(ConfigurationError, match=r"party A: releasing the side of each of its splits per row .* "
                                                 r"rebuild column '(flag|grade)' for 100% of rows .*"
                                                 r"allow_reconstruction=\['A'\]"):
        model.predict_proba(data)
    assert "A" not in received                          # B got no mask of A's
    model.set_params(allow_reconstruction=["A"])        # the party's choice, recorded in its ledger
    assert model.predict_proba(data).shape == (N_ROWS, 2)


def test_dp_randomized_sides_bring_the_decoding_down_to_a_constant_guess(received):
    data, a = credit_like()
    exact = VerticalGradientBoostingClassifier(**FAST, allow_reconstruction=["A"]).fit(data)
    accuracy = float(np.mean(exact.predict(data) == data.labels))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReleaseWarning)  # with DP the training check warns of nothing
        model = VerticalGradientBoostingClassifier(**FAST, release_epsilon=5.0).fit(data)
    noisy = float(np.mean(model.predict(data) == data.labels))      # no opt-in: the noisy sides pass the check
    masks = received["A"]
    for column in ("flag", "grade"):
        assert decoded_share(masks, a[column].to_numpy()) < commonest(a[column]) + 0.05
    findings = {f.column: f for f in assess(a.to_numpy(), masks.astype(float), list(a.columns)).findings}
    assert all(f.gain < 0.05 for f in findings.values()), findings
    assert np.array_equal(model.predict(data), model.predict(data))     # the same noise per row and version
    assert accuracy > 0.85 and noisy < accuracy - 0.1                   # the price (measured: 0.91 -> about 0.65)


def test_continuous_columns_pass_at_defaults():
    data, a = credit_like(continuous_only=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReleaseWarning)
        model = VerticalGradientBoostingClassifier(**FAST).fit(data)
    assert model.predict_proba(data).shape == (N_ROWS, 2)


def test_a_few_rows_use_the_check_on_the_training_rows():
    data, a = credit_like()
    model = VerticalGradientBoostingClassifier(**FAST, allow_reconstruction=["A"]).fit(data)
    few = VerticalDataset({"A": a.iloc[:5].reset_index(drop=True),
                           "B": pd.DataFrame({"b0": np.zeros(5)})})
    assert model.predict_proba(few).shape == (5, 2)     # too few to assess: the training rows' check stands
    model.set_params(allow_reconstruction=None)
    with pytest.raises(ConfigurationError, match="rebuild column"):
        model.predict_proba(few)


def served_telco(tmp_path, model, a, **policy):
    """Party A's ``vfl serve`` feature service, as far as its release check goes: its shard of ``model`` as served
    version 1, a store of its rows (ids ``r0``...), and its policy with its ledger in ``tmp_path``."""
    from vfl.deploy.shards.trees import write_shard
    from vfl.protocols.release import ReleaseLedger, ReleasePolicy
    from vfl.protocols.release_dp import NoiseKey
    from vfl.serving.feature import FeatureService
    from vfl.serving.models import load_share
    from vfl.serving.store import CSVStore

    write_shard(tmp_path / "models" / "1" / "model_A.json", model._parties["A"], "feature", "f",
                feature_parties=["A"])
    store = a.assign(id=[f"r{i}" for i in range(len(a))])
    store.to_csv(tmp_path / "store.csv", index=False)
    service = FeatureService.__new__(FeatureService)
    service.label, service.store = "B", CSVStore(tmp_path / "store.csv", "A")
    key = NoiseKey.at(tmp_path, "A") if policy.get("epsilon") else None
    service.release = ReleasePolicy("A", ReleaseLedger.at(tmp_path, "A"), how="allow_reconstruction = true in its "
                                    "own [parties.A] table", key=key, **policy)
    return service, load_share(tmp_path / "models", "1", "A", "feature", "trees")


def test_vfl_serve_checks_each_version_at_load_and_answers_with_the_sides_it_may_send(tmp_path):
    data, a = credit_like()
    model = VerticalGradientBoostingClassifier(**FAST, allow_reconstruction=["A"]).fit(data)
    service, share = served_telco(tmp_path / "default", model, a)
    with pytest.raises(ConfigurationError, match=r"party A: releasing the side of each of its splits per row \(its "
                                                 r"leaf masks\) in served version 1 would let the label party B "
                                                 r"rebuild column '(flag|grade)' .*allow_reconstruction = true in "
                                                 r"its own \[parties.A\] table"):
        share.check_release(service, "1", {}, 0.0, 0)
    service, share = served_telco(tmp_path / "opted-in", model, a, allowed=True)
    share.check_release(service, "1", {}, 0.0, 0)
    ledger = (tmp_path / "opted-in" / "release_ledger.json").read_text()
    assert '"kind": "splits"' in ledger and "served version 1" in ledger
    x = a.to_numpy()
    status = np.zeros(len(x), dtype=np.uint8)           # OK
    ids = [f"r{i}" for i in range(len(x))]
    np.testing.assert_array_equal(service.noised("1", share.sides(x), ids, status, bits=True), share.sides(x))
    np.testing.assert_array_equal(share.masks_of(share.sides(x), share.trees), share.masks(x, share.trees))

    service, share = served_telco(tmp_path / "dp", model, a, epsilon=5.0)
    share.check_release(service, "1", {}, 0.0, 0)             # randomized sides: passes without the opt-in
    noisy = service.noised("1", share.sides(x), ids, status, bits=True)
    assert 0.3 < np.mean(noisy != share.sides(x)) < 0.5     # ~70 sides per row at epsilon 5: most flips near 1/2
    np.testing.assert_array_equal(noisy, service.noised("1", share.sides(x), ids, status, bits=True))   # per id
    masks = share.masks_of(noisy, share.trees)
    at = 0
    for index in share.trees:                            # each tree's mask still allows a path's leaves
        width = len(model._parties["B"].trees[index]["tree"].leaves)
        assert masks[:, at:at + width].any(axis=1).all()
        at += width
