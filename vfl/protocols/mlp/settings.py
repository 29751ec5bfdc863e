"""The settings every party of a split-network run shares, named as scikit-learn's ``MLPClassifier``.

scikit-learn's names: ``hidden_layer_sizes`` (the interactive layer's width, then
the top's hidden widths), ``activation``, ``solver`` (``"adam"``, ``"sgd"``),
``alpha``, ``batch_size``, ``learning_rate_init``, ``max_iter``, ``shuffle``,
``tol``, ``momentum``, ``nesterovs_momentum``, ``early_stopping``,
``validation_fraction``, ``beta_1``, ``beta_2``, ``epsilon``,
``n_iter_no_change``; vfl's own: ``bottom_sizes`` (each party's bottom model)
and ``frac_bits`` (the fixed-point precision of the shared backward pass).  ``random_state``
seeds the public schedule only (the batches' order, the validation rows); every
starting weight is secret, drawn by its party from the CSPRNG.  ``dp_epsilon``,
``dp_delta`` and ``dp_label_bound`` (regression) turn on label differential
privacy (:mod:`vfl.protocols.mlp.training`, docs/mlp.md).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from vfl.errors import ConfigurationError, DataError, LabelLeakWarning
from vfl.parties.mlp.activations import HIDDEN as HIDDEN_ACTIVATIONS
from vfl.parties.mlp.losses import check_task
from vfl.protocols.values import built, is_int, is_real, require, table_values

#: Fractional bits of the ring encoding: a real ``x`` is held as ``round(x 2^40)``.
DEFAULT_FRAC_BITS = 40


def _sizes(value, what: str) -> tuple[int, ...]:
    require(isinstance(value, (tuple, list)) and all(is_int(v) and v >= 1 for v in value),
           f"{what} must be a tuple of positive integers", value)
    return tuple(int(v) for v in value)


@dataclass(frozen=True)
class MLPSettings:
    """Shared settings of a split-network run (see the module's docstring for the names).

    ``bottom_sizes`` maps each data party's name to its bottom layers' widths
    (``()``: its columns go straight into the interactive layer); a party it does
    not name gets ``default_bottom``: ``"auto"`` (the default) gives every feature
    party one ReLU-type layer narrower than its columns (:func:`auto_bottom`: what
    it sends the label party is then no linear image of its rows) and the label
    party none.  ``standardize``: each data party scales its own columns on its
    training rows (kept with its model, applied at prediction).
    """

    task: str = "binary"
    hidden_layer_sizes: tuple = (100,)
    bottom_sizes: dict = field(default_factory=dict)
    default_bottom: tuple | str = "auto"
    standardize: bool = True
    activation: str = "relu"
    solver: str = "adam"
    alpha: float = 0.0001
    batch_size: int | str = "auto"
    learning_rate_init: float = 0.001
    max_iter: int = 200
    shuffle: bool = True
    tol: float = 1e-4
    momentum: float = 0.9
    nesterovs_momentum: bool = True
    early_stopping: bool = False
    validation_fraction: float = 0.1
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-8
    n_iter_no_change: int = 10
    frac_bits: int = DEFAULT_FRAC_BITS
    random_state: int | None = None
    dp_epsilon: float | None = None
    dp_delta: float | None = None
    dp_label_bound: float | None = None

    @classmethod
    def from_table(cls, where: str, table: dict, roles: dict, also=()) -> "MLPSettings":
        """``[training]`` of ``federation.toml``: scikit-learn's names (``iterations`` for ``max_iter``), ``task``
        required (``model`` chooses the family; ``also``: the keys the caller reads itself).

        ``bottom_sizes`` is an array of widths (every data party's bottom) or a table of arrays by party name
        (a data party it leaves out gets none); ``roles`` (each party's role, by name) says the data parties.
        """
        values = table_values(cls, where, table, {"model": None, "iterations": "max_iter"}, ("default_bottom",),
                              also)
        if "task" not in values:
            raise ConfigurationError(f"{where}: 'task' is missing: set task = \"binary\", \"multiclass\" or "
                                     "\"regression\" (every party, the coordinator too, needs it before the label "
                                     "party reads a label)")
        bottoms = values.pop("bottom_sizes", "auto")
        if isinstance(bottoms, dict):
            data_parties = sorted(n for n, role in roles.items() if role != "coordinator")
            unknown = sorted(set(bottoms) - set(data_parties))
            if unknown:
                raise ConfigurationError(f"{where}: bottom_sizes names {unknown}, not data parties of this "
                                         f"federation ({data_parties})")
            values["bottom_sizes"] = bottoms
        elif isinstance(bottoms, list) or bottoms == "auto":
            values["default_bottom"] = bottoms
        else:
            raise ConfigurationError(f"{where}: bottom_sizes must be \"auto\", an array of widths (every data "
                                     f"party's bottom) or a table of arrays by party name, got {bottoms!r}")
        return built(cls, where, values)

    def __post_init__(self):
        check_task(self.task)
        hidden = _sizes(self.hidden_layer_sizes, "hidden_layer_sizes")
        require(len(hidden) >= 1, "hidden_layer_sizes needs the interactive layer's width at least", hidden)
        object.__setattr__(self, "hidden_layer_sizes", hidden)
        if self.default_bottom != "auto":
            object.__setattr__(self, "default_bottom", _sizes(self.default_bottom, "bottom_sizes"))
        require(isinstance(self.standardize, bool), "standardize must be a bool", self.standardize)
        require(isinstance(self.bottom_sizes, dict), "bottom_sizes must map party names to tuples of widths",
               self.bottom_sizes)
        object.__setattr__(self, "bottom_sizes", {str(k): _sizes(v, f"bottom_sizes[{k!r}]")
                                                  for k, v in self.bottom_sizes.items()})
        require(self.activation in HIDDEN_ACTIVATIONS, f"activation must be one of {sorted(HIDDEN_ACTIVATIONS)}",
               self.activation)
        require(self.solver in ("adam", "sgd"), "solver must be 'adam' or 'sgd' ('lbfgs' needs whole-data line "
               "searches, which the federation does not run)", self.solver)
        require(is_real(self.alpha) and self.alpha >= 0, "alpha must be a finite number >= 0", self.alpha)
        require(self.batch_size == "auto" or (is_int(self.batch_size) and self.batch_size >= 1),
               "batch_size must be 'auto' or a positive integer", self.batch_size)
        require(is_real(self.learning_rate_init) and self.learning_rate_init > 0,
               "learning_rate_init must be a finite number > 0", self.learning_rate_init)
        require(is_int(self.max_iter) and self.max_iter >= 1, "max_iter must be a positive integer", self.max_iter)
        require(isinstance(self.shuffle, bool), "shuffle must be a bool", self.shuffle)
        require(is_real(self.tol) and self.tol >= 0, "tol must be a finite number >= 0", self.tol)
        require(is_real(self.momentum) and 0 <= self.momentum <= 1, "momentum must be in [0, 1]", self.momentum)
        require(isinstance(self.nesterovs_momentum, bool), "nesterovs_momentum must be a bool",
               self.nesterovs_momentum)
        require(isinstance(self.early_stopping, bool), "early_stopping must be a bool", self.early_stopping)
        require(is_real(self.validation_fraction) and 0 < self.validation_fraction < 1,
               "validation_fraction must be in (0, 1)", self.validation_fraction)
        for name in ("beta_1", "beta_2"):
            value = getattr(self, name)
            require(is_real(value) and 0 <= value < 1, f"{name} must be in [0, 1)", value)
        require(is_real(self.epsilon) and self.epsilon > 0, "epsilon must be a finite number > 0", self.epsilon)
        require(is_int(self.n_iter_no_change) and self.n_iter_no_change >= 1,
               "n_iter_no_change must be a positive integer", self.n_iter_no_change)
        require(self.random_state is None or (is_int(self.random_state) and self.random_state >= 0),
               "random_state must be None or an integer >= 0 (it seeds the batches and the validation split only)",
               self.random_state)
        self._check_dp()
        require(is_int(self.frac_bits) and 16 <= self.frac_bits <= 60, "frac_bits must be an integer in [16, 60]",
               self.frac_bits)

    def _check_dp(self) -> None:
        if (self.dp_epsilon is None) != (self.dp_delta is None):
            raise ConfigurationError("label differential privacy needs both dp_epsilon and dp_delta (or neither)")
        if not self.dp:
            return
        require(is_real(self.dp_epsilon) and self.dp_epsilon > 0, "dp_epsilon must be a finite number > 0",
               self.dp_epsilon)
        require(is_real(self.dp_delta) and 0 < self.dp_delta < 1, "dp_delta must be in (0, 1)", self.dp_delta)
        require(not self.early_stopping, "with label differential privacy every epoch runs (when to stop would "
               "depend on the labels): set early_stopping=False", self.early_stopping)
        if self.task == "regression":
            require(is_real(self.dp_label_bound) and self.dp_label_bound > 0, "label differential privacy for "
                   "regression needs dp_label_bound > 0 (the targets are clipped to it)", self.dp_label_bound)

    @property
    def dp(self) -> bool:
        """Whether the label party adds Gaussian noise to its output deltas (label differential privacy)."""
        return self.dp_epsilon is not None

    def dp_sensitivity(self) -> float:
        """L2 sensitivity of one row's output delta ``out - y`` to its label (one-hot for several classes)."""
        if self.task == "binary":
            return 1.0
        if self.task == "multiclass":
            return math.sqrt(2.0)
        return 2.0 * float(self.dp_label_bound)

    def to_dict(self) -> dict:
        """The settings as plain values (for the fingerprint ``vfl party``'s parties compare)."""
        return dataclasses.asdict(self)

    @property
    def units(self) -> int:
        """The interactive layer's width."""
        return self.hidden_layer_sizes[0]

    def bottom_of(self, party: str, columns: int | None = None, feature: bool = True) -> tuple[int, ...]:
        """Party ``party``'s bottom layers' widths (``columns``: its column count, for ``"auto"``)."""
        if party in self.bottom_sizes:
            return self.bottom_sizes[party]
        if self.default_bottom != "auto":
            return self.default_bottom
        return auto_bottom(columns) if feature and columns is not None else ()

    def optimizer_options(self) -> dict:
        """The keyword arguments of :func:`vfl.parties.mlp.make_optimizer`."""
        return {"learning_rate_init": self.learning_rate_init, "momentum": self.momentum,
                "nesterovs_momentum": self.nesterovs_momentum, "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon}

    def effective_batch(self, n_rows: int) -> int:
        """scikit-learn's batch size: ``min(200, rows)`` for ``"auto"``, else clipped to the rows."""
        size = min(200, n_rows) if self.batch_size == "auto" else int(self.batch_size)
        return int(np.clip(size, 1, n_rows))


def auto_bottom(columns: int) -> tuple[int, ...]:
    """A feature party's default bottom: one layer of ``max(1, min(16, columns // 2))`` units, narrower than its
    columns, so that the interactive part it sends is no linear image of its rows (its release check decides)."""
    return (max(1, min(16, int(columns) // 2)),)


def warn_label_leak(settings: MLPSettings, n_rows: int) -> None:
    """Warn that mini-batch training without label DP lets a feature party guess labels from its summed gradients."""
    if settings.dp or len(batch_sizes(n_rows, settings.effective_batch(n_rows))) < 2:
        return
    warnings.warn("mini-batch training without label differential privacy lets a feature party guess the labels "
                  "from its own gradients summed over each batch, over the epochs (docs/mlp.md: an attack's AUC "
                  "0.69 where chance is 0.50); set dp_epsilon and dp_delta (e.g. 1.0 and 1e-5), whose noise "
                  "brings it back near chance", LabelLeakWarning, stacklevel=2)


def batch_sizes(n_rows: int, batch_size: int) -> list[int]:
    """Sizes of one epoch's batches: full batches, the remainder folded into the last one.

    Every batch therefore has at least ``batch_size`` rows (or all rows, if fewer): a short last
    batch would let a feature party solve for its rows' gradients (:func:`check_batch_size`).
    """
    if batch_size >= n_rows:
        return [n_rows]
    count = n_rows // batch_size
    sizes = [batch_size] * count
    sizes[-1] += n_rows - count * batch_size
    return sizes


def batches(n_rows: int, batch_size: int, seed: int, epoch: int, shuffle: bool) -> list[np.ndarray]:
    """The row indices of each batch of ``epoch``: every party computes the same list from the shared seed.

    The order depends on the seed and the epoch only, never on labels or features (it is public
    within the federation, as the rows are).
    """
    sizes = batch_sizes(n_rows, batch_size)
    order = np.random.default_rng([int(seed), int(epoch)]).permutation(n_rows) if shuffle else np.arange(n_rows)
    return np.split(order, np.cumsum(sizes)[:-1])


def gradient_count(in_dim: int, bottom: tuple[int, ...], units: int) -> int:
    """How many gradient values a feature party learns per batch: its bottom's weights and intercepts, its block."""
    widths = [in_dim, *bottom]
    return sum(a * b + b for a, b in zip(widths[:-1], widths[1:])) + widths[-1] * units


#: The memory a run may plan for, as a share of this machine's (the rest: the data, the interpreter, the others).
MEMORY_SHARE = 0.5
#: Bytes a ring element costs in the shared backward pass (a 256-bit Python integer and its array slot).
_RING_ELEMENT = 72


def check_memory(in_dims: dict, settings, batch: int, roster) -> None:
    """Refuse, before training, widths whose arrays would not fit in this machine's memory.

    Per data party: its weights with Adam's two moments and the gradient (``4 x 8`` bytes
    each), and per batch its activations and the shared backward pass's ring elements
    (about ten arrays of ``batch x width``); the label party's top besides.
    """
    import os

    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    units = settings.units
    need, widest = 0, ("", 0)
    for name, in_dim in in_dims.items():
        bottom = settings.bottom_of(name, in_dim, feature=name != roster.label)
        widths = [in_dim, *bottom]
        weights = sum(a * b + b for a, b in zip(widths[:-1], widths[1:])) + widths[-1] * units
        need += 32 * weights + 10 * _RING_ELEMENT * batch * max(widths[1:] + [units])
        widest = max(widest, (name, max(widths[1:] + [units])), key=lambda t: t[1])
    top = [units, *settings.hidden_layer_sizes[1:]]
    need += 32 * sum(a * b + b for a, b in zip(top[:-1], top[1:])) + 8 * batch * sum(top)
    if need > MEMORY_SHARE * memory:
        raise ConfigurationError(
            f"the network's layers would need about {need / 2**30:.1f} GiB (widest: {widest[1]:,} units, at party "
            f"{widest[0]}; batches of {batch} rows), more than half of this machine's {memory / 2**30:.1f} GiB: "
            "use narrower layers (hidden_layer_sizes, bottom_sizes) or smaller batches (batch_size)")


def check_batch_size(role: str, in_dim: int, bottom: tuple[int, ...], units: int, smallest_batch: int) -> None:
    """Refuse batches so small that a feature party's gradients determine its rows' ``delta``.

    A feature party learns ``g`` gradient values per batch, linear in the batch's
    ``rows x units`` values of ``delta`` with coefficients it knows; with
    ``rows x units <= g`` it could solve for ``delta`` row by row (the per-row
    gradient the shared backward pass hides).  Refused with a margin of two.
    """
    g = gradient_count(in_dim, bottom, units)
    if smallest_batch * units <= 2 * g:
        raise DataError(f"party {role}: a batch of {smallest_batch} rows gives {smallest_batch * units} values of the "
                        f"interactive layer's gradient, not more than twice the {g} gradient values party {role} "
                        f"learns per batch, so it could solve for them row by row; use batch_size > "
                        f"{2 * g // units} (or a narrower bottom model for party {role})")
