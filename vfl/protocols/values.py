"""The checks every family's settings make of a value (an integer proper, a finite real, a boolean proper), and
how a settings dataclass reads its table of ``federation.toml`` from its own fields."""

from __future__ import annotations

import dataclasses
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


def check_keys(where: str, table: dict, allowed) -> None:
    """A :class:`~vfl.errors.ConfigurationError` naming ``where`` and the keys of ``table`` not in ``allowed``."""
    extra = sorted(set(table) - set(allowed))
    if extra:
        raise ConfigurationError(f"{where}: unknown key(s) {extra}; expected some of {sorted(allowed)}")


def table_values(settings: type, where: str, table: dict, names: dict, hidden=(), also=()) -> dict:
    """The keyword arguments of the dataclass ``settings`` from a table of ``federation.toml``.

    Parameters
    ----------
    settings : type
        The family's settings dataclass: its fields are the keys the table may hold.
    where : str
        The file and table (``"federation.toml [training]"``), starting every error.
    table : dict
        The table's keys and values (the caller's own keys already taken out).
    names : dict
        The table's other names of fields (``{"iterations": "max_iter"}``); a name mapped to None is a key the
        registry reads (``model``, the family's word) and the settings do not take.
    hidden : iterable of str
        Fields the table may not set (they are set from another key).
    also : iterable of str
        Keys the caller reads from the same table, listed among the expected ones.

    Returns
    -------
    dict
        Field name to value; a field given twice (by two of its names) is refused.
    """
    fields = {f.name for f in dataclasses.fields(settings)} - set(hidden)
    check_keys(where, table, fields | set(names) | set(also))
    values, given = {}, {}
    for key, value in table.items():
        name = names.get(key, key)
        if key in names and name is None:
            continue
        if name in values:
            raise ConfigurationError(f"{where}: {name!r} is given twice (as {given[name]!r} and {key!r})")
        values[name], given[name] = value, key
    return values


def built(settings: type, where: str, values: dict):
    """``settings(**values)``, its refusal starting with ``where``."""
    try:
        return settings(**values)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None
