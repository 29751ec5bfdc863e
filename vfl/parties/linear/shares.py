"""Additive shares of the weights, as integers: the arithmetic of the shared protocol (numbers only).

In the shared protocol (:mod:`vfl.protocols.linear.shared`) every data party's parameters
``w`` (its weights, then B's intercept) exist only as two integer shares at the
protocol's fixed-point precision ``f``: the party holds ``a``, the coordinator ``c``,
and ``w = (a + c) / 2^f``.  Shares are integers, not residues modulo anything:
no sum of them ever wraps, so each holder can scale its own share by a public
rational (the learning rate, ``2a / n``, the momentum) and round it, and the
rounded shares still add up to the scaled value within one unit per holder
(SecureML's local truncation, without its wrap-around failure).  What hides a
share is the other holder's randomness: the gradients that move the shares are
split with *statistical* masks (:func:`draw_masks`), 80 bits wider than any
gradient can be (:func:`gradient_bits`), plus :data:`GROWTH_BITS` of room.

Update rules (:class:`UpdateRule`): the first-order rules whose update is linear
in the gradient and the weights, so that each holder applies it to its own share
(``sgd``, ``momentum``, ``nesterov`` with an L2 penalty and any learning-rate
schedule).  Adagrad, RMSprop, Adam and L1 need squares, roots or signs of the
weights or gradients, which shares do not give without a comparison protocol.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from vfl.crypto import packing
from vfl.crypto.packing import STATISTICAL_BITS, SlotLayout

#: The update rules the shared protocol runs on shares.
SHARED_OPTIMIZERS = ("sgd", "momentum", "nesterov")
#: Penalties it runs on shares (the L2 part is linear in the weights; L1 is not).
SHARED_PENALTIES = ("l2", "none")
#: Bits of mask beyond the statistical 80: room for a run whose residuals outgrow the declared bound for a
#: batch before the coordinator's check of that batch's loss stops it (:meth:`SharedBounds.check_loss`).
GROWTH_BITS = 16
#: Guard bits above every masked slot of a packed pass, which the coordinator checks are clear.
GUARD_BITS = 1
#: Largest row weight (``vfl.parties.linear.data_party.WEIGHT_BITS``): weighted residuals are at most this times larger.
WEIGHT_BITS = 16


def to_fixed(values, frac_bits: int) -> list[int]:
    """Exact integers ``round(v * 2^frac_bits)`` of floats (every float is a dyadic rational)."""
    return [_round(Fraction(float(v)) * (1 << frac_bits)) for v in np.ravel(values)]


def from_fixed(values, frac_bits: int) -> np.ndarray:
    """Floats ``v / 2^frac_bits`` of integers, each correctly rounded."""
    return np.array([float(Fraction(int(v), 1 << frac_bits)) for v in values], dtype=np.float64)


def _round(x: Fraction) -> int:
    """The nearest integer (halves up): every holder rounds alike."""
    return math.floor(x + Fraction(1, 2))


def draw_masks(count: int, value_bits: int) -> list[int]:
    """``count`` masks uniform in ``[0, 2^(value_bits + 1 + 80 + GROWTH_BITS))``, from the CSPRNG.

    A value ``|v| < 2^value_bits`` sent as ``v + 2^value_bits + r`` is then within
    statistical distance ``2^-(80 + GROWTH_BITS)`` of any other value in range
    (``2^(value_bits + 1)`` over the mask's range), and ``2^-80`` of a value up to
    ``2^GROWTH_BITS`` times the bound.
    """
    return [secrets.randbits(mask_bits(value_bits)) for _ in range(count)]


def mask_bits(value_bits: int) -> int:
    """The width of a gradient's mask: ``value_bits + 1 + 80 + GROWTH_BITS``."""
    return value_bits + 1 + STATISTICAL_BITS + GROWTH_BITS


def bound_bits(bound: float) -> int:
    """The least ``b`` with ``bound <= 2^b``."""
    bits = math.ceil(math.log2(bound))
    return bits + 1 if math.ldexp(1.0, bits) < bound else bits


@dataclass(frozen=True)
class SharedBounds:
    """The public bounds of one pass: where the residual and the gradient sit, and how wide their masks are.

    Every holder computes the same values from public settings: the fixed-point
    precision ``frac_bits``, the rows ``n`` of the pass, the number ``parties`` of
    data parties, the declared ``feature_bound`` on ``|x|`` and ``score_bound`` on each
    party's share of a score (so ``|z - kappa y| <= parties * score_bound``), and
    whether B weighs rows (weights up to ``2^16``).

    Attributes
    ----------
    residual_exponent : int
        The residual ``[[d]]`` carries ``2 f`` fractional bits (``3 f`` weighted: the
        weights are encoded too); the gradient ``X^T [[d]]`` one ``f`` more.
    value_bits : int
        Every gradient value, at its exponent, is below ``2^value_bits``.
    """

    frac_bits: int
    n: int
    parties: int
    feature_bound: float
    score_bound: float
    weighted: bool = False

    @property
    def residual_exponent(self) -> int:
        return (3 if self.weighted else 2) * self.frac_bits

    @property
    def gradient_exponent(self) -> int:
        return self.residual_exponent + self.frac_bits

    @property
    def loss_exponent(self) -> int:
        """The loss's parts, ``w . X^T d`` and ``y . d``: the gradient's exponent plus the weights' ``f``."""
        return self.gradient_exponent + self.frac_bits

    @property
    def residual_limit(self) -> float:
        """``|d| <= parties * score_bound`` (times the largest row weight, weighted)."""
        return self.parties * self.score_bound * (2.0 ** WEIGHT_BITS if self.weighted else 1.0)

    @property
    def value_bits(self) -> int:
        """``|X^T d| <= n * feature_bound * residual_limit``, at the gradient's exponent."""
        return (self.gradient_exponent + math.ceil(math.log2(max(2, self.n))) + bound_bits(self.feature_bound)
                + bound_bits(self.score_bound) + math.ceil(math.log2(max(2, self.parties)))
                + (WEIGHT_BITS if self.weighted else 0) + 1)

    @property
    def offset(self) -> int:
        """``2^value_bits``: added with the mask, so the masked value is positive."""
        return 1 << self.value_bits

    @property
    def masked_limit(self) -> int:
        """Every masked gradient the coordinator decrypts is below this (``2^(value_bits + 1)`` plus the mask)."""
        return (1 << (self.value_bits + 1)) + (1 << mask_bits(self.value_bits))

    def layout(self, plaintext_bits: int) -> SlotLayout:
        """The slots of a packed pass: ``[[u]]``, ``[[d]]`` and the products ``X^T [[d]]`` (``2s - 1`` positions).

        Every product position holds a sum of ``n`` terms ``x d`` (a gradient, or a cross
        term of two slots), below ``2^value_bits`` while every residual keeps
        :attr:`residual_limit`; the slots leave :data:`GROWTH_BITS` of room above that,
        80 bits of mask above the room (so the mask of a gradient value is
        :func:`mask_bits` wide, as unpacked) and :data:`GUARD_BITS` above the mask.
        """
        return packing.layout_for(plaintext_bits, self.value_bits + GROWTH_BITS, product=True,
                                  guard_bits=GUARD_BITS)

    def gradient_scale(self, grad_scale: float) -> Fraction:
        """``k``: an integer share ``G`` of ``X^T d`` is ``k G`` in weight units (``2a/n X^T d``, at ``f`` bits)."""
        return Fraction(grad_scale) / self.n / (1 << (self.gradient_exponent - self.frac_bits))

    def loss_within(self, residual_squares: float) -> bool:
        """Whether ``sum s (z - kappa y)^2`` keeps every residual ``|s (z - kappa y)|`` within :attr:`residual_limit`.

        ``|s_i r_i| <= sqrt(s_max s_i r_i^2) <= sqrt(s_max sum s r^2)`` with ``s_max`` the
        largest row weight (1 unweighted).
        """
        largest_weight = 2.0 ** WEIGHT_BITS if self.weighted else 1.0
        return math.isfinite(residual_squares) and math.sqrt(max(0.0, residual_squares) * largest_weight) \
            <= self.residual_limit


@dataclass(frozen=True)
class UpdateRule:
    """A linear update rule, applied by each holder to its own share.

    ``optimizer`` is ``"sgd"``, ``"momentum"`` or ``"nesterov"`` (as
    :class:`vfl.parties.linear.optim.Optimizer`: ``v <- mu v - eta g``, then ``w <- w + v``, or
    ``w <- w + mu v - eta g`` for Nesterov); ``alpha`` the L2 penalty, which joins the
    gradient as ``alpha w`` on the ``penalised`` coordinates (never the intercept).
    """

    optimizer: str = "sgd"
    momentum: float = 0.9
    alpha: float = 0.0

    def __post_init__(self):
        if self.optimizer not in SHARED_OPTIMIZERS:
            raise ValueError(f"the shared protocol's update rules are {SHARED_OPTIMIZERS}, got {self.optimizer!r}")


class WeightShare:
    """One holder's additive share of one party's parameters, and of its optimizer's velocity.

    Parameters
    ----------
    values : list of int
        The share of each parameter at ``2^frac_bits`` (weights, then the intercept).
    penalised : sequence of bool
        Which parameters the L2 penalty applies to (not the intercept).
    """

    def __init__(self, values, penalised, velocity=None):
        self.values = [int(v) for v in values]
        self.penalised = [bool(p) for p in penalised]
        if len(self.penalised) != len(self.values):
            raise ValueError(f"{len(self.values)} shares and {len(self.penalised)} penalty flags")
        self.velocity = [0] * len(self.values) if velocity is None else [int(v) for v in velocity]
        #: the values after each epoch, to restore the best one (early stopping)
        self.snapshots: dict[int, list[int]] = {}

    @classmethod
    def zeros(cls, penalised) -> "WeightShare":
        return cls([0] * len(penalised), penalised)

    def __len__(self) -> int:
        return len(self.values)

    def step(self, gradient, scale: Fraction, rule: UpdateRule, eta: float) -> None:
        """One update with this holder's share ``gradient`` of ``X^T d`` (integers; ``scale`` makes weight units).

        Each holder rounds its own result: the two shares then move by the exact
        update within one unit (``2^-f``) each.
        """
        if len(gradient) != len(self.values):
            raise ValueError(f"a gradient share of {len(gradient)} values for {len(self.values)} parameters")
        eta, alpha, mu = Fraction(eta), Fraction(rule.alpha), Fraction(rule.momentum)
        grads = [scale * int(g) + (alpha * w if pen else 0)
                 for g, w, pen in zip(gradient, self.values, self.penalised)]
        if rule.optimizer == "sgd":
            self.values = [w - _round(eta * g) for w, g in zip(self.values, grads)]
            return
        self.velocity = [_round(mu * v - eta * g) for v, g in zip(self.velocity, grads)]
        if rule.optimizer == "momentum":
            self.values = [w + v for w, v in zip(self.values, self.velocity)]
        else:       # nesterov
            self.values = [w + _round(mu * v - eta * g) for w, v, g in zip(self.values, self.velocity, grads)]

    def penalty_terms(self, coefficient: Fraction) -> tuple[int, list[int]]:
        """For the loss's L2 term ``K ||a + c||^2``: this holder's ``K ||a||^2`` and the exponents ``2 K a`` of the
        other's encrypted share (its ``K ||c||^2`` the other adds itself), rounded."""
        own = sum(v * v for v, p in zip(self.values, self.penalised) if p)
        return (_round(coefficient * own),
                [_round(2 * coefficient * v) if p else 0 for v, p in zip(self.values, self.penalised)])

    def snapshot(self, epoch: int) -> None:
        self.snapshots[int(epoch)] = list(self.values)

    def restore(self, epoch: int) -> None:
        self.values = list(self.snapshots[int(epoch)])

    def state(self) -> dict:
        state = {"values": [str(v) for v in self.values], "velocity": [str(v) for v in self.velocity],
                 "penalised": list(self.penalised)}
        if self.snapshots:
            state["snapshots"] = {str(e): [str(v) for v in vs] for e, vs in self.snapshots.items()}
        return state

    @classmethod
    def from_state(cls, state: dict) -> "WeightShare":
        """A share from :meth:`state` (integers as decimal strings: JSON readers need not take big numbers).

        Only ``values`` is needed (a model shard keeps no more): the others default
        to every parameter penalised and no velocity.
        """
        values = [int(v) for v in state["values"]]
        share = cls(values, state.get("penalised", [True] * len(values)),
                    [int(v) for v in state["velocity"]] if "velocity" in state else None)
        share.snapshots = {int(e): [int(v) for v in vs] for e, vs in state.get("snapshots", {}).items()}
        return share
