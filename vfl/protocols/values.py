"""The checks every family's settings make of a value: an integer proper, a finite real, a boolean proper."""

from __future__ import annotations

import math

import numpy as np

from vfl.errors import ConfigurationError


def is_int(v) -> bool:
    """An integer, not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def is_bool(v) -> bool:
    """A boolean proper: the string ``"false"`` is truthy, so it is no answer to a yes/no setting."""
    return isinstance(v, (bool, np.bool_))


def is_real(v) -> bool:
    """A finite real number, not a bool."""
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)


def require(ok: bool, message: str, value) -> None:
    """A :class:`~vfl.errors.ConfigurationError` ``"<message>, got <value>"`` unless ``ok``."""
    if not ok:
        raise ConfigurationError(f"{message}, got {value!r}")
