"""One set of checks on a party's table, shared by the in-process API and the ``vfl`` command.

:class:`vfl.VerticalDataset` (and :func:`vfl.psi.intersect`) and the CSV reader
of ``vfl party`` (:func:`vfl.deploy.data.load_csv`) call these functions,
so a bad table is refused the same way on both paths, each message naming the
party, the column and the row (and its id where there is one):

* ids (:func:`canonical_id`): missing, blank, boolean or infinite ids are
  refused; ``" 7 "``, ``7``, ``7.0`` and ``"7.0"`` are one id;
* columns (:func:`check_columns`): no MultiIndex, no repeated names, and a
  feature party holds neither the label column nor the label party's weights
  (:func:`check_feature_party_columns`);
* values (:func:`feature_values`, :func:`label_values`): features numeric, real
  and finite (missing values allowed where the model takes them, :func:`check_complete`
  refusing them for the linear models); labels present and finite.
"""

from __future__ import annotations

import difflib
import math
import re
import unicodedata

import numpy as np
import pandas as pd

from vfl.errors import DataError

_INTEGRAL = re.compile(r"^([+-]?\d+)\.0*\Z")


def check_label_held(label: str, columns: dict) -> None:
    """Refuse a label column that no party holds: list each party's columns and the closest name.

    Parameters
    ----------
    label : str
        The label column asked for (``label=`` or ``[data] label``).
    columns : dict of str to list of str
        Each party's columns (a party name, or ``"party NAME (FILE)"``, to its column names).

    Raises
    ------
    DataError
        When no party's columns include ``label``: a misspelt label would otherwise leave the real label
        column among the features (and be reported as a feature that is not numeric).
    """
    if any(label in cols for cols in columns.values()):
        return
    names = {str(c).lower(): str(c) for cols in columns.values() for c in cols}     # 'Y' is close to 'y'
    close = difflib.get_close_matches(str(label).lower(), list(names), n=1)
    hint = f" (did you mean {names[close[0]]!r}?)" if close else ""
    if len(columns) == 1:       # one party's own table (vfl party reads only its own CSV)
        (where, cols), = columns.items()
        raise DataError(f"{where}: there is no label column {label!r}{hint}; its columns are {_listing(cols)}")
    listed = "; ".join(f"{party}: {_listing(cols)}" for party, cols in columns.items())
    raise DataError(f"no party holds the label column {label!r}{hint}; the columns are {listed}")


def _listing(columns, limit: int = 20) -> str:
    shown = [str(c) for c in list(columns)[:limit]]
    more = len(columns) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "") if shown else "(none)"


def canonical_id(value) -> str:
    """The canonical text of one id.

    Strings lose surrounding whitespace and are NFC-normalized; integers, and
    floats with an integral value, become their decimal digits (``7.0`` ->
    ``"7"``), and so does text of that form (``"7.0"`` -> ``"7"``, as a CSV
    written from floats holds it; ``"007"`` stays ``"007"``); other finite floats
    their shortest round-trip text (``"1.5"``).

    Raises
    ------
    ValueError
        For a missing value (None, NaN, NA), a boolean, an infinite float, an
        empty or blank string or a value of another type; the message says which.
    """
    if value is None or value is pd.NA or value is pd.NaT:
        raise ValueError("the id is missing")
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"the id is a boolean ({value}); ids are text or integers")
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isnan(value):
            raise ValueError("the id is missing (NaN)")
        if math.isinf(value):
            raise ValueError(f"the id is {value}")
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        text = unicodedata.normalize("NFC", value.strip())
        if not text:
            raise ValueError("the id is empty" + (f" (only whitespace: {value!r})" if value else ""))
        integral = _INTEGRAL.match(text)
        return integral.group(1) if integral else text
    raise ValueError(f"the id is a {type(value).__name__}; ids are text or integers")


def canonical_ids(values, where: str, column: str) -> list[str]:
    """The canonical ids of a column, one per row; ``where`` names the party (``"party A"``) in errors.

    Raises
    ------
    DataError
        Naming the party, the column and the row (0-based position) of the first bad id.
    """
    values = values.to_numpy() if isinstance(values, (pd.Series, pd.Index)) else np.asarray(values, dtype=object)
    if values.dtype.kind in "iu":                      # integer column: nothing can be wrong with it
        return [str(v) for v in values.tolist()]
    out = []
    for row, value in enumerate(values.tolist()):
        try:
            text = canonical_id(value)
            text.encode("utf-8")
        except (ValueError, UnicodeEncodeError) as exc:
            reason = "the id is not valid Unicode text (a lone surrogate)" if isinstance(exc, UnicodeEncodeError) \
                else exc                        # (UnicodeEncodeError is a ValueError: asked first)
            raise DataError(f"{where}: id column {column!r}, row {row}: {reason}") from None
        out.append(text)
    return out


def check_id_column(where: str, columns, id_column: str) -> None:
    """Refuse a table without its id column, naming the columns it has."""
    if id_column not in columns:
        raise DataError(f"{where}: the id column {id_column!r} is missing; its columns are "
                        f"{[str(c) for c in columns][:10]}")


def check_distinct_ids(where: str, canonical, given=None) -> None:
    """Refuse an id that appears twice (compared as canonical text), naming it as given and both rows."""
    first: dict = {}
    for row, key in enumerate(canonical):
        seen = first.setdefault(key, row)
        if seen != row:
            shown = show(given[row]) if given is not None else repr(key)
            raise DataError(f"{where}: id {shown} appears twice (rows {seen} and {row}; ids are compared as text "
                            "without surrounding spaces, and 7 and 7.0 are one id)")


def check_has_columns(where: str, columns, why: str = "") -> None:
    """Refuse a party with no feature column (``why``: what needs one)."""
    if not len(columns):
        raise DataError(f"{where}: no feature columns (besides the id and the label){why}")


def check_columns(where: str, frame: pd.DataFrame) -> None:
    """Column names a party's table can be trained on: one level, each name once."""
    if isinstance(frame.columns, pd.MultiIndex):
        raise DataError(f"{where}: the columns have {frame.columns.nlevels} levels (a MultiIndex such as "
                        f"{frame.columns[0]!r}); give one name per column, e.g. "
                        "frame.columns = ['_'.join(map(str, c)) for c in frame.columns]")
    names = pd.Index([str(c) for c in frame.columns])      # as the dataset names them: 1 and "1" are one name
    duplicated = names[names.duplicated()]
    if len(duplicated):
        raise DataError(f"{where}: duplicate column name(s) {sorted(set(duplicated))} (names are compared as text)")


def check_feature_party_columns(where: str, columns, foreign) -> None:
    """A feature party's table holds none of the label party's columns ``foreign`` (its label, its row weights)."""
    for name in foreign:
        if name is not None and name in list(columns):
            raise DataError(f"{where}: holds the column {name!r}, the label party's (its label or its sample "
                            "weights), but this party is a feature party: it would train on it as a feature. "
                            f"Drop {name!r} from this party's data; only the label party holds it")


def check_shared_id_columns(tables: dict[str, pd.DataFrame]) -> None:
    """Without an id column: refuse a column every party holds with the same values, row for row (a row id)."""
    (first, frame), *others = tables.items()
    for column in frame.columns:
        if all(column in other.columns for _, other in others) and all(
                len(other) == len(frame) and frame[column].reset_index(drop=True).equals(
                    other[column].reset_index(drop=True)) for _, other in others):
            raise DataError(f"every party holds a column {column!r} with the same values in every row: a row id, "
                            f"which would become a feature at each party; pass id_column={column!r} (or drop it)")


def feature_values(where: str, frame: pd.DataFrame, columns, ids=None, missing: bool = False) -> np.ndarray:
    """``frame[columns]`` as floats: each column numeric and real, each value finite; else an error naming it.

    With ``missing``, NaN (a missing value) is allowed: gradient boosting takes
    gaps as they are.  Infinity is refused either way.
    """
    columns = list(columns)
    for column in columns:
        dtype = frame[column].dtype
        if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)):
            raise DataError(f"{where}, column {column!r}: not numeric (dtype {dtype})"
                            f"{_first_text(frame[column], ids)}; encode categories as numbers first")
        if pd.api.types.is_complex_dtype(dtype):
            raise DataError(f"{where}, column {column!r}: complex numbers (dtype {dtype}); the protocol "
                            "takes real values only (split the real and imaginary parts into two columns)")
    values = frame[columns].to_numpy(dtype=np.float64)
    bad = np.isinf(values) if missing else ~np.isfinite(values)
    if bad.any():
        row, col = map(int, np.argwhere(bad)[0])
        what = "NaN" if np.isnan(values[row, col]) else "infinity"
        raise DataError(f"{where}, column {columns[col]!r}: {what} at {_row(row, ids)}"
                        + (f" and {int(bad.sum()) - 1} more" if bad.sum() > 1 else "")
                        + ("" if missing or what != "NaN" else f"; {NO_GAPS}"))
    return values


def _first_text(column: pd.Series, ids) -> str:
    """Where a column that should be numeric first holds something else: `` (row 3 (id 'c-17') holds 'abc')``."""
    values = column.to_numpy(dtype=object)
    numbers = pd.to_numeric(column, errors="coerce").to_numpy()
    bad = np.flatnonzero(pd.isna(numbers) & ~pd.isna(values))
    if not len(bad):
        return ""
    text = str(values[bad[0]])
    return f": {_row(int(bad[0]), ids)} holds {text if len(text) <= 40 else text[:37] + '...'!r}"


#: Why the linear models and the split networks refuse a missing value, and what to do.
NO_GAPS = ("linear models and neural networks need every value: fill the gaps first, or use a gradient-boosting "
           "model (vfl.VerticalGradientBoostingClassifier / Regressor), which takes missing values as they are")


def check_complete(where: str, values: np.ndarray, columns, ids=None) -> None:
    """Refuse a missing value (NaN) in ``values``, naming the column and the row (linear models, networks)."""
    gaps = np.isnan(values)
    if gaps.any():
        row, col = map(int, np.argwhere(gaps)[0])
        raise DataError(f"{where}, column {list(columns)[col]!r}: NaN at {_row(row, ids)}"
                        + (f" and {int(gaps.sum()) - 1} more" if gaps.sum() > 1 else "") + f"; {NO_GAPS}")


def label_values(where: str, column: pd.Series, ids=None) -> np.ndarray:
    """The labels as given (numbers, or class values such as strings); none missing, none infinite."""
    if pd.api.types.is_complex_dtype(column.dtype):
        raise DataError(f"{where}, column {column.name!r}: complex numbers (dtype {column.dtype}); "
                        "a label must be real (or any two class values)")
    values = column.to_numpy()
    missing = np.array(column.isna(), dtype=bool)
    if pd.api.types.is_numeric_dtype(column.dtype) and not missing.any():
        missing |= ~np.isfinite(values.astype(np.float64))   # the values keep their type (int, bool, float)
    if missing.any():
        row = int(np.flatnonzero(missing)[0])
        what = "NaN" if pd.isna(values[row]) else "infinity"
        raise DataError(f"{where}, column {column.name!r}: {what} at {_row(row, ids)}")
    return values


def show(value) -> str:
    """An id as the user wrote it (``1004``, ``'c-17'``), not as numpy's repr."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _row(row: int, ids) -> str:
    return f"row {row}" + (f" (id {show(ids[row])})" if ids is not None else "")
