"""``VerticalDataset``: the same rows, split by columns between two or more parties.

Every check names what is wrong — the party, the column, the row — so that a
bad frame never reaches the protocol.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from vfl.datachecks import (canonical_ids, check_columns, check_complete, check_distinct_ids, check_has_columns,
                             check_id_column, check_label_held, check_shared_id_columns, feature_values, label_values,
                             show as _show)
from vfl.errors import DataError


class VerticalDataset:
    """Aligned frames of two or more parties; the label column lives in exactly one of them.

    Parameters
    ----------
    frames : mapping of party name to DataFrame or 2-D array
        Two or more parties, named as you like ("bank", "telco").  Arrays get
        columns ``x0, x1, ...`` and are matched to the training columns by position
        at prediction time.  Without ``id_column``, rows are matched by position,
        and DataFrames must have the same index.
    label : str, optional
        Name of the label column.  The party whose frame holds it is the label
        party (Yang et al.'s B); every other party is a feature party (A).  Test
        data for prediction may leave it out.
    id_column : str, optional
        A column present in every frame; the ids must be the same, in the same order.
        It is checked and then dropped from the features.

    Feature values must be numbers; a missing value (NaN) is kept as it is, for
    the gradient-boosting models, and refused by the linear ones at ``fit`` and
    ``predict`` (naming the party, column and row).

    Attributes
    ----------
    parties : tuple of str
        The party names, in the order given.
    label_party : str or None
        The party holding the label (B), if the label is present.
    feature_parties : tuple of str
        The other parties, in the order given (empty without a label).
    """

    def __init__(self, frames: Mapping[str, object], label: str | None = None, id_column: str | None = None):
        if not isinstance(frames, Mapping) or not frames:
            raise DataError("no frames given: pass a mapping {party name: DataFrame} with two or more parties")
        if len(frames) < 2:
            raise DataError(f"vertical learning takes two or more parties' frames, got {len(frames)}: {list(frames)}")
        if label is not None and id_column is not None and label == id_column:
            raise DataError(f"the label column {label!r} is also the id column: the ids would become the target. "
                            "Pass label='the column to predict' and id_column='the column of row ids', "
                            "two different columns (or leave id_column out to match rows by position)")
        self.parties = tuple(str(p) for p in frames)
        self.label = label
        self.id_column = id_column
        #: parties whose data came as arrays: their columns are positional (``x0, x1, ...``)
        self.positional = {str(p): not isinstance(f, pd.DataFrame) for p, f in frames.items()}
        if id_column is None:
            _check_index(frames)
        tables = {str(p): _as_frame(str(p), f) for p, f in frames.items()}

        holders = [p for p, f in tables.items() if label is not None and label in f.columns]
        if len(holders) > 1:
            hint = (" (arrays get columns x0, x1, ...: give the labelled party as a DataFrame with named columns)"
                    if any(self.positional.values()) else "")
            raise DataError(f"the label column {label!r} is in the frames of {' and '.join(holders)}; "
                            f"it must live in exactly one party's frame{hint}")
        self.label_party = holders[0] if holders else None

        if id_column is None:
            check_shared_id_columns(tables)
        self.ids = self._check_ids(tables) if id_column is not None else None
        rows = {p: len(f) for p, f in tables.items()}
        if len(set(rows.values())) != 1:
            raise DataError("the parties have different row counts: "
                            + ", ".join(f"party {p} has {n}" for p, n in rows.items()))
        self.n_rows = next(iter(rows.values()))

        self.labels = None
        if self.label_party is not None:
            self.labels = label_values(f"party {self.label_party}", tables[self.label_party][label], self.ids)
        self._frames = {}
        for party, frame in tables.items():
            drop = [c for c in (id_column, label) if c is not None and c in frame.columns]
            self._frames[party] = frame.drop(columns=drop)
        for party, frame in self._frames.items():
            try:
                feature_values(f"party {party}", frame, frame.columns, self.ids, missing=True)
            except DataError:
                if label is not None and self.label_party is None:
                    self.require_label()    # a misspelt label leaves the real one among the features
                raise

    def _check_ids(self, tables: dict[str, pd.DataFrame]) -> np.ndarray:
        """Each party's ids present, not blank, distinct, and the same row by row (compared as canonical ids)."""
        keys = {}
        for party, frame in tables.items():
            check_id_column(f"party {party}", frame.columns, self.id_column)
            keys[party] = pd.Series(canonical_ids(frame[self.id_column], f"party {party}", self.id_column),
                                    dtype=object)
            check_distinct_ids(f"party {party}", keys[party].tolist(), frame[self.id_column].tolist())
        (first, a), *others = [(p, f[self.id_column].to_numpy()) for p, f in tables.items()]
        for second, b in others:
            if len(a) != len(b):
                raise DataError(f"party {first} has {len(a)} rows (ids) but party {second} has {len(b)}")
            differ = np.flatnonzero(keys[first].to_numpy() != keys[second].to_numpy())
            if differ.size:
                rows = ", ".join(f"row {i}: {_show(a[i])} vs {_show(b[i])}" for i in differ[:5])
                raise DataError(f"the parties' ids differ at {differ.size} row(s) ({first} vs {second}): {rows}; "
                                "align the rows (same ids, same order) before training, or use vfl.psi")
        return a

    # -- accessors ---------------------------------------------------------------
    def require_label(self) -> None:
        """Raise :class:`DataError` unless some party holds the label column (listing every party's columns)."""
        if self.label is None:
            raise DataError("fit needs labels: name the label column with VerticalDataset(..., label='column'), "
                            "in one party's frame")
        if self.label_party is None:
            check_label_held(self.label, {f"party {p}": list(f.columns) for p, f in self._frames.items()})

    @property
    def feature_parties(self) -> tuple[str, ...]:
        """The parties without the label (Yang et al.'s A), when the label is present."""
        if self.label_party is None:
            return ()
        return tuple(p for p in self.parties if p != self.label_party)

    @property
    def feature_party(self) -> str | None:
        """The one party without the label, in a two-party data set (see :attr:`feature_parties`)."""
        if len(self.feature_parties) > 1:
            raise DataError(f"this data set has {len(self.feature_parties)} feature parties "
                            f"{list(self.feature_parties)}: use feature_parties")
        return self.feature_parties[0] if self.feature_parties else None

    def require_columns(self, model: str) -> None:
        """Refuse a party with no column, naming it: every party of ``model`` (e.g. "a linear model") needs one."""
        for party in self.parties:
            check_has_columns(f"party {party}", self.columns(party), f"; every party of {model} needs at least one")

    def require_complete(self) -> None:
        """Refuse a missing value (NaN) in any party's columns, naming it (linear models and networks need them all)."""
        for party in self.parties:
            check_complete(f"party {party}", self.features(party), self.columns(party), self.ids)

    def prediction_features(self, trained: Mapping[str, list]) -> dict[str, np.ndarray]:
        """Each party's values to score, checked against the columns it trained on (``{party: columns}``).

        The parties must be the training's; each party's columns the training's, in the same order (a party
        given as an array takes its columns in the training order, as scikit-learn does).

        Raises
        ------
        DataError
            Naming the parties, or the party whose columns differ and how.
        """
        if set(self.parties) != set(trained):
            raise DataError(f"prediction data has parties {list(self.parties)}, "
                            f"the model was trained with {list(trained)}")
        out = {}
        for name, columns in trained.items():
            given = self.columns(name)
            if not (self.positional.get(name) and len(given) == len(columns)) and given != list(columns):
                missing = [c for c in columns if c not in given]
                extra = [c for c in given if c not in columns]
                how = f"missing {missing}, unexpected {extra}" if missing or extra else \
                    f"the same columns in another order: trained {list(columns)[:20]}, given {given[:20]}"
                raise DataError(f"party {name}: prediction columns differ from training ({how})")
            out[name] = self.features(name)
        return out

    def columns(self, party: str) -> list[str]:
        return [str(c) for c in self._frame(party).columns]

    def features(self, party: str) -> np.ndarray:
        return self._frame(party).to_numpy(dtype=np.float64)

    def _frame(self, party: str) -> pd.DataFrame:
        try:
            return self._frames[party]
        except KeyError:
            raise DataError(f"no party named {party!r}; parties are {list(self.parties)}") from None

    def __repr__(self) -> str:
        cols = ", ".join(f"{p}: {len(self.columns(p))} columns" for p in self.parties)
        return f"VerticalDataset({self.n_rows} rows; {cols}; label={self.label!r} at {self.label_party})"


def _check_index(frames: Mapping[str, object]) -> None:
    """Without ids rows are matched by position: refuse DataFrames whose index labels disagree."""
    tables = [(str(p), f) for p, f in frames.items() if isinstance(f, pd.DataFrame)]
    if len(tables) < 2:
        return
    (first, a), *others = tables
    for second, b in others:
        if len(a) != len(b) or a.index.equals(b.index):
            continue    # different lengths are reported later, with every party's count
        differ = np.flatnonzero(a.index.to_numpy() != b.index.to_numpy())
        shown = ", ".join(f"row {i}: {_show(a.index[i])} vs {_show(b.index[i])}" for i in differ[:3])
        raise DataError(f"the frames of {first} and {second} have different index labels at {differ.size} row(s) "
                        f"({shown}); without id_column rows are matched by position, so align the frames or pass "
                        "id_column (or reset_index(drop=True) on all if their order is already the same)")


def _as_frame(party: str, frame) -> pd.DataFrame:
    if isinstance(frame, pd.DataFrame):
        table = frame
    else:
        array = np.asarray(frame)
        if array.ndim != 2:
            raise DataError(f"party {party}: expected a DataFrame or a 2-D array, got shape {array.shape}")
        table = pd.DataFrame(array, columns=[f"x{j}" for j in range(array.shape[1])])
    if len(table) == 0:
        raise DataError(f"party {party}: the frame is empty (no rows)")
    check_columns(f"party {party}", table)
    return table.reset_index(drop=True)


def score_labels(data, y=None) -> np.ndarray:
    """The labels ``score(data, y)`` compares with: ``y`` if given (scikit-learn's meaning), else the data's own."""
    if y is not None:
        return np.asarray(y)
    if getattr(data, "labels", None) is None:
        raise DataError("score needs labels: the data has no label column and no y was given")
    return data.labels


def check_fit_arguments(data, y) -> None:
    """Answer scikit-learn's ``fit(X, y)`` with what vertical data looks like here; a fit needs labels."""
    usage = ("pass VerticalDataset({'A': frame_a, 'B': frame_b}, label='y', id_column='id') instead of (X, y), "
             "with the label column inside the labelled party's frame")
    if y is not None:
        raise DataError(f"fit takes a VerticalDataset that holds the labels, not scikit-learn's (X, y) "
                        f"(got {type(data).__name__}, {type(y).__name__}): {usage}")
    if not isinstance(data, VerticalDataset):
        raise DataError(f"fit takes a VerticalDataset, got {type(data).__name__}: {usage}")
