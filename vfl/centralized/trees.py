"""Gradient boosting on the pooled table: the reference federated boosting must equal, split for split.

The same pieces as the federated label party (:mod:`vfl.parties.trees`) on
one table whose columns are every party's binned columns, in the data parties'
order (feature parties, then the label party): the same quantized gradients,
the same candidates in the same order, the same gains and tie-breaking, the
same growth and leaf values, the same validation rows and stopping rule.
:func:`fit_boosting` returns every split as ``(party, feature, bin,
missing_left)``, so a test can compare the federated trees with these one node
at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vfl.parties.trees import (CandidateTable, Tree, TreeGrower, best, flat_bins, gains, histogram, make_loss,
                                  quantize, validation_score)
from vfl.parties.trees.loss import BOUNDS
from vfl.parties.trees.splits import goes_left
from vfl.parties.trees.tree import allowed_leaves, leaf_of
from vfl.protocols.trees.settings import TreeSettings, should_stop
from vfl.parties.holdout import validation_rows


@dataclass
class PooledModel:
    """What :func:`fit_boosting` returns.

    ``trees[i][k]`` is iteration ``i``'s tree for raw-score column ``k``, and
    ``splits[i][k]`` maps each of its split nodes to ``(party, feature, bin,
    missing_left)`` (``party``: index in the data parties' order).
    """

    loss: object
    baseline: np.ndarray
    trees: list
    splits: list
    train_rows: np.ndarray
    validation_rows: np.ndarray
    validation_scores: list
    raw: np.ndarray

    @property
    def n_iter(self) -> int:
        return len(self.trees)


def tree_leaves(tree: Tree, splits: dict, codes: list, binners: list) -> np.ndarray:
    """Each row's leaf (column of :func:`allowed_leaves`), combining every party's splits as the parties do."""
    n_rows = len(codes[0])
    masks = []
    for party in range(len(codes)):
        own = {node: goes_left(codes[party], binners[party].missing_code, *split[1:])
               for node, split in splits.items() if split[0] == party}
        masks.append(allowed_leaves(tree.left, tree.right, n_rows, own))
    return leaf_of(masks, "pooled prediction")


def fit_boosting(codes: list, binners: list, y: np.ndarray, settings: TreeSettings, n_classes: int | None = None,
                 seed: int | None = None) -> PooledModel:
    """Boost on the pooled binned columns.

    Parameters
    ----------
    codes : list of uint16 arrays (rows, columns)
        Every data party's bin codes (:meth:`Binner.transform`), in the data parties'
        order; the label party is last.
    binners : list of Binner
        Their binnings (bins per column, missing values), in the same order.
    y : array
        Class indices ``0..K-1`` for log loss, real targets for squared error.
    settings : TreeSettings
    n_classes : int, optional
        For log loss.
    seed : int, optional
        The validation split's seed (the federated label party's ``random_state`` or draw).
    """
    y = np.asarray(y)
    n_rows = len(y)
    loss = make_loss(settings.loss, n_classes, y)
    rules = settings.rules
    label = len(codes) - 1
    tables = [CandidateTable(b.n_bins_, b.has_missing_) for b in binners]
    flats = [flat_bins(c, b.n_bins_, b.missing_code) for c, b in zip(codes, binners)]
    held = validation_rows(n_rows, settings.validation_fraction, seed) if settings.early_stops(n_rows) \
        else np.empty(0, dtype=np.int64)
    train = np.setdiff1d(np.arange(n_rows), held)
    baseline = loss.baseline(y[train])
    raw = np.tile(baseline, (n_rows, 1))
    trees, splits, scores = [], [], []
    for iteration in range(settings.max_iter):
        g, h = loss.gradients(raw[train], y[train])
        big_g = np.zeros((n_rows, loss.n_trees), dtype=np.int64)
        big_h = np.zeros_like(big_g)
        g_bits, h_bits = BOUNDS[settings.loss]
        big_g[train] = quantize(g, settings.frac_bits, g_bits)
        big_h[train] = quantize(h, settings.frac_bits, h_bits, "hessian")
        parties = [label] if iteration < settings.label_party_trees else list(range(len(codes)))
        these_trees, these_splits = [], []
        for k in range(loss.n_trees):
            grower = TreeGrower(big_g[:, k], big_h[:, k], train, rules, settings.max_depth, settings.max_leaf_nodes,
                                settings.learning_rate, loss.value_scale)
            values = np.column_stack([big_g[:, k], big_h[:, k], np.ones(n_rows, dtype=np.int64)])
            while True:
                nodes = grower.to_evaluate()
                for node in nodes:
                    found = (-np.inf, None)
                    for party in parties:
                        hist = histogram(flats[party], node.rows, values, tables[party].size)
                        left = tables[party].left_sums(hist)
                        gain, tied = best(gains(left[:, 0], left[:, 1], node.g, node.h, rules, left[:, 2],
                                                len(node.rows)))
                        if gain > found[0]:
                            i = int(tied[0])
                            t = tables[party]
                            found = (gain, (party, int(t.feature[i]), int(t.bin[i]), bool(t.missing_left[i])))
                    grower.set_best(node, *found)
                chosen = grower.to_split()
                if not nodes and not chosen:
                    break
                for node in chosen:
                    party = node.split[0]
                    grower.split(node, goes_left(codes[party][node.rows], binners[party].missing_code, *node.split[1:]))
            tree = grower.tree(lambda split: split[0])
            split_of = {n.id: n.split for n in grower.nodes if n.children is not None}
            leaves = tree_leaves(tree, split_of, codes, binners)
            raw[:, k] += tree.value[tree.leaves][leaves]
            these_trees.append(tree)
            these_splits.append(split_of)
        trees.append(these_trees)
        splits.append(these_splits)
        if len(held):
            scores.append(validation_score(settings.scoring, loss, raw[held], y[held]))
            if should_stop(scores, settings):
                break
    return PooledModel(loss, baseline, trees, splits, train, held, scores, raw)

