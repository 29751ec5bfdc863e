"""What every shard reader checks the same way: a model parameter, a value quoted in an error."""

from __future__ import annotations

import math

from vfl.crypto.encoding import MAX_PARAMETER
from vfl.errors import DataError


def finite(path, field: str, value) -> None:
    """A model parameter: a finite number within :data:`~vfl.crypto.encoding.MAX_PARAMETER`, else a DataError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError(f"{path}: {field} must be a finite number, got {short(value)}")
    if abs(value) > MAX_PARAMETER:
        raise DataError(f"{path}: {field} = {value:.6g} is beyond the range of a model parameter (|value| <= 2**256 "
                        "= 1.16e77): no training gives it, and every row's score would leave the range the protocol "
                        "can encode; the shard is corrupt")


def short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_head(path, shard: dict, party: str, role: str, fmt: str, what: str) -> list:
    """The fields every shard starts with: its format, its party, its role, its columns; return the columns.

    ``what`` names the kind of shard in the error (``"model shard"``, ``"gradient-boosting shard"``).
    """
    if shard.get("format") != fmt or shard.get("party") != party:
        raise DataError(f"{path} is not party {party}'s {what} (party {short(shard.get('party'))}, "
                        f"format {short(shard.get('format'))})")
    if shard.get("role") != role:
        raise DataError(f"{path} is the model shard of a {short(shard.get('role'))} party; party {party} is the "
                        f"{role} party of this federation")
    columns = shard.get("columns")
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise DataError(f"{path}: 'columns' must be a list of column names, got {short(columns)}")
    return columns
