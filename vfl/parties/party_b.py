"""Party B: holds feature columns and the labels (and the intercept)."""

from __future__ import annotations

import numpy as np

from vfl.crypto import EncryptedVector
from vfl.errors import DataError, FixedPointOverflowError
from vfl.parties.feature_party import FeatureParty, loss_part_bound, score_bound
from vfl.parties.objectives import Objective


class PartyB(FeatureParty):
    """The labelled party (FATE's *guest*).

    Parameters
    ----------
    features : array of shape (n_rows, n_features)
    labels : array of shape (n_rows,)
        Already in the objective's coding (real values, or -1/+1 for logistic).
    fit_intercept : bool, default=True
    """

    role = "B"

    def __init__(self, features, labels, fit_intercept: bool = True, role: str = "B", columns=None):
        super().__init__(features, fit_intercept=fit_intercept, role=role, columns=columns)
        y = np.asarray(labels, dtype=np.float64).ravel()
        if y.shape[0] != self.n_rows:
            raise DataError(f"party {self.role}: {y.shape[0]} labels for {self.n_rows} rows")
        if not np.isfinite(y).all():
            raise DataError(f"party {self.role}: non-finite label at row {int(np.flatnonzero(~np.isfinite(y))[0])}")
        self.labels = y

    def receive_public_key(self, key_bytes: bytes, precision, engine=None) -> None:
        """As for A, and check the labels leave room for the scores within :func:`score_bound`."""
        super().receive_public_key(key_bytes, precision, engine)
        limit = score_bound(self.context, self.n_rows) / 4       # kappa |y| at most half the bound (kappa <= 2)
        big = np.flatnonzero(~(np.abs(self.labels) <= limit))
        if big.size:
            key_bits, self.context = self.context.public_key.key_bits, None
            raise FixedPointOverflowError(
                f"party {self.role}: label {self.labels[big[0]]:.3g} at row {int(big[0])} is outside the fixed-point "
                f"range of a {key_bits}-bit key with {precision.frac_bits} fractional bits "
                f"(|label| < {limit:.3g} for {self.n_rows} rows); scale the label down")

    def residual_and_loss(self, u_a: EncryptedVector, loss_a: EncryptedVector, rows, objective: Objective,
                          alpha: float) -> tuple[EncryptedVector, EncryptedVector]:
        """Table 2, step 2 at B: ``[[d]]`` and ``[[n L]]``, both re-randomized.

        ``[[d]] = [[u_A]] + (u_B - kappa y)``: without re-randomizing, A, who knows
        the randomness of its own ``[[u_A]]``, could divide it out and read ``u_B - kappa y``.
        """
        y = self.labels[rows]
        u_b = self.scores(rows)
        self.check_range(np.abs(u_b) + objective.kappa * np.abs(y), score_bound(self._ctx(), len(y)),
                         "partial scores and labels", len(y))
        d = (u_a + (u_b - objective.kappa * y)).rerandomize()
        cross = 2.0 * objective.a * u_b + objective.b * y
        with np.errstate(over="ignore", invalid="ignore"):
            own = float(np.sum(objective.a * u_b * u_b + objective.b * y * u_b + objective.c(y)))
            own += len(y) * self.penalty(alpha)
        self.check_range(own, loss_part_bound(self._ctx()), "its loss part (penalty included)", len(y))
        total_loss = (loss_a + cross @ u_a + own).rerandomize()
        return d, total_loss
