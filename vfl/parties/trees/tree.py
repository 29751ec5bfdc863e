"""A grown tree's shape, and the leaves a party's own splits allow for each row.

:class:`Tree` is the label party's view: children, the owner of every split (a
data party's index), leaf values and split gains.  A feature party keeps only
the shape (``left``, ``right``) and its own splits.

Private prediction (the label party alone learns the leaf): every party says,
per row, which leaves its own splits allow (:func:`allowed_leaves`): below one
of its splits only the side the row takes, below anyone else's split both.
The label party intersects the parties' answers; exactly one leaf remains, the
row's leaf, and no feature party learns which.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vfl.errors import ProtocolError


@dataclass
class Tree:
    """One tree: ``left[i]``/``right[i]`` children (-1 at a leaf), ``owner[i]`` of a split (-1 at a leaf).

    ``value`` holds the leaf values and ``gain`` the split gains (both only at the label party).
    """

    left: np.ndarray
    right: np.ndarray
    owner: np.ndarray
    value: np.ndarray
    gain: np.ndarray

    @property
    def leaves(self) -> np.ndarray:
        """Leaf node ids, ascending: the order of :func:`allowed_leaves`' columns."""
        return np.flatnonzero(self.left < 0)

    def to_dict(self) -> dict:
        return {"left": self.left.tolist(), "right": self.right.tolist(), "owner": self.owner.tolist(),
                "value": self.value.tolist(), "gain": self.gain.tolist()}

    @classmethod
    def from_dict(cls, saved: dict) -> "Tree":
        return cls(*(np.asarray(saved[k], dtype=dt) for k, dt in (("left", np.int64), ("right", np.int64),
                                                                    ("owner", np.int64), ("value", np.float64),
                                                                    ("gain", np.float64))))


def check_shape(left, right, what: str = "tree") -> tuple[np.ndarray, np.ndarray]:
    """Children arrays of a binary tree rooted at 0, each node reached once; else a ProtocolError."""
    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    count = len(left)
    if count == 0 or len(right) != count or ((left < 0) != (right < 0)).any():
        raise ProtocolError(f"{what}: malformed shape (children arrays of {len(left)} and {len(right)} nodes)")
    children = np.concatenate([left[left >= 0], right[right >= 0]])
    if (children >= count).any() or (children <= 0).any() or len(np.unique(children)) != len(children) \
            or len(children) != count - 1:
        raise ProtocolError(f"{what}: malformed shape (a child index is out of range or repeated)")
    order = [0]
    for node in order:                      # reachable from the root, no cycle (each child once)
        if left[node] >= 0:
            order += [int(left[node]), int(right[node])]
        if len(order) > count:
            break
    if len(order) != count:
        raise ProtocolError(f"{what}: malformed shape (not every node is reached from the root)")
    return left, right


def allowed_leaves(left: np.ndarray, right: np.ndarray, n_rows: int, goes_left: dict) -> np.ndarray:
    """Per row, the leaves this party's splits allow: bool (rows, leaves), leaves in ascending node id.

    ``goes_left`` maps each node this party split to a bool per row; at every
    other split both sides stay allowed.
    """
    reach = {0: np.ones(n_rows, dtype=bool)}
    stack = [0]
    while stack:
        node = stack.pop()
        if left[node] < 0:
            continue
        here = reach[node]
        side = goes_left.get(node)
        reach[int(left[node])] = here if side is None else here & side
        reach[int(right[node])] = here if side is None else here & ~side
        stack += [int(left[node]), int(right[node])]
    leaves = np.flatnonzero(left < 0)
    return np.column_stack([reach[int(leaf)] for leaf in leaves]) if len(leaves) else np.ones((n_rows, 0), bool)


def leaf_of(masks: list[np.ndarray], what: str = "prediction") -> np.ndarray:
    """The one leaf (column) every party's mask allows, per row; a ProtocolError if not exactly one."""
    combined = masks[0].copy()
    for mask in masks[1:]:
        if mask.shape != combined.shape:
            raise ProtocolError(f"{what}: leaf masks of shapes {mask.shape} and {combined.shape}")
        combined &= mask
    counts = combined.sum(axis=1)
    if (counts != 1).any():
        row = int(np.flatnonzero(counts != 1)[0])
        raise ProtocolError(f"{what}: the parties' leaf masks leave {int(counts[row])} leaves for row {row}; "
                            "their model shards do not come from the same training")
    return np.argmax(combined, axis=1)
