"""The arithmetic each boosting party runs on its own: bins, candidates, gains, growth — against direct computations."""

import numpy as np
import pytest

from vfl import ConfigurationError, DataError
from vfl.parties.binning import Binner
from vfl.parties.trees import CandidateTable, SplitRules, TreeGrower, best, flat_bins, gains, histogram
from vfl.parties.trees.splits import sums_to_send
from vfl.parties.trees.tree import allowed_leaves, check_shape, leaf_of
from vfl.errors import ProtocolError


def test_bins_hold_the_values_between_thresholds_and_missing_values_have_their_own_code():
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.normal(size=400), np.round(rng.normal(size=400)), np.full(400, 3.0)])
    x[::9, 0] = np.nan
    binner = Binner(16).fit(x)
    codes = binner.transform(x)
    assert list(binner.n_bins_) == [16, len(np.unique(x[:, 1])), 1]
    np.testing.assert_allclose(binner.thresholds_[1], (np.unique(x[:, 1])[:-1] + np.unique(x[:, 1])[1:]) / 2)
    assert list(binner.has_missing_) == [True, False, False]
    assert (codes[::9, 0] == binner.missing_code).all() and binner.missing_code == 16
    present = ~np.isnan(x[:, 0])
    for j, thresholds in enumerate(binner.thresholds_):
        for b, t in enumerate(thresholds):       # x <= t_b exactly when the code is at most b
            assert np.array_equal(x[present, j] <= t, codes[present, j] <= b) if j == 0 else \
                np.array_equal(x[:, j] <= t, codes[:, j] <= b)
    again = Binner.from_dict(binner.to_dict())
    assert np.array_equal(again.transform(x), codes)


def test_binning_refuses_infinity_and_a_bad_max_bins_by_name():
    with pytest.raises(DataError, match="party A, column 'income': infinity at row 1"):
        Binner(8).fit(np.array([[1.0], [np.inf]]), "party A", ["income"])
    for bad in (1, 256, 2.5, True):
        with pytest.raises(ConfigurationError, match="max_bins"):
            Binner(bad)


def brute_left(codes, values, rows, n_bins, missing_code, feature, bin_, missing_left):
    column = codes[rows, feature].astype(int)
    left = np.where(column == missing_code, missing_left, column <= bin_)
    return values[rows][left].sum(axis=0)


def test_candidates_come_in_their_fixed_order_with_the_left_sums_of_a_direct_count():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 3))
    x[rng.random(300) < 0.2, 1] = np.nan
    binner = Binner(6).fit(x)
    codes = binner.transform(x)
    table = CandidateTable(binner.n_bins_, binner.has_missing_)
    # feature 0 and 2: one candidate per inner threshold; feature 1: both directions and "missing alone"
    assert len(table) == 5 + (2 * 5 + 1) + 5
    f1 = table.feature == 1
    assert list(zip(table.bin[f1], table.missing_left[f1]))[:3] == [(0, True), (0, False), (1, True)]
    assert (table.bin[f1][-1], table.missing_left[f1][-1]) == (5, False)
    values = np.column_stack([rng.integers(-50, 50, 300), rng.integers(0, 20, 300), np.ones(300, int)])
    rows = np.sort(rng.choice(300, 180, replace=False))
    flat = flat_bins(codes, binner.n_bins_, binner.missing_code)
    left = table.left_sums(histogram(flat, rows, values, table.size))
    for i in range(len(table)):
        expected = brute_left(codes, values, rows, binner.n_bins_, binner.missing_code, table.feature[i],
                              table.bin[i], table.missing_left[i])
        assert left[i].tolist() == expected.tolist()


def test_histogram_sums_are_exact_beyond_float_precision():
    flat = np.zeros((4, 1), dtype=np.int64)
    values = np.array([[2 ** 52 + 1], [2 ** 52 + 1], [3], [-(2 ** 40)]], dtype=np.int64)
    assert histogram(flat, np.arange(4), values, 1)[0, 0] == 2 ** 53 + 5 - 2 ** 40


def test_gains_follow_the_formula_and_refuse_children_below_the_rules():
    rules = SplitRules(min_samples_leaf=2, min_child_weight=0.5, l2_regularization=1.0, frac_bits=4)
    gl, hl, nl = np.array([16, -8, 40]), np.array([32, 4, 64]), np.array([3, 3, 1])
    node_g, node_h, node_n = 24, 96, 8
    got = gains(gl, hl, node_g, node_h, rules, nl, node_n)
    s = 1 / 16
    term = lambda g, h: (g * s) ** 2 / (h * s + 1.0)
    expected = 0.5 * (term(16, 32) + term(24 - 16, 96 - 32) - term(24, 96))
    assert got[0] == pytest.approx(expected)
    assert got[1] == -np.inf                         # the left hessian 4/16 is below min_child_weight
    assert got[2] == -np.inf                         # one row on the left: below min_samples_leaf
    top, tied = best(np.array([0.5, 2.0, 2.0, -np.inf]))
    assert top == 2.0 and tied.tolist() == [1, 2]
    assert best(np.array([0.0, -1.0]))[0] == -np.inf


def test_worth_sending_keeps_the_first_candidate_of_each_partition():
    codes = np.array([[0], [0], [2], [2], [3], [99]], dtype=np.uint16)      # bin 1 empty, one missing value
    table = CandidateTable([4], [True])
    counts = histogram(flat_bins(codes, [4], 99), np.arange(6), np.ones((6, 1), np.int64), table.size)[:, 0]
    keep = table.worth_sending(counts, SplitRules(min_samples_leaf=1))
    kept = [(int(table.bin[i]), bool(table.missing_left[i])) for i in np.flatnonzero(keep)]
    # (1, *) repeat (0, *): bin 1 is empty; (3, False) sends only the missing value right
    assert kept == [(0, True), (0, False), (2, True), (2, False), (3, False)]
    no_missing = histogram(flat_bins(codes[:5], [4], 99), np.arange(5), np.ones((5, 1), np.int64), table.size)[:, 0]
    kept = np.flatnonzero(table.worth_sending(no_missing, SplitRules(min_samples_leaf=2)))
    # no missing value in these rows: "missing right" repeats "missing left"; (2, *) leaves one row on the right
    assert [(int(table.bin[i]), bool(table.missing_left[i])) for i in kept] == [(0, True)]


def test_the_row_count_slot_travels_only_when_min_samples_leaf_asks_more_than_min_child_weight():
    from vfl.parties.trees import layout

    # log loss: h <= 1/4, so min_child_weight 1 needs 4 rows; squared error: h = 1
    assert not layout.counts_travel(SplitRules(min_samples_leaf=4, min_child_weight=1.0), "log_loss")
    assert layout.counts_travel(SplitRules(min_samples_leaf=5, min_child_weight=1.0), "log_loss")
    assert layout.counts_travel(SplitRules(min_samples_leaf=1, min_child_weight=0.0), "log_loss")
    assert not layout.counts_travel(SplitRules(min_samples_leaf=2, min_child_weight=1.5), "squared_error")
    assert layout.counts_travel(SplitRules(), "log_loss")                 # vfl's defaults: 20 rows, 1e-3
    g, h, n = layout.widths(569, 16, "log_loss")
    assert layout.node_group(range(2), 569, 16, "log_loss", 2048).widths == (g, h, n, g, h, n)
    assert layout.node_group(range(2), 569, 16, "log_loss", 2048, counts=False).widths == (g, h, g, h)
    assert len(layout.node_chunks(40, 569, 16, "log_loss", 2048, counts=False)[0]) == 2046 // (2 * g)


def grow(g, h, codes, rules, **kwargs):
    """A tree over one party's columns, every split the best candidate (the reference's loop)."""
    binner = Binner(8).fit(codes)
    table = CandidateTable(binner.n_bins_, binner.has_missing_)
    bins = binner.transform(codes)
    flat = flat_bins(bins, binner.n_bins_, binner.missing_code)
    values = np.column_stack([g, h, np.ones(len(g), np.int64)])
    grower = TreeGrower(g, h, np.arange(len(g)), rules, **kwargs)
    while True:
        nodes = grower.to_evaluate()
        for node in nodes:
            left = table.left_sums(histogram(flat, node.rows, values, table.size))
            gain, tied = best(gains(left[:, 0], left[:, 1], node.g, node.h, rules, left[:, 2], len(node.rows)))
            grower.set_best(node, gain, int(tied[0]) if len(tied) else None)
        chosen = grower.to_split()
        if not nodes and not chosen:
            return grower
        for node in chosen:
            i = node.split
            column = bins[node.rows, table.feature[i]].astype(int)
            grower.split(node, np.where(column == binner.missing_code, table.missing_left[i], column <= table.bin[i]))


def leaf_sets(grower):
    return sorted(tuple(n.rows.tolist()) for n in grower.nodes if n.children is None)


def test_best_first_growth_reaches_the_depth_wise_tree_when_the_leaf_bound_does_not_bind():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(400, 3))
    g = np.rint((np.sin(3 * x[:, 0]) + x[:, 1] * x[:, 2]) * 2 ** 10).astype(np.int64)
    h = np.full(400, 2 ** 10, dtype=np.int64)
    rules = SplitRules(min_samples_leaf=10, frac_bits=10)
    depth_wise = grow(g, h, x, rules, max_depth=3)
    assert leaf_sets(grow(g, h, x, rules, max_depth=3, max_leaf_nodes=100)) == leaf_sets(depth_wise)
    capped = grow(g, h, x, rules, max_depth=3, max_leaf_nodes=4)
    assert capped.leaves() == 4
    tree = depth_wise.tree(lambda split: 0)
    leaves = tree.leaves
    for leaf in leaves:            # leaf value: -learning_rate G / (H + l2), in real units
        node = depth_wise.nodes[leaf]
        assert tree.value[leaf] == pytest.approx(-0.1 * node.g / node.h)


def test_the_sums_that_travel_are_the_smaller_childs_once_per_parent():
    parent_of = {1: 0, 2: 0, 3: 1, 4: 1}
    children = {0: (1, 2), 1: (3, 4)}
    sizes = {0: 10, 1: 6, 2: 4, 3: 3, 4: 3}
    assert sums_to_send([0], {}, sizes, {}) == [(0, None, [0])]
    assert sums_to_send([1, 2], parent_of, sizes, children) == [(2, 0, [1, 2])]
    assert sums_to_send([1], parent_of, sizes, children) == [(2, 0, [1])]
    assert sums_to_send([3, 4], parent_of, sizes, children) == [(3, 1, [3, 4])]


def test_leaf_masks_of_two_parties_leave_exactly_one_leaf():
    left, right = np.array([1, 3, -1, -1, -1]), np.array([2, 4, -1, -1, -1])
    a = allowed_leaves(left, right, 4, {0: np.array([True, True, False, False])})
    b = allowed_leaves(left, right, 4, {1: np.array([True, False, True, False])})
    assert a.shape == (4, 3) and a[2].tolist() == [True, False, False]        # columns: leaves 2, 3, 4
    assert leaf_of([a, b]).tolist() == [1, 2, 0, 0]                          # leaves 3, 4, 2, 2
    with pytest.raises(ProtocolError, match=r"leave [02] leaves for row 2"):
        leaf_of([a, ~b])
    for bad in ([1, -1], [1, 1, -1]):
        with pytest.raises(ProtocolError, match="malformed shape"):
            check_shape(bad, [2, -1, -1][:len(bad)])


def test_a_column_whose_bin_thresholds_overflow_is_refused():
    """Two neighbours near 1e308 average to infinity: a threshold that would bin rows wrongly without a word."""
    x = np.array([[1e308], [1.5e308], [1.0], [2.0]])
    with pytest.raises(DataError, match=r"party A, column 'a': cannot be binned, .*value 1\.5e\+308 at row 1"):
        Binner().fit(x, "party A", ["a"])
    spread = np.concatenate([np.linspace(-1.7e307, 1.7e307, 50) * 10, np.linspace(-1, 1, 60)])[:, None]
    with pytest.raises(DataError, match=r"cannot be binned"):
        Binner(strategy="uniform").fit(spread, "party A", ["a"])
