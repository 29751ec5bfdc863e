"""What A and B share: a block of feature columns, their weights, and the masked-gradient step."""

from __future__ import annotations

import gmpy2
import numpy as np

from vfl.crypto import Context, EncryptedVector, FixedPoint, PublicKey
from vfl.errors import DataError, FixedPointOverflowError, ProtocolError
from vfl.parties.objectives import Objective


class FeatureParty:
    """A party holding features ``X`` (rows aligned with its peers) and weights.

    With ``fit_intercept`` the party also holds the intercept, treated as the
    weight of a column of ones that is not penalised.

    Parameters
    ----------
    features : array of shape (n_rows, n_features)
    fit_intercept : bool
    role : str
        Used in error messages.
    columns : list of str, optional
        Column names, used in error messages.
    """

    role = "?"

    def __init__(self, features, fit_intercept: bool = False, role: str | None = None, columns=None):
        self.role = role or self.role
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] == 0 or (x.shape[1] == 0 and not fit_intercept):
            raise DataError(f"party {self.role}: features must be a non-empty 2-D array, got shape {x.shape}")
        self.columns = list(columns) if columns is not None else [f"column {j}" for j in range(x.shape[1])]
        bad = ~np.isfinite(x)
        if bad.any():
            row, col = map(int, np.argwhere(bad)[0])
            raise DataError(f"party {self.role}, {self._column(col)}: non-finite value {x[row, col]} at row {row}")
        self.features = x
        self.fit_intercept = bool(fit_intercept)
        #: weights, then the intercept if there is one
        self.params = np.zeros(x.shape[1] + self.fit_intercept)
        self.context: Context | None = None
        self._pending_mask = None

    # -- plaintext, local ------------------------------------------------------
    @property
    def n_rows(self) -> int:
        return self.features.shape[0]

    @property
    def n_features(self) -> int:
        return self.features.shape[1]

    @property
    def coef(self) -> np.ndarray:
        return self.params[: self.n_features].copy()

    @property
    def intercept(self) -> float:
        return float(self.params[-1]) if self.fit_intercept else 0.0

    @property
    def n_gradient_values(self) -> int:
        """How many gradient components this party learns per batch."""
        return self.params.size

    def design(self, rows=None, features=None) -> np.ndarray:
        x = self.features if features is None else features
        x = x if rows is None else x[rows]
        return np.hstack([x, np.ones((x.shape[0], 1))]) if self.fit_intercept else x

    def scores(self, rows=None, features=None) -> np.ndarray:
        """This party's partial scores ``X w (+ b)``: they never leave the party in plaintext."""
        return self.design(rows, features) @ self.params

    def penalty(self, alpha: float) -> float:
        coef = self.params[: self.n_features]
        return 0.5 * alpha * float(coef @ coef)

    # -- keys ------------------------------------------------------------------
    def _column(self, j: int) -> str:
        name = self.columns[j]
        return name if name.startswith("column ") else f"column {name!r}"

    def receive_public_key(self, key_bytes: bytes, precision: FixedPoint, engine=None) -> None:
        """Keep the public key, and check every feature fits its fixed-point range."""
        context = Context(PublicKey.from_bytes(key_bytes), precision, engine=engine)
        if self.features.size:
            # float(mpfr) is inf when the range exceeds every double: then every finite value fits
            limit = float(gmpy2.mpfr(context.public_key.max_int) / 2 ** precision.frac_bits)
            big = np.abs(self.features) >= limit
            if big.any():
                row, col = map(int, np.argwhere(big)[0])
                raise FixedPointOverflowError(
                    f"party {self.role}, {self._column(col)}: value {self.features[row, col]:.3g} at row {row} is "
                    f"outside the fixed-point range of a {context.public_key.key_bits}-bit key "
                    f"with {precision.frac_bits} fractional bits; scale the column down")
        self.context = context

    def _ctx(self) -> Context:
        if self.context is None:
            raise ProtocolError(f"party {self.role} has no public key yet")
        return self.context

    # -- Table 2, steps 3 and 4 --------------------------------------------------
    def masked_gradient(self, d: EncryptedVector, rows) -> EncryptedVector:
        """``[[X^T d]] + [[R]]`` with a fresh uniform mask ``R`` kept for the unmasking."""
        gradient = self.design(rows).T @ d
        masked, mask = self._ctx().mask(gradient)
        self._pending_mask = (mask, masked.exponent)
        return masked

    def apply_update(self, residues, n: int, objective: Objective, alpha: float, learning_rate: float) -> np.ndarray:
        """Unmask ``X^T d`` and take one gradient step; returns the gradient used."""
        if self._pending_mask is None:
            raise ProtocolError(f"party {self.role} received a gradient it did not ask for")
        mask, exponent = self._pending_mask
        self._pending_mask = None  # a mask is used exactly once
        xtd = self._ctx().unmask(residues, mask, exponent, what=f"party {self.role} gradient")
        penalised = np.ones_like(self.params)
        if self.fit_intercept:
            penalised[-1] = 0.0
        gradient = objective.grad_scale * xtd / n + alpha * penalised * self.params
        self.params = self.params - learning_rate * gradient
        return gradient

    # -- checkpoints -------------------------------------------------------------
    def state(self) -> dict:
        return {"params": self.params.tolist()}

    def load_state(self, state: dict) -> None:
        params = np.asarray(state["params"], dtype=np.float64)
        if params.shape != self.params.shape:
            raise DataError(f"party {self.role}: saved state has {params.size} weights, data has {self.params.size}")
        self.params = params
