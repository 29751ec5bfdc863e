"""Party B: holds feature columns and the labels (and the intercept)."""

from __future__ import annotations

import numpy as np

from vfl.crypto import EncryptedVector
from vfl.crypto.randomness import gaussian
from vfl.errors import DataError, FixedPointOverflowError, ProtocolError
from vfl.parties.linear import packed
from vfl.parties.linear.data_party import WEIGHT_BITS, DataParty, loss_part_bound, score_bound
from vfl.parties.objectives import Objective
from vfl.parties.linear.optim import Penalty


class LinearLabelParty(DataParty):
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
        #: standard deviation of the DP noise B adds to each residual (0: DP off); see :mod:`vfl.parties.linear.dp`
        self.noise_std = 0.0
        #: ``noise_std`` over the sensitivity (None: DP off)
        self.noise_multiplier: float | None = None
        #: how many models release these labels (one-vs-rest: one per class), for the DP budget
        self.dp_models = 1
        #: each row's weight in the loss (class_weight times sample_weight), or None: B's secret
        self.weights: np.ndarray | None = None
        #: the source of standard normal noise: the CSPRNG (a test may substitute a recorded one)
        self.standard_normal = gaussian
        self._pending_loss = None
        #: the labels of the validation rows (early stopping)
        self.validation_labels: np.ndarray | None = None

    def start(self, init: str, kappa: float = 1.0) -> None:
        """As :meth:`FeatureParty.start`; B's random start hides ``kappa y`` in the first residual.

        Its partial scores get a root mean square of half that of ``kappa y``, the
        term they must hide from the feature parties in the first residual (see
        docs/protocol.md for what that buys and what it costs).
        """
        label_rms = float(np.sqrt(np.mean(np.square(self.labels)))) or 1.0
        self.start_scale = 0.5 * kappa * label_rms
        super().start(init)

    def hold_out(self, rows) -> None:
        """As for a feature party; the held-out labels stay with B."""
        rows = np.asarray(rows, dtype=np.int64)
        self.validation_labels = self.labels[rows]
        self.labels = np.delete(self.labels, rows)
        if self.weights is not None:
            self.weights = np.delete(self.weights, rows)
        super().hold_out(rows)

    def set_weights(self, weights) -> None:
        """Weigh each row's loss (``class_weight`` times ``sample_weight``); the weights never leave B.

        They enter the residual, ``[[s * d]]``, so every party's gradient is the
        weighted one; what they imply about the weights is what a weighted gradient
        implies.  Each is finite, non-negative and at most ``2^WEIGHT_BITS``.
        """
        s = np.asarray(weights, dtype=np.float64).ravel()
        if s.shape != (self.n_rows,):
            raise DataError(f"party {self.role}: {s.size} sample weights for {self.n_rows} rows")
        bad = np.flatnonzero(~np.isfinite(s) | (s < 0) | (s > 2.0 ** WEIGHT_BITS))
        if bad.size:
            raise DataError(f"party {self.role}: sample weight {float(s[bad[0]])!r} at row {int(bad[0])} is not a finite "
                            f"number in [0, {2 ** WEIGHT_BITS}]")
        self.weights = s

    def clip_labels(self, bound: float) -> None:
        """Clip the labels to ``[-bound, bound]``: the sensitivity bound of linear regression with DP."""
        self.labels = np.clip(self.labels, -bound, bound)

    def receive_public_key(self, key_bytes: bytes, precision, engine=None, n_parties: int = 2,
                           extra_bits: int = 0) -> None:
        """As for A, and check the labels leave room for the scores within :func:`score_bound`."""
        super().receive_public_key(key_bytes, precision, engine, n_parties, extra_bits)
        limit = score_bound(self.context, self.n_rows, self.n_parties, self.extra_bits) / 4       # kappa |y| at most half the bound (kappa <= 2)
        big = np.flatnonzero(~(np.abs(self.labels) <= limit))
        if big.size:
            key_bits, self.context = self.context.public_key.key_bits, None
            raise FixedPointOverflowError(
                f"party {self.role}: label {self.labels[big[0]]:.3g} at row {int(big[0])} is outside the fixed-point "
                f"range of a {key_bits}-bit key with {precision.frac_bits} fractional bits "
                f"(|label| < {limit:.3g} for {self.n_rows} rows); scale the label down")

    def residual(self, scores: list[EncryptedVector], rows, objective: Objective) -> EncryptedVector:
        """Table 2, step 2 at B: ``[[d]] = sum_k [[u_k]] + (u_B - kappa y)``, re-randomized.

        ``scores`` are the feature parties' ``[[u_k]]``.  Without re-randomizing, a
        feature party, who knows the randomness of its own ``[[u_k]]``, could divide
        it out of the sum.  With DP on, B adds fresh Gaussian noise of standard
        deviation ``noise_std`` to every row (the loss stays exact).  With row weights
        ``s`` the residual is ``[[s * d]]``: an element-wise product under encryption.
        """
        y = self.labels[rows]
        exact = self.scores(rows) - objective.kappa * y
        noise = self.noise_std * self.standard_normal(len(y)) if self.noise_std else np.zeros(len(y))
        self.check_range(np.maximum(np.abs(exact), np.abs(exact + noise)),
                         score_bound(self._ctx(), len(y), self.n_parties, self.extra_bits),
                         "partial scores and labels" + (" (with the DP noise)" if self.noise_std else ""), len(y))
        total = scores[0]
        for other in scores[1:]:
            total = total + other
        self._pending_loss = (total, exact, noise, rows)
        if self.weights is None:
            return (total + (exact + noise)).rerandomize()
        s = self.weights[rows]
        return (total * s + s * (exact + noise)).rerandomize()

    def batch_loss(self, loss_parts: list[EncryptedVector], objective: Objective, penalty: Penalty) -> EncryptedVector:
        """Table 2, step 2 at B: the encrypted batch loss ``[[n L]]``, re-randomized, for C.

        With ``U = sum_k u_k``, ``r = u_B - kappa y`` and ``d = U + r + e`` (``e``: the
        DP noise, or 0), the quadratic loss is ``a z^2 + b y z + c(y)`` with
        ``z = U + u_B``, and since ``b = -2 a kappa``::

            sum a z^2 + b y z = sum_k a u_k . d  +  a (r - e) . U  +  sum a u_B^2 + b y u_B

        and with row weights ``s`` (``d`` then means ``s * d``), ``sum s (a z^2 + b y z)``
        is the same with ``s * (r - e)`` for ``r - e`` and ``s`` on B's own terms.
        The feature parties send ``[[a u_k . d + penalty_k]]`` (``loss_parts``); B adds
        ``a (r - e) . [[U]]`` and its own terms, which it holds in plaintext.  With one
        feature party this is ``a u_A^2 + (2a u_B + b y) . u_A + ...``, Yang et al.'s loss.
        """
        if self._pending_loss is None:
            raise ProtocolError(f"party {self.role} received loss parts before forming the residual")
        total, exact, noise, rows = self._pending_loss
        self._pending_loss = None
        y, u_b = self.labels[rows], self.scores(rows)
        s = self.weights[rows] if self.weights is not None else np.ones(len(y))
        with np.errstate(over="ignore", invalid="ignore"):
            own = float(np.sum(s * (objective.a * u_b * u_b + objective.b * y * u_b + objective.c(y))))
            own += len(y) * self.penalty(penalty)
        self.check_range(own, loss_part_bound(self._ctx(), self.n_parties, self.extra_bits), "its loss part (penalty included)",
                         len(y))
        loss = (objective.a * s * (exact - noise)) @ total + own
        for part in loss_parts:
            loss = loss + part
        return loss.rerandomize()

    # -- packed ciphertexts ----------------------------------------------------------------
    def packed_residual(self, scores: list[EncryptedVector], rows, objective: Objective, layout,
                        score_bound: float) -> EncryptedVector:
        """Step 2, packed: ``[[d]] = sum_k [[u_k]] + pack(u_B - kappa y (+ e))``, re-randomized (``n / s`` ciphertexts)."""
        y = self.labels[rows]
        exact = self.scores(rows) - objective.kappa * y
        noise = self.noise_std * self.standard_normal(len(y)) if self.noise_std else np.zeros(len(y))
        share = exact + noise
        packed.check_declared(self.role, np.maximum(np.abs(exact), np.abs(share)), score_bound,
                              "partial score minus kappa * label" + (" (with the DP noise)" if self.noise_std else ""),
                              advice="lower learning_rate if the training diverges, or scale the columns or labels")
        total = scores[0]
        for other in scores[1:]:
            total = total + other
        self._pending_loss = (total, exact, noise, rows)
        return packed.add_packed_plain(self._ctx(), total, share, layout,
                                       what=f"party {self.role} residual").rerandomize()

    def packed_batch_loss(self, loss_parts: list[EncryptedVector], objective: Objective, penalty: Penalty,
                          layout) -> EncryptedVector:
        """Step 2, packed: ``[[n L]]`` in slot ``s - 1``; every other position masked for C (see :meth:`batch_loss`)."""
        if self._pending_loss is None:
            raise ProtocolError(f"party {self.role} received loss parts before forming the residual")
        total, exact, noise, rows = self._pending_loss
        self._pending_loss = None
        ctx = self._ctx()
        y, u_b = self.labels[rows], self.scores(rows)
        with np.errstate(over="ignore", invalid="ignore"):
            own = float(np.sum(objective.a * u_b * u_b + objective.b * y * u_b + objective.c(y)))
            own += len(y) * self.penalty(penalty)
        self.check_range(own, packed.own_loss_bound(ctx, layout, self.n_parties), "its loss part (penalty included)",
                         len(y), advice="lower alpha or learning_rate, or raise score_bound")
        loss = packed.add_in_result_slot(ctx, packed.products(ctx, total, objective.a * (exact - noise), layout),
                                         own, layout)
        for part in loss_parts:
            loss = loss + part
        masked, _ = packed.mask_products(ctx, loss, layout, keep_result=True)
        return masked


#: Yang et al.'s name for the linear label party, kept for teaching and the notebooks.
PartyB = LinearLabelParty
