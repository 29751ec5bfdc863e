"""Small argument validators raising :class:`~vfl.horizontal.errors.InvalidParameterError`.

Every public constructor and function of :mod:`vfl.horizontal` routes its
scalar arguments through these helpers, so a wrong *type* (``"x"``, ``2.5``
where an integer is needed, ``True`` where a number is needed) gets the same
clear :class:`~vfl.horizontal.errors.InvalidParameterError` as a wrong *value*,
instead of a bare :class:`TypeError` from a comparison deep inside.

Each ``check_*`` takes the argument's ``name``, as its error message names
it, and the ``value`` to check; it returns the value as the type it names
(``int``, ``float``, a tuple or a generator), and raises
:class:`~vfl.horizontal.errors.InvalidParameterError` saying what was expected
and what was given otherwise.
"""

from __future__ import annotations

import numbers

import numpy as np

from .errors import InvalidParameterError


def _is_bool(value) -> bool:
    """A Python or numpy bool, which the number checks refuse (``True < 1`` would otherwise pass)."""
    return isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not _is_bool(value)


def _is_int(value, minimum: int) -> bool:
    """An integer that is not a bool, ``>= minimum``."""
    return isinstance(value, numbers.Integral) and not _is_bool(value) and value >= minimum


def _check_real(name: str, value, accepts, requirement: str) -> float:
    """``float(value)`` if it is a real number that ``accepts``; else an error saying it must be ``requirement``."""
    if not _is_real(value) or not accepts(value):
        raise InvalidParameterError(f"{name} must be {requirement}, got {value!r}")
    return float(value)


def check_positive_int(name: str, value, minimum: int = 1) -> int:
    """An integer (not a bool) ``>= minimum`` (default 1), as an ``int``."""
    if not _is_int(value, minimum):
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_positive_float(name: str, value) -> float:
    """A real number ``> 0`` and finite (not NaN, not infinite), as a ``float``."""
    return _check_real(name, value, lambda v: 0 < v < np.inf, "a finite number > 0")


def check_nonnegative_float(name: str, value) -> float:
    """A real number ``>= 0`` and finite (not NaN, not infinite), as a ``float``."""
    return _check_real(name, value, lambda v: 0 <= v < np.inf, "a finite number >= 0")


def check_interval(name: str, value, low: float, high: float, *, closed: str = "right") -> float:
    """A real number in the interval from ``low`` to ``high`` (NaN never is), as a ``float``.

    ``closed`` says which end points belong to it: ``"right"`` (the default)
    is ``(low, high]``, ``"left"`` is ``[low, high)``, and ``"both"`` and
    ``"neither"`` are what they say.
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
    """A non-empty sequence of integers ``>= 1``, e.g. ``(64, 64)``, as a tuple (``2.5`` is refused, not truncated)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise InvalidParameterError(f"hidden_layer_sizes must be a sequence of integers >= 1, got {value!r}")
    sizes = list(value)
    if not sizes or not all(_is_int(h, 1) for h in sizes):
        raise InvalidParameterError(f"hidden_layer_sizes must be a non-empty sequence of integers >= 1, "
                                    f"got {value!r}")
    return tuple(int(h) for h in sizes)


def check_random_state(value, name: str = "random_state") -> np.random.Generator:
    """A :class:`numpy.random.Generator` from anything :func:`numpy.random.default_rng` takes but a bool.

    None, a non-negative integer (or an array of them), a ``SeedSequence`` or
    a ``BitGenerator`` seed a new generator; a ``Generator`` is returned as is
    (not copied), so its stream continues.  A string, a float or a negative
    integer is refused.
    """
    if _is_bool(value):
        raise InvalidParameterError(f"{name} must be None, a non-negative integer or a numpy Generator, "
                                    f"got {value!r}")
    try:
        return np.random.default_rng(value)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"{name} must be None, a non-negative integer or a numpy Generator, "
                                    f"got {value!r} ({exc})") from None
