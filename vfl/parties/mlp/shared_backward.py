"""A feature party's backward pass in shares: its gradients without the per-row gradient it would need.

A feature party's raw gradients (its bottom layers' and its block ``W`` of the
interactive layer) are linear in ``delta``, the gradient on the interactive
layer's pre-activation, with coefficients only the feature party knows (its
activations ``a_l``, their derivatives ``S_l``, its weights)::

    dW   = h^T delta                       h = a_m, the bottom's output
    Y_m  = delta W^T                       (the gradient on h: what plain split learning sends back)
    D_l  = Y_l * S_l                       dA_l = a_(l-1)^T D_l,   dc_l = sum of D_l's rows
    Y_(l-1) = D_l A_l^T

The label party holds ``delta``.  Here the two compute these products on
additive shares (:mod:`vfl.crypto.ring`), with the coordinator dealing the
Beaver triples: ``delta``, every ``Y_l`` and every ``D_l`` exist only as two
uniform shares, one at each party, and at the end the label party sends its
shares of the *gradients* (summed over the batch's rows), which the feature
party adds to its own.  So the feature party learns its own gradients, as it
does in Yang's linear regression, and never ``delta`` or ``Y_m`` row by row —
the vectors the label-leak attacks of Li et al. read.

Every product is one *round*: each party sends the openings of its factors and
receives the other's (:func:`plan` lists them; both parties and the dealer make
the same list from public shapes).  A bottom of ``m`` layers takes ``2m + 1``
rounds.  The feature party truncates as the first holder, the label party as
the second (:func:`vfl.crypto.ring.truncate`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vfl.crypto import ring
from vfl.parties.mlp.activations import derivative

FEATURE = "feature"
LABEL = "label"


@dataclass(frozen=True)
class Product:
    """One Beaver product of a round: its name, ``matmul`` or ``mul``, who holds the left factor, the shapes."""

    name: str
    operation: str
    left: str
    left_shape: tuple
    right_shape: tuple


def plan(rows: int, in_dim: int, bottom_sizes, units: int) -> list[list[Product]]:
    """The rounds of one batch's shared backward pass (public: rows, widths, units).

    Parameters
    ----------
    rows : int
        The batch's rows.
    in_dim : int
        The feature party's column count.
    bottom_sizes : tuple of int
        Its bottom layers' widths (``()``: its columns go straight into the interactive layer).
    units : int
        The interactive layer's width.
    """
    widths = [in_dim, *bottom_sizes]
    m, h = len(bottom_sizes), widths[-1]
    first = [Product("block", "matmul", FEATURE, (h, rows), (rows, units))]
    if m:
        first.append(Product(f"back{m}", "matmul", LABEL, (rows, units), (units, h)))
    rounds = [first]
    for layer in range(m, 0, -1):
        out, inp = widths[layer], widths[layer - 1]
        rounds.append([Product(f"act{layer}", "mul", LABEL, (rows, out), (rows, out))])
        products = [Product(f"weights{layer}", "matmul", FEATURE, (inp, rows), (rows, out))]
        if layer > 1:
            products.append(Product(f"back{layer - 1}", "matmul", LABEL, (rows, out), (out, inp)))
        rounds.append(products)
    return rounds


def product_shape(p: Product) -> tuple:
    """The shape of a product's result."""
    return (p.left_shape[0], p.right_shape[1]) if p.operation == "matmul" else tuple(p.left_shape)


def deal(rounds: list[list[Product]]) -> tuple[dict, dict]:
    """The dealer's triples for every product, by seeds (:func:`vfl.crypto.ring.deal_seeded`).

    Returns ``{name: (seed, share or None)}`` for the feature party, then for the label party: each
    side's seed, and the product's share in full for the side holding the right factor.
    """
    feature, label = {}, {}
    for products in rounds:
        for p in products:
            left_seed, right_seed, right_share = ring.deal_seeded(p.operation, p.left_shape, p.right_shape)
            left, right = (left_seed, None), (right_seed, right_share)
            feature[p.name], label[p.name] = (left, right) if p.left == FEATURE else (right, left)
    return feature, label


def halves(dealt: dict, rounds: list[list[Product]], side: str) -> dict:
    """This side's :class:`~vfl.crypto.ring.Half` of each product, expanded from what the dealer sent."""
    out = {}
    for products in rounds:
        for p in products:
            seed, share = dealt[p.name]
            mask_shape = p.left_shape if p.left == side else p.right_shape
            out[p.name] = ring.seeded_half(seed, mask_shape, product_shape(p), share)
    return out


def shares_from(products: list[Product], side: str, factors: dict, peer_openings: dict, halves: dict) -> dict:
    """This side's share of each product of a round, from its factors and the peer's openings."""
    out = {}
    for p in products:
        if p.left == side:
            out[p.name] = ring.left_share(p.operation, factors[p.name], peer_openings[p.name], halves[p.name])
        else:
            out[p.name] = ring.right_share(p.operation, peer_openings[p.name], halves[p.name])
    return out


def openings(products: list[Product], factors: dict, halves: dict) -> dict:
    """What this side sends for a round: each factor minus its mask."""
    return {p.name: ring.opening(factors[p.name], halves[p.name]) for p in products}


class FeatureSide:
    """The feature party's half of the shared backward pass of one batch.

    Parameters
    ----------
    acts : list of ndarray
        Its bottom's activations on the batch, ``[x, a_1, ..., a_m]``.
    bottom : list of (W, b)
        Its bottom layers.
    block : ndarray
        Its block of the interactive weights.
    activation : str
        The hidden activation.
    frac_bits : int
    """

    def __init__(self, acts, bottom, block, activation: str, frac_bits: int):
        self.f = frac_bits
        self.acts = [ring.encode(a, frac_bits) for a in acts]
        self.slopes = [None] + [ring.encode(derivative(activation, a, np.ones_like(a)), frac_bits) for a in acts[1:]]
        self.weights = [ring.encode(w, frac_bits) for w, _ in bottom]
        self.block = ring.encode(block, frac_bits)
        self.m = len(bottom)
        self.current = None
        self.grads: dict[str, np.ndarray] = {}

    def factors(self, products: list[Product]) -> dict:
        """The feature party's factor of each product of a round."""
        out = {}
        for p in products:
            kind, layer = p.name.rstrip("0123456789"), int(p.name[len(p.name.rstrip("0123456789")):] or 0)
            if kind == "block":
                out[p.name] = self.acts[-1].T
            elif kind == "back":
                out[p.name] = (self.block if layer == self.m else self.weights[layer]).T
            elif kind == "act":
                out[p.name] = self.slopes[layer]
            else:
                out[p.name] = self.acts[layer - 1].T
        return out

    def absorb(self, products: list[Product], shares: dict) -> None:
        """Take a round's shares: add the feature party's own local terms and truncate."""
        for p in products:
            kind, layer = p.name.rstrip("0123456789"), int(p.name[len(p.name.rstrip("0123456789")):] or 0)
            share = shares[p.name]
            if kind == "block":
                self.grads["block"] = ring.truncate(share, self.f, True)
            elif kind == "act":
                local = ring.apply("mul", self.current, self.slopes[layer])
                self.current = ring.truncate(ring.reduce(share + local), self.f, True)
                self.grads[f"intercept{layer}"] = ring.reduce(self.current.sum(axis=0))
            elif kind == "weights":
                local = ring.apply("matmul", self.acts[layer - 1].T, self.current)
                self.grads[p.name] = ring.truncate(ring.reduce(share + local), self.f, True)
        for p in products:
            if p.name.startswith("back"):
                layer = int(p.name[4:])
                local = (0 if layer == self.m else
                         ring.apply("matmul", self.current, self.weights[layer].T))
                self.current = ring.truncate(ring.reduce(shares[p.name] + local), self.f, True)

    def gradients(self, peer_shares: dict) -> tuple[list, np.ndarray]:
        """The raw gradients (sums over the rows): ``[(dA_l, dc_l), ...]`` and ``dW``, from both parties' shares."""
        def whole(name):
            return ring.decode(ring.reduce(self.grads[name] + peer_shares[name]), self.f)

        bottom = [(whole(f"weights{layer}"), whole(f"intercept{layer}")) for layer in range(1, self.m + 1)]
        return bottom, whole("block")


class LabelSide:
    """The label party's half of the shared backward pass of one batch, for one feature party.

    Parameters
    ----------
    delta : ndarray (rows, units)
        The gradient on the interactive layer's pre-activation (raw: sums, no scaling).
    frac_bits : int
    """

    def __init__(self, delta, frac_bits: int, depth: int):
        self.f = frac_bits
        self.delta = ring.encode(delta, frac_bits)
        self.m = depth
        self.current = None
        self.grads: dict[str, np.ndarray] = {}

    def factors(self, products: list[Product]) -> dict:
        """The label party's factor of each product of a round: ``delta``, then its shares of ``Y`` and ``D``."""
        out = {}
        for p in products:
            if p.name == "block" or p.name == f"back{self.m}" and self.current is None:
                out[p.name] = self.delta
            else:
                out[p.name] = self.current
        return out

    def absorb(self, products: list[Product], shares: dict) -> None:
        """Take a round's shares and truncate them (the label party has no local term)."""
        for p in products:
            kind = p.name.rstrip("0123456789")
            if kind == "block":
                self.grads["block"] = ring.truncate(shares[p.name], self.f, False)
            elif kind == "act":
                self.current = ring.truncate(shares[p.name], self.f, False)
                self.grads[f"intercept{p.name[3:]}"] = ring.reduce(self.current.sum(axis=0))
            elif kind == "weights":
                self.grads[p.name] = ring.truncate(shares[p.name], self.f, False)
        for p in products:
            if p.name.startswith("back"):
                self.current = ring.truncate(shares[p.name], self.f, False)

    def gradient_shares(self) -> dict:
        """The label party's shares of the feature party's gradients: uniform, sent to the feature party."""
        return dict(self.grads)
