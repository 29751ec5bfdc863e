"""Per-party checkpoints: one JSON file per completed epoch or iteration.

A checkpoint holds what the role program's ``on_epoch`` hands over (weights,
B's batch seed, C's loss curve: never a key) plus the settings fingerprint, so
a run is never resumed under other settings.  Files are written atomically
(temporary file, then rename) with mode 0600, and the last :data:`KEEP` are
kept: parties may be one epoch apart when one of them is killed, and a resumed
run restarts after the last epoch *all* of them completed.

The trained models' shards are :mod:`vfl.deploy.shards`.
"""

from __future__ import annotations

import re
from pathlib import Path

from vfl.deploy.jsonfile import read_json, write_json
from vfl.errors import ConfigurationError, DataError

KEEP = 3
_NAME = re.compile(r"^epoch-(\d{6})\.json$")


class CheckpointStore:
    """Checkpoints of one role in ``folder``.

    Parameters
    ----------
    folder : path
    role : str
    fingerprint : str
        The shared-settings fingerprint; checkpoints of other settings are refused.
    """

    def __init__(self, folder, role: str, fingerprint: str):
        self.folder = Path(folder)
        self.role = role
        self.fingerprint = fingerprint

    def save(self, epoch: int, state: dict) -> Path:
        path = write_json(self.folder / f"epoch-{epoch:06d}.json",
                          {"role": self.role, "epoch": int(epoch), "fingerprint": self.fingerprint, "state": state})
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
            states[epoch] = saved["state"]
        return states

    def clear(self) -> None:
        for epoch in self.epochs():
            (self.folder / f"epoch-{epoch:06d}.json").unlink(missing_ok=True)
