"""The label party of gradient boosting: labels, the key pair, the trees' shapes and leaf values.

It computes every row's gradient and hessian (:mod:`~vfl.parties.trees.loss`),
quantizes and encrypts them under its own Paillier key, and decrypts only sums:
the left sums of the feature parties' split candidates, which come shuffled, so
that it knows a candidate only as "party k, its candidate j".  Its own columns'
candidates it sums in the clear.  It grows every tree
(:class:`~vfl.parties.trees.TreeGrower`), keeps the leaf values, and at
prediction combines the parties' leaf masks into each row's leaf.
"""

from __future__ import annotations

import numpy as np

from vfl.crypto import Context, FixedPoint, generate_keypair
from vfl.errors import ProtocolError
from vfl.parties.binning import Binner
from vfl.parties.labels import class_labels, numeric_labels
from vfl.parties.trees import layout
from vfl.parties.trees.loss import BOUNDS, Loss, loss_from_dict, make_loss, quantize
from vfl.parties.trees.columns import BinnedColumns
from vfl.parties.trees.splits import SplitRules, best, gains, goes_left, histogram
from vfl.parties.trees.tree import Tree, leaf_of


class TreeLabelParty(BinnedColumns):
    """The label party's state in a boosting run.

    Parameters
    ----------
    features : array (rows, columns)
        Its aligned rows, in its own units; NaN is a missing value.
    labels : array (rows,)
        Class values (log loss) or real targets (squared error).
    role : str
    columns : list of str, optional
    binner : Binner, optional
        Thresholds fitted earlier; by default fitted on ``features`` with ``max_bins``.
    max_bins : int
    """

    def __init__(self, features, labels, role: str = "B", columns=None, binner: Binner | None = None,
                 max_bins: int = 32):
        super().__init__(features, role, columns, binner, max_bins)
        self.labels = None if labels is None else np.asarray(labels)
        self.context: Context | None = None
        #: trees in training order: {"tree": Tree, "splits": {node: (feature, bin, missing_left)}}
        self.trees: list[dict] = []
        self.classes: np.ndarray | None = None
        self.loss: Loss | None = None
        self.baseline: np.ndarray | None = None


    # -- set-up ----------------------------------------------------------------------------
    def make_keys(self, key_bits: int, insecure: bool = False, engine=None) -> bytes:
        """A fresh key pair (kept here); returns the public key's bytes."""
        public, private = generate_keypair(key_bits, insecure=insecure)
        self.context = Context(public, FixedPoint(), private_key=private, engine=engine)
        return public.to_bytes()

    def start(self, loss_name: str, train_rows: np.ndarray, validation_rows: np.ndarray) -> None:
        """Encode the targets, choose the loss and the baseline from the training rows."""
        self.train_rows = np.asarray(train_rows, dtype=np.int64)
        self.validation_rows = np.asarray(validation_rows, dtype=np.int64)
        if loss_name == "log_loss":
            self.classes, self.y = class_labels(self.labels, self.role, "a classifier", "a gradient-boosting regressor")
            self.loss = make_loss(loss_name, len(self.classes))
        else:
            self.y = numeric_labels(self.labels, self.role)
            self.loss = make_loss(loss_name, y=self.y[self.train_rows])
        self.baseline = self.loss.baseline(self.y[self.train_rows])
        self.raw = np.tile(self.baseline, (self.n_rows, 1))

    @property
    def n_trees(self) -> int:
        """Trees per iteration: one per class for the multinomial log loss, else one."""
        return self.loss.n_trees

    # -- gradients ---------------------------------------------------------------------------
    def gradients(self, frac_bits: int, loss_name: str) -> tuple[np.ndarray, np.ndarray]:
        """Quantized gradients and hessians of every row (zero outside the training rows), (rows, trees)."""
        g, h = self.loss.gradients(self.raw[self.train_rows], self.y[self.train_rows])
        g_bits, h_bits = BOUNDS[loss_name]
        big_g = np.zeros((self.n_rows, self.n_trees), dtype=np.int64)
        big_h = np.zeros_like(big_g)
        big_g[self.train_rows] = quantize(g, frac_bits, g_bits)
        big_h[self.train_rows] = quantize(h, frac_bits, h_bits, "hessian")
        return big_g, big_h

    def encrypt_classes(self, big_g: np.ndarray, big_h: np.ndarray, classes: range, frac_bits: int,
                        loss_name: str) -> list:
        """One ciphertext per training row holding ``(G_k, H_k)`` of ``classes`` (standard mode)."""
        group = layout.class_group(classes, len(self.train_rows), frac_bits, loss_name,
                                   self.context.public_key.key_bits)
        values = np.empty((len(self.train_rows), 2 * len(classes)), dtype=np.int64)
        values[:, 0::2] = big_g[self.train_rows][:, classes.start:classes.stop]
        values[:, 1::2] = big_h[self.train_rows][:, classes.start:classes.stop]
        return self._encrypt(group.pack(values))

    def encrypt_nodes(self, nodes: list, g: np.ndarray, h: np.ndarray, frac_bits: int, loss_name: str,
                      counts: bool = True) -> list:
        """One ciphertext per training row with ``(G, H, 1)`` in its node's slots among ``nodes``, zeros elsewhere
        (``(G, H)`` without ``counts``: :func:`~vfl.parties.trees.layout.counts_travel`)."""
        n_train = len(self.train_rows)
        width = 3 if counts else 2
        position = np.full(self.n_rows, -1, dtype=np.int64)
        for slot, node in enumerate(nodes):
            position[node.rows] = slot
        values = np.zeros((n_train, width * len(nodes)), dtype=np.int64)
        where = position[self.train_rows]
        inside = np.flatnonzero(where >= 0)
        rows = self.train_rows[inside]
        values[inside, width * where[inside]] = g[rows]
        values[inside, width * where[inside] + 1] = h[rows]
        if counts:
            values[inside, width * where[inside] + 2] = 1
        group = layout.node_group(range(len(nodes)), n_train, frac_bits, loss_name, self.context.public_key.key_bits,
                                  counts)
        return self._encrypt(group.pack(values))

    def _encrypt(self, plaintexts: list) -> list:
        """Fresh encryptions under its own key: as the key owner (half-size tables) where the engine can."""
        engine = self.context.engine
        if hasattr(engine, "encrypt_owned"):
            return engine.encrypt_owned(self.context.private_key, plaintexts)
        return engine.encrypt(self.context.public_key, plaintexts)

    # -- splits ---------------------------------------------------------------------------------
    def own_best(self, node, values: np.ndarray, rules: SplitRules) -> tuple[float, tuple | None]:
        """The best split of ``node`` on this party's columns: ``(gain, (feature, bin, missing_left))``."""
        hist = histogram(self.flat, node.rows, values, self.table.size)
        left = self.table.left_sums(hist)
        gain, tied = best(gains(left[:, 0], left[:, 1], node.g, node.h, rules, left[:, 2], len(node.rows)))
        if not len(tied):
            return -np.inf, None
        i = int(tied[0])
        return gain, (int(self.table.feature[i]), int(self.table.bin[i]), bool(self.table.missing_left[i]))

    def decrypt_groups(self, ciphertexts: list, group, count: int) -> np.ndarray:
        """``count`` groups of signed sums from combined ciphertexts (rows: groups, columns: slots)."""
        per = group.per_plaintext(self.context.public_key.key_bits)
        if len(ciphertexts) != -(-count // per):
            raise ProtocolError(f"{self.role}: {len(ciphertexts)} combined ciphertexts for {count} candidates")
        residues = self.context.engine.decrypt(self.context.private_key, ciphertexts)
        return group.unpack(residues, self.context.public_key.n, count, per)

    def split_rows(self, node, split: tuple) -> np.ndarray:
        """Directions of ``node``'s rows at one of this party's own splits."""
        return goes_left(self.codes[node.rows], self.binner.missing_code, *split)

    # -- trees and scores --------------------------------------------------------------------------
    def add_tree(self, tree: Tree, own_splits: dict, column: int, leaves_of_train: np.ndarray,
                 foreign: dict | None = None) -> None:
        """Record a finished tree and add its leaf values to the training rows' raw scores (column ``column``).

        ``foreign`` maps each feature party's split node to that party's column index.
        """
        self.trees.append({"tree": tree, "splits": own_splits, "foreign": dict(foreign or {}),
                           "counts": np.bincount(leaves_of_train, minlength=len(tree.leaves))})
        self.raw[self.train_rows, column] += tree.value[tree.leaves][leaves_of_train]

    def own_masks(self, index: int, codes: np.ndarray) -> np.ndarray:
        """Per row of ``codes``, the leaves this party's splits allow in tree ``index``."""
        entry = self.trees[index]
        return self.allowed(entry["tree"].left, entry["tree"].right, entry["splits"], codes)

    def leaf_values(self, index: int, codes: np.ndarray, others: list) -> np.ndarray:
        """The leaf value of each row in tree ``index``, from this party's mask and the others' masks."""
        tree = self.trees[index]["tree"]
        leaves = leaf_of([self.own_masks(index, codes), *others], f"{self.role}: tree {index}")
        return tree.value[tree.leaves][leaves]

    # -- state ------------------------------------------------------------------------------------
    def state(self) -> dict:
        return {"trees": [{"tree": t["tree"].to_dict(), "splits": [[n, *s] for n, s in sorted(t["splits"].items())],
                           "foreign": [[n, c] for n, c in sorted(t["foreign"].items())],
                           **({"counts": t["counts"].tolist()} if t.get("counts") is not None else {})}
                          for t in self.trees],
                "raw": self.raw.tolist(), "baseline": self.baseline.tolist(), "loss": self.loss.to_dict()}

    def load_state(self, state: dict) -> None:
        self.trees = [{"tree": Tree.from_dict(t["tree"]),
                       "splits": {int(s[0]): (int(s[1]), int(s[2]), bool(s[3])) for s in t["splits"]},
                       "foreign": {int(n): int(c) for n, c in t["foreign"]},
                       "counts": np.asarray(t["counts"], dtype=np.int64) if "counts" in t else None}
                      for t in state["trees"]]
        self.raw = np.asarray(state["raw"], dtype=np.float64).reshape(self.n_rows, -1)
        self.baseline = np.asarray(state["baseline"], dtype=np.float64)
        self.loss = loss_from_dict(state["loss"])


class ForeignSums:
    """What the label party knows of one feature party's candidates in the tree being grown.

    Per evaluated node: the left sums of the candidates still worth evaluating
    there, and their positions in the feature party's order for this tree (all
    it knows of them).  A node whose sums did not travel gets its parent's minus
    its sibling's, candidate by candidate.
    """

    def __init__(self, columns: int):
        #: sums per candidate: (G, H), or (G, H, N) with hidden membership when the counts travel
        self.columns = columns
        self.sums: dict[int, np.ndarray] = {}
        self.positions: dict[int, np.ndarray] = {}

    def base(self, parent: int | None, count: int) -> np.ndarray:
        """The candidates a sent node's sums cover: the parent's (or, at the root, all ``count`` sent)."""
        return np.arange(count) if parent is None else self.positions[parent]

    def add(self, sent: int, parent: int | None, served: list, sums: np.ndarray, keep: list | None = None) -> None:
        """``sums`` of node ``sent`` over :meth:`base`; each node of ``served`` keeps the candidates ``keep`` says."""
        base = self.base(parent, len(sums))
        if len(sums) != len(base):
            raise ProtocolError(f"{len(sums)} candidate sums for {len(base)} candidates")
        for i, node in enumerate(served):
            mine = sums if node == sent else self.sums[parent] - sums
            mask = np.ones(len(base), dtype=bool) if keep is None else keep[i]
            self.sums[node], self.positions[node] = mine[mask], base[mask]


#: The name before the trees family had one word in every layer.
BoostingLabelParty = TreeLabelParty
