"""A party's checkpoint of a split network: its arrays, its optimizer's state, the best epoch's arrays.

Plain lists of floats (JSON keeps doubles exactly), never pickles; a checkpoint that does not fit the
party's shapes is refused.
"""

from __future__ import annotations

import numpy as np

from vfl.errors import ConfigurationError


def party_state(parameters: list[np.ndarray], optimizer, best=None) -> dict:
    """What a party's checkpoint keeps."""
    return {"params": [a.tolist() for a in parameters], "optimizer": optimizer.state(),
            "best": None if best is None else [a.tolist() for a in best]}


def load_party_state(role: str, like: list[np.ndarray], optimizer, state: dict) -> tuple[list, list | None]:
    """The arrays of a checkpoint (checked against ``like``'s shapes) and its best arrays; loads the optimizer."""
    arrays = [np.asarray(a, dtype=np.float64) for a in state["params"]]
    if len(arrays) != len(like) or any(a.shape != b.shape for a, b in zip(arrays, like)):
        raise ConfigurationError(f"party {role}: its checkpoint does not fit this network's shapes")
    optimizer.load_state(state["optimizer"])
    best = None if state.get("best") is None else [np.asarray(a, dtype=np.float64) for a in state["best"]]
    return arrays, best


class Checkpointed:
    """What both parties of a split network share: their checkpoint (``parameters()``, ``_set``, ``_optimizer``,
    ``role`` are theirs)."""

    def state(self, best=None) -> dict:
        """Its checkpoint: its arrays, its optimizer's state, and the best epoch's arrays (early stopping)."""
        return party_state(self.parameters(), self._optimizer, best)

    def load_state(self, state: dict):
        """Take a checkpoint back (after ``start``, which gave the shapes); returns the best arrays or None."""
        arrays, best = load_party_state(self.role, self.parameters(), self._optimizer, state)
        self._set(arrays)
        return best
