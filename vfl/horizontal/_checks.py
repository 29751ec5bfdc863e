"""Small argument validators raising :class:`~vfl.horizontal.errors.InvalidParameterError`."""

from __future__ import annotations

import numbers

import numpy as np

from .errors import InvalidParameterError


def check_positive_int(name: str, value, minimum: int = 1) -> int:
    """An integer (not bool) ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_positive_float(name: str, value) -> float:
    """A finite real number ``> 0``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < np.inf:
        raise InvalidParameterError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_fraction(name: str, value) -> float:
    """A real number in ``(0, 1]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < value <= 1.0:
        raise InvalidParameterError(f"{name} must be in (0, 1], got {value!r}")
    return float(value)


def check_batch_size(batch_size):
    """``None`` (B = infinity, the whole local set) or a positive integer."""
    if batch_size is None:
        return None
    return check_positive_int("batch_size (B)", batch_size)
