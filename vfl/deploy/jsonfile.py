"""Every JSON file vfl writes and reads for a party: written atomically, mode 0600, read with one set of errors;
and the party's other files that hold its data (CSVs, its serving store), owner-only alike."""

from __future__ import annotations

import json
import os
from pathlib import Path

from vfl.errors import ConfigurationError, DataError, file_problem


def open_private(path, mode: str = "w"):
    """``path`` opened for writing (truncated), readable by its owner only: mode 0600 even over a file a crash
    left there with another mode (``O_CREAT`` alone would keep that one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, mode)


def write_private_csv(frame, path, **options) -> Path:
    """A table (a transcript, scores, aligned rows) as a CSV readable by its owner only, whatever the umask."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_private(path) as out:
        frame.to_csv(out, **options)
    return path


def private_file(path) -> Path:
    """Create ``path`` empty and owner-only if it is not there (a database file its engine then opens: SQLite
    gives its journal and WAL files the database file's mode), or make it owner-only if it is."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    os.chmod(path, 0o600)
    return path


def write_json(path, obj, private: bool = True) -> Path:
    """Write ``obj`` as JSON atomically; ``private`` files get mode 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    opened = open_private(tmp) if private else \
        os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), "w")
    with opened as f:
        json.dump(obj, f, indent=1, allow_nan=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path



def read_json(path, what: str) -> dict:
    """The JSON object in ``path`` (a model shard, a checkpoint): every shard and checkpoint is read here.

    A missing file is a :class:`ConfigurationError`; a file that is not JSON, or
    whose nesting is too deep for the parser (no file vfl writes nests more than
    a few levels), a :class:`DataError` naming it.
    """
    problem = file_problem(path)
    if problem == "does not exist":
        raise ConfigurationError(f"the {what} {path} does not exist")
    if problem:
        raise DataError(f"the {what} {path} {problem}")
    try:
        with open(path) as f:
            obj = json.load(f)
    except FileNotFoundError:
        raise ConfigurationError(f"the {what} {path} does not exist") from None
    except RecursionError:
        raise DataError(f"cannot read the {what} {path}: its JSON nests too deeply to be read (no file vfl writes "
                        "nests more than a few levels; the file is corrupt, or not one of vfl's)") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read the {what} {path}: {exc}") from None
    if not isinstance(obj, dict):
        raise DataError(f"the {what} {path} is not a JSON object")
    return obj
