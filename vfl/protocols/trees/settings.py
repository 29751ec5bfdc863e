"""The settings every party of a gradient-boosting run shares (compared between them at connect).

Parameter names follow scikit-learn's ``HistGradientBoostingClassifier``
(``max_iter``, ``learning_rate``, ``max_depth``, ``max_leaf_nodes``,
``max_bins``, ``l2_regularization``, ``min_samples_leaf``, ``early_stopping``,
``validation_fraction``, ``n_iter_no_change``, ``tol``, ``scoring``), with
XGBoost's ``min_child_weight``, and three of vfl's own: ``hide_membership``,
``label_party_trees`` and the key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from vfl.crypto import check_key_bits
from vfl.parties.binning import check_max_bins
from vfl.parties.trees import LOSSES, SCORINGS, SplitRules
from vfl.protocols.values import built, is_int, is_real, require, table_values

#: Rows from which ``early_stopping="auto"`` turns early stopping on (scikit-learn's rule).
AUTO_EARLY_STOPPING_ROWS = 10_000


@dataclass(frozen=True)
class TreeSettings:
    """Shared settings of a boosting run.

    Parameters
    ----------
    loss : {"log_loss", "squared_error"}
        Log loss (binary, or multinomial with three classes or more: one tree per
        class and iteration) or squared error.
    max_iter : int
        Boosting iterations.
    learning_rate : float
        Shrinkage of every leaf value, in (0, 1].
    max_depth : int or None
        Depth of a tree at most (the root is at depth 0).
    max_leaf_nodes : int or None
        Leaves of a tree at most; ``None`` grows depth-wise to ``max_depth``, an
        integer best-first (highest gain first).
    max_bins : int
        Bins per column for non-missing values, from 2 to 255; missing values get one more.
    l2_regularization, min_samples_leaf, min_child_weight
        The split rules (:class:`~vfl.parties.trees.SplitRules`).
    early_stopping : "auto", bool
        Hold out ``validation_fraction`` of the rows (chosen from ``random_state``,
        never from the labels), score them after every iteration by private
        prediction, and stop when ``n_iter_no_change`` iterations did not improve
        the score by more than ``tol``.  ``"auto"``: on from 10,000 rows.
    scoring : str
        ``"loss"``, or ``"roc_auc"``/``"accuracy"`` (classification), ``"r2"`` (regression).
    random_state : int or None
        Seed of the validation split; ``None`` lets the label party draw one.
    hide_membership : bool
        A feature party learns no row's node: the label party sends, per row and
        round, one packed ciphertext holding the row's gradients in its node's
        slot (see :mod:`vfl.protocols.trees.training`).
    label_party_trees : int
        The first iterations split on the label party's columns only (their
        gradients, which reveal the most about the labels, never leave it).
    key_bits, insecure : int, bool
        The label party's Paillier key (2048 bits at least unless ``insecure``).
    frac_bits : int
        Fixed point of the gradients and hessians, from 8 to 48 bits.
    """

    loss: str = "log_loss"
    max_iter: int = 100
    learning_rate: float = 0.1
    max_depth: int | None = 3
    max_leaf_nodes: int | None = None
    max_bins: int = 32
    l2_regularization: float = 0.0
    min_samples_leaf: int = 20
    min_child_weight: float = 1e-3
    early_stopping: str | bool = "auto"
    validation_fraction: float = 0.1
    n_iter_no_change: int = 10
    tol: float = 1e-7
    scoring: str = "loss"
    random_state: int | None = None
    hide_membership: bool = False
    label_party_trees: int = 1
    key_bits: int = 2048
    insecure: bool = False
    frac_bits: int = 16

    @classmethod
    def from_table(cls, where: str, table: dict, roles: dict | None = None, also=()) -> "TreeSettings":
        """``[training]`` of ``federation.toml``: these fields by name, ``iterations`` for ``max_iter``
        (``model`` chooses the family; ``roles`` is not needed; ``also``: the keys the caller reads itself)."""
        return built(cls, where, table_values(cls, where, table, {"model": None, "iterations": "max_iter"},
                                              also=also))

    def __post_init__(self):
        require(self.loss in LOSSES, f"loss must be one of {LOSSES}", self.loss)
        require(is_int(self.max_iter) and self.max_iter >= 1, "max_iter must be a positive integer", self.max_iter)
        require(is_real(self.learning_rate) and 0 < self.learning_rate <= 1, "learning_rate must be in (0, 1]",
               self.learning_rate)
        require(self.max_depth is None or (is_int(self.max_depth) and 1 <= self.max_depth <= 32),
               "max_depth must be None or an integer from 1 to 32", self.max_depth)
        require(self.max_leaf_nodes is None or (is_int(self.max_leaf_nodes) and self.max_leaf_nodes >= 2),
               "max_leaf_nodes must be None or an integer of at least 2", self.max_leaf_nodes)
        require(self.max_depth is not None or self.max_leaf_nodes is not None,
               "set max_depth or max_leaf_nodes (or both): a tree needs a bound", (self.max_depth,
                                                                                    self.max_leaf_nodes))
        check_max_bins(self.max_bins)
        self.rules                              # checks the split rules
        require(isinstance(self.early_stopping, (bool, np.bool_)) or self.early_stopping == "auto",
               "early_stopping must be 'auto', True or False", self.early_stopping)
        require(is_real(self.validation_fraction) and 0 < self.validation_fraction < 1,
               "validation_fraction must be in (0, 1)", self.validation_fraction)
        require(is_int(self.n_iter_no_change) and self.n_iter_no_change >= 1,
               "n_iter_no_change must be a positive integer", self.n_iter_no_change)
        require(is_real(self.tol) and self.tol >= 0, "tol must be a non-negative number", self.tol)
        require(self.scoring in SCORINGS[self.loss], f"scoring for loss={self.loss!r} must be one of "
               f"{SCORINGS[self.loss]}", self.scoring)
        require(self.random_state is None or is_int(self.random_state), "random_state must be None or an integer",
               self.random_state)
        require(isinstance(self.hide_membership, (bool, np.bool_)), "hide_membership must be True or False",
               self.hide_membership)
        require(is_int(self.label_party_trees) and 0 <= self.label_party_trees,
               "label_party_trees must be a non-negative integer", self.label_party_trees)
        check_key_bits(self.key_bits, self.insecure)
        require(is_int(self.frac_bits) and 8 <= self.frac_bits <= 48, "frac_bits must be an integer from 8 to 48",
               self.frac_bits)

    @property
    def rules(self) -> SplitRules:
        return SplitRules(self.min_samples_leaf, self.min_child_weight, self.l2_regularization, self.frac_bits)

    def early_stops(self, n_rows: int) -> bool:
        """Whether this run holds out validation rows (``"auto"`` resolved by the row count)."""
        if self.early_stopping == "auto":
            return n_rows > AUTO_EARLY_STOPPING_ROWS
        return bool(self.early_stopping)

    def to_dict(self) -> dict:
        return {k: (bool(v) if isinstance(v, np.bool_) else v) for k, v in dataclasses.asdict(self).items()}


#: The earlier name of :class:`TreeSettings` (the trees family has one word in every layer now).
BoostingSettings = TreeSettings


def should_stop(scores: list, settings: TreeSettings) -> bool:
    """scikit-learn's rule: none of the last ``n_iter_no_change`` scores beat the one before them by ``tol``.

    Scores are "higher is better" (the loss enters negated).
    """
    n = settings.n_iter_no_change
    if len(scores) <= n:
        return False
    reference = scores[-n - 1] + settings.tol
    return not any(score > reference for score in scores[-n:])
