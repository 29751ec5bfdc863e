"""One party's CSV: an id column, its feature columns and (the label party) the label.

Rows are put in the order of their ids (compared as text), so that parties
holding the same ids hold them in the same order without ever exchanging them.
At connect, each feature party and the label party compare only a digest of
their sorted ids, salted afresh for every run (:func:`new_salt`,
:meth:`PartyData.ids_digest`).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

import numpy as np
import pandas as pd

from vfl.datachecks import (canonical_ids, check_columns, check_distinct_ids, check_feature_party_columns,
                             check_has_columns, check_id_column, check_label_held, feature_values, label_values)
from vfl.errors import DataError, file_problem


@dataclass
class PartyData:
    """The rows of one party: sorted by id as read, in the common order once aligned (:meth:`take`)."""

    ids: list[str]
    columns: list[str]
    features: np.ndarray
    labels: np.ndarray | None = None
    #: the label party's row weights (``[data] sample_weight``), or None
    weights: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return len(self.ids)

    def take(self, rows) -> "PartyData":
        """These rows only, in this order (a private set intersection's result)."""
        rows = np.asarray(rows, dtype=np.int64)
        return PartyData(ids=[self.ids[i] for i in rows.tolist()], columns=list(self.columns),
                         features=self.features[rows], labels=None if self.labels is None else self.labels[rows],
                         weights=None if self.weights is None else self.weights[rows])

    def id_bytes(self) -> list[bytes]:
        """The ids as the private set intersection hashes them (UTF-8 of their canonical text)."""
        return [i.encode("utf-8") for i in self.ids]

    def ids_digest(self, salts) -> str:
        """SHA-256 of both parties' salts and the sorted ids: equal digests, same rows.

        The ids themselves are never sent.  ``salts`` are the two parties' fresh
        salts of this run, taken in sorted order so both compute the same digest;
        the salts make a digest worthless in any other run, and unknown before
        both parties have sent theirs, so none can be computed in advance from a
        guessed id set.
        """
        h = hashlib.sha256(b"vfl-ids-digest/2\n")
        for part in [*sorted(salts), *self.ids]:
            data = part.encode("utf-8")
            h.update(len(data).to_bytes(8, "big") + data)   # length-prefixed: no id can mimic a boundary
        return h.hexdigest()


#: Bytes of randomness in a salt (sent as hexadecimal).
SALT_BYTES = 16


def new_salt() -> str:
    """A fresh random salt for this run's id digest, from the operating system's CSPRNG."""
    return secrets.token_hex(SALT_BYTES)


def is_salt(value) -> bool:
    """Whether a peer's salt has the form :func:`new_salt` gives."""
    return (isinstance(value, str) and len(value) == 2 * SALT_BYTES
            and all(c in "0123456789abcdef" for c in value))


def load_csv(path, role: str, id_column: str = "id", label: str | None = None, columns=None,
             label_required: bool = True, weight: str | None = None, foreign=(), missing: bool = False) -> PartyData:
    """Read party ``role``'s CSV, checked by :mod:`vfl.datachecks` as the in-process API checks its frames.

    Parameters
    ----------
    path : path
    role : str
        The party's name, used in error messages.
    id_column : str
    label : str, optional
        The label column (the label party); ``None`` for a party without labels.
    columns : list of str, optional
        The feature columns expected, in this order (prediction: the columns the
        model was trained on).  By default every column but the id and label.
    label_required : bool
        Whether the label column must be present (training) or may be absent (prediction).
    weight : str, optional
        The label party's column of row weights: read with the label (each a finite
        number from 0 to 65536), never a feature.
    foreign : iterable of str
        A feature party: the label party's columns (the label, the weights), which
        its CSV must not hold (it would train on them as features).
    missing : bool
        Empty cells (missing values) are kept as NaN, for gradient boosting; without
        it they are refused, naming the column and the row's id, as the linear models need.
    """
    problem = file_problem(path)
    if problem:
        raise DataError(f"party {role}: data file {path} {problem}")
    try:
        frame = pd.read_csv(path, dtype={id_column: str}, keep_default_na=True)
    except FileNotFoundError:
        raise DataError(f"party {role}: data file {path} does not exist") from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"party {role}: cannot read {path} as CSV: {exc}") from None
    where = f"party {role} ({path})"
    if label is not None and label == id_column:
        raise DataError(f"{where}: the label column {label!r} is also the id column; the label must be "
                        "another column (set [data] label and id_column to two different columns)")
    check_columns(where, frame)
    check_id_column(where, frame.columns, id_column)
    if frame.empty:
        raise DataError(f"{where}: no rows")
    check_feature_party_columns(where, frame.columns, foreign)
    given = frame[id_column].tolist()
    frame = frame.assign(**{id_column: canonical_ids(frame[id_column], where, id_column)})
    ids = frame[id_column].tolist()        # in the file's order: a problem names the file's data row (from 0)
    check_distinct_ids(where, ids, given)

    labels = None
    if label is not None and label in frame.columns:
        labels = label_values(where, frame[label], ids)
    elif label is not None and label_required:
        check_label_held(label, {where: [c for c in frame.columns if c != id_column]})

    weights = None
    if weight is not None and weight in frame.columns and labels is not None:
        weights = _weights(frame, weight, id_column, where)
    elif weight is not None and label_required:
        raise DataError(f"{where}: the sample weight column {weight!r} is missing")
    available = [c for c in frame.columns if c not in (id_column, label, weight)]
    if columns is None:
        columns = available
    else:
        absent = [c for c in columns if c not in frame.columns]
        extra = [c for c in available if c not in columns]
        if absent or extra:
            raise DataError(f"{where}: columns differ from the model's (missing {absent}, unexpected {extra})")
    check_has_columns(where, columns)
    features = feature_values(where, frame, columns, ids, missing=missing)
    order = np.argsort(np.array(ids, dtype=object), kind="stable")        # then the rows sorted by id
    return PartyData(ids=[ids[i] for i in order], columns=[str(c) for c in columns], features=features[order],
                     labels=None if labels is None else labels[order],
                     weights=None if weights is None else weights[order])


def _weights(frame: pd.DataFrame, column: str, id_column: str, where: str) -> np.ndarray:
    """The row weights of ``column``: finite numbers in ``[0, 65536]``, else an error naming the row's id."""
    if not pd.api.types.is_numeric_dtype(frame[column].dtype) or pd.api.types.is_complex_dtype(frame[column].dtype):
        raise DataError(f"{where}, sample weight column {column!r}: not numeric (dtype {frame[column].dtype})")
    values = frame[column].to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0) | (values > 65536))
    if bad.size:
        raise DataError(f"{where}, sample weight column {column!r}: {float(values[bad[0]])!r} at id "
                        f"{frame[id_column].iloc[int(bad[0])]!r} is not a finite number from 0 to 65536")
    return values
