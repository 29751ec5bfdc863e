"""Party A: holds feature columns only, never the labels."""

from __future__ import annotations

import numpy as np

from vfl.crypto import EncryptedVector
from vfl.parties.feature_party import FeatureParty, loss_part_bound, score_bound
from vfl.parties.objectives import Objective


class PartyA(FeatureParty):
    """The feature-only party (FATE's *host*).

    Parameters
    ----------
    features : array of shape (n_rows, n_features)
    """

    role = "A"

    def __init__(self, features, role: str = "A", columns=None):
        super().__init__(features, fit_intercept=False, role=role, columns=columns)

    def encrypted_scores(self, rows, objective: Objective, alpha: float) -> tuple[EncryptedVector, EncryptedVector]:
        """Table 2, step 2: ``[[u_A]]`` and A's part of the loss, ``[[a sum u_A^2 + n alpha/2 ||w_A||^2]]``.

        Both are fresh encryptions, so they may leave A as they are.
        """
        u = self.scores(rows)
        self.check_range(u, score_bound(self._ctx(), len(u)), "partial scores", len(u))
        with np.errstate(over="ignore", invalid="ignore"):
            loss_part = objective.a * float(u @ u) + len(u) * self.penalty(alpha)
        self.check_range(loss_part, loss_part_bound(self._ctx()), "its loss part (penalty included)", len(u))
        ctx = self._ctx()
        return ctx.encrypt(u, what="party A score"), ctx.encrypt([loss_part], what="party A loss part")
