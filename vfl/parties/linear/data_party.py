"""What every party holding rows shares (feature parties and the label party): a block of feature columns, their
weights, and the masked-gradient step."""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

from vfl.crypto import Context, EncryptedVector, FixedPoint, PublicKey
from vfl.crypto.randomness import uniform_floats
from vfl.errors import DataError, FixedPointOverflowError, ProtocolError
from vfl.parties.labels import plain_class
from vfl.parties.linear import packed
from vfl.parties.linear.cg import Directions
from vfl.parties.objectives import Objective
from vfl.parties.linear.optim import Optimizer, Penalty, penalised_step
from vfl.parties.linear.shares import WeightShare


class DataParty:
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

    #: the rows' ids, in the rows' order, to name a row in an error (they stay with the party); None: not known
    ids: list | None = None

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
        #: where training started (``start``); never leaves the party
        self.initial_params = self.params.copy()
        self.context: Context | None = None
        #: how many parties hold rows (feature parties and the label party): the range bounds depend on it
        self.n_parties = 2
        #: range bits the label party's row weights take (0 without weights): the bounds depend on it
        self.extra_bits = 0
        #: the coordinate-wise update rule, with its own state (see :mod:`vfl.parties.linear.optim`)
        self.optimizer = Optimizer("sgd", self.params.size)
        #: where to start instead of a fresh start (``warm_start``: the fitted weights), or None
        self.warm_params: np.ndarray | None = None
        #: held-out rows scored after every epoch (early stopping), or None
        self.validation: np.ndarray | None = None
        #: this party's parameters after each epoch, to restore the best one (early stopping)
        self.snapshots: dict[int, list] = {}
        #: this party's blocks of the gradient and search direction (``solver="cg"``)
        self.directions = Directions()
        #: its additive share of its own parameters (``protocol="shared"``: :mod:`vfl.parties.linear.shares`), or None
        self.share: WeightShare | None = None
        self._pending_mask = None

    # -- where training starts -------------------------------------------------------
    #: Root mean square this party's random start gives its partial scores (see ``start``): enough to
    #: hide them from the label party's first gradient, small enough to cost little accuracy.
    start_scale = 0.5

    def start(self, init: str) -> None:
        """Set the weights training starts from: ``"zeros"``, or a secret ``"random"`` start.

        The random start draws each weight uniformly from ``[-a_j, a_j]`` with the
        operating system's CSPRNG, ``a_j = sqrt(3 / f) * start_scale / rms_j`` for
        this party's ``f`` columns of root mean square ``rms_j``: the partial scores
        then have a root mean square of about ``start_scale`` whatever the columns'
        units.  An intercept starts uniform in ``[-start_scale, start_scale]``.  The
        start is this party's secret, like its weights.  With ``warm_params`` set
        (a warm start), training continues from them instead.
        """
        params = np.zeros_like(self.params)
        if self.warm_params is not None:
            params = np.asarray(self.warm_params, dtype=np.float64).copy()
            if params.shape != self.params.shape:
                raise DataError(f"party {self.role}: a warm start of {params.size} parameters for {self.params.size}")
        elif init == "random":
            f = self.n_features
            if f:
                with np.errstate(over="ignore"):    # a value too large to square is refused by the range check
                    rms = np.sqrt(np.mean(np.square(self.features), axis=0))
                half_width = math.sqrt(3.0 / f) * self.start_scale / np.where(rms > 0, rms, 1.0)
                params[:f] = (2.0 * uniform_floats(f) - 1.0) * half_width
            if self.fit_intercept:
                params[-1] = (2.0 * uniform_floats(1)[0] - 1.0) * self.start_scale
        elif init != "zeros":
            raise ValueError(f"party {self.role}: init must be 'random' or 'zeros', got {init!r}")
        self.params = params
        self.initial_params = params.copy()

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
        with np.errstate(over="ignore", invalid="ignore"):   # a diverging run: check_range reports it
            return self.design(rows, features) @ self.params

    def penalty(self, penalty: Penalty) -> float:
        """This party's share of the penalty (its weights; never the intercept)."""
        return penalty.value(self.params[: self.n_features])

    @property
    def penalised(self) -> np.ndarray:
        """1 for each weight, 0 for the intercept (never penalised)."""
        penalised = np.ones_like(self.params)
        if self.fit_intercept:
            penalised[-1] = 0.0
        return penalised

    @contextmanager
    def scoring_with(self, vector):
        """Run a pass with ``vector`` in place of the weights: conjugate gradient's product ``H p``.

        The training pass computes ``X^T`` of the residual of the scores ``X w``; run
        at a search direction ``p`` with the label term taken out (the curvature
        objective, :meth:`~vfl.parties.objectives.Objective.curvature`), the same
        messages give ``X^T S X p`` and ``p^T H p``.  The weights are back on exit.
        """
        params, self.params = self.params, np.asarray(vector, dtype=np.float64)
        try:
            yield
        finally:
            self.params = params

    def hold_out(self, rows) -> None:
        """Move ``rows`` (agreed by every party from the shared seed) from training to validation."""
        rows = np.asarray(rows, dtype=np.int64)
        self.validation = self.features[rows]
        self.features = np.delete(self.features, rows, axis=0)

    def snapshot(self, epoch: int) -> None:
        self.snapshots[int(epoch)] = self.params.tolist()

    def restore(self, epoch: int) -> None:
        """Take back the parameters this party had after ``epoch`` (the best validation epoch)."""
        try:
            self.params = np.asarray(self.snapshots[int(epoch)], dtype=np.float64)
        except KeyError:
            raise ProtocolError(f"party {self.role} has no snapshot of epoch {epoch} to restore") from None

    def set_optimizer(self, name: str = "sgd", **hyper) -> None:
        """The update rule of :meth:`apply_update` (fresh state: call before training, not on resume)."""
        self.optimizer = Optimizer(name, self.params.size, **hyper)

    # -- keys ------------------------------------------------------------------
    def _column(self, j: int) -> str:
        name = self.columns[j]
        return name if name.startswith("column ") else f"column {name!r}"

    def receive_public_key(self, key_bytes: bytes, precision: FixedPoint, engine=None, n_parties: int = 2,
                           extra_bits: int = 0) -> None:
        """Keep the public key, and check every feature fits the fixed-point range.

        The check is the data half of :func:`score_bound`'s budget: with scores
        within that bound, no gradient over any batch of these rows can wrap.
        ``n_parties`` is the number of parties holding rows (public); ``extra_bits``
        the head-room the label party's row weights take (see :data:`WEIGHT_BITS`).
        """
        context = Context(PublicKey.from_bytes(key_bytes), precision, engine=engine)
        self.n_parties, self.extra_bits = int(n_parties), int(extra_bits)
        if self.features.size:
            limit = _power_of_two(math.floor(
                _product_bits(context, self.extra_bits) - 1 - math.log2(self.n_parties * self.n_rows)
                - _score_bits(context, self.n_rows, self.n_parties, self.extra_bits)))
            big = np.abs(self.features) >= limit
            if big.any():
                row, col = map(int, np.argwhere(big)[0])
                which = f"row {row}" + (f" (id {plain_class(self.ids[row])!r})" if self.ids is not None else "")
                raise FixedPointOverflowError(
                    f"party {self.role}, {self._column(col)}: value {self.features[row, col]:.3g} at {which} is "
                    f"outside the fixed-point range of a {context.public_key.key_bits}-bit key "
                    f"with {precision.frac_bits} fractional bits (|value| < {limit:.3g} for {self.n_rows} rows); "
                    "scale the column down")
        self.context = context

    def check_range(self, values, bound: float, what: str, n: int | None = None,
                    advice: str = "the training diverges (lower learning_rate) or the features need scaling down"
                    ) -> None:
        """Refuse to go on when a value this party is about to encrypt could make a sum wrap around Z_n.

        Each party holds its own contributions below public bounds
        (:func:`score_bound`, :func:`loss_part_bound`, :func:`prediction_bound`),
        so neither needs to know, or trust, the other's magnitudes.
        """
        worst = float(np.max(np.abs(values))) if np.size(values) else 0.0
        if math.isfinite(worst) and worst <= bound:
            return
        ctx = self._ctx()
        if not math.isfinite(worst):
            raise FixedPointOverflowError(f"party {self.role}: {what} are no longer finite numbers ({worst}); {advice}")
        batch = f" for a batch of {n} rows" if n else ""
        raise FixedPointOverflowError(
            f"party {self.role}: {what} reach {worst:.3g}, beyond the {bound:.3g} that the fixed-point range "
            f"of a {ctx.public_key.key_bits}-bit key with {ctx.frac_bits} fractional bits allows{batch}; {advice}")

    def _ctx(self) -> Context:
        if self.context is None:
            raise ProtocolError(f"party {self.role} has no public key yet")
        return self.context

    # -- Table 2, steps 3 and 4 --------------------------------------------------
    def masked_gradient(self, d: EncryptedVector, rows) -> EncryptedVector:
        """``[[X^T d]] + [[R]]`` with a fresh uniform mask ``R`` kept for the unmasking."""
        return self.mask_gradient(self.design(rows).T @ d)

    def mask_gradient(self, gradient: EncryptedVector) -> EncryptedVector:
        """``[[g + R]]`` for an encrypted gradient ``[[g]]``; ``R`` is kept for :meth:`apply_update`."""
        masked, mask = self._ctx().mask(gradient)
        self._pending_mask = (mask, masked.exponent)
        return masked

    def apply_update(self, residues, n: int, objective: Objective, penalty: Penalty, learning_rate: float
                     ) -> np.ndarray:
        """Unmask ``X^T d`` and take one step of this party's optimizer; returns the gradient used.

        ``learning_rate`` is this step's rate (the schedule's); the penalty's L2 part
        joins the gradient and its L1 part is a proximal step (:func:`~vfl.parties.linear.optim.penalised_step`).
        """
        self.params, gradient = penalised_step(self.optimizer, self.params, self.data_gradient(residues, n, objective),
                                               self.penalised, penalty, learning_rate)
        return gradient

    def gradient(self, residues, n: int, objective: Objective, penalty: Penalty, at=None) -> np.ndarray:
        """This party's block of the objective's gradient at ``at`` (default: the weights), L2 penalty included.

        Run after a pass at a search direction (``at=p``), the same formula gives this
        block of the product ``H p``.  (L1 has no gradient: conjugate gradient takes L2.)
        """
        at = self.params if at is None else at
        return self.data_gradient(residues, n, objective) + penalty.alpha * (1 - penalty.l1_ratio) * self.penalised * at

    def data_gradient(self, residues, n: int, objective: Objective) -> np.ndarray:
        """Unmask the ``X^T d`` that C returned: the data part of the gradient, ``2a X^T d / n``."""
        if self._pending_mask is None:
            raise ProtocolError(f"party {self.role} received a gradient it did not ask for")
        pending, self._pending_mask = self._pending_mask, None  # a mask is used exactly once
        if isinstance(pending, packed.SlotMasks):
            xtd = pending.unmask(self._ctx(), residues, what=f"party {self.role} gradient")
        else:
            mask, exponent = pending
            xtd = self._ctx().unmask(residues, mask, exponent, what=f"party {self.role} gradient")
        return objective.grad_scale * xtd / n

    # -- packed ciphertexts (see vfl.parties.linear.packed) -------------------------------------
    def check_declared_features(self, feature_bound: float) -> None:
        """Refuse features beyond the declared ``feature_bound`` the packed slots are sized for."""
        big = np.abs(self.features) > feature_bound
        if big.any():
            row, col = map(int, np.argwhere(big)[0])
            raise FixedPointOverflowError(
                f"party {self.role}, {self._column(col)}: value {self.features[row, col]:.6g} at row {row} is "
                f"beyond the declared feature_bound {feature_bound:g} that the packed slots are sized for; "
                "raise feature_bound or scale the column down")

    def packed_masked_gradient(self, d: EncryptedVector, rows, layout) -> EncryptedVector:
        """``[[X^T d]]`` from the packed ``[[d]]``, every slot position masked (the masks kept)."""
        return self._mask_packed_gradient(packed.products(self._ctx(), d, self.design(rows).T, layout), layout)

    def _mask_packed_gradient(self, products: EncryptedVector, layout) -> EncryptedVector:
        masked, masks = packed.mask_products(self._ctx(), products, layout)
        self._pending_mask = masks
        return masked

    # -- checkpoints -------------------------------------------------------------
    def state(self) -> dict:
        state = {"params": self.params.tolist(), "initial": self.initial_params.tolist(),
                 "optimizer": self.optimizer.state()}
        if self.directions.started:
            state["cg"] = self.directions.state()
        if self.snapshots:
            state["snapshots"] = {str(e): p for e, p in self.snapshots.items()}
        if self.share is not None:
            state["share"] = self.share.state()
        return state

    def load_state(self, state: dict) -> None:
        params = np.asarray(state["params"], dtype=np.float64)
        if params.shape != self.params.shape:
            raise DataError(f"party {self.role}: saved state has {params.size} weights, data has {self.params.size}")
        self.params = params
        if "initial" in state:      # where the run started (a resumed run's shard records it as the whole run's)
            self.initial_params = np.asarray(state["initial"], dtype=np.float64).reshape(params.shape)
        self.snapshots = {int(e): list(p) for e, p in state.get("snapshots", {}).items()}
        self.directions = Directions.from_state(state.get("cg"))
        self.share = WeightShare.from_state(state["share"]) if "share" in state else None
        if self.share is not None and len(self.share) != self.params.size:
            raise DataError(f"party {self.role}: saved share has {len(self.share)} values, data has {self.params.size}")
        if "optimizer" in state:
            try:
                self.optimizer.load_state(state["optimizer"])
            except (KeyError, TypeError, ValueError) as exc:
                raise DataError(f"party {self.role}: saved optimizer state does not fit: {exc}") from None


def _range_bits(context: Context) -> int:
    """``R`` with ``2^R <= max_int``: the magnitude any encoded integer may reach."""
    return int(context.public_key.max_int).bit_length() - 1


#: Row weights (class_weight, sample_weight) are at most 2^WEIGHT_BITS; a weighted residual carries one
#: more fixed-point scale, so weights cost ``frac_bits + WEIGHT_BITS`` bits of the range.
WEIGHT_BITS = 16


def weight_extra_bits(frac_bits: int) -> int:
    """The range bits a weighted residual takes beyond an unweighted one (one more fixed-point scale, the weight)."""
    return frac_bits + WEIGHT_BITS


def _product_bits(context: Context, extra_bits: int = 0) -> int:
    """Bits of real magnitude a value carried at twice the fractional bits (a product) may use.

    ``extra_bits`` is what row weights take (:func:`weight_extra_bits`): a weighted
    residual carries one more fixed-point scale and a factor up to ``2^WEIGHT_BITS``.
    """
    return _range_bits(context) - 2 * context.frac_bits - extra_bits


def _power_of_two(bits: int) -> float:
    """``2^bits`` as a float, or infinity when no double is that large (every finite value is below it)."""
    return math.ldexp(1.0, bits) if bits < 1024 else math.inf


def _score_bits(context: Context, n: int, n_parties: int = 2, extra_bits: int = 0) -> int:
    return math.floor((_product_bits(context, extra_bits) - 4 - math.log2(3 * n * n_parties ** 2 / 4)) / 2)


def score_bound(context: Context, n: int, n_parties: int = 2, extra_bits: int = 0) -> float:
    """The largest share of a score each party may contribute in a batch of ``n`` rows.

    A public function of the key, the precision, the batch size and the number
    ``m`` of parties holding rows: ``S`` with ``3 n m^2 S^2 / 4 <= 2^(P-4)``, where
    ``2^P`` is the magnitude a value carried at ``2 * frac_bits`` may reach (for
    ``m = 2``, ``3 n S^2 <= 2^(P-4)``).  With ``|u_k| <= S`` at every feature party
    and ``|u_B - kappa y| <= S`` at B (with DP, also after adding its noise), every
    residual is below ``m S``.  The batch loss B assembles is the feature parties'
    ``a u_k . d`` (each below ``n m S^2 / 2``), B's ``a (u_B - kappa y - e) . U``
    (below ``3 n K S^2 / 2``) and every party's own part (each held below
    ``2^(P-1) / m``, :func:`loss_part_bound`): in all under ``0.6 * 2^P``.  With the
    feature check of :meth:`FeatureParty.receive_public_key` (made for the largest
    batch, ``N`` rows), a gradient ``X^T d`` over ``n`` rows stays below
    ``sqrt(n/N) 2^(P-1) <= 2^P``.  So nothing the coordinator decrypts can have
    wrapped around Z_n — as long as every party runs these checks, as
    semi-honest parties do.
    """
    return _power_of_two(_score_bits(context, n, n_parties, extra_bits))


def loss_part_bound(context: Context, n_parties: int = 2, extra_bits: int = 0) -> float:
    """The largest own part (penalty, B's label terms) a party may add to the encrypted batch loss."""
    return _power_of_two(_product_bits(context, extra_bits) - 1) / n_parties


def prediction_bound(context: Context, n_parties: int = 2) -> float:
    """The largest partial score a party may contribute to an encrypted prediction (``m`` parties add up)."""
    return _power_of_two(_range_bits(context) - context.frac_bits - math.ceil(math.log2(n_parties)))


#: The name of :class:`DataParty` before the families had folders (it was the base of the label party too).
FeatureParty = DataParty
