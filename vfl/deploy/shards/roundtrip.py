"""An in-process model's shards exactly as the parties' readers return them: written, then read back.

An estimator that holds every party (the in-process estimators) gives its shards through the same writer and
reader ``vfl party`` and ``vfl predict`` use, so that what it hands on (an export, a check) is what a
deployment would read from the parties' files.  The run's fingerprint (``trained_with``) of an in-process
model is the digest of every shard written: ``in-process:sha256:<hex>``, the same for all its shards and
another for any other model.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Callable


def read_back(parties: dict[str, tuple[Callable[[Path, str], object], Callable[[Path], dict]]]) -> dict:
    """``{party: shard}``: each party's ``write(path, fingerprint)`` then ``read(path)``, in a private temporary
    folder removed afterwards; every shard's ``trained_with`` is then the digest of all of them."""
    digest, out = hashlib.sha256(), {}
    with tempfile.TemporaryDirectory(prefix="vfl-shards-") as folder:
        for index, (name, (write, read)) in enumerate(parties.items()):
            path = Path(folder) / f"party{index}.json"
            write(path, "")
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
            out[name] = read(path)
    fingerprint = "in-process:sha256:" + digest.hexdigest()[:32]
    for shard in out.values():
        shard["trained_with"] = fingerprint
    return out
