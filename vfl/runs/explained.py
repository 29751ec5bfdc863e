"""What the label party ends an explanation with, as the estimators return it: a frame per row, and reasons.

Every family's explanation run leaves the label party with the same pieces
(:func:`explained`): its own columns' contributions (for the trees and networks:
its party total), one total per feature party, perhaps a code per row from a
feature party that consented to name its columns, and the base value.  This
module turns them into the estimators' answers: :func:`frame` (``explain``) and
:func:`reasons` (``predict_reasons``).  It imports no family.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from vfl.errors import ConfigurationError, DataError
from vfl.parties.explain import party_code, rank_reasons

#: The base value's column in an explanation.
BASE = "base_value"


def explained(own_columns, own, parties: dict, base: float | np.ndarray, own_codes=None) -> dict:
    """The label party's explanation: ``own`` (rows, own columns), per feature party ``{"totals", "codes",
    "names"}``, the base value; ``own_codes``: what a reason calls each own column (default its name)."""
    return {"columns": list(own_columns), "own": np.asarray(own, dtype=np.float64), "parties": parties,
            "base": base, "own_codes": list(own_codes) if own_codes is not None else None}


def party_level(values: dict) -> dict:
    """:func:`explained` of a party-level explanation (trees, networks): ``values`` is ``{"players", "shapley"
    (rows, players), "base"}``, the label party first; each party is one unit, named ``"information from
    <party>"`` (a party-level value names parties, not columns)."""
    phi, players = values["shapley"], values["players"]
    return explained([players[0]], phi[:, :1], {k: {"totals": phi[:, i + 1], "codes": None, "names": []}
                                                for i, k in enumerate(players[1:])},
                     values["base"], own_codes=[party_code(players[0])])


def frame(result: dict, index=None) -> pd.DataFrame:
    """Per row: the label party's own columns, one column per feature party (its total), the base value; each
    row sums to the raw score."""
    columns = {}
    for j, name in enumerate(result["columns"]):
        columns[name] = result["own"][:, j]
    for k, part in result["parties"].items():
        if k in columns:
            raise DataError(f"the label party has a column named {k!r}, the name of a feature party: rename the "
                            "column to explain")
        columns[k] = part["totals"]
    n_rows = len(result["own"])
    if BASE in columns:
        raise DataError(f"a party or column is named {BASE!r}, the explanation's base value: rename it to explain")
    columns[BASE] = np.broadcast_to(np.asarray(result["base"], dtype=np.float64), (n_rows,)).copy()
    return pd.DataFrame(columns, index=index)


def reasons(result: dict, k: int, sign: float, index=None) -> pd.DataFrame:
    """Per row the codes of the ``k`` largest contributions toward the adverse side (``sign``: +1 when a higher
    score is adverse): the label party's column names, a feature party's published code where it named one,
    else ``"information from <party>"``; ``reason_1`` .. ``reason_k``, None where fewer push that way."""
    n_rows = len(result["own"])
    units = [result["own"][:, j] for j in range(result["own"].shape[1])]
    codes = [np.full(n_rows, name, dtype=object) for name in (result.get("own_codes") or result["columns"])]
    for party, part in result["parties"].items():
        units.append(part["totals"])
        named = np.full(n_rows, party_code(party), dtype=object)
        if part.get("codes") is not None:
            at = part["codes"] >= 0
            named[at] = np.asarray(part["names"], dtype=object)[part["codes"][at]]
        codes.append(named)
    values = np.column_stack(units) if units else np.zeros((n_rows, 0))
    ranked = rank_reasons(values, np.column_stack(codes) if codes else np.zeros((n_rows, 0)), k, sign)
    table = [row + [None] * (k - len(row)) for row in ranked]
    return pd.DataFrame(table, columns=[f"reason_{i + 1}" for i in range(k)], index=index, dtype=object)


def adverse_sign(classes, adverse) -> float:
    """+1 when a higher raw score is adverse, -1 when lower: a classifier's ``adverse`` is a class (default: the
    positive class ``classes[1]``, whose log-odds the score is); a regressor's ``"high"`` (default) or ``"low"``."""
    if classes is None:
        if adverse in (None, "high"):
            return 1.0
        if adverse == "low":
            return -1.0
        raise ConfigurationError(f"adverse must be 'high' or 'low' for a regressor (which side of the prediction "
                                 f"is adverse), got {adverse!r}")
    classes = list(classes)
    if len(classes) != 2:
        raise ConfigurationError(f"explanations and reasons take a binary model; this one has {len(classes)} "
                                 "classes (one-vs-rest): explain one class's model at a time")
    if adverse is None or adverse == classes[1]:
        return 1.0
    if adverse == classes[0]:
        return -1.0
    raise ConfigurationError(f"adverse must be one of the classes {classes}, got {adverse!r}")


def check_reason_columns(reason_columns, feature_columns: dict) -> dict:
    """A feature party's consent to name its columns: ``{party: [column, ...]}`` or ``{party: {column: code}}``;
    returns ``{party: {column: code}}``, every party and column checked."""
    if reason_columns is None:
        return {}
    if not isinstance(reason_columns, dict):
        raise ConfigurationError(f"reason_columns must be a dict of feature party to its columns it lets be "
                                 f"named, got {type(reason_columns).__name__}")
    out = {}
    for party, named in reason_columns.items():
        if party not in feature_columns:
            raise ConfigurationError(f"reason_columns names party {party!r}, which is not a feature party "
                                     f"{sorted(feature_columns)}")
        if isinstance(named, str) or not hasattr(named, "__iter__"):
            raise ConfigurationError(f"reason_columns[{party!r}] must be a list of its columns (or a dict of "
                                     f"column to code), got {named!r}")
        codes = dict(named) if isinstance(named, dict) else {c: c for c in named}
        bad = [c for c, code in codes.items() if not isinstance(code, str) or not code]
        if bad:
            raise ConfigurationError(f"reason_columns: party {party}'s code for column {bad[0]!r} must be a "
                                     "non-empty string")
        out[party] = consented(codes, feature_columns[party], party, "its model",
                               f"name only its own columns in reason_columns[{party!r}]")
    return out


def consented(codes: dict, columns, party: str, model: str, fix: str, error: type = ConfigurationError) -> dict:
    """Party ``party``'s consent ``{column: code}`` checked against the columns of its model, in their order: the
    one check of a consent's columns the estimators, ``vfl predict`` and ``vfl serve`` make.

    ``model`` names the model in the message ("its model", "model version 3"), ``fix`` says how to mend the
    consent, ``error`` is the exception the caller raises (``vfl predict``: a :class:`~vfl.errors.DataError`,
    which a party tells its peers before it stops).
    """
    columns = list(columns)
    unknown = [c for c in codes if c not in columns]
    if unknown:
        raise error(f"party {party}: its reason_columns names {unknown[0]!r}, a column {model} does not have (its "
                    f"columns: {columns}); {fix}")
    return {c: codes[c] for c in columns if c in codes}
