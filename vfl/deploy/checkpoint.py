"""Per-party checkpoints: one JSON file per completed epoch or iteration.

A checkpoint holds what the role program's ``on_epoch`` hands over (weights,
B's batch seed, C's loss curve: never a key) plus the settings fingerprint and a
digest of the party's aligned rows (:func:`data_digest`), so a run is never
resumed under other settings or on other data.  The label party also keeps the
run's id (:func:`run_id`): a resumed run's shards carry the id of the run it
continues.  Files are written atomically
(temporary file, then rename) with mode 0600, and the last :data:`KEEP` are
kept: parties may be one epoch apart when one of them is killed, and a resumed
run restarts after the last epoch *all* of them completed.

The trained models' shards are :mod:`vfl.deploy.shards`.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from pathlib import Path

import numpy as np

from vfl.deploy.jsonfile import read_json, write_json
from vfl.errors import ConfigurationError, DataError

KEEP = 3
_NAME = re.compile(r"^epoch-(\d{6})\.json\Z")


class CheckpointStore:
    """Checkpoints of one role in ``folder``.

    Parameters
    ----------
    folder : path
    role : str
    fingerprint : str
        The shared-settings fingerprint; checkpoints of other settings are refused.
    """

    def __init__(self, folder, role: str, fingerprint: str, data: str | None = None):
        self.folder = Path(folder)
        self.role = role
        self.fingerprint = fingerprint
        #: :func:`data_digest` of the party's aligned rows (None: the coordinator, which holds none)
        self.data = data

    def save(self, epoch: int, state: dict) -> Path:
        path = write_json(self.folder / f"epoch-{epoch:06d}.json",
                          {"role": self.role, "epoch": int(epoch), "fingerprint": self.fingerprint,
                           "data": self.data, "state": state})
        for old in self.epochs()[:-KEEP]:
            (self.folder / f"epoch-{old:06d}.json").unlink(missing_ok=True)
        return path

    def epochs(self) -> list[int]:
        if not self.folder.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.folder.iterdir() if (m := _NAME.match(p.name)))

    def load(self) -> dict[int, dict]:
        """``{epoch: state}`` of every kept checkpoint."""
        states = {}
        for epoch in self.epochs():
            saved = read_json(self.folder / f"epoch-{epoch:06d}.json", "checkpoint")
            if saved.get("role") != self.role or saved.get("epoch") != epoch:
                raise DataError(f"checkpoint {epoch} in {self.folder} is not party {self.role}'s")
            if saved.get("fingerprint") != self.fingerprint:
                raise ConfigurationError(
                    f"party {self.role}: the checkpoints in {self.folder} were made with other settings; "
                    "run without --resume to start afresh")
            check_same_data(self.role, self.folder, saved.get("data"), self.data)
            states[epoch] = saved["state"]
        return states

    def clear(self) -> None:
        for epoch in self.epochs():
            (self.folder / f"epoch-{epoch:06d}.json").unlink(missing_ok=True)


def data_digest(data) -> str | None:
    """A digest of a party's aligned rows: ids in order, columns, values, labels and weights (None: no rows)."""
    if data is None:
        return None
    digest = hashlib.sha256(json.dumps([[str(i) for i in data.ids], [str(c) for c in data.columns]]).encode())
    digest.update(np.ascontiguousarray(data.features, dtype=np.float64).tobytes())
    if data.labels is not None:
        digest.update(json.dumps([str(v) for v in np.asarray(data.labels).tolist()]).encode())
    if data.weights is not None:
        digest.update(np.ascontiguousarray(data.weights, dtype=np.float64).tobytes())
    return digest.hexdigest()[:32]


def check_same_data(role: str, where, saved: str | None, now: str | None) -> None:
    """Refuse to resume a run on rows other than its own (checkpoints written before digests were kept pass)."""
    if saved is not None and now is not None and saved != now:
        raise DataError(f"party {role}: its aligned rows differ from those of the run the checkpoints in {where} "
                        "belong to (other rows, ids, columns, values or labels); resume with the same data, or "
                        "run without --resume to start afresh")


#: The label party's file of the run's id, beside its checkpoints.
RUN_FILE = "run_id.json"
#: A run's id: 16 random bytes as hex.
RUN_ID = re.compile(r"[0-9a-f]{32}")


def run_id(folder, resume: bool) -> str:
    """The training run's id, chosen by the label party: the one kept in ``folder`` when resuming, else a new one.

    It goes into every party's shard (``trained_with``), so shards of two runs are never mixed, even of
    runs with the same settings on the same rows.
    """
    path = Path(folder) / RUN_FILE
    if resume and path.exists():
        kept = read_json(path, "run id").get("run")
        if isinstance(kept, str) and RUN_ID.fullmatch(kept):
            return kept
    fresh = secrets.token_hex(16)
    write_json(path, {"run": fresh}, private=True)
    return fresh
