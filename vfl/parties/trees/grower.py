"""Growing one tree from the label party's gradients: which nodes to evaluate, which to split, the leaves.

:class:`TreeGrower` holds the tree being grown and nothing about who owns which
column: the caller evaluates the nodes it asks for (the federated label party
by a round of messages, the centralized reference on the pooled table), hands
back each node's best split, and splits the nodes the grower picks by their
rows.  Both callers thus grow by the same rules:

* a node is evaluated when it may still split: below ``max_depth`` and with at
  least ``2 min_samples_leaf`` rows;
* without ``max_leaf_nodes``, every evaluated node with a positive gain splits
  at once (depth-wise growth, one round per level);
* with ``max_leaf_nodes``, the node of highest gain splits first, one at a
  time (best-first, as scikit-learn's ``HistGradientBoosting*``), until the
  tree has that many leaves;
* a leaf's value is ``-learning_rate G / (H + l2_regularization)`` on its rows'
  (quantized) gradients and hessians.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vfl.parties.trees.splits import SplitRules
from vfl.parties.trees.tree import Tree


@dataclass
class Node:
    """A node of the tree being grown: its rows and their sums."""

    id: int
    depth: int
    rows: np.ndarray
    g: int
    h: int
    #: the best split found (``None``: not evaluated, or none with a positive gain)
    split: object = None
    gain: float = -np.inf
    evaluated: bool = False
    children: tuple[int, int] | None = None


@dataclass
class TreeGrower:
    """Grow one tree on the rows ``rows`` with per-row quantized gradients ``g`` and hessians ``h``.

    Parameters
    ----------
    g, h : int64 arrays over all rows
    rows : array of int
        The training rows of this tree.
    rules : SplitRules
    max_depth : int or None
    max_leaf_nodes : int or None
    learning_rate : float
    value_scale : float
        Leaf values are multiplied by it (the squared error's target scale).
    """

    g: np.ndarray
    h: np.ndarray
    rows: np.ndarray
    rules: SplitRules
    max_depth: int | None = None
    max_leaf_nodes: int | None = None
    learning_rate: float = 0.1
    value_scale: float = 1.0
    nodes: list = field(default_factory=list)

    def __post_init__(self):
        self._add(np.asarray(self.rows, dtype=np.int64), depth=0)

    def _add(self, rows: np.ndarray, depth: int) -> Node:
        node = Node(len(self.nodes), depth, rows, int(self.g[rows].sum()), int(self.h[rows].sum()))
        self.nodes.append(node)
        return node

    def _may_split(self, node: Node) -> bool:
        return (self.max_depth is None or node.depth < self.max_depth) and \
            len(node.rows) >= 2 * self.rules.min_samples_leaf

    def to_evaluate(self) -> list[Node]:
        """The nodes whose best split is needed now (a round evaluates them together)."""
        return [n for n in self.nodes if not n.evaluated and n.children is None and self._may_split(n)]

    def set_best(self, node: Node, gain: float, split) -> None:
        """Record ``node``'s best split (``split`` is the caller's; ``None`` or ``gain <= 0``: it stays a leaf)."""
        node.evaluated = True
        if split is not None and gain > 0:
            node.gain, node.split = float(gain), split

    def leaves(self) -> int:
        return sum(1 for n in self.nodes if n.children is None)

    def to_split(self) -> list[Node]:
        """The nodes to split now: every splittable one (depth-wise), or the best one (``max_leaf_nodes``)."""
        ready = [n for n in self.nodes if n.children is None and n.split is not None]
        if self.to_evaluate() and self.max_leaf_nodes is not None:
            return []                       # best-first needs every open node's gain first
        if self.max_leaf_nodes is None:
            return ready
        if not ready or self.leaves() >= self.max_leaf_nodes:
            return []
        return [max(ready, key=lambda n: (n.gain, -n.id))]

    def split(self, node: Node, goes_left: np.ndarray) -> tuple[Node, Node]:
        """Split ``node`` by ``goes_left`` (a bool per row of ``node.rows``, in order)."""
        goes_left = np.asarray(goes_left, dtype=bool)
        if goes_left.shape != node.rows.shape:
            raise ValueError(f"node {node.id} has {len(node.rows)} rows; got {goes_left.size} directions")
        left = self._add(node.rows[goes_left], node.depth + 1)
        right = self._add(node.rows[~goes_left], node.depth + 1)
        node.children = (left.id, right.id)
        return left, right

    def parents(self) -> dict:
        """Each child's parent."""
        return {c: n.id for n in self.nodes if n.children is not None for c in n.children}

    def children(self) -> dict:
        """Each split node's two children."""
        return {n.id: n.children for n in self.nodes if n.children is not None}

    def sizes(self) -> dict:
        """Each node's row count."""
        return {n.id: len(n.rows) for n in self.nodes}

    def done(self) -> bool:
        return not self.to_evaluate() and not self.to_split()

    def leaf_value(self, node: Node) -> float:
        scale = 2.0 ** -self.rules.frac_bits
        denominator = node.h * scale + float(self.rules.l2_regularization)
        if denominator <= 0:
            return 0.0
        return -self.learning_rate * (node.g * scale) / denominator * self.value_scale

    def tree(self, owner_of) -> Tree:
        """The grown tree; ``owner_of(split)`` says which party (data-party index) owns a split."""
        count = len(self.nodes)
        left, right = np.full(count, -1, np.int64), np.full(count, -1, np.int64)
        owner, value = np.full(count, -1, np.int64), np.zeros(count)
        gain = np.zeros(count)
        for n in self.nodes:
            if n.children is None:
                value[n.id] = self.leaf_value(n)
            else:
                left[n.id], right[n.id] = n.children
                owner[n.id], gain[n.id] = owner_of(n.split), n.gain
        return Tree(left, right, owner, value, gain)
