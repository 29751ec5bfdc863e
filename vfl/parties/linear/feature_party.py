"""A feature party: holds feature columns only, never the labels (there may be any number of them)."""

from __future__ import annotations

import numpy as np

from vfl.crypto import EncryptedVector
from vfl.errors import ProtocolError
from vfl.parties.linear.data_party import DataParty, loss_part_bound, score_bound
from vfl.parties.linear import packed
from vfl.parties.objectives import Objective
from vfl.parties.linear.optim import Penalty


class LinearFeatureParty(DataParty):
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

    # -- packed ciphertexts ----------------------------------------------------------------
    def encrypted_packed_scores(self, rows, layout, score_bound: float) -> EncryptedVector:
        """Step 2, packed: ``[[u_k]]``, ``s`` scores per ciphertext (each checked against the declared bound)."""
        u = self.scores(rows)
        packed.check_declared(self.role, u, score_bound, "partial score",
                              advice="lower learning_rate if the training diverges, or scale the columns down")
        self._pending_scores = u
        return packed.encrypt_packed(self._ctx(), u, layout, what=f"party {self.role} score")

    def packed_gradient_and_loss_part(self, d: EncryptedVector, rows, objective: Objective, penalty: Penalty,
                                      layout) -> tuple[EncryptedVector, EncryptedVector]:
        """Step 3, packed: as :meth:`masked_gradient_and_loss_part`, from the packed ``[[d]]``.

        The gradient's products have every slot position masked; the loss part's
        result is in slot ``s - 1`` (cross terms elsewhere, which B masks before C
        decrypts the loss).
        """
        if self._pending_scores is None:
            raise ProtocolError(f"party {self.role} received a residual before sending its scores")
        u, self._pending_scores = self._pending_scores, None
        ctx = self._ctx()
        own_penalty = len(u) * self.penalty(penalty)
        self.check_range(own_penalty, packed.own_loss_bound(ctx, layout, self.n_parties), "its penalty", len(u),
                         advice="lower alpha or learning_rate, or raise score_bound")
        columns = np.vstack([self.design(rows).T, objective.a * u])
        products = packed.products(ctx, d, columns, layout)
        gradient, cross = products[: self.params.size], products[self.params.size:]
        loss_part = packed.add_in_result_slot(ctx, cross, own_penalty, layout).rerandomize()
        return self._mask_packed_gradient(gradient, layout), loss_part


#: Yang et al.'s name for the linear feature party, kept for teaching and the notebooks.
PartyA = LinearFeatureParty
