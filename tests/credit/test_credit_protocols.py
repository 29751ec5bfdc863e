"""The credit-scoring steps' arithmetic against plaintext computations on the pooled data.

WOE and IV of every party's columns equal, bit for bit, the pooled table's on
the same bins (the counts are exact integers, the same function turns them into
WOE and IV, the IV is an exactly rounded sum); the encrypted Pearson matrix
equals the same rounded values' products summed in the clear, and pandas'
correlation within the fixed point.  Binning: equal width, and monotone event
rates for the label party's columns.
"""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import adjusted_rand_score

from vfl import inprocess
from vfl.errors import ConfigurationError, ProtocolError
from vfl.parties.binning import Binner, monotone_thresholds
from vfl.parties.binning import flat_bins, offsets
from vfl.parties.credit.feature_party import WOEFeatureParty
from vfl.parties.credit.label_party import WOELabelParty
from vfl.parties.credit.selection import SelectionRules, inflation_factors, select_by_correlation, select_by_iv
from vfl.parties.credit.statistics import describe, pooled_pearson, population_stability
from vfl.parties.credit.woe import class_tables, woe_iv
from vfl.protocols import Roster
from vfl.transport import Transcript


def pooled_tables(x, binner, y):
    """Per column: the class counts of the pooled table's bins, and their WOE/IV tables."""
    flat = flat_bins(binner.transform(x), binner.n_bins_, binner.missing_code)
    start = offsets(binner.n_bins_)
    classes, index = np.unique(y, return_inverse=True)
    out = []
    for j in range(x.shape[1]):
        counts = np.zeros((binner.n_bins_[j] + 1, len(classes)), dtype=np.int64)
        np.add.at(counts, (flat[:, j] - start[j], index), 1)
        out.append(class_tables(counts))
    return out


def tables(n=900, seed=0, classes=2):
    rng = np.random.default_rng(seed)
    x_a = rng.normal(size=(n, 3))
    x_a[rng.random(n) < 0.1, 1] = np.nan
    x_c = rng.exponential(size=(n, 2))
    x_b = rng.normal(size=(n, 2))
    signal = x_a[:, 0] + x_b[:, 0] + rng.normal(size=n)
    y = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, classes + 1)[1:-1])) if classes > 2 else \
        np.where(signal > 0.8, "bad", "good")
    return x_a, x_c, x_b, y


@pytest.mark.parametrize("classes", [2, 3])
def test_woe_and_iv_of_every_party_equal_the_pooled_bins_exactly(classes):
    x_a, x_c, x_b, y = tables(classes=classes)
    binners = {"A": Binner(8).fit(x_a), "C": Binner(6, "uniform").fit(x_c)}
    events = y == np.unique(y)[-1]
    binners["B"] = Binner(5, "monotone").fit(x_b, events=events)
    data = {"A": x_a, "C": x_c, "B": x_b}
    parties = {k: WOEFeatureParty(binners[k].transform(data[k]), binners[k], k) for k in ("A", "C")}
    parties["B"] = WOELabelParty(binners["B"].transform(x_b), binners["B"], y, "B")
    label = inprocess.woe(parties, Roster(("A", "C"), "B", None), 1024, True, chunk_rows=128)
    for name in ("A", "C", "B"):
        pooled = pooled_tables(data[name], binners[name], y)
        for j, reference in enumerate(pooled):
            got = label.tables[name][j]
            order = parties[name].orders[j] if name != "B" else np.arange(len(reference["counts"]))
            for key in ("counts", "events", "woe"):
                assert np.array_equal(got[key], reference[key][order]), (name, j, key)
            assert np.array_equal(got["iv"], reference["iv"]), (name, j)
    assert label.tables["A"][0]["iv"].shape == ((1,) if classes == 2 else (classes,))


def two_parties(x_a, x_b, y):
    """Feature party A (8 quantile bins per column) and label party B (4)."""
    binner_a, binner_b = Binner(8).fit(x_a), Binner(4).fit(x_b)
    return {"A": WOEFeatureParty(binner_a.transform(x_a), binner_a, "A"),
            "B": WOELabelParty(binner_b.transform(x_b), binner_b, y, "B")}


def test_shared_woe_values_reach_their_own_bins_and_the_plan_names_own_columns_only():
    x_a, _, x_b, y = tables()
    parties = two_parties(x_a, x_b, y)
    roster = Roster(("A",), "B", None)
    inprocess.woe(parties, roster, 1024, True)
    inprocess.select(parties, {"A": x_a, "B": x_b}, roster, SelectionRules(iv_threshold=None, top_k=4),
                     share_woe=True)
    pooled = pooled_tables(x_a, parties["A"].binner, y)
    for j in range(3):
        assert np.array_equal(parties["A"].woe[j], pooled[j]["woe"][:, 0])
    ivs = [t["iv"][0] for t in pooled] + [t["iv"][0] for t in pooled_tables(x_b, parties["B"].binner, y)]
    assert parties["A"].selected.tolist() == [iv >= sorted(ivs)[-4] for iv in ivs[:3]]
    assert np.allclose(parties["A"].iv, [t["iv"][0] for t in pooled])


def test_without_share_woe_a_feature_party_receives_ciphertexts_and_its_plan_only():
    x_a, _, x_b, y = tables()
    parties = two_parties(x_a, x_b, y)
    transcript = Transcript(keep_payloads=True)
    roster = Roster(("A",), "B", None)
    inprocess.woe(parties, roster, 1024, True, transcript)
    inprocess.select(parties, {"A": x_a, "B": x_b}, roster, SelectionRules(), transcript=transcript)
    seen = {}
    for sender, receiver, message in transcript.messages():
        if receiver == "A":
            seen[message.name] = (message.kind, sorted(message.fields))
    assert seen == {"woe_start": ("public", ["chunk_rows", "key", "n_classes", "n_rows"]),
                    "classes": ("ciphertext", ["ciphertexts", "exponent"]),
                    "plan": ("public", ["bits", "count", "share_woe"])}
    assert parties["A"].woe is None


def label_guess_by_ciphertexts(ciphertexts: list[int], y) -> tuple[float, float]:
    """A feature party's attacks on the ``classes`` ciphertexts: group equal ones, and rank rows by them.

    Returns the adjusted Rand index between the groups of equal ciphertexts and the classes (1: the
    groups are the classes; about 0: unrelated) and the AUC of ranking the rows by the ciphertexts as
    integers.
    """
    events = np.asarray(y == np.unique(y)[-1])
    groups = pd.factorize(pd.Series([str(c) for c in ciphertexts]))[0]
    order = np.empty(len(events))
    order[sorted(range(len(events)), key=ciphertexts.__getitem__)] = np.arange(len(events))
    auc = (order[events].mean() - (events.sum() - 1) / 2) / (~events).sum()
    return adjusted_rand_score(events, groups), auc


def test_a_feature_party_cannot_group_or_rank_rows_by_class_from_the_encrypted_classes():
    """The attacks that succeed on deterministic encryption fail on what the feature party receives."""
    x_a, _, x_b, y = tables()
    parties = two_parties(x_a, x_b, y)
    transcript = Transcript(keep_payloads=True)
    inprocess.woe(parties, Roster(("A",), "B", None), 1024, True, transcript)
    received = [c for _, receiver, message in transcript.messages() if receiver == "A" and message.name == "classes"
                for c in message.fields["ciphertexts"].to_ints()]
    assert len(received) == len(y)
    grouping, auc = label_guess_by_ciphertexts(received, y)
    assert len(set(received)) == len(y) and abs(grouping) < 1e-9      # every ciphertext distinct: no group
    assert abs(auc - 0.5) < 0.1                                       # chance (sd about 0.02 at 900 rows)
    # the same attack against a deterministic encryption of the same one-hot classes ((1 + n)^m mod n^2)
    label = parties["B"]
    n, slot = label.context.public_key.n, label.group.widths[0]
    deterministic = [pow(1 + n, 1 << (slot * int(c)), n * n) for c in label.y]
    grouping, auc = label_guess_by_ciphertexts(deterministic, y)
    assert grouping == 1.0 and min(auc, 1 - auc) == 0.0


def test_a_count_that_does_not_add_up_to_the_rows_is_refused():
    _, _, x_b, y = tables(n=200)
    binner_b = Binner(4).fit(x_b)
    label = WOELabelParty(binner_b.transform(x_b), binner_b, y, "B")
    label.make_keys(1024, insecure=True)
    wrong = label.context.engine.encrypt(label.context.public_key, [1])     # two bins: one row, then none
    with pytest.raises(ProtocolError, match="counts 1 rows, not 200"):
        label.receive_counts("A", wrong, [2])


def test_woe_iv_formula_and_adjustment():
    events, counts = np.array([10, 0, 30, 0]), np.array([100, 50, 60, 0])
    woe, iv = woe_iv(events, counts)
    e, m = np.array([10, 0.5, 30]) / 40, np.array([90, 50.5, 30]) / 170
    assert np.allclose(woe[:3], np.log(e / m)) and woe[3] == 0 and iv[3] == 0
    assert np.allclose(iv[:3], (e - m) * np.log(e / m))


def test_equal_width_and_monotone_binning():
    rng = np.random.default_rng(1)
    x = rng.exponential(size=(3000, 1))
    thresholds = Binner(5, "uniform").fit(x).thresholds_[0]
    assert np.allclose(np.diff(np.concatenate([[x.min()], thresholds, [x.max()]])), (x.max() - x.min()) / 5)
    z = rng.normal(size=3000)
    z[rng.random(3000) < 0.05] = np.nan
    events = np.nan_to_num(z, nan=0.0) + rng.normal(scale=1.5, size=3000) < -0.3      # falls with z
    binner = Binner(6, "monotone").fit(z[:, None], events=events)
    codes = binner.transform(z[:, None])[:, 0]
    present = codes != binner.missing_code
    rates = [events[present][codes[present] == k].mean() for k in range(binner.n_bins_[0])]
    assert 2 <= len(rates) <= 6 and np.all(np.diff(rates) < 0)
    assert min(np.bincount(codes[present])) >= 0.05 * present.sum()
    with pytest.raises(ConfigurationError, match="monotone binning uses the labels"):
        Binner(6, "monotone").fit(z[:, None])
    assert len(monotone_thresholds(np.ones(50), np.zeros(50, bool), 5)) == 0


def test_encrypted_pearson_equals_the_rounded_plaintext_and_pandas_within_the_fixed_point():
    x_a, x_c, x_b, _ = tables(n=500)
    both = inprocess.pearson(x_b, np.column_stack([x_a, x_c]), key_bits=1024, insecure=True)
    reference = pooled_pearson(x_b, np.column_stack([x_a, x_c]))
    assert np.array_equal(both["B"], reference) and np.array_equal(both["A"], reference)
    filled = np.column_stack([x_a, x_c])
    filled = np.where(np.isnan(filled), np.nanmean(filled, axis=0), filled)
    pandas = pd.DataFrame(np.column_stack([x_b, filled])).corr().to_numpy()[:2, 2:]
    assert np.abs(both["B"] - pandas).max() < 1e-5


def test_selection_by_iv_correlation_and_vif():
    ivs = {"A": np.array([0.5, 0.01, 0.3, 0.2]), "B": np.array([0.4, 0.3])}
    assert {k: v.tolist() for k, v in select_by_iv(ivs, SelectionRules()).items()} == \
        {"A": [True, False, True, True], "B": [True, True]}
    assert {k: v.tolist() for k, v in select_by_iv(ivs, SelectionRules(top_k_per_party=1)).items()} == \
        {"A": [True, False, False, False], "B": [True, False]}
    assert {k: v.tolist() for k, v in select_by_iv(ivs, SelectionRules(top_k=3)).items()} == \
        {"A": [True, False, True, False], "B": [True, False]}     # A's 0.3 before B's 0.3: the earlier party
    columns = [("A", 0), ("A", 2), ("B", 0)]
    corr = np.array([[1, 0.9, 0.2], [0.9, 1, 0.1], [0.2, 0.1, 1]])
    assert select_by_correlation(columns, ivs, corr, SelectionRules(max_correlation=0.8)).tolist() == [True, False, True]
    assert select_by_correlation(columns, ivs, corr, SelectionRules(max_vif=3)).tolist() == [False, True, True]
    assert np.allclose(inflation_factors(corr), np.diag(np.linalg.inv(corr)))
    with pytest.raises(ConfigurationError, match="top_k"):
        SelectionRules(top_k=0)
    with pytest.raises(ConfigurationError, match="max_correlation"):
        SelectionRules(max_correlation=True)


def test_table_statistics_and_population_stability():
    x = np.array([[1.0, np.nan], [2.0, 3.0], [3.0, 5.0], [4.0, np.nan]])
    stats = describe(x, ["a", "b"])
    assert stats.loc["a", "count"] == 4 and stats.loc["b", "missing"] == 2
    assert stats.loc["a", "mean"] == 2.5 and np.isclose(stats.loc["a", "std"], np.std([1, 2, 3, 4], ddof=1))
    assert stats.loc["b", "median"] == 4.0
    assert population_stability([10, 10], [10, 10]) == 0
    assert np.isclose(population_stability([50, 50], [25, 75]), 0.25 * np.log(0.5) * -1 + 0.25 * np.log(1.5))



def test_population_stability_s_floor_is_the_one_docs_credit_scoring_quotes():
    """An empty bin: the 1e-4 share floor sets most of the figure (docs/credit_scoring.md's example)."""
    from vfl.parties.credit.statistics import PSI_FLOOR

    assert PSI_FLOOR == 1e-4
    emptied = population_stability([10] * 10, [10] * 9 + [0])
    assert round(emptied, 2) == 0.70 and round(0.1 * np.log(0.1 / 1e-4), 2) == 0.69
    assert round(population_stability([10] * 10, [10] * 9 + [0], floor=1e-6), 2) == 1.16
    assert round(population_stability([10] * 10, [11] * 9 + [1]), 2) == 0.22


def test_every_message_of_woe_selection_and_pearson_is_described():
    from vfl.deploy.narration import NOT_DESCRIBED, message_table

    x_a, _, x_b, y = tables(n=300)
    binner_a, binner_b = Binner(4).fit(x_a), Binner(4).fit(x_b)
    parties = {"A": WOEFeatureParty(binner_a.transform(x_a), binner_a, "A"),
               "B": WOELabelParty(binner_b.transform(x_b), binner_b, y, "B")}
    transcript = Transcript(keep_payloads=True)
    roster = Roster(("A",), "B", None)
    inprocess.woe(parties, roster, 1024, True, transcript)
    inprocess.select(parties, {"A": x_a, "B": x_b}, roster, SelectionRules(iv_threshold=None, max_vif=5.0),
                     share_woe=True, transcript=transcript)
    table = message_table(transcript, family="credit", roster=roster)
    assert (table["what"] != NOT_DESCRIBED).all()
    assert {"woe_start", "classes", "counts", "iv_kept", "pearson_rows", "pearson_products", "pearson",
            "own_correlation", "plan"} <= set(table["name"])
    assert parties["A"].correlation.shape == (2, 3)         # the block both learn: B's kept columns by A's
