"""A party's rows by id, for online scoring: an SQL database (SQLite by default) or a CSV file.

A store answers one question, :meth:`Store.lookup`: the rows of these ids, in
these columns, and which ids it holds.  Ids are compared as their canonical text
(:func:`vfl.datachecks.canonical_id`: ``" 7 "``, ``7`` and ``7.0`` are one id), as
in training and batch prediction.

* :class:`SQLStore`: any SQLAlchemy URL (``sqlite:///telco.db``, the default kind;
  ``postgresql+psycopg://...`` for real deployments).  The table (or view) holds
  one row per id: an id column compared as text (each id written as its
  canonical text, checked when the store opens), and the model's columns.  Ids
  reach the database only as bound parameters, never spliced into SQL text; the
  id column is compared with them as text (on PostgreSQL, a view can cast an
  integer id: ``CREATE VIEW features AS SELECT id::text AS id, ...``).
  :func:`load_csv_into` fills a table from a CSV, with the checks of training.
* :class:`CSVStore`: a CSV read into memory at start, for small deployments.

Empty cells and SQL ``NULL`` are missing values (``NaN``): a linear model refuses
such a row for that id only, a tree model takes it as missing.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from vfl.datachecks import canonical_id
from vfl.errors import ConfigurationError, DataError
from vfl.deploy.data import load_csv

#: Ids per ``IN (...)`` query (SQLite's bound on parameters is far above; PostgreSQL's too).
_CHUNK = 500


class Store:
    """What every store offers: ``lookup(ids, columns) -> (values, found)``."""

    description = "store"

    def lookup(self, ids: list[str], columns: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The rows of ``ids`` in ``columns``: ``(values (n, len(columns)), found (n,))``.

        ``values`` is float64 with NaN for a missing value, and for a value that is not a
        number (its row is then reported by :func:`row_problems`); rows of unknown ids are NaN.
        """
        raise NotImplementedError

    def rows(self, columns: list[str]) -> tuple[list[str], np.ndarray]:
        """Every row: ``(ids, values (n, len(columns)))``, ids canonical and in a stable order (a private-query
        table is built from them, :mod:`vfl.serving.private`)."""
        raise NotImplementedError

    def check_columns(self, columns: list[str]) -> None:
        """Raise :class:`DataError` naming the columns a model needs that the store lacks."""
        missing = [c for c in columns if c not in self.columns]
        if missing:
            raise DataError(f"{self.description} has no column(s) {missing}; it has {self.columns[:20]}")

    def close(self) -> None:
        pass


class CSVStore(Store):
    """A party's CSV held in memory: every column but the id (and the label, which is never a feature)."""

    def __init__(self, path, role: str, id_column: str = "id", label: str | None = None):
        data = load_csv(path, role, id_column, label=label, label_required=False, missing=True)
        self.description = f"party {role}'s store {path}"
        self.columns = data.columns
        self._rows = {key: i for i, key in enumerate(data.ids)}
        self._values = data.features

    def lookup(self, ids, columns):
        index = [self.columns.index(c) for c in columns]
        rows = np.array([self._rows.get(i, -1) for i in ids], dtype=np.int64)
        found = rows >= 0
        values = np.full((len(ids), len(columns)), np.nan)
        values[found] = self._values[np.ix_(rows[found], index)]
        return values, found

    def rows(self, columns):
        index = [self.columns.index(c) for c in columns]
        return list(self._rows), np.array(self._values[:, index], dtype=np.float64)


class SQLStore(Store):
    """Rows of one table (or view) of a database reached by a SQLAlchemy URL.

    Parameters
    ----------
    url : str
        A SQLAlchemy URL (``sqlite:///path.db``, ``postgresql+psycopg://user@host/db``).
    table : str
        The table or view; ``schema.table`` for another schema.
    id_column : str
    role : str
        The party's name, for messages.
    """

    def __init__(self, url: str, table: str, id_column: str, role: str):
        import sqlalchemy as sa

        self.description = f"party {role}'s store (table {table!r} of {_redacted(url)})"
        try:
            self._engine = sa.create_engine(url, pool_pre_ping=True)
            schema, _, name = table.rpartition(".")
            self._table = sa.Table(name, sa.MetaData(), schema=schema or None, autoload_with=self._engine)
        except sa.exc.NoSuchTableError:
            raise ConfigurationError(f"{self.description}: no such table; load a CSV into it with vfl serve "
                                     "--load-csv FILE, or name another with [serving] table") from None
        except (sa.exc.SQLAlchemyError, ImportError) as exc:
            raise ConfigurationError(f"{self.description}: cannot open it: {_first_line(exc)}") from None
        self.columns = [c.name for c in self._table.columns if c.name != id_column]
        if id_column not in self._table.columns:
            raise ConfigurationError(f"{self.description}: no id column {id_column!r}; its columns are "
                                     f"{[c.name for c in self._table.columns][:20]}")
        self._id = self._table.columns[id_column]
        self._statements: dict[tuple, object] = {}
        self._lock = threading.Lock()
        self._check_ids()

    def _check_ids(self) -> None:
        """Refuse a table holding an id that is not its own canonical text: a lookup by that text would miss it.

        Reads the id column once (about 1 s per 10^6 ids); a table :func:`load_csv_into` filled passes.
        """
        import sqlalchemy as sa

        try:
            with self._engine.connect() as connection:
                result = connection.execution_options(stream_results=True).execute(sa.select(self._id))
                for (value,) in result:
                    if isinstance(value, str) and _canonical(value) not in (None, value):
                        raise DataError(f"{self.description}: the id {value!r} is not written as its canonical text "
                                        f"{_canonical(value)!r} (ids are compared as canonical text: a lookup of it "
                                        "would miss this row); store the ids as vfl serve --load-csv does, or "
                                        "correct this one")
        except sa.exc.SQLAlchemyError as exc:
            raise ConfigurationError(f"{self.description}: reading its ids failed: {_first_line(exc)}") from None

    def _select(self, columns: tuple):
        import sqlalchemy as sa

        with self._lock:
            statement = self._statements.get(columns)
            if statement is None:
                chosen = [self._id] + [self._table.columns[c] for c in columns]
                statement = self._statements[columns] = sa.select(*chosen).where(
                    self._id.in_(sa.bindparam("ids", expanding=True)))
            return statement

    def lookup(self, ids, columns):
        import sqlalchemy as sa

        statement = self._select(tuple(columns))
        positions: dict[str, list[int]] = {}       # a round may ask for one id twice (two requests)
        for i, key in enumerate(ids):
            positions.setdefault(key, []).append(i)
        unique = list(positions)
        values = np.full((len(ids), len(columns)), np.nan)
        found = np.zeros(len(ids), dtype=bool)
        try:
            with self._engine.connect() as connection:
                for start in range(0, len(unique), _CHUNK):
                    for row in connection.execute(statement, {"ids": unique[start:start + _CHUNK]}):
                        at = positions.get(_canonical(row[0]), [])
                        found[at] = True
                        values[at] = [_number(v) for v in row[1:]]
        except sa.exc.SQLAlchemyError as exc:
            raise ConfigurationError(f"{self.description}: the lookup failed: {_first_line(exc)}") from None
        return values, found

    def rows(self, columns):
        import sqlalchemy as sa

        chosen = [self._id] + [self._table.columns[c] for c in columns]
        ids, values = [], []
        try:
            with self._engine.connect() as connection:
                result = connection.execution_options(stream_results=True).execute(
                    sa.select(*chosen).order_by(self._id))
                for row in result:
                    key = _canonical(row[0])
                    if key is None:
                        continue                # an id the lookup could never match
                    ids.append(key)
                    values.append([_number(v) for v in row[1:]])
        except sa.exc.SQLAlchemyError as exc:
            raise ConfigurationError(f"{self.description}: reading its rows failed: {_first_line(exc)}") from None
        if len(set(ids)) != len(ids):
            raise DataError(f"{self.description}: two rows have the same id (as canonical text)")
        return ids, np.array(values, dtype=np.float64).reshape(len(ids), len(columns))

    def close(self) -> None:
        self._engine.dispose()


def open_store(spec: str, table: str, id_column: str, role: str, label: str | None = None) -> Store:
    """The store a ``[serving] store`` names: a ``.csv`` path, or a SQLAlchemy URL."""
    if "://" not in spec:
        if not Path(spec).exists():
            raise ConfigurationError(f"party {role}: the store {spec} does not exist")
        return CSVStore(spec, role, id_column, label)
    return SQLStore(spec, table, id_column, role)


def load_csv_into(url: str, table: str, csv_path, role: str, id_column: str = "id", label: str | None = None,
                  foreign=()) -> int:
    """Replace ``table`` of the database at ``url`` by the rows of a CSV, checked as in training; the row count.

    The ids are stored as their canonical text, in a primary-key column; the label
    column (of the label party's CSV) is left out: it is never a feature.
    """
    import pandas as pd
    import sqlalchemy as sa

    data = load_csv(csv_path, role, id_column, label=label, label_required=False, missing=True, foreign=foreign)
    frame = pd.DataFrame(data.features, columns=data.columns)
    frame.insert(0, id_column, data.ids)
    schema, _, name = table.rpartition(".")
    try:
        engine = sa.create_engine(url)
        metadata = sa.MetaData()
        target = sa.Table(name, metadata, sa.Column(id_column, sa.String, primary_key=True),
                          *(sa.Column(c, sa.Float) for c in data.columns), schema=schema or None)
        with engine.begin() as connection:
            target.drop(connection, checkfirst=True)
            target.create(connection)
            frame.to_sql(name, connection, schema=schema or None, if_exists="append", index=False,
                         chunksize=10_000)
        engine.dispose()
    except sa.exc.SQLAlchemyError as exc:
        raise ConfigurationError(f"party {role}: cannot load {csv_path} into table {table!r} of {_redacted(url)}: "
                                 f"{_first_line(exc)}") from None
    return data.n_rows


def _canonical(value) -> str | None:
    try:
        return canonical_id(value)
    except ValueError:
        return None


def _number(value) -> float:
    """A stored value as a float: ``NULL`` and anything that is not a real number are NaN (the row is then refused)."""
    if value is None or isinstance(value, bool):
        return np.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        return np.nan
    return number if np.isfinite(number) else np.nan


def _redacted(url: str) -> str:
    """A URL without its password, for messages."""
    try:
        import sqlalchemy as sa

        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a malformed URL: say little
        return url.split("@")[-1]


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    return text.splitlines()[0] if text else type(exc).__name__
