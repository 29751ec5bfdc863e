"""Per-party checkpoints (one JSON file per completed epoch) and model shards.

A checkpoint holds what the role program's ``on_epoch`` hands over (weights,
B's batch seed, C's loss curve: never a key) plus the settings fingerprint, so
a run is never resumed under other settings.  Files are written atomically
(temporary file, then rename) with mode 0600, and the last :data:`KEEP` are
kept: parties may be one epoch apart when one of them is killed, and a resumed
run restarts after the last epoch *all* of them completed.

A model shard is a party's share of the trained model: its columns and
weights (B: also the intercept and the label classes), and where its training
started (``initial_coef``, B: ``initial_intercept``) so the run can be
reproduced centrally by whoever holds every shard.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from vfl.errors import ConfigurationError, DataError

KEEP = 3
_NAME = re.compile(r"^epoch-(\d{6})\.json$")


def write_json(path, obj, private: bool = True) -> Path:
    """Write ``obj`` as JSON atomically; ``private`` files get mode 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1, allow_nan=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def read_json(path, what: str) -> dict:
    try:
        with open(path) as f:
            obj = json.load(f)
    except FileNotFoundError:
        raise ConfigurationError(f"the {what} {path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read the {what} {path}: {exc}") from None
    if not isinstance(obj, dict):
        raise DataError(f"the {what} {path} is not a JSON object")
    return obj


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


def write_shard(path, role: str, objective: str, columns, params, fit_intercept: bool, fingerprint: str,
                classes=None, label: str | None = None, initial=None) -> Path:
    """Write a party's model shard: its columns and weights (B: the intercept and classes too).

    ``initial`` is the parameter vector training started from (same layout as ``params``).
    """
    params = [float(v) for v in params]
    initial = [float(v) for v in initial] if initial is not None else [0.0] * len(params)
    n = len(columns)
    shard = {"format": "vfl-model-shard/1", "role": role, "objective": objective, "columns": list(columns),
             "coef": params[:n], "initial_coef": initial[:n], "trained_with": fingerprint}
    if role == "B":
        shard["fit_intercept"] = bool(fit_intercept)
        shard["intercept"] = params[n] if fit_intercept else 0.0
        shard["initial_intercept"] = initial[n] if fit_intercept else 0.0
        shard["label"] = label
        shard["classes"] = list(classes or [])
    return write_json(path, shard, private=True)


def read_shard(path, role: str) -> dict:
    shard = read_json(path, "model shard")
    if shard.get("format") != "vfl-model-shard/1" or shard.get("role") != role:
        raise DataError(f"{path} is not party {role}'s model shard (role {shard.get('role')!r})")
    if len(shard.get("coef", [])) != len(shard.get("columns", [])):
        raise DataError(f"{path}: {len(shard.get('coef', []))} weights for {len(shard.get('columns', []))} columns")
    return shard


def shard_params(shard: dict) -> list[float]:
    """The parameter vector of the party classes: weights, then the intercept if fitted."""
    params = list(shard["coef"])
    if shard.get("fit_intercept"):
        params.append(shard["intercept"])
    return params
