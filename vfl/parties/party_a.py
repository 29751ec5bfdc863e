"""A feature party: holds feature columns only, never the labels (there may be any number of them)."""

from __future__ import annotations

import numpy as np

from vfl.crypto import EncryptedVector
from vfl.errors import ProtocolError
from vfl.parties.feature_party import FeatureParty, loss_part_bound, score_bound
from vfl.parties.objectives import Objective
from vfl.parties.optim import Penalty


class PartyA(FeatureParty):
    """A feature-only party (FATE's *host*); Yang et al.'s party A.

    Parameters
    ----------
    features : array of shape (n_rows, n_features)
    role : str
        The party's name (used in messages and errors).
    columns : list of str, optional
    """

    role = "A"

    def __init__(self, features, role: str = "A", columns=None):
        super().__init__(features, fit_intercept=False, role=role, columns=columns)
        self._pending_scores = None

    def encrypted_scores(self, rows) -> EncryptedVector:
        """Table 2, step 2: ``[[u_k]]``, a fresh encryption, so it may leave the party as it is."""
        u = self.scores(rows)
        self.check_range(u, score_bound(self._ctx(), len(u), self.n_parties, self.extra_bits), "partial scores", len(u))
        self._pending_scores = u
        return self._ctx().encrypt(u, what=f"party {self.role} score")

    def masked_gradient_and_loss_part(self, d: EncryptedVector, rows, objective: Objective,
                                      penalty: Penalty) -> tuple[EncryptedVector, EncryptedVector]:
        """Table 2, step 3: ``[[X^T d]] + [[R]]`` for C, and the loss part ``[[a u.d + n alpha/2 ||w||^2]]`` for B.

        Both come from one multi-exponentiation over ``[[d]]``: the party's columns,
        and ``a u`` as one more column (``u`` are the scores it sent in step 2).
        The cross terms ``u_j u_k`` of the loss between feature parties, which no
        party holds, are all inside ``sum_k u_k . d``; B removes what it adds (see
        :meth:`PartyB.batch_loss`).  The loss part is re-randomized: it is computed
        from B's ``[[d]]``, whose randomness B knows.
        """
        if self._pending_scores is None:
            raise ProtocolError(f"party {self.role} received a residual before sending its scores")
        u, self._pending_scores = self._pending_scores, None
        own_penalty = len(u) * self.penalty(penalty)
        self.check_range(own_penalty, loss_part_bound(self._ctx(), self.n_parties, self.extra_bits), "its penalty", len(u))
        columns = np.vstack([self.design(rows).T, objective.a * u])
        products = columns @ d
        gradient, cross = products[: self.params.size], products[self.params.size:]
        return self.mask_gradient(gradient), (cross + own_penalty).rerandomize()
