"""What each party computes in the shared protocol: its share of the weights, and products under C's key.

The protocol (:mod:`vfl.protocols.linear.shared`) keeps every data party's parameters as
two integer shares (:mod:`vfl.parties.linear.shares`): ``a`` at the party, ``c`` at the
coordinator C.  Every product that crosses between them runs under C's Paillier
key, and C decrypts only masked values and the batch loss.  One batch, with
``[[.]]`` encryption under C's key and ``f`` the fixed-point precision::

    C -> each party P     [[c_P]]                                    C's share, encrypted
    P                     [[u_P]] = X_P [[c_P]] + X_P a_P            = [[X_P w_P]], nobody holds it
    B                     [[d]] = sum_P [[u_P]] - kappa y (times B's row weights), re-randomized
    P -> C                [[G_P + 2^V + rho_P]], G_P = X_P^T d       C keeps G_P + rho_P, P keeps -rho_P
    P -> B -> C           [[a_P . G_P - rho_P . c_P + penalty]]      C adds c_P . (G_P + rho_P): the loss
    P and C               a_P, c_P <- the update rule on their shares of G_P

Packed (``settings.packed``, :meth:`SharedBounds.layout`): ``[[u_P]]`` and ``[[d]]`` hold ``s``
rows per ciphertext (``X_P [[c_P]]`` from ``[[c_P 2^(j w)]]``, ``j < s``, and ``X_P a_P``
packed as one exact integer per ciphertext); ``X_P^T [[d]]`` is Yang's packed
product (:func:`vfl.crypto.packing.slot_products`) with every position masked;
C checks every position's guard bit, keeps ``G_P + rho_P`` from position ``s - 1``
and returns it encrypted afresh, from which P forms ``[[G_P]]`` for its loss share.

:class:`DataShares` is a data party's side (feature parties and the label party
alike, B with its labels and row weights), :class:`CoordinatorShares` C's.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from vfl.crypto import EncryptedVector, packing
from vfl.crypto.packing import SlotLayout
from vfl.errors import FixedPointOverflowError, ProtocolError
from vfl.parties.linear import packed
from vfl.parties.linear.data_party import FeatureParty
from vfl.parties.objectives import Objective
from vfl.parties.linear.shares import (GUARD_BITS, SharedBounds, UpdateRule, WeightShare, draw_masks, from_fixed,
                                       to_fixed)


def penalty_coefficient(alpha: float, n: int, objective: Objective, bounds: SharedBounds) -> Fraction:
    """``K``: the loss's ``(alpha n / 2) ||w||^2`` over ``a`` (the loss sum is ``nL / a``), at the loss's exponent.

    ``||w||^2 = ||a + c||^2 / 2^(2f)``, so ``K = alpha n / (2 a) * 2^(e_L - 2f)``.
    """
    return Fraction(alpha) * n / (2 * Fraction(objective.a)) * (1 << (bounds.loss_exponent - 2 * bounds.frac_bits))


def _object_product(matrix, values) -> list[int]:
    """``matrix @ values`` in exact integers (Python ints; the matrix's rows are encoded features)."""
    m = np.asarray(matrix, dtype=object)
    if m.size == 0:
        return [0] * m.shape[0]
    return [int(v) for v in m @ np.array([int(v) for v in values], dtype=object)]


def _signed(residue: int, context) -> int:
    """A decrypted residue as the signed integer it encodes; a residue in the middle third of Z_n wrapped."""
    pk = context.public_key
    r = int(residue)
    if r <= pk.max_int:
        return r
    if r >= int(pk.n) - pk.max_int:
        return r - int(pk.n)
    raise FixedPointOverflowError("a sum under encryption overflowed the plaintext space")


def encrypt_integers(context, values, exponent: int) -> EncryptedVector:
    """A fresh encryption of exact integers (shares, masks) that stand for ``v / 2^exponent``.

    Raises :class:`~vfl.errors.FixedPointOverflowError` for an integer outside ``(-n/3, n/3)``: its sums
    could wrap around Z_n.
    """
    values = [int(v) for v in values]
    limit = context.public_key.max_int
    if any(abs(v) > limit for v in values):
        raise FixedPointOverflowError(f"a share or mask of {max(abs(v) for v in values).bit_length()} bits is "
                                      f"beyond the plaintext range of a {context.public_key.key_bits}-bit key")
    return EncryptedVector(context, context.engine.encrypt(context.public_key, values), exponent, fresh=True)


def combine(vector: EncryptedVector, columns, exponent: int) -> EncryptedVector:
    """``[[columns @ v]]`` for integer ``columns`` (one result per column), at the given exponent (not fresh).

    ``columns`` is an int64 array (the engine's fast path) or lists of integers.
    """
    if not (isinstance(columns, np.ndarray) and columns.dtype == np.int64):
        columns = [[int(e) for e in column] for column in columns]
    out = vector.context.engine.lincomb(vector.context.public_key, vector.ciphertexts, columns)
    return EncryptedVector(vector.context, out, exponent)


class DataShares:
    """A data party's side of the shared protocol; its share lives on the party (``party.share``).

    Parameters
    ----------
    party : FeatureParty
        A feature party or the label party, holding the public key.
    """

    def __init__(self, party: FeatureParty):
        self.party = party
        self._pending = None

    @property
    def context(self):
        return self.party._ctx()

    @property
    def share(self) -> WeightShare:
        if self.party.share is None:
            raise ProtocolError(f"party {self.party.role} has no share of its weights")
        return self.party.share

    def begin(self) -> None:
        """Its share is its whole start (``party.params``), to ``2^-f``; C's starts at zero.

        The start the run reproduces is the rounded one (``initial_params``).
        """
        f = self.context.frac_bits
        values = to_fixed(self.party.params, f)
        self.party.share = WeightShare(values, self.party.penalised > 0)
        self.party.params = from_fixed(values, f)
        self.party.initial_params = self.party.params.copy()

    # -- the forward pass: [[u]] = X [[c]] + X a ---------------------------------------------
    def _encoded(self, rows=None, features=None):
        return self.context.encode_matrix(self.party.design(rows, features), what=f"party {self.party.role} feature")

    def partial_scores(self, c: EncryptedVector, rows=None, features=None) -> EncryptedVector:
        """``[[X w]] = X [[c]] + X a`` at ``2f`` bits; not re-randomized (the label party's own part)."""
        self._check_share(c)
        x = self._encoded(rows, features)
        encrypted = combine(c, x, 2 * c.exponent)
        return EncryptedVector(self.context, self.context.engine.add_plain(
            self.context.public_key, encrypted.ciphertexts, _object_product(x, self.share.values)), encrypted.exponent)

    def scores(self, c: EncryptedVector, rows=None, features=None) -> EncryptedVector:
        """``[[X w]]`` to send: ``X [[c]]`` plus a fresh encryption of ``X a`` (which re-randomizes it)."""
        self._check_share(c)
        x = self._encoded(rows, features)
        encrypted = combine(c, x, 2 * c.exponent)
        out = encrypted + encrypt_integers(self.context, _object_product(x, self.share.values), encrypted.exponent)
        out.fresh = True
        return out

    def _check_share(self, c: EncryptedVector) -> None:
        if len(c) != len(self.share) or c.exponent != self.context.frac_bits:
            raise ProtocolError(f"party {self.party.role}: the coordinator's share of its weights has {len(c)} values "
                                f"at exponent {c.exponent}, not {len(self.share)} at {self.context.frac_bits}")

    # -- the backward pass: C's share of X^T d, masked ------------------------------------
    def gradient_share(self, d: EncryptedVector, bounds: SharedBounds, rows=None, features=None,
                       extra_columns=None) -> tuple[EncryptedVector, EncryptedVector | None]:
        """``[[G + 2^V + rho]]`` for C, with ``G = X^T d``; this party's share of ``G`` is ``-rho``.

        ``extra_columns`` (integer exponents) ride in the same multi-exponentiation;
        their products (exponent ``f`` above ``d``'s) are returned beside it.
        """
        if d.exponent != bounds.residual_exponent:
            raise ProtocolError(f"party {self.party.role}: the residual arrived at exponent {d.exponent}, not "
                                f"{bounds.residual_exponent}")
        own = self.party.params.size
        products = combine(d, self._columns(rows, features, extra_columns), bounds.gradient_exponent)
        gradient = products[:own]
        masks = draw_masks(own, bounds.value_bits)
        masked = gradient + encrypt_integers(self.context, [bounds.offset + r for r in masks], gradient.exponent)
        masked.fresh = True             # the fresh encryption of the masks re-randomizes the sum
        self._pending = (gradient, masks)
        return masked, (products[own:] if extra_columns else None)

    def _columns(self, rows=None, features=None, extra_columns=None):
        """``X^T`` (one row per parameter) and the ``extra_columns`` below it: int64 where they fit, else lists."""
        x = self._encoded(rows, features)
        if isinstance(x, np.ndarray) and all(isinstance(c, np.ndarray) for c in extra_columns or []):
            return np.vstack([x.T, *(extra_columns or [])]) if extra_columns else np.ascontiguousarray(x.T)
        columns = [list(map(int, row)) for row in np.asarray(x, dtype=object).T]
        return columns + [list(map(int, c)) for c in (extra_columns or [])]

    # -- packed passes: s rows per ciphertext ---------------------------------------------
    def _packed_forward(self, c: EncryptedVector, layout: SlotLayout, rows=None, features=None):
        """``X [[c]]`` packed ``s`` rows per ciphertext (at ``2f``), and ``X a`` (exact integers, zero-padded).

        Row ``i s + j`` of ``X`` raises ``[[c 2^(j w)]]``: one multi-exponentiation of ``s``
        times the parameters with the short feature exponents per packed ciphertext.
        """
        self._check_share(c)
        x = self._encoded(rows, features)
        s, w = layout.slots, layout.slot_bits
        n, p = len(x), len(self.share)
        pad = layout.ciphertexts(n) * s - n
        engine, key = self.context.engine, self.context.public_key
        shifted = list(c.ciphertexts) + engine.mul_plain(key, list(c.ciphertexts) * (s - 1),
                                                         [1 << (j * w) for j in range(1, s) for _ in range(p)])
        if isinstance(x, np.ndarray):
            exponents = np.vstack([x, np.zeros((pad, p), dtype=np.int64)]).reshape(-1, s * p)
        else:
            rows_ = [list(map(int, r)) for r in x] + [[0] * p] * pad
            exponents = [sum(rows_[i:i + s], []) for i in range(0, len(rows_), s)]
        encrypted = combine(EncryptedVector(self.context, shifted, c.exponent), exponents, 2 * c.exponent)
        return encrypted, _object_product(x, self.share.values) + [0] * pad

    def packed_scores(self, c: EncryptedVector, layout: SlotLayout, rows=None, features=None) -> EncryptedVector:
        """``[[X w]]`` packed: ``X [[c]]`` plus a fresh encryption of ``X a`` packed (which re-randomizes it)."""
        encrypted, plain = self._packed_forward(c, layout, rows, features)
        out = encrypted + encrypt_integers(self.context, packing.pack_exact(plain, layout), encrypted.exponent)
        out.fresh = True
        return out

    def packed_residual(self, c: EncryptedVector, scores: list[EncryptedVector], objective: Objective,
                        layout: SlotLayout, rows=None, features=None, labels=None) -> EncryptedVector:
        """The label party's ``[[d]] = sum_k [[u_k]] + X [[c]] + pack(X a - kappa y)``, packed, re-randomized."""
        y = self.party.labels[rows] if labels is None else labels
        total, plain = self._packed_forward(c, layout, rows, features)
        for other in scores:
            if other.exponent != total.exponent or len(other) != len(total):
                raise ProtocolError(f"party {self.party.role}: a feature party's packed scores have {len(other)} "
                                    f"ciphertexts at exponent {other.exponent}, not {len(total)} at {total.exponent}")
            total = total + other
        label = self.context.encode(-objective.kappa * np.asarray(y, dtype=np.float64), total.exponent,
                                    what=f"party {self.party.role} label")
        plain = [int(u) + int(k) for u, k in zip(plain, label)] + plain[len(label):]
        total = EncryptedVector(self.context, self.context.engine.add_plain(
            self.context.public_key, total.ciphertexts, packing.pack_exact(plain, layout)), total.exponent)
        return total.rerandomize()

    def packed_gradient_share(self, d: EncryptedVector, bounds: SharedBounds, layout: SlotLayout, rows=None,
                              features=None, extra_columns=None) -> EncryptedVector:
        """``[[X^T d]]`` (and the ``extra_columns``' products) from the packed ``[[d]]``, every position masked.

        Position ``s - 1`` of each holds ``G + 2^V' + rho`` (``V'`` the layout's value
        bits) for C; this party keeps ``rho`` until C returns ``[[G + rho]]``
        (:meth:`take_packed_gradient`).
        """
        if d.exponent != bounds.residual_exponent:
            raise ProtocolError(f"party {self.party.role}: the residual arrived at exponent {d.exponent}, not "
                                f"{bounds.residual_exponent}")
        products = packing.slot_products(self.context.public_key, self.context.engine, d.ciphertexts,
                                         self._columns(rows, features, extra_columns), layout)
        masked, masks = packed.mask_products(self.context,
                                             EncryptedVector(self.context, products, bounds.gradient_exponent),
                                             layout)
        self._pending = (None, masks.masks)
        return masked

    def take_packed_gradient(self, returned: EncryptedVector, bounds: SharedBounds) -> EncryptedVector | None:
        """From C's ``[[G + rho]]``: ``[[G]]`` for the loss share (this party's share stays ``-rho``).

        Returns the products of the extra columns, ``[[e . d]]``, or None.
        """
        if self._pending is None or self._pending[0] is not None:
            raise ProtocolError(f"party {self.party.role} got its packed gradient back before sending it")
        _, masks = self._pending
        own = len(self.share)
        if len(returned) != len(masks) or returned.exponent != bounds.gradient_exponent:
            raise ProtocolError(f"party {self.party.role}: the coordinator returned {len(returned)} values at "
                                f"exponent {returned.exponent}, not {len(masks)} at {bounds.gradient_exponent}")
        values = EncryptedVector(self.context, self.context.engine.add_plain(
            self.context.public_key, returned.ciphertexts, [-r for r in masks]), returned.exponent)
        self._pending = (values[:own], masks[:own])
        return values[own:] if len(masks) > own else None

    def loss_share(self, c: EncryptedVector, bounds: SharedBounds, penalty: Fraction) -> EncryptedVector:
        """``[[a . G - rho . c + K (||a||^2 + 2 a . c)]]`` at the loss's exponent (not re-randomized).

        With C's part ``c . (G + rho) + K ||c||^2`` it sums to ``w . X^T d + K ||w||^2``
        (``w`` the parameters at ``2^f``, ``K`` from :func:`penalty_coefficient`).
        """
        if self._pending is None:
            raise ProtocolError(f"party {self.party.role} was asked for a loss share before its gradient")
        gradient, masks = self._pending
        own, cross = self.share.penalty_terms(penalty)
        exponent = bounds.loss_exponent
        total = combine(gradient, [self.share.values], exponent)
        total = total + combine(c, [[x - r for x, r in zip(cross, masks)]], exponent)
        return EncryptedVector(self.context, self.context.engine.add_plain(
            self.context.public_key, total.ciphertexts, [own]), exponent)

    def update(self, bounds: SharedBounds, objective: Objective, rule: UpdateRule, eta: float) -> None:
        """This party's share ``-rho`` of the gradient moves its share of the weights."""
        if self._pending is None:
            raise ProtocolError(f"party {self.party.role} has no gradient share to update with")
        _, masks = self._pending
        self._pending = None
        self.share.step([-r for r in masks], bounds.gradient_scale(objective.grad_scale), rule, eta)

    def forget(self) -> None:
        """Drop the pending pass (a validation pass updates nothing)."""
        self._pending = None

    # -- the label party --------------------------------------------------------------
    def residual(self, scores: list[EncryptedVector], own: EncryptedVector, objective: Objective, rows=None,
                 labels=None, weights=None) -> EncryptedVector:
        """``[[d]] = sum_k [[u_k]] + [[u_B]] - kappa y`` (times the row weights ``s``), re-randomized."""
        y = self.party.labels[rows] if labels is None else labels
        total = own
        for other in scores:
            if other.exponent != own.exponent or len(other) != len(own):
                raise ProtocolError(f"party {self.party.role}: a feature party's scores have {len(other)} values at "
                                    f"exponent {other.exponent}, not {len(own)} at {own.exponent}")
            total = total + other
        total = total - objective.kappa * y
        if weights is not None:
            total = total * weights
        return total.rerandomize()

    def label_column(self, objective: Objective, rows=None, labels=None, bound: float | None = None) -> np.ndarray:
        """The exponents ``-kappa y`` (at ``f`` bits) of the loss's label term ``-kappa y . d``.

        With ``bound`` (packed: the label term rides in slots sized for ``|x| <= feature_bound``)
        a ``|kappa y|`` beyond it is refused, naming the party and the row.
        """
        y = self.party.labels[rows] if labels is None else labels
        if bound is not None:
            packed.check_declared(self.party.role, objective.kappa * np.asarray(y, dtype=np.float64), bound,
                                  "label (times the objective's kappa)", setting="feature_bound",
                                  advice="scale the label down, or set packing=False")
        return self.context.encode_matrix(-objective.kappa * np.asarray(y, dtype=np.float64)[None, :],
                                          what=f"party {self.party.role} label")[0]

    def label_constant(self, objective: Objective, rows=None, labels=None, weights=None) -> float:
        """``sum s (c(y) - a kappa^2 y^2) / a``: the loss's terms in the labels alone, in plaintext."""
        y = np.asarray(self.party.labels[rows] if labels is None else labels, dtype=np.float64)
        s = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=np.float64)
        return float(np.sum(s * (objective.c(y) - objective.a * objective.kappa ** 2 * y * y))) / objective.a


class CoordinatorShares:
    """C's side of the shared protocol: its share of every data party's parameters.

    Parameters
    ----------
    context : Context
        C's, with the private key.
    """

    def __init__(self, context):
        self.context = context
        #: C's share of each data party's parameters, by party name
        self.shares: dict[str, WeightShare] = {}
        self._gradients: dict[str, list[int]] = {}

    def begin(self, penalised: dict[str, list[bool]]) -> None:
        """A fresh run: C's share of every party's parameters is zero."""
        self.shares = {name: WeightShare.zeros(flags) for name, flags in penalised.items()}

    def encrypted_share(self, name: str) -> EncryptedVector:
        """``[[c_P]]``: a fresh encryption of C's share of party ``name``'s parameters, at ``f`` bits."""
        return encrypt_integers(self.context, self.shares[name].values, self.context.frac_bits)

    def receive_gradient(self, name: str, masked: EncryptedVector, bounds: SharedBounds) -> None:
        """Decrypt ``G + 2^V + rho`` and keep ``G + rho``: C's share of party ``name``'s ``X^T d``.

        A decrypted value beyond the masked range means a gradient beyond its bound:
        the run stops before anything is computed from it.
        """
        if len(masked) != len(self.shares[name]) or masked.exponent != bounds.gradient_exponent:
            raise ProtocolError(f"coordinator: party {name} sent {len(masked)} masked gradient values at exponent "
                                f"{masked.exponent}, not {len(self.shares[name])} at {bounds.gradient_exponent}")
        values = [int(v) for v in self.context.decrypt_residues(masked)]
        if any(v >= bounds.masked_limit for v in values):
            raise FixedPointOverflowError(
                f"coordinator: party {name}'s gradient is beyond the range its mask hides (more than "
                f"{bounds.residual_limit:g} per residual): the training diverges (lower learning_rate), or the "
                "declared feature_bound or score_bound is too small for the data")
        self._gradients[name] = [v - bounds.offset for v in values]

    def receive_packed_gradient(self, name: str, masked: EncryptedVector, bounds: SharedBounds, layout: SlotLayout,
                                extra: int = 0) -> EncryptedVector:
        """Decrypt the packed ``G + 2^V' + rho`` (position ``s - 1``), keep ``G + rho``; return it encrypted afresh.

        Every position of every product must keep its guard bit clear (a slot that
        overflowed, or a borrow or carry into a neighbour, shows there): the run then
        stops before anything is computed from it.  ``extra`` more products (the label
        party's label term) are returned the same way, not kept.
        """
        own = len(self.shares[name])
        if len(masked) != own + extra or masked.exponent != bounds.gradient_exponent:
            raise ProtocolError(f"coordinator: party {name} sent {len(masked)} packed gradient values at exponent "
                                f"{masked.exponent}, not {own + extra} at {bounds.gradient_exponent}")
        try:
            values = [packing.guarded_position_value(r, layout, layout.slots - 1, GUARD_BITS) - layout.offset
                      for r in self.context.decrypt_residues(masked)]
        except FixedPointOverflowError as error:
            raise FixedPointOverflowError(
                f"coordinator: party {name}'s packed gradient overflowed its slots ({error}): the training diverges "
                "(lower learning_rate), or the declared feature_bound or score_bound is too small for the data") \
                from None
        self._gradients[name] = values[:own]
        return encrypt_integers(self.context, values, masked.exponent)

    def loss(self, encrypted: EncryptedVector, bounds: SharedBounds, objective: Objective,
             penalty: Fraction) -> float:
        """The batch's mean loss from the parties' summed share ``[[...]]`` and C's own part.

        Also checks that the loss keeps every residual within the bound the masks
        were sized for (:meth:`SharedBounds.loss_within`).
        """
        if len(encrypted) != 1 or encrypted.exponent != bounds.loss_exponent:
            raise ProtocolError(f"coordinator: the loss arrived as {len(encrypted)} value(s) at exponent "
                                f"{encrypted.exponent}, not one at {bounds.loss_exponent}")
        total = _signed(self.context.decrypt_residues(encrypted)[0], self.context)
        for name, share in self.shares.items():
            gradient = self._gradients[name]
            total += sum(c * g for c, g in zip(share.values, gradient)) + share.penalty_terms(penalty)[0]
        squares = float(Fraction(total, 1 << bounds.loss_exponent))
        if not bounds.loss_within(squares):
            raise FixedPointOverflowError(
                f"coordinator: the batch loss ({objective.a * squares / bounds.n:.4g}) says a residual is beyond the "
                f"{bounds.residual_limit:g} the masks are sized for: the training diverges (lower learning_rate), or "
                "raise score_bound")
        return objective.a * squares / bounds.n

    def update(self, bounds: SharedBounds, objective: Objective, rule: UpdateRule, eta: float) -> None:
        """C's share of each gradient moves its share of each party's parameters."""
        scale = bounds.gradient_scale(objective.grad_scale)
        for name, share in self.shares.items():
            share.step(self._gradients.pop(name), scale, rule, eta)

    def forget(self) -> None:
        self._gradients = {}

    def snapshot(self, epoch: int) -> None:
        for share in self.shares.values():
            share.snapshot(epoch)

    def restore(self, epoch: int) -> None:
        for share in self.shares.values():
            share.restore(epoch)

    def share_residues(self, name: str) -> list[int]:
        """C's share of party ``name``'s parameters as residues of Z_n (to reveal them to that party)."""
        n = int(self.context.public_key.n)
        return [v % n for v in self.shares[name].values]

    def state(self) -> dict:
        return {name: share.state() for name, share in self.shares.items()}

    def load_state(self, state: dict) -> None:
        self.shares = {name: WeightShare.from_state(s) for name, s in state.items()}


def reveal(party: FeatureParty, residues, context) -> np.ndarray:
    """The party's parameters from C's share (residues of Z_n) and its own: ``(a + c) / 2^f``."""
    share = party.share
    other = [_signed(r, context) for r in residues]
    if len(other) != len(share):
        raise ProtocolError(f"party {party.role}: the coordinator revealed {len(other)} shares for "
                            f"{len(share)} parameters")
    return from_fixed([a + c for a, c in zip(share.values, other)], context.frac_bits)


def whole(share: dict, other: dict, frac_bits: int) -> np.ndarray:
    """The parameters from both holders' shares (:meth:`WeightShare.state`): only whoever holds both can do this."""
    a, c = WeightShare.from_state(share).values, WeightShare.from_state(other).values
    if len(a) != len(c):
        raise ProtocolError(f"shares of {len(a)} and {len(c)} parameters do not add up")
    return from_fixed([x + y for x, y in zip(a, c)], frac_bits)


__all__ = ["CoordinatorShares", "DataShares", "combine", "encrypt_integers", "penalty_coefficient", "reveal",
           "whole"]
