"""A feature party of gradient boosting: its binned columns, encrypted histograms, and its own splits.

It never sees a gradient, a label or a leaf value.  From the label party it
receives each row's gradients and hessians encrypted under the label party's
key; it bins its own columns (the thresholds stay here), sums the ciphertexts
per bin, turns the sums into the left sums of its split candidates (prefix
sums, plus the missing values' bin when they go left), and returns them in an
order shuffled afresh for every tree, combined several to a ciphertext and
re-randomized.  When the label party picks one of its candidates it learns only
"your candidate number j": it keeps the threshold, and says which rows go left.

Of two sibling nodes only the smaller one's sums travel
(:func:`~vfl.parties.trees.splits.sums_to_send`); the label party gets the
other's by subtracting them from the parent's, candidate by candidate.

Two modes (``hide_membership``):

* **standard** (as FATE's SecureBoost): the label party tells it which rows each
  new node holds, so it sums only those rows and sends only the candidates that
  can still win: the root's that leave each child ``min_samples_leaf`` rows, one
  per distinct partition, and for each new node which of its parent's stay so
  (a bit per candidate);
* **hidden membership**: it never learns a row's node.  Per round the label party
  sends one ciphertext per row whose slots hold the row's gradients in its
  node's slot and zeros elsewhere; summing them per bin gives every such node's
  sums at once, and every candidate is sent.
"""

from __future__ import annotations

import secrets

import numpy as np

from vfl.crypto import Context, FixedPoint, PublicKey
from vfl.crypto.histogram import bucket_products, running_products
from vfl.crypto.slots import Lanes, combine
from vfl.errors import ProtocolError
from vfl.parties.binning import Binner
from vfl.parties.trees.columns import BinnedColumns
from vfl.parties.trees.splits import SplitRules, goes_left, histogram, sums_to_send
from vfl.parties.trees.tree import allowed_leaves, check_shape

_RANDOM = secrets.SystemRandom()


class TreeFeatureParty(BinnedColumns):
    """One feature party's state in a boosting run.

    Parameters
    ----------
    features : array (rows, columns)
        Its aligned rows, in its own units; NaN is a missing value.
    role : str
        Its name in the federation.
    columns : list of str, optional
    binner : Binner, optional
        Thresholds fitted earlier (prediction); by default fitted on ``features`` with ``max_bins``.
    max_bins : int
    """

    def __init__(self, features, role: str = "A", columns=None, binner: Binner | None = None, max_bins: int = 32):
        super().__init__(features, role, columns, binner, max_bins)
        #: per tree it took part in: its index among all trees, shape, and own splits {node: (feature, bin, missing_left)}
        self.trees: list[dict] = []
        self.context: Context | None = None
        self.train_rows = np.arange(self.n_rows)

    # -- set-up ----------------------------------------------------------------------
    def receive_public_key(self, key_bytes: bytes, engine=None) -> None:
        self.context = Context(PublicKey.from_bytes(key_bytes), FixedPoint(), engine=engine)

    def set_training_rows(self, rows: np.ndarray) -> None:
        self.train_rows = np.asarray(rows, dtype=np.int64)

    def start_tree(self, rules: SplitRules, ciphertexts: list | None = None) -> None:
        """A new tree: a fresh order of its candidates; ``ciphertexts`` (standard mode) hold the training rows'
        gradients, one per row in order (with hidden membership they come with every round)."""
        self._hidden = ciphertexts is None
        self._rules = rules
        self._order = np.arange(len(self.table))
        _RANDOM.shuffle(self._order)            # the label party knows candidate j as this party's order[j]
        self._tree: dict = {"splits": {}}
        self._rows = {0: self.train_rows}
        self._children: dict[int, tuple[int, int]] = {}
        self._sets: dict[int, np.ndarray] = {}  # standard: positions (in the order) each node still considers
        if ciphertexts is not None:
            if len(ciphertexts) != len(self.train_rows):
                raise ProtocolError(f"{self.role}: {len(ciphertexts)} encrypted gradients for "
                                    f"{len(self.train_rows)} training rows")
            self._ciphertexts = [None] * self.n_rows
            for row, c in zip(self.train_rows.tolist(), ciphertexts):
                self._ciphertexts[row] = c

    # -- standard mode ---------------------------------------------------------------------
    def apply_splits(self, parents, lefts, rights, directions: np.ndarray) -> None:
        """The label party split ``parents``: each one's rows, in order, go left where ``directions`` says."""
        at = 0
        for parent, left, right in zip(parents.tolist(), lefts.tolist(), rights.tolist()):
            rows = self._rows.get(parent)
            if rows is None or parent in self._children or left in self._rows or right in self._rows:
                raise ProtocolError(f"{self.role}: a split of node {parent} into {left} and {right} does not fit "
                                    "the tree so far")
            side = directions[at:at + len(rows)]
            if len(side) != len(rows):
                raise ProtocolError(f"{self.role}: too few directions for the rows of node {parent}")
            at += len(rows)
            self._rows[left], self._rows[right] = rows[side], rows[~side]
            self._children[parent] = (left, right)
        if at != len(directions):
            raise ProtocolError(f"{self.role}: {len(directions)} directions for {at} rows of the split nodes")

    def node_candidates(self, nodes, group: Lanes) -> tuple[list, list, np.ndarray]:
        """The round's candidates (standard mode): combined, re-randomized ciphertexts, their counts, and bits.

        For each entry of :func:`sums_to_send`: the left sums of the sent node over
        its parent's candidates (the root: those worth sending), and for each node it
        serves a bit per such candidate saying whether it is still worth evaluating.
        """
        nodes = [int(n) for n in nodes]
        for node in nodes:
            if node not in self._rows or node in self._children:
                raise ProtocolError(f"{self.role}: asked to evaluate node {node}, which is not a leaf it knows")
        parent_of = {c: p for p, pair in self._children.items() for c in pair}
        sizes = {n: len(rows) for n, rows in self._rows.items()}
        ones = np.ones((self.n_rows, 1), np.int64)
        out, counts, keep_bits = [], [], []
        for sent, parent, served in sums_to_send(nodes, parent_of, sizes, self._children):
            base = np.arange(len(self._order)) if parent is None else self._sets[parent]
            lefts = self._left_sums(self._sum(self._rows[sent]), self._order[base])
            out += lefts
            counts.append(len(base))
            for node in served:
                row_counts = histogram(self.flat, self._rows[node], ones, self.table.size)[:, 0]
                keep = self.table.worth_sending(row_counts, self._rules)[self._order[base]]
                self._sets[node] = base[keep]
                keep_bits.append(keep)
        bits = np.concatenate(keep_bits) if keep_bits else np.empty(0, bool)
        return combine(self.context.public_key, self.context.engine, out, group), counts, bits

    def _sum(self, rows: np.ndarray) -> list:
        return bucket_products(self.context.public_key, [self._ciphertexts[i] for i in rows.tolist()],
                               self.flat[rows], self.table.size)

    def _left_sums(self, buckets: list, candidates: np.ndarray) -> list:
        """The encrypted left sums of ``candidates`` (indices into the table), in that order."""
        pk = self.context.public_key
        n2 = pk.nsquare
        prefix = {}
        wanted = set(self.table.feature[candidates].tolist())
        for f, (start, nb) in enumerate(self.table.prefix_positions()):
            if f in wanted:
                prefix[f] = running_products(pk, buckets[start:start + nb])
        out = []
        for i in candidates.tolist():
            f = int(self.table.feature[i])
            value = prefix[f][int(self.table.bin[i])]
            if self.table.missing_left[i]:
                value = value * buckets[int(self.table.offsets[f]) + int(self.table.n_bins[f])] % n2
            out.append(value)
        return out

    # -- hidden membership ------------------------------------------------------------------
    def round_candidates(self, chunks: list, groups: list) -> list:
        """Every candidate's left sums for each chunk of a round (hidden membership), in the tree's order.

        ``chunks`` are lists of ciphertexts, one per training row each, whose slots
        hold a few nodes' gradients (``groups[i]``: the slots of chunk ``i``).
        Returns the combined, re-randomized ciphertexts of every chunk, chunk after chunk.
        """
        out = []
        for ciphertexts, group in zip(chunks, groups):
            if len(ciphertexts) != len(self.train_rows):
                raise ProtocolError(f"{self.role}: {len(ciphertexts)} round ciphertexts for "
                                    f"{len(self.train_rows)} training rows")
            buckets = bucket_products(self.context.public_key, ciphertexts, self.flat[self.train_rows],
                                      self.table.size)
            out += combine(self.context.public_key, self.context.engine, self._left_sums(buckets, self._order), group)
        return out

    # -- splits ------------------------------------------------------------------------------
    def resolve(self, node: int, tied) -> tuple[np.ndarray, int]:
        """Record the split the label party chose at ``node``: the first in this party's order among ``tied``.

        ``tied`` are positions in this tree's order of candidates.  Returns the
        directions of the node's rows (standard) or of every training row (hidden
        membership), and the split's column index.
        """
        tied = np.asarray(tied, dtype=np.int64)
        allowed = np.arange(len(self._order)) if self._hidden else self._sets.get(int(node))
        if allowed is None or len(tied) == 0 or not np.isin(tied, allowed).all():
            raise ProtocolError(f"{self.role}: a split of node {node} names candidates it did not send for it")
        if int(node) in self._tree["splits"]:
            raise ProtocolError(f"{self.role}: node {node} is split twice")
        candidate = int(np.min(self._order[tied]))
        split = (int(self.table.feature[candidate]), int(self.table.bin[candidate]),
                 bool(self.table.missing_left[candidate]))
        self._tree["splits"][int(node)] = split
        rows = self.train_rows if self._hidden else self._rows[int(node)]
        return goes_left(self.codes[rows], self.binner.missing_code, *split), split[0]

    def finish_tree(self, index: int, left, right) -> None:
        """The finished tree ``index`` (its place among all trees) as the label party shaped it."""
        left, right = check_shape(left, right, f"{self.role}: tree {index}")
        for node in self._tree["splits"]:
            if not 0 <= node < len(left) or left[node] < 0:
                raise ProtocolError(f"{self.role}: its split at node {node} is not a split of the finished tree")
        self.trees.append({"index": int(index), "left": left, "right": right, "splits": self._tree["splits"]})
        self._ciphertexts = self._rows = self._sets = None

    # -- prediction -------------------------------------------------------------------------
    def leaf_masks(self, trees, codes: np.ndarray | None = None) -> np.ndarray:
        """Per row, the leaves its splits allow in each tree of ``trees`` (indices among all trees), side by side."""
        codes = self.codes if codes is None else codes
        masks = [self.allowed(tree["left"], tree["right"], tree["splits"], codes) for tree in self._asked(trees)]
        return np.hstack(masks) if masks else np.ones((len(codes), 0), dtype=bool)

    def _asked(self, trees) -> list[dict]:
        """The stored trees of ``trees`` (indices among all trees); one it took no part in is a protocol error."""
        stored = {t["index"]: t for t in self.trees}
        missing = [int(i) for i in trees if int(i) not in stored]
        if missing:
            raise ProtocolError(f"{self.role}: asked for the leaves of tree {missing[0]}, which it took no part in")
        return [stored[int(i)] for i in trees]

    # -- what prediction releases ------------------------------------------------------------
    def own_splits(self) -> list[tuple[int, int, int, int, bool]]:
        """Every split of this party, in the order its split bits go: ``(tree index, node, feature, bin,
        missing_left)`` per split, trees as stored, nodes ascending."""
        return [(int(t["index"]), node, *t["splits"][node]) for t in self.trees for node in sorted(t["splits"])]

    def raw_splits(self) -> list[tuple[int, float, bool]]:
        """Every split as ``(column, threshold, missing_left)`` on raw values: a row goes left where ``x <=
        threshold`` (or is missing and ``missing_left``), exactly as it is routed by its bin (bin ``<= b`` is
        ``x <= t_b``; the last bin's split sends every present value left: threshold infinity)."""
        out = []
        for _, _, feature, bin_, missing_left in self.own_splits():
            thresholds = self.binner.thresholds_[feature]
            out.append((feature, float(thresholds[bin_]) if bin_ < len(thresholds) else float("inf"), missing_left))
        return out

    def split_bits(self, codes: np.ndarray | None = None) -> np.ndarray:
        """Per row of ``codes``, the side of every split of :meth:`own_splits` (True: left): ``(rows, splits)``."""
        codes = self.codes if codes is None else codes
        splits = self.own_splits()
        if not splits:
            return np.zeros((len(codes), 0), dtype=bool)
        return np.column_stack([goes_left(codes, self.binner.missing_code, f, b, m) for _, _, f, b, m in splits])

    def masks_from_bits(self, trees, split_bits: np.ndarray) -> np.ndarray:
        """The leaf masks of ``trees`` (as :meth:`leaf_masks`) from the sides ``split_bits`` (as
        :meth:`split_bits`, perhaps randomized): what the label party receives is a function of these bits."""
        split_bits = np.asarray(split_bits).astype(bool).reshape(len(split_bits), -1)
        column = {(t, node): k for k, (t, node, *_) in enumerate(self.own_splits())}
        if split_bits.shape[1] != len(column):
            raise ProtocolError(f"{self.role}: {split_bits.shape[1]} split sides for its {len(column)} splits")
        masks = []
        for tree in self._asked(trees):
            own = {node: split_bits[:, column[(tree["index"], node)]] for node in tree["splits"]}
            masks.append(allowed_leaves(tree["left"], tree["right"], len(split_bits), own))
        return np.hstack(masks) if masks else np.ones((len(split_bits), 0), dtype=bool)

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> dict:
        return {"trees": [{"index": t["index"], "left": t["left"].tolist(), "right": t["right"].tolist(),
                           "splits": [[n, *s] for n, s in sorted(t["splits"].items())]} for t in self.trees]}

    def load_state(self, state: dict) -> None:
        self.trees = [{"index": int(t["index"]), "left": np.asarray(t["left"], np.int64),
                       "right": np.asarray(t["right"], np.int64),
                       "splits": {int(s[0]): (int(s[1]), int(s[2]), bool(s[3])) for s in t["splits"]}}
                      for t in state["trees"]]


#: The name before the trees family had one word in every layer.
BoostingFeatureParty = TreeFeatureParty
