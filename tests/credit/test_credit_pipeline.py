"""The pipeline estimators: IV finds the planted column, the scorecard's points add up to its score, shards.

Also what each party learns, read from the transcripts: a feature party
receives ciphertexts and its plan only (with ``share_woe``, its bins' WOE
values, and the attack that scores its rows by them is measured); the label
party receives the feature party's counts per bin in an order it cannot read
off the counts, but that an informative monotone column's event rates give
away (measured).
"""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from credit_data import credit_data, credit_frames
from vfl import VerticalDataset, VerticalLogisticRegression
from vfl.errors import ConfigurationError, DataError
from vfl.parties.binning import Binner
from vfl.deploy.shards.credit import check
from vfl.protocols.release import ReleaseWarning
from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE
from vfl.stats import population_stability, table_statistics

KEYS = {"key_bits": 1024, "insecure": True}


def pipeline(share_woe=False, **selection):
    # telco's part of a score is one value per cell of its bins, which gives them away (its release check refuses,
    # tests/credit/test_credit_release.py): these tests are about the scorecard's arithmetic, so telco opts in
    return VerticalPipeline([
        ("woe", VerticalWOE(VerticalBinning(max_bins=8), share_woe=share_woe, **KEYS)),
        ("selection", VerticalSelection(**selection)),
        ("scorecard", VerticalScorecard(VerticalLogisticRegression(**KEYS, allow_reconstruction=["telco"]))),
    ])


@pytest.fixture(scope="module")
def fitted():
    data = credit_data()
    return data, pipeline(max_correlation=0.9).fit(data)


def test_iv_finds_the_planted_column_and_selection_drops_the_noise(fitted):
    data, pipe = fitted
    woe = pipe.named_steps["woe"]
    everyone = sorted(((iv, p, c) for p, cols in woe.columns_.items() for c, iv in zip(cols, woe.iv_[p])),
                      reverse=True)
    assert everyone[0][1:] == ("telco", "calls")
    assert pipe.named_steps["selection"].selected_columns_["telco"] == ["calls", "tenure"] or \
        "noise" not in pipe.named_steps["selection"].selected_columns_["telco"]
    assert woe.iv_["telco"][2] < 0.02


def test_the_scorecard_equals_the_pooled_woe_model_and_its_points_add_up_to_the_score(fitted):
    data, pipe = fitted
    card = pipe.named_steps["scorecard"]
    score = pipe.predict_score(data)
    through = pipe._through(data)
    points = card.points(through)
    assert np.abs(sum(points.values()) + card.base_points_ - score).max() < 1e-6
    z = pipe.decision_function(data)
    assert np.allclose(score, card.scale_.offset - card.scale_.factor * z)
    # the bank's columns are WOE-coded exactly as the pooled table's WOE substitution
    woe = pipe.named_steps["woe"].transform_woe(data)
    coded = card.transform(through)
    for j, column in enumerate(coded.columns("bank")):
        assert np.array_equal(coded.features("bank")[:, j], woe.features("bank")[:, data.columns("bank").index(column)])
    # and the model matches logistic regression on the pooled coded table (the Taylor loss: close, not equal)
    y = (data.labels == "yes").astype(int)
    pooled = np.column_stack([coded.features(p) for p in coded.parties])
    reference = LogisticRegression(C=1e4, max_iter=2000).fit(pooled, y).decision_function(pooled)
    assert abs(roc_auc_score(y, -score) - roc_auc_score(y, reference)) < 0.01
    assert score[y == 1].mean() < score[y == 0].mean()          # defaulters score lower


def test_shards_hold_each_party_s_own_bins_weights_and_points_only(fitted):
    data, pipe = fitted
    shards = {k: json.loads(json.dumps(v)) for k, v in pipe.shards().items()}
    check(shards["bank"], "bank", "label")
    check(shards["telco"], "telco", "feature")
    assert shards["telco"]["coding"]["coding"] == "bins" and "iv" not in shards["telco"]
    assert set(shards["bank"]["iv"]) == {"telco", "bank"}
    text = json.dumps(shards["bank"])
    for threshold in pipe.named_steps["woe"].binning_.binners_["telco"].thresholds_[0][1:3]:
        assert repr(float(threshold)) not in text
    assert "calls" not in json.dumps(shards["bank"]["model"]) and "calls" not in json.dumps(shards["bank"]["points"])


def test_share_woe_codes_feature_columns_as_woe_and_the_attack_by_its_woe_values_is_measured():
    data = credit_data(seed=1)
    pipe = pipeline(share_woe=True).fit(data)
    shard = pipe.shards()["telco"]
    assert shard["coding"]["coding"] == "woe" and len(shard["iv"]) == 3
    telco = pipe.named_steps["woe"]._parties["telco"]
    y = (data.labels == "yes").astype(int)
    # the feature party scores its own rows by its bins' WOE: what the shared values give away
    codes = telco.codes
    flat = np.where(codes == telco.binner.missing_code, telco.binner.n_bins_[None, :], codes)
    guess = sum(telco.woe[j][flat[:, j]] for j in range(3))
    assert roc_auc_score(y, guess) > 0.65            # measured 0.73-0.75 over 5 seeds of 3,000 rows


def test_share_woe_must_be_a_real_boolean():
    data = credit_data(n=300)
    with pytest.raises(ConfigurationError, match="share_woe must be True or False"):
        VerticalWOE(share_woe="false", **KEYS).fit(data)


def test_a_feature_party_receives_only_ciphertexts_public_values_its_plan_and_its_pearson_block(fitted):
    data, pipe = fitted
    woe = pipe.named_steps["woe"].transcript_
    assert set(map(tuple, woe[woe.receiver == "telco"][["name", "kind"]].values)) == \
        {("woe_start", "public"), ("classes", "ciphertext")}
    # and the label party gets nothing per row from it: the bins per column, then one small message of counts
    back = woe[woe.sender == "telco"]
    assert list(back.name) == ["bins", "counts"] and back.bytes.max() < 2_000 < data.n_rows * 128
    selection = pipe.named_steps["selection"].transcript_
    assert set(map(tuple, selection[selection.receiver == "telco"][["name", "kind"]].values)) == \
        {("iv_kept", "public"), ("pearson_start", "public"), ("pearson_rows", "ciphertext"),
         ("pearson", "plaintext"), ("plan", "public")}


def test_the_label_party_cannot_read_a_bin_s_rank_off_its_counts_but_an_informative_column_gives_it_away():
    """Sorting anonymous bins by rows recovers nothing (quantile bins are alike); by event rate, a monotone one."""
    data = credit_data(n=3000, seed=2)
    woe = VerticalWOE(VerticalBinning(max_bins=10), **KEYS).fit(data)
    label = woe._parties["bank"]
    telco = woe._parties["telco"]
    by_rows, by_rate = [], []
    for j, name in enumerate(["calls", "tenure", "noise"]):
        table = label.tables["telco"][j]
        real = telco.orders[j]                     # sent position -> its own bin (the missing bin last)
        present = real != telco.sizes[j] - 1
        ranks = real[present]
        counts = table["counts"][present]
        by_rows.append(0.0 if np.ptp(counts) == 0 else abs(spearmanr(counts, ranks)[0]))
        by_rate.append(abs(spearmanr(table["woe"][present, 0], ranks)[0]))
    assert max(by_rows) < 0.9                          # counts alike: no order from them
    assert by_rate[0] > 0.95                           # the planted monotone column: order from its event rates
    assert by_rate[2] < 0.9                            # noise: none


def test_table_statistics_and_population_stability_equal_pandas_on_the_pooled_table():
    """Each party's statistics are pandas' describe of its columns; PSI per column that of bins counted directly."""
    data = credit_data(n=1200, seed=3)
    stats = table_statistics(data)
    assert set(stats) == {"telco", "bank"}
    for party, got in stats.items():
        frame = pd.DataFrame(data.features(party), columns=data.columns(party))
        reference = frame.describe().T
        assert list(got.index) == data.columns(party)
        assert np.array_equal(got["count"], reference["count"]) and np.array_equal(got["missing"], frame.isna().sum())
        for ours, theirs in (("mean", "mean"), ("std", "std"), ("min", "min"), ("q25", "25%"), ("median", "50%"),
                             ("q75", "75%"), ("max", "max")):
            assert np.allclose(got[ours], reference[theirs], rtol=1e-12, atol=0), (party, ours)
    assert stats["telco"].loc["calls", "missing"] > 0
    # PSI at the telco: training rows against drifted scoring rows, in the training bins (missing its own bin)
    train = data.features("telco")
    rng = np.random.default_rng(4)
    scoring = train[rng.permutation(len(train))[:500]] + np.array([0.8, 0.0, 0.1])
    binner = Binner(6).fit(train)
    got = population_stability(binner, train, scoring, data.columns("telco"))
    for j, column in enumerate(data.columns("telco")):
        shares = []
        for x in (train[:, j], scoring[:, j]):
            bins = np.where(np.isnan(x), len(binner.thresholds_[j]) + 1,
                            np.searchsorted(binner.thresholds_[j], x, side="left"))
            shares.append(np.bincount(bins, minlength=len(binner.thresholds_[j]) + 2) / len(x))
        e, a = shares
        present = (e > 0) & (a > 0)
        assert present.sum() == len(e) - (j > 0)            # only tenure and noise lack missing values
        assert np.isclose(got[column], np.sum((a - e)[present] * np.log(a[present] / e[present])), rtol=1e-12)
    assert got["calls"] > 0.25 > got["tenure"]                # the shifted column flagged, the unchanged not


def one_per_party(top_k, iv_threshold=0.02, **model):
    return VerticalPipeline([
        ("woe", VerticalWOE(VerticalBinning(max_bins=10), **KEYS)),
        ("selection", VerticalSelection(iv_threshold=iv_threshold, top_k_per_party=top_k)),
        ("scorecard", VerticalScorecard(VerticalLogisticRegression(**KEYS, **model))),
    ])


def telco_part_seen_by_bank(pipe, data):
    """What the label party holds after scoring ``data``: each score minus its own points and the base points."""
    card = pipe.named_steps["scorecard"]
    own = card.points(pipe._through(data))["bank"]
    return np.round(pipe.predict_score(data) - own - card.base_points_, 4)


def test_one_selected_column_of_a_feature_party_gives_the_label_party_each_row_s_decile_unless_it_opted_in():
    """The scorecard's floor: telco's part of a score, a function of its one column, takes one value per bin."""
    from sklearn.metrics import adjusted_rand_score

    data, test = credit_data(n=3000, seed=3), credit_data(n=3000, seed=103)
    refused = r"party telco: releasing its part of each score \(one value per bin of its selected columns\) " \
              r"at prediction would let the label party bank rebuild column 'calls \(bin\)' for 100% of rows .*" \
              r"allow_reconstruction=\['telco'\] in the scorecard's model"
    with pytest.warns(ReleaseWarning, match=refused):                   # at training: nothing is released yet
        pipe = one_per_party(1).fit(data)
    with pytest.raises(ConfigurationError, match=refused):
        pipe.predict_score(test)
    pipe = one_per_party(1, allow_score_span=["telco"]).fit(data)      # the opt-in's earlier name
    card = pipe.named_steps["scorecard"]
    missing = np.ravel(card._binners["telco"].missing_code)[0]
    seen, seen_test = telco_part_seen_by_bank(pipe, data), telco_part_seen_by_bank(pipe, test)
    true = card._codes(pipe._through(test), "telco")[:, 0]          # telco's decile of calls (missing: its own bin)
    groups = np.unique(seen_test, return_inverse=True)[1]
    assert adjusted_rand_score(true, groups) > 0.999                     # measured 1.0: the bank groups rows by bin
    # the bank orders its training rows' groups by their event rate (its own labels): the deciles' order
    y = np.asarray(data.labels == "yes")
    own_bins = card._codes(pipe._through(data), "telco")[:, 0]
    present = [v for v in np.unique(seen) if not np.any((seen == v) & (own_bins == missing))]
    rank = {v: i for i, v in enumerate(sorted(present, key=lambda v: y[seen == v].mean()))}
    guess = np.array([rank.get(v, -1) for v in seen_test])
    shown = true != missing
    exact, within_one = np.mean(guess[shown] == true[shown]), np.mean(np.abs(guess[shown] - true[shown]) <= 1)
    assert exact > 0.7 and within_one > 0.99                             # measured 0.79-0.81 and 1.0 over 5 seeds


def test_two_selected_columns_are_refused_too_their_part_groups_rows_by_bin_pair_unless_the_party_opts_in():
    from sklearn.metrics import adjusted_rand_score

    data, test = credit_data(n=3000, seed=4), credit_data(n=3000, seed=104)
    with pytest.warns(ReleaseWarning, match=r"rebuild column '(calls|tenure) \(bin\)' for 100% of rows"):
        refused = one_per_party(2, iv_threshold=0.0).fit(data)
    with pytest.raises(ConfigurationError, match=r"rebuild column '(calls|tenure) \(bin\)' for 100% of rows .*"
                                                 r"allow_reconstruction=\['telco'\] in the scorecard's model"):
        refused.predict_score(test)
    pipe = one_per_party(2, iv_threshold=0.0, allow_reconstruction=["telco"]).fit(data)
    card = pipe.named_steps["scorecard"]
    assert pipe.named_steps["selection"].selected_columns_["telco"] == ["calls", "tenure"]
    codes = card._codes(pipe._through(test), "telco")
    groups = np.unique(telco_part_seen_by_bank(pipe, test), return_inverse=True)[1]
    assert adjusted_rand_score(codes[:, 0] * 100 + codes[:, 1], groups) > 0.999     # measured 1.0: by pair
    assert adjusted_rand_score(codes[:, 0], groups) < 0.5                          # measured 0.17: not by calls
def test_a_selection_that_keeps_no_column_is_refused_naming_its_threshold():
    with pytest.raises(ConfigurationError, match=r"the selection keeps no column of any party under "
                                                 r"iv_threshold=100.0; the highest IV is .*lower iv_threshold"):
        pipeline(iv_threshold=100.0).fit(credit_data(n=300))


@pytest.mark.parametrize("rows,message", [
    (slice(None), r"party bank: the label column holds one class only \('no' in every row\)"),
    (slice(0, 1), r"party bank: only 1 row to learn event rates from"),
])
def test_one_class_or_one_row_says_so_instead_of_blaming_the_binning(rows, message):
    telco, bank = credit_frames(n=200)
    data = VerticalDataset({"telco": telco.iloc[rows], "bank": bank.assign(default="no").iloc[rows]},
                           label="default", id_column="id")
    with pytest.raises(DataError, match=message) as caught:
        pipeline().fit(data)
    assert "label_strategy" not in str(caught.value)


def test_prediction_data_with_other_columns_or_parties_is_refused_naming_the_party(fitted):
    """Every step checks the parties and their columns (names and order) against what it was fitted on."""
    data, pipe = fitted
    telco, bank = credit_frames()
    bank = bank.drop(columns="default")
    cases = [({"telco": telco[["id", "tenure", "calls", "noise"]], "bank": bank},
              r"party telco: .*the same columns in another order"),
             ({"telco": telco.rename(columns={"calls": "minutes"}), "bank": bank},
              r"party telco: .*missing \['calls'\], unexpected \['minutes'\]"),
             ({"telco": telco.assign(extra=1.0), "bank": bank}, r"party telco: .*unexpected \['extra'\]"),
             ({"mobile": telco, "bank": bank}, r"prediction data has parties")]
    for frames, words in cases:
        new = VerticalDataset(frames, id_column="id")
        for predict in (pipe.predict_score, pipe.predict_proba, pipe.named_steps["woe"].transform):
            with pytest.raises(DataError, match=words):
                predict(new)
    binning = VerticalBinning(max_bins=4).fit(data)
    with pytest.raises(DataError, match="party telco: .*another order"):
        binning.transform(VerticalDataset(cases[0][0], id_column="id"))
