"""scikit-learn's two stochastic optimizers, over a list of parameter arrays.

* :class:`SGD` — ``SGDOptimizer`` with a constant learning rate: ``v <- momentum v - lr g``, the step is
  ``v`` (or, with Nesterov's momentum, ``momentum v - lr g`` with the new ``v``).
* :class:`Adam` — ``AdamOptimizer``: ``m <- b1 m + (1 - b1) g``, ``v <- b2 v + (1 - b2) g^2``,
  ``lr_t = lr sqrt(1 - b2^t) / (1 - b1^t)``, the step ``-lr_t m / (sqrt(v) + epsilon)`` (scikit-learn puts
  the bias correction into ``lr_t``, so ``epsilon`` is not corrected: kept, to equal it).

Each keeps its state per parameter array and returns the new arrays (the inputs are not changed).
"""

from __future__ import annotations

import numpy as np

from vfl.errors import ConfigurationError


class SGD:
    """Stochastic gradient descent with momentum, as scikit-learn's ``SGDOptimizer`` (``learning_rate="constant"``).

    Parameters
    ----------
    shapes : list of tuple
        The parameter arrays' shapes.
    learning_rate_init : float
    momentum : float
        In [0, 1].
    nesterovs_momentum : bool
    """

    def __init__(self, shapes, learning_rate_init=0.001, momentum=0.9, nesterovs_momentum=True):
        if not 0 <= momentum <= 1:
            raise ConfigurationError(f"momentum must be in [0, 1], got {momentum}")
        self.learning_rate = float(learning_rate_init)
        self.momentum = float(momentum)
        self.nesterov = bool(nesterovs_momentum)
        self.velocities = [np.zeros(shape) for shape in shapes]

    def step(self, params: list[np.ndarray], grads: list[np.ndarray]) -> list[np.ndarray]:
        """The parameters after one step along ``grads``."""
        updates = [self.momentum * v - self.learning_rate * g for v, g in zip(self.velocities, grads)]
        self.velocities = updates
        if self.nesterov:
            updates = [self.momentum * v - self.learning_rate * g for v, g in zip(self.velocities, grads)]
        return [p + u for p, u in zip(params, updates)]

    def state(self) -> dict:
        """What a checkpoint keeps: the velocities (as nested lists)."""
        return {"velocities": [v.tolist() for v in self.velocities]}

    def load_state(self, state: dict) -> None:
        self.velocities = _arrays(state["velocities"], self.velocities)


class Adam:
    """Adam, as scikit-learn's ``AdamOptimizer``.

    Parameters
    ----------
    shapes : list of tuple
        The parameter arrays' shapes.
    learning_rate_init, beta_1, beta_2, epsilon : float
        scikit-learn's names and defaults; ``beta_1`` and ``beta_2`` in [0, 1).
    """

    def __init__(self, shapes, learning_rate_init=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-8):
        for name, beta in (("beta_1", beta_1), ("beta_2", beta_2)):
            if not 0 <= beta < 1:
                raise ConfigurationError(f"{name} must be in [0, 1), got {beta}")
        self.learning_rate_init = float(learning_rate_init)
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)
        self.t = 0
        self.ms = [np.zeros(shape) for shape in shapes]
        self.vs = [np.zeros(shape) for shape in shapes]

    def step(self, params: list[np.ndarray], grads: list[np.ndarray]) -> list[np.ndarray]:
        """The parameters after one step along ``grads``."""
        self.t += 1
        self.ms = [self.beta_1 * m + (1 - self.beta_1) * g for m, g in zip(self.ms, grads)]
        self.vs = [self.beta_2 * v + (1 - self.beta_2) * (g ** 2) for v, g in zip(self.vs, grads)]
        rate = self.learning_rate_init * np.sqrt(1 - self.beta_2 ** self.t) / (1 - self.beta_1 ** self.t)
        return [p + (-rate * m / (np.sqrt(v) + self.epsilon)) for p, m, v in zip(params, self.ms, self.vs)]

    def state(self) -> dict:
        """What a checkpoint keeps: the step count and both moments (as nested lists)."""
        return {"t": self.t, "ms": [m.tolist() for m in self.ms], "vs": [v.tolist() for v in self.vs]}

    def load_state(self, state: dict) -> None:
        self.t = int(state["t"])
        self.ms, self.vs = _arrays(state["ms"], self.ms), _arrays(state["vs"], self.vs)


def _arrays(values, like: list[np.ndarray]) -> list[np.ndarray]:
    """Saved arrays back, each checked against the shape it replaces."""
    out = [np.asarray(v, dtype=np.float64) for v in values]
    if len(out) != len(like) or any(a.shape != b.shape for a, b in zip(out, like)):
        raise ConfigurationError("a checkpoint's optimizer state does not fit this network's shapes")
    return out


def make_optimizer(solver: str, shapes, **hyper):
    """:class:`SGD` for ``solver="sgd"``, :class:`Adam` for ``"adam"`` (scikit-learn's ``solver``)."""
    if solver == "sgd":
        keys = ("learning_rate_init", "momentum", "nesterovs_momentum")
        return SGD(shapes, **{k: hyper[k] for k in keys if k in hyper})
    if solver == "adam":
        keys = ("learning_rate_init", "beta_1", "beta_2", "epsilon")
        return Adam(shapes, **{k: hyper[k] for k in keys if k in hyper})
    raise ConfigurationError(f"solver must be 'sgd' or 'adam', got {solver!r}")
