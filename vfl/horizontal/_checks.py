"""Small argument validators raising :class:`~vfl.horizontal.errors.InvalidParameterError`.

Every public constructor and function of :mod:`vfl.horizontal` routes its
scalar arguments through these helpers, so a wrong *type* (``"x"``, ``2.5``
where an integer is needed, ``True`` where a number is needed) gets the same
clear :class:`~vfl.horizontal.errors.InvalidParameterError` as a wrong *value*,
instead of a bare :class:`TypeError` from a comparison deep inside.
"""

from __future__ import annotations

import numbers

import numpy as np

from .errors import InvalidParameterError


def _is_real(value) -> bool:
    """A real number that is not a bool (``True < 1`` would otherwise pass)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _check_real(name: str, value, accepts, requirement: str) -> float:
    """``float(value)`` if it is a real number that ``accepts``; else an error saying it must be ``requirement``."""
    if not _is_real(value) or not accepts(value):
        raise InvalidParameterError(f"{name} must be {requirement}, got {value!r}")
    return float(value)


def check_positive_int(name: str, value, minimum: int = 1) -> int:
    """An integer (not bool) ``>= minimum``.

    Parameters
    ----------
    name : str
        How the error message names the argument.
    value : object
        The value to check.
    minimum : int, default=1
        Smallest accepted value.

    Returns
    -------
    int

    Raises
    ------
    InvalidParameterError
        ``value`` is not an integer or is below ``minimum``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_positive_float(name: str, value) -> float:
    """A finite real number ``> 0``.

    Parameters
    ----------
    name : str
    value : object

    Returns
    -------
    float

    Raises
    ------
    InvalidParameterError
        ``value`` is not a real number, or is NaN, infinite or ``<= 0``.
    """
    return _check_real(name, value, lambda v: 0 < v < np.inf, "a finite number > 0")


def check_nonnegative_float(name: str, value) -> float:
    """A finite real number ``>= 0``.

    Parameters
    ----------
    name : str
    value : object

    Returns
    -------
    float

    Raises
    ------
    InvalidParameterError
        ``value`` is not a real number, or is NaN, infinite or negative.
    """
    return _check_real(name, value, lambda v: 0 <= v < np.inf, "a finite number >= 0")


def check_interval(name: str, value, low: float, high: float, *, closed: str = "right") -> float:
    """A real number in the interval from ``low`` to ``high``.

    Parameters
    ----------
    name : str
    value : object
    low, high : float
        Interval end points.
    closed : {"right", "left", "both", "neither"}, default="right"
        Which end points belong to the interval: ``"right"`` is
        ``(low, high]``, ``"left"`` is ``[low, high)``.

    Returns
    -------
    float

    Raises
    ------
    InvalidParameterError
        ``value`` is not a real number or lies outside the interval (NaN
        always does).
    """
    left, right = {"right": ("(", "]"), "left": ("[", ")"), "both": ("[", "]"), "neither": ("(", ")")}[closed]
    if _is_real(value):
        above = value >= low if left == "[" else value > low
        below = value <= high if right == "]" else value < high
        if above and below:
            return float(value)
    raise InvalidParameterError(f"{name} must be in {left}{low:g}, {high:g}{right}, got {value!r}")


def check_fraction(name: str, value) -> float:
    """A real number in ``(0, 1]``; see :func:`check_interval`."""
    return check_interval(name, value, 0.0, 1.0, closed="right")


def check_batch_size(batch_size):
    """``None`` (B = infinity, the whole local set) or a positive integer."""
    if batch_size is None:
        return None
    return check_positive_int("batch_size (B)", batch_size)


def check_hidden_layer_sizes(value) -> tuple[int, ...]:
    """A non-empty sequence of positive integers, e.g. ``(64, 64)``.

    Parameters
    ----------
    value : sequence of int

    Returns
    -------
    tuple of int

    Raises
    ------
    InvalidParameterError
        ``value`` is not a sequence, is empty, or holds something other than
        integers ``>= 1`` (``2.5`` is rejected rather than truncated).
    """
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise InvalidParameterError(f"hidden_layer_sizes must be a sequence of integers >= 1, got {value!r}")
    sizes = list(value)
    if not sizes or any(isinstance(h, (bool, np.bool_)) or not isinstance(h, numbers.Integral) or h < 1
                        for h in sizes):
        raise InvalidParameterError(f"hidden_layer_sizes must be a non-empty sequence of integers >= 1, "
                                    f"got {value!r}")
    return tuple(int(h) for h in sizes)


def check_random_state(value, name: str = "random_state") -> np.random.Generator:
    """A :class:`numpy.random.Generator` from ``None``, a seed, or a generator.

    Parameters
    ----------
    value : None, int, array-like of int, SeedSequence, BitGenerator or Generator
        Anything :func:`numpy.random.default_rng` accepts.  A ``Generator`` is
        returned as is (not copied), so its stream continues.
    name : str, default="random_state"

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    InvalidParameterError
        ``value`` cannot seed a generator (a string, a float, a negative int).
    """
    if isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"{name} must be None, a non-negative integer or a numpy Generator, "
                                    f"got {value!r}")
    try:
        return np.random.default_rng(value)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"{name} must be None, a non-negative integer or a numpy Generator, "
                                    f"got {value!r} ({exc})") from None
