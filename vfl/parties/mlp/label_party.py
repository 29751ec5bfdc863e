"""The label party of a split network: its labels, its own bottom model (if it has columns), the top model.

It sums the feature parties' parts of the interactive layer with its own and the
intercept, runs the top model, the loss and the backward pass down to
``delta`` (the gradient on the interactive layer's pre-activation), all in the
clear; its own bottom, block, intercept and top it moves itself.  ``delta``
leaves it only as shares (:mod:`vfl.parties.mlp.shared_backward`).
"""

from __future__ import annotations

import numpy as np

from vfl.crypto.randomness import gaussian
from vfl.errors import DivergenceError, FixedPointOverflowError
from vfl.parties.mlp.activations import activate, derivative
from vfl.parties.mlp.feature_party import check_columns, draw_start
from vfl.parties.mlp.layers import Layer, backward, forward, layer_activations
from vfl.parties.mlp.losses import OUTPUT_ACTIVATION, loss, output_delta, targets
from vfl.parties.mlp.optim import make_optimizer
from vfl.parties.mlp.starts import glorot_bound, glorot_stack, uniform
from vfl.parties.mlp.state import Checkpointed
from vfl.parties.mlp.shared_backward import LabelSide


class MLPLabelParty(Checkpointed):
    """The label party's state in a split-network run.

    Parameters
    ----------
    role : str
    features : ndarray (rows, columns)
        Its own columns (zero columns: it holds only the labels).
    columns : list of str
    labels : ndarray (rows,)
    task : {"binary", "multiclass", "regression"}
    bottom_sizes : tuple of int
        Its bottom layers' widths (ignored without columns).
    hidden_layer_sizes : tuple of int
        The interactive layer's width, then the top's hidden widths.
    activation : str
    label_bound : float, optional
        Regression targets are clipped to ``[-label_bound, label_bound]`` (label differential privacy).
    """

    def __init__(self, role: str, features, columns, labels, task: str, bottom_sizes, hidden_layer_sizes,
                 activation: str, label_bound: float | None = None):
        self.role = role
        self.x = np.asarray(features, dtype=np.float64).reshape(len(labels), -1)
        self.columns = list(columns)
        self.task = task
        self.y, self.classes = targets(labels, task, role)
        if task == "regression" and label_bound is not None:
            self.y = np.clip(self.y, -label_bound, label_bound)
        self.bottom_sizes = tuple(bottom_sizes) if self.x.shape[1] else ()
        self.hidden_layer_sizes = tuple(hidden_layer_sizes)
        self.activation = activation
        self.bottom: list[Layer] = []
        self.block = None
        self.bias = None
        self.top: list[Layer] = []
        self._optimizer = None
        self._state = None

    @property
    def has_columns(self) -> bool:
        return self.x.shape[1] > 0

    @property
    def out_width(self) -> int:
        """Its bottom's output width (0 without columns)."""
        if not self.has_columns:
            return 0
        return self.bottom_sizes[-1] if self.bottom_sizes else self.x.shape[1]

    @property
    def n_outputs(self) -> int:
        return self.y.shape[1]

    @property
    def units(self) -> int:
        return self.hidden_layer_sizes[0]

    def _names(self) -> tuple[list[str], list[str]]:
        upper = layer_activations(len(self.hidden_layer_sizes) + 1, self.activation, OUTPUT_ACTIVATION[self.task])
        return upper, [self.activation] * len(self.bottom)

    def start(self, fan_in: int, solver: str, options: dict, start=None) -> None:
        """Take a start (``(bottom, block, bias, top)``; by default a secret one) and make the optimizer."""
        if start is None:
            bottom, block = (draw_start(self.x.shape[1], self.bottom_sizes, fan_in, self.units, self.activation)
                             if self.has_columns else ([], None))
            upper = [*self.hidden_layer_sizes, self.n_outputs]
            start = (bottom, block, uniform((self.units,), glorot_bound(fan_in, self.units, self.activation)),
                     glorot_stack(upper, self.activation))
        bottom, block, bias, top = start
        self.bottom = [(np.array(w, dtype=np.float64), np.array(b, dtype=np.float64)) for w, b in bottom]
        self.block = None if block is None else np.array(block, dtype=np.float64)
        self.bias = np.array(bias, dtype=np.float64)
        self.top = [(np.array(w, dtype=np.float64), np.array(b, dtype=np.float64)) for w, b in top]
        self._optimizer = make_optimizer(solver, [a.shape for a in self.parameters()], **options)

    def parameters(self) -> list[np.ndarray]:
        """Its arrays in a fixed order: bottom (W, b), block (if any), intercept, top (W, b)."""
        own = [a for layer in self.bottom for a in layer] + ([self.block] if self.block is not None else [])
        return own + [self.bias] + [a for layer in self.top for a in layer]

    def weight_matrices(self) -> list[np.ndarray]:
        return [w for w, _ in self.bottom] + ([self.block] if self.block is not None else []) + [
            w for w, _ in self.top]

    def _set(self, arrays) -> None:
        it = iter(arrays)
        self.bottom = [(next(it), next(it)) for _ in self.bottom]
        if self.block is not None:
            self.block = next(it)
        self.bias = next(it)
        self.top = [(next(it), next(it)) for _ in self.top]

    def output(self, x_own: np.ndarray, parts: np.ndarray, keep: bool = False) -> np.ndarray:
        """The network's output from its own rows and the sum of the feature parties' parts."""
        upper, hidden = self._names()
        with np.errstate(over="ignore", invalid="ignore"):
            acts = forward(self.bottom, x_own, hidden) if self.has_columns else [x_own]
            z = parts + self.bias + (acts[-1] @ self.block if self.has_columns else 0.0)
            top = forward(self.top, activate(upper[0], z), upper[1:])
        if not np.all(np.isfinite(top[-1])):
            raise DivergenceError(f"party {self.role}: the network's output is no longer finite; the fit diverged: "
                                  "lower learning_rate_init")
        if keep:
            self._state = (acts, top)
        return top[-1]

    def margin(self, x_own: np.ndarray, parts: np.ndarray) -> np.ndarray:
        """The network's raw score before the output activation (a binary classifier's log-odds; a regressor's
        output itself), from its own rows and the sum of the feature parties' parts."""
        upper, hidden = self._names()
        with np.errstate(over="ignore", invalid="ignore"):
            acts = forward(self.bottom, x_own, hidden) if self.has_columns else [x_own]
            z = parts + self.bias + (acts[-1] @ self.block if self.has_columns else 0.0)
            top = forward(self.top, activate(upper[0], z), upper[1:-1] + ["identity"])
        return top[-1]

    def batch_loss(self, rows: np.ndarray, parts: np.ndarray) -> float:
        """The batch's loss (no penalty), its forward pass kept for :meth:`backward`."""
        out = self.output(self.x[rows], parts, keep=True)
        with np.errstate(over="ignore", invalid="ignore"):
            return loss(self.task, self.y[rows], out)

    def backward(self, rows: np.ndarray, noise_std: float = 0.0) -> tuple[np.ndarray, list]:
        """``delta`` (raw: sums over the rows) and its own raw gradients, in :meth:`parameters`' order.

        With ``noise_std > 0`` every row's output delta ``out - y`` gets Gaussian noise from the CSPRNG
        before anything is computed from it (label differential privacy: the label party's own
        weights move by the noisy deltas too, so everything that leaves it is post-processing of them).
        """
        upper, hidden = self._names()
        acts, top = self._state
        delta_out = output_delta(self.y[rows], top[-1])
        if noise_std > 0:
            delta_out = delta_out + noise_std * gaussian(delta_out.size).reshape(delta_out.shape)
        top_grads, grad_a = backward(self.top, top, delta_out, upper[1:])
        delta = derivative(upper[0], top[0], grad_a)
        own = []
        if self.has_columns:
            h = acts[-1]
            bottom_grads = backward(self.bottom, acts, derivative(self.activation, h, delta @ self.block.T),
                                    hidden)[0] if self.bottom else []
            own = [g for layer in bottom_grads for g in layer] + [h.T @ delta]
        return delta, own + [delta.sum(axis=0)] + [g for layer in top_grads for g in layer]

    def step(self, raw: list, alpha: float, sw_sum: float) -> None:
        """One optimizer step on its own parameters from their raw gradients (scikit-learn's scaling)."""
        matrices = {id(w) for w in self.weight_matrices()}
        grads = [(g + alpha * p) / sw_sum if id(p) in matrices else g / sw_sum
                 for g, p in zip(raw, self.parameters())]
        self._set(self._optimizer.step(self.parameters(), grads))

    def squared_norm(self) -> float:
        return float(sum(np.dot(w.ravel(), w.ravel()) for w in self.weight_matrices()))

    def backward_side(self, delta: np.ndarray, frac_bits: int, depth: int) -> LabelSide:
        """Its half of the shared backward pass with a feature party whose bottom has ``depth`` layers."""
        try:
            return LabelSide(delta, frac_bits, depth)
        except FixedPointOverflowError:
            raise DivergenceError(f"party {self.role}: the interactive layer's gradient outgrew the shared backward "
                                  "pass's range; the fit diverged: lower learning_rate_init") from None

    def check_columns(self, x: np.ndarray) -> np.ndarray:
        """Rows to score: as many columns as it trained on, scaled as its training rows were (``scaler``)."""
        x = check_columns(self.role, self.columns, x)
        scaler = getattr(self, "scaler", None)
        return x if scaler is None or not x.shape[1] else scaler.apply(x)

    def score(self, rows: np.ndarray, parts: np.ndarray) -> float:
        """scikit-learn's ``score`` on rows ``rows``: the accuracy, or R² for regression (early stopping's measure)."""
        out = self.output(self.x[rows], parts)
        y = self.y[rows]
        if self.task == "regression":
            residual = ((y - out) ** 2).sum(axis=0)
            spread = ((y - y.mean(axis=0)) ** 2).sum(axis=0)
            r2 = np.where(spread > 0, 1 - residual / np.where(spread > 0, spread, 1), 0.0)
            return float(np.mean(r2))
        if self.task == "binary":
            return float(np.mean((out[:, 0] > 0.5) == (y[:, 0] == 1)))
        return float(np.mean(out.argmax(axis=1) == y.argmax(axis=1)))
