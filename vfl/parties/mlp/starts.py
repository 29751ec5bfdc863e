"""Initial weights in scikit-learn's Glorot-uniform shape, drawn from the CSPRNG.

scikit-learn draws each layer's ``W`` and ``b`` uniformly on ``[-r, r]`` with
``r = sqrt(factor / (fan_in + fan_out))``, ``factor`` 2 for the logistic
activation and 6 otherwise.  Here the same distribution comes from
:func:`vfl.crypto.randomness.uniform_floats` (``os.urandom``), never numpy's
generator: a party's secret start must not be predictable.  The interactive
layer's blocks share one bound, its fan-in being every party's bottom outputs
together, so that with empty bottoms the start is distributed as scikit-learn's.
"""

from __future__ import annotations

import numpy as np

from vfl.crypto.randomness import uniform_floats
from vfl.errors import ConfigurationError
from vfl.parties.mlp.layers import Layer
from vfl.parties.mlp.split import SplitNetwork


def glorot_bound(fan_in: int, fan_out: int, activation: str) -> float:
    """scikit-learn's ``init_bound``: ``sqrt(factor / (fan_in + fan_out))``."""
    return float(np.sqrt((2.0 if activation == "logistic" else 6.0) / (fan_in + fan_out)))


def uniform(shape, bound: float) -> np.ndarray:
    """An array of ``shape`` uniform on ``[-bound, bound)`` from the CSPRNG."""
    count = int(np.prod(shape))
    return (bound * (2.0 * uniform_floats(count) - 1.0)).reshape(shape)


def glorot_layer(fan_in: int, fan_out: int, activation: str) -> Layer:
    """One layer ``(W, b)`` drawn as scikit-learn's ``_init_coef`` draws it, from the CSPRNG."""
    bound = glorot_bound(fan_in, fan_out, activation)
    return uniform((fan_in, fan_out), bound), uniform((fan_out,), bound)


def glorot_stack(sizes: list[int], activation: str) -> list[Layer]:
    """Layers between consecutive ``sizes`` (inputs first)."""
    return [glorot_layer(a, b, activation) for a, b in zip(sizes[:-1], sizes[1:])]


def initial_network(widths: list[int], bottom_sizes: list[tuple[int, ...]], hidden_layer_sizes: tuple[int, ...],
                    n_outputs: int, activation: str) -> SplitNetwork:
    """A split network's start.

    Parameters
    ----------
    widths : list of int
        Each party's column count.
    bottom_sizes : list of tuple of int
        Each party's bottom layer widths (``()``: none).
    hidden_layer_sizes : tuple of int
        The interactive layer's width, then the top's hidden widths (``()``: the interactive layer is the output).
    n_outputs : int
        Output units: 1 for binary and single-output regression, the class count for multi-class.
    activation : str
        The hidden activation (it sets Glorot's factor).
    """
    if len(widths) != len(bottom_sizes):
        raise ConfigurationError(f"{len(widths)} parties' widths for {len(bottom_sizes)} bottom models")
    bottoms = [glorot_stack([w, *sizes], activation) for w, sizes in zip(widths, bottom_sizes)]
    outs = [sizes[-1] if sizes else w for w, sizes in zip(widths, bottom_sizes)]
    upper = [*hidden_layer_sizes, n_outputs]
    bound = glorot_bound(sum(outs), upper[0], activation)
    blocks = [uniform((out, upper[0]), bound) for out in outs]
    return SplitNetwork(bottoms, blocks, uniform((upper[0],), bound), glorot_stack(upper, activation))
