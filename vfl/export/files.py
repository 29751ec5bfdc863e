"""Writing an export so that nothing is left behind on an error: a temporary name, renamed at the end."""

from __future__ import annotations

import os
import shutil
import secrets
from contextlib import contextmanager
from pathlib import Path

from vfl.errors import ConfigurationError


@contextmanager
def written(path):
    """Yield a temporary path beside ``path`` (mode 0600); on success it becomes ``path``, on any error it is
    removed and ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def written_folder(folder):
    """Yield a temporary folder beside ``folder`` (mode 0700); on success it becomes ``folder``, on any error it is
    removed.  ``folder`` must not exist, or be empty."""
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigurationError(f"{folder} exists and is not an empty folder; a split export writes a new folder")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.{secrets.token_hex(4)}.tmp")
    tmp.mkdir(mode=0o700)
    try:
        yield tmp
        if folder.exists():
            folder.rmdir()
        os.replace(tmp, folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
