"""A feature party of a split network: its columns, its bottom model, its block of the interactive layer.

It computes its part ``h_k W_k`` of the interactive layer's pre-activation in
the clear (its own data and weights) and sends it, masked when several feature
parties sum theirs; it never receives the gradient on that part row by row —
its gradients come out of the shared backward pass
(:mod:`vfl.parties.mlp.shared_backward`) already summed over the batch — and it
moves its own weights with its own optimizer, as a party of the pooled network
would (Adam and SGD act weight by weight).
"""

from __future__ import annotations

import numpy as np

from vfl.crypto import ring
from vfl.errors import DataError, DivergenceError, FixedPointOverflowError
from vfl.parties.mlp.layers import Layer, forward
from vfl.parties.mlp.optim import make_optimizer
from vfl.parties.mlp.state import Checkpointed
from vfl.parties.mlp.shared_backward import FeatureSide
from vfl.parties.mlp.starts import glorot_bound, glorot_stack, uniform


def draw_start(in_dim: int, bottom_sizes, fan_in: int, units: int, activation: str) -> tuple[list[Layer], np.ndarray]:
    """A party's secret start (CSPRNG): its bottom layers and its block, scikit-learn's Glorot bounds.

    ``fan_in`` is every party's bottom outputs together (the interactive layer's fan-in), public.
    """
    bottom = glorot_stack([in_dim, *bottom_sizes], activation)
    out = bottom_sizes[-1] if bottom_sizes else in_dim
    return bottom, uniform((out, units), glorot_bound(fan_in, units, activation))


def check_columns(role: str, columns: list, x) -> np.ndarray:
    """A party's rows to score as floats, refused (naming the party) unless they have its training columns' count."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(columns):
        raise DataError(f"party {role}: {x.shape[-1] if x.ndim else 0} columns to score, trained on "
                        f"{len(columns)} ({columns})")
    return x


class MLPFeatureParty(Checkpointed):
    """A feature party's state in a split-network run.

    Parameters
    ----------
    role : str
        The party's name (errors name it).
    features : ndarray (rows, columns)
        Its aligned rows.
    columns : list of str
    bottom_sizes : tuple of int
        Its bottom layers' widths.
    activation : str
        The hidden activation.
    """

    def __init__(self, role: str, features, columns, bottom_sizes, activation: str):
        self.role = role
        self.x = np.asarray(features, dtype=np.float64)
        self.columns = list(columns)
        self.bottom_sizes = tuple(bottom_sizes)
        self.activation = activation
        self.bottom: list[Layer] = []
        self.block: np.ndarray | None = None
        self._acts = None
        self._optimizer = None

    @property
    def out_width(self) -> int:
        """The width of its bottom's output (its column count when the bottom is empty)."""
        return self.bottom_sizes[-1] if self.bottom_sizes else self.x.shape[1]

    def start(self, fan_in: int, units: int, solver: str, options: dict, start=None) -> None:
        """Take a start (``(bottom, block)``; by default a secret one from the CSPRNG) and make the optimizer."""
        if start is None:
            start = draw_start(self.x.shape[1], self.bottom_sizes, fan_in, units, self.activation)
        bottom, block = start
        self.bottom = [(np.array(w, dtype=np.float64), np.array(b, dtype=np.float64)) for w, b in bottom]
        self.block = np.array(block, dtype=np.float64)
        self._optimizer = make_optimizer(solver, [a.shape for a in self.parameters()], **options)

    def parameters(self) -> list[np.ndarray]:
        """Its arrays in a fixed order: bottom layers' (W, b), then the block."""
        return [a for layer in self.bottom for a in layer] + [self.block]

    def _set(self, arrays: list[np.ndarray]) -> None:
        it = iter(arrays)
        self.bottom = [(next(it), next(it)) for _ in self.bottom]
        self.block = next(it)

    def part(self, x: np.ndarray, keep: bool = False) -> np.ndarray:
        """``h_k W_k`` on rows ``x`` (keeping the bottom's activations for the backward pass if ``keep``)."""
        with np.errstate(over="ignore", invalid="ignore"):
            acts = forward(self.bottom, x, [self.activation] * len(self.bottom))
            out = acts[-1] @ self.block
        if not (np.all(np.isfinite(out)) and (out.size == 0 or np.abs(out).max() < 2.0 ** ring.VALUE_BITS)):
            raise DivergenceError(f"party {self.role}: its bottom model's output is no longer finite; the fit "
                                  "diverged: lower learning_rate_init or alpha, or scale the columns")
        if keep:
            self._acts = acts
        return out

    def train_part(self, rows: np.ndarray) -> np.ndarray:
        """``h_k W_k`` on training rows ``rows``, remembered for :meth:`backward_side`."""
        return self.part(self.x[rows], keep=True)

    def backward_side(self, frac_bits: int) -> FeatureSide:
        """Its half of the shared backward pass for the rows of the last :meth:`train_part`."""
        try:
            return FeatureSide(self._acts, self.bottom, self.block, self.activation, frac_bits)
        except FixedPointOverflowError:
            raise DivergenceError(f"party {self.role}: its bottom model's values outgrew the shared backward pass's "
                                  "range; the fit diverged: lower learning_rate_init, or scale the columns") from None

    def step(self, bottom_grads, block_grad, alpha: float, sw_sum: float) -> None:
        """One optimizer step from its raw gradients (sums over the batch): scikit-learn's scaling and penalty."""
        grads = [g for (gw, gb), (w, _) in zip(bottom_grads, self.bottom)
                 for g in ((gw + alpha * w) / sw_sum, gb / sw_sum)]
        grads.append((block_grad + alpha * self.block) / sw_sum)
        self._set(self._optimizer.step(self.parameters(), grads))

    def squared_norm(self) -> float:
        """``sum ||W||^2`` over its weight matrices (no intercept): its part of the L2 penalty."""
        return float(sum(np.dot(w.ravel(), w.ravel()) for w, _ in self.bottom) + np.dot(self.block.ravel(),
                                                                                         self.block.ravel()))

    def check_columns(self, x: np.ndarray) -> np.ndarray:
        """Rows to score: as many columns as it trained on, scaled as its training rows were (``scaler``)."""
        x = check_columns(self.role, self.columns, x)
        scaler = getattr(self, "scaler", None)
        return x if scaler is None or not x.shape[1] else scaler.apply(x)
