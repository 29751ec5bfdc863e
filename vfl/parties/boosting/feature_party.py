"""A feature party of gradient boosting: its binned columns, encrypted histograms, and its own splits.

It never sees a gradient, a label or a leaf value.  From the label party it
receives each row's gradients and hessians encrypted under the label party's
key; it bins its own columns (the thresholds stay here), sums the ciphertexts
per bin, turns the sums into the left sums of its split candidates (prefix
sums, plus the missing values' bin when they go left), shuffles the candidates
afresh for every node and returns them combined several to a ciphertext and
re-randomized.  When the label party picks one of its candidates it learns only
"your candidate number j": it keeps the threshold, and says which rows go left.

Two modes (``hide_membership``):

* **standard** (as FATE's SecureBoost): the label party tells it which rows each
  new node holds, so it sums only those rows, gets a sibling's histogram from
  its parent's by one division per bin, and sends only the candidates that can
  win (each child with ``min_samples_leaf`` rows, one per distinct partition);
* **hidden membership**: it never learns a row's node.  Per round the label party
  sends one ciphertext per row whose slots hold the row's gradients in its
  node's slot and zeros elsewhere; summing them per bin gives every node's sums
  at once, and every candidate is sent.
"""

from __future__ import annotations

import secrets

import numpy as np

from vfl.crypto import Context, FixedPoint
from vfl.crypto.histogram import bucket_products, quotients, running_products
from vfl.crypto.slots import Group, combine
from vfl.errors import DataError, ProtocolError
from vfl.parties.binning import Binner
from vfl.parties.boosting.splits import CandidateTable, SplitRules, flat_bins, goes_left, histogram
from vfl.parties.boosting.tree import allowed_leaves, check_shape

_RANDOM = secrets.SystemRandom()


class BoostingFeatureParty:
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
        self.role = role
        self.columns = list(columns) if columns is not None else [f"x{j}" for j in range(np.shape(features)[1])]
        where = f"party {role}"
        self.binner = binner if binner is not None else Binner(max_bins).fit(features, where, self.columns)
        self.codes = self.binner.transform(features, where, self.columns)
        self.n_rows = len(self.codes)
        self.table = CandidateTable(self.binner.n_bins_, self.binner.has_missing_)
        self.flat = flat_bins(self.codes, self.binner.n_bins_, self.binner.missing_code)
        #: per tree (in training order), its shape and this party's splits {node: (feature, bin, missing_left)}
        self.trees: list[dict] = []
        self.context: Context | None = None
        self.train_rows = np.arange(self.n_rows)

    @property
    def n_columns(self) -> int:
        return len(self.columns)

    # -- set-up ----------------------------------------------------------------------
    def receive_public_key(self, key_bytes: bytes, engine=None) -> None:
        from vfl.crypto import PublicKey

        self.context = Context(PublicKey.from_bytes(key_bytes), FixedPoint(), engine=engine)

    def set_training_rows(self, rows: np.ndarray) -> None:
        self.train_rows = np.asarray(rows, dtype=np.int64)

    # -- one tree, standard mode -----------------------------------------------------
    def start_tree(self, ciphertexts: list, group: Group, rules: SplitRules) -> None:
        """A new tree on the training rows: ``ciphertexts`` hold their gradients, one per training row in order."""
        if len(ciphertexts) != len(self.train_rows):
            raise ProtocolError(f"{self.role}: {len(ciphertexts)} encrypted gradients for {len(self.train_rows)} "
                                "training rows")
        self._hidden = False
        self._ciphertexts = [None] * self.n_rows
        for row, c in zip(self.train_rows.tolist(), ciphertexts):
            self._ciphertexts[row] = c
        self._group, self._rules = group, rules
        self._rows = {0: self.train_rows}
        self._children: dict[int, tuple[int, int]] = {}
        self._encrypted: dict[int, list] = {}
        self._candidates: dict[int, np.ndarray] = {}
        self._tree = {"splits": {}}

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

    def node_candidates(self, nodes) -> tuple[list, list]:
        """The combined, re-randomized candidates of ``nodes`` and how many each has (standard mode)."""
        nodes = [int(n) for n in nodes]
        for node in nodes:
            if node not in self._rows or node in self._children:
                raise ProtocolError(f"{self.role}: asked to evaluate node {node}, which is not a leaf it knows")
        histograms = self._histograms(nodes)
        ones = np.ones((self.n_rows, 1), np.int64)
        out, counts = [], []
        for node in nodes:
            row_counts = histogram(self.flat, self._rows[node], ones, self.table.size)[:, 0]
            keep = np.flatnonzero(self.table.worth_sending(row_counts, self._rules))
            lefts = self._left_sums(histograms[node], keep)
            order = list(range(len(keep)))
            _RANDOM.shuffle(order)
            self._candidates[node] = keep[order]
            out += [lefts[i] for i in order]
            counts.append(len(keep))
        return combine(self.context.public_key, self.context.engine, out, self._group), counts

    def _histograms(self, nodes: list) -> dict:
        """Each node's encrypted histogram: the smaller of two siblings summed, the other its parent's quotient."""
        pk = self.context.public_key
        parent_of = {child: parent for parent, pair in self._children.items() for child in pair}
        wanted, out = set(nodes), {}
        for node in nodes:
            if node in out:
                continue
            parent = parent_of.get(node)
            pair = self._children.get(parent, ())
            sibling = next((c for c in pair if c != node), None)
            if parent in self._encrypted and sibling in wanted:
                small, big = sorted((node, sibling), key=lambda c: (len(self._rows[c]), c))
                out[small] = self._sum(self._rows[small])
                out[big] = quotients(pk, self._encrypted[parent], out[small])
            else:
                out[node] = self._sum(self._rows[node])
        for node in nodes:
            self._encrypted.pop(parent_of.get(node), None)  # a parent's histogram serves its children once
        self._encrypted.update(out)
        return out

    def _sum(self, rows: np.ndarray) -> list:
        return bucket_products(self.context.public_key, [self._ciphertexts[i] for i in rows.tolist()],
                               self.flat[rows], self.table.size)

    def _left_sums(self, buckets: list, keep: np.ndarray) -> list:
        """The encrypted left sums of candidates ``keep`` from a node's bucket products."""
        pk = self.context.public_key
        n2 = pk.nsquare
        prefix = {}
        for f, (start, nb) in enumerate(self.table.prefix_positions()):
            if np.any(self.table.feature[keep] == f):
                prefix[f] = running_products(pk, buckets[start:start + nb])
        out = []
        for i in keep.tolist():
            f = int(self.table.feature[i])
            value = prefix[f][int(self.table.bin[i])]
            if self.table.missing_left[i]:
                value = value * buckets[int(self.table.offsets[f]) + int(self.table.n_bins[f])] % n2
            out.append(value)
        return out

    # -- one tree, hidden membership -----------------------------------------------------
    def start_hidden_tree(self, rules: SplitRules) -> None:
        self._hidden = True
        self._rules = rules
        self._candidates = {}                   # by list number: every chunk of every round of the tree
        self._tree = {"splits": {}}

    def round_candidates(self, chunks: list, groups: list) -> tuple[list, int]:
        """Every candidate of every node of a round (hidden membership).

        ``chunks`` are lists of ciphertexts, one per training row each, whose slots
        hold a few nodes' gradients (``groups[i]``: the slots of chunk ``i``).  Returns
        the candidates of every chunk, chunk after chunk, each chunk's shuffled,
        combined and re-randomized, and the number of candidates per chunk.  The
        chunks of a tree's rounds are numbered in order (the label party's "key").
        """
        every = np.arange(len(self.table))
        out = []
        for ciphertexts, group in zip(chunks, groups):
            if len(ciphertexts) != len(self.train_rows):
                raise ProtocolError(f"{self.role}: {len(ciphertexts)} round ciphertexts for "
                                    f"{len(self.train_rows)} training rows")
            buckets = bucket_products(self.context.public_key, ciphertexts, self.flat[self.train_rows],
                                      self.table.size)
            lefts = self._left_sums(buckets, every)
            order = list(range(len(every)))
            _RANDOM.shuffle(order)
            self._candidates[len(self._candidates)] = every[order]
            out += combine(self.context.public_key, self.context.engine, [lefts[i] for i in order], group)
        return out, len(every)

    # -- splits ------------------------------------------------------------------------------
    def resolve(self, node: int, key: int, tied) -> tuple[np.ndarray, int]:
        """Record the split the label party chose at ``node``: the first in this party's order among ``tied``.

        ``key`` names the candidate list (the node in standard mode, the chunk with
        hidden membership) and ``tied`` are positions in it as sent.  Returns the
        directions of the node's rows (standard) or of every training row (hidden),
        and the split's column index.
        """
        shuffled = self._candidates.get(int(key))
        tied = np.asarray(tied, dtype=np.int64)
        if shuffled is None or len(tied) == 0 or tied.min() < 0 or tied.max() >= len(shuffled):
            raise ProtocolError(f"{self.role}: a split of node {node} names candidates it did not send")
        if int(node) in self._tree["splits"]:
            raise ProtocolError(f"{self.role}: node {node} is split twice")
        candidate = int(np.min(shuffled[tied]))
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

    # -- prediction -------------------------------------------------------------------------
    def leaf_masks(self, trees, codes: np.ndarray | None = None) -> np.ndarray:
        """Per row, the leaves its splits allow in each tree of ``trees`` (indices among all trees), side by side."""
        codes = self.codes if codes is None else codes
        stored = {t["index"]: t for t in self.trees}
        masks = []
        for index in trees:
            tree = stored.get(int(index))
            if tree is None:
                raise ProtocolError(f"{self.role}: asked for the leaves of tree {index}, which it took no part in")
            own = {node: goes_left(codes, self.binner.missing_code, *split) for node, split in tree["splits"].items()}
            masks.append(allowed_leaves(tree["left"], tree["right"], len(codes), own))
        return np.hstack(masks) if masks else np.ones((len(codes), 0), dtype=bool)

    def bin_new(self, features) -> np.ndarray:
        """New rows binned with the training thresholds."""
        features = np.asarray(features, dtype=np.float64)
        if features.ndim != 2 or features.shape[1] != self.n_columns:
            raise DataError(f"party {self.role}: expected {self.n_columns} columns {self.columns}, got shape "
                            f"{features.shape}")
        return self.binner.transform(features, f"party {self.role}", self.columns)

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> dict:
        return {"trees": [{"index": t["index"], "left": t["left"].tolist(), "right": t["right"].tolist(),
                           "splits": [[n, *s] for n, s in sorted(t["splits"].items())]} for t in self.trees]}

    def load_state(self, state: dict) -> None:
        self.trees = [{"index": int(t["index"]), "left": np.asarray(t["left"], np.int64), "right": np.asarray(t["right"], np.int64),
                       "splits": {int(s[0]): (int(s[1]), int(s[2]), bool(s[3])) for s in t["splits"]}}
                      for t in state["trees"]]
