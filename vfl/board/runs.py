"""Reading one party's run records (:mod:`vfl.deploy.record`), for the board: safely, incrementally, in pages.

Every path the board opens is a file of a run folder whose name matches
:data:`vfl.deploy.record.RECORD_ID` directly inside ``WORKDIR/runs``; links are not
followed (a linked folder is no run, a linked file is not opened), so a request
cannot reach a file elsewhere.  A record still being written is read as far as it
goes (an event line without its newline waits for the next read); a damaged or
foreign file is shown as damaged, with what could be read, never as an error page.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path

from vfl.deploy.record import FORMAT, RECORD_ID
from vfl.errors import ConfigurationError

#: Runs per page of the runs list.
PAGE = 50
#: Runs whose folded events the board keeps in memory (the least recently viewed go first).
CACHED_RUNS = 32
#: Bytes of new events read per request at most (a longer backlog is read over the next polls).
READ_BYTES = 16 * 2 ** 20
#: The statuses a record may say; anything else reads as unreadable.
STATUSES = ("running", "finished", "failed")


class NotFound(LookupError):
    """No such run (or a name that is not a run's)."""


@dataclass
class Live:
    """What a run's events say so far, folded as they are read."""

    task: str = "train"
    offset: int = 0
    #: inside a line longer than a whole read (:data:`READ_BYTES`): skipped to its end, counted as damaged
    skipping: bool = False
    step: str = "starting"
    waiting: list = field(default_factory=list)
    peers: list = field(default_factory=list)
    lines: list = field(default_factory=list)
    #: per model index: {"epochs": planned, "what": its class, "done": completed, "loss": [(epoch, loss)]}
    models: dict = field(default_factory=dict)
    #: how many messages it sent and received
    messages: int = 0
    #: the messages it received, grouped: (name, sender, kind) -> [count, bytes], in the order first seen
    received: dict = field(default_factory=dict)
    last: float = 0.0
    damaged: int = 0


class Workdir:
    """One party's work directory, read only.

    Parameters
    ----------
    path : path
        The directory ``vfl party`` / ``vfl serve`` / ``save_run`` wrote (holding ``runs/``),
        or a ``runs/`` folder itself.
    """

    def __init__(self, path):
        path = Path(path).expanduser()
        if not path.is_dir():
            raise ConfigurationError(f"{path} is not a directory")
        if path.name == "runs" and not (path / "runs").is_dir():
            path = path.parent
        runs = path / "runs"
        if not runs.is_dir():
            raise ConfigurationError(
                f"{path} holds no vfl runs (no runs/ folder): give the work directory of a party "
                "(vfl party --workdir, default ./vfl-NAME), or a folder written by an estimator's save_run")
        self.path = path.resolve()
        self.runs = runs.resolve()
        self._live: OrderedDict[str, Live] = OrderedDict()
        self._lock = threading.Lock()

    # -- the list ------------------------------------------------------------------------------------------
    def run_ids(self) -> list[str]:
        """Every run's id, newest first (names sort by their start time)."""
        names = [e.name for e in _scandir(self.runs) if RECORD_ID.match(e.name)]
        return sorted(names, reverse=True)

    def page(self, number: int = 1, size: int = PAGE) -> tuple[list[dict], int]:
        """The runs of page ``number`` (from 1), newest first, and how many runs there are.

        Only the page's ``run.json`` files are read, so the list costs the same at 10 runs or 10,000.
        A run removed meanwhile is left out.
        """
        ids = self.run_ids()
        start = max(0, (number - 1) * size)
        shown = []
        for run_id in ids[start:start + size]:
            try:
                shown.append(self.info(run_id))
            except NotFound:
                pass
        return shown, len(ids)

    # -- one run -------------------------------------------------------------------------------------------
    def folder(self, run_id: str) -> Path:
        """The folder of run ``run_id``; :class:`NotFound` for anything that is not a run's name here."""
        if not isinstance(run_id, str) or not RECORD_ID.match(run_id):
            raise NotFound(run_id)
        folder = self.runs / run_id
        if folder.is_symlink() or not folder.is_dir():
            raise NotFound(run_id)
        return folder

    def info(self, run_id: str) -> dict:
        """``run.json``, checked field by field, or what can be said of a run whose ``run.json`` is missing,
        damaged or not a record (status ``unreadable``); a running run whose process is gone: ``interrupted``."""
        folder = self.folder(run_id)
        info = _json(folder / "run.json")
        problem = ("its run.json is missing" if info is None else
                   "its run.json is damaged" if isinstance(info, _Damaged) else
                   f"its run.json is not a {FORMAT} record" if not isinstance(info, dict)
                   or info.get("format") != FORMAT else _malformed(info))
        if problem:
            return {"id": run_id, "task": run_id.split("-")[1], "status": "unreadable", "error": problem,
                    "party": "", "role": "", "family": "", "parties": {}, "settings": {},
                    "started": "", "ended": None}
        info["id"] = run_id
        if info["status"] == "running" and not _alive(info.get("pid")):
            info.update(status="interrupted", error=f"its process (pid {info.get('pid')}) ended without recording "
                                                    "an end: it was killed, or its machine stopped")
        return info

    def result(self, run_id: str) -> dict | None:
        """``result.json`` (``None`` while running, or if the run failed); ``{"damaged": ...}`` if unreadable."""
        value = _json(self.folder(run_id) / "result.json")
        if isinstance(value, _Damaged) or (value is not None and not isinstance(value, dict)):
            return {"damaged": "its result.json is damaged"}
        return value

    def live(self, run_id: str) -> Live:
        """The run's events folded so far, as a copy; reads only what was appended since the last call."""
        folder = self.folder(run_id)
        with self._lock:
            state = self._live.pop(run_id, None)
            if state is None:
                state = Live(task=str(self.info(run_id).get("task", "train")))
            self._live[run_id] = state                              # the most recently viewed last
            while len(self._live) > CACHED_RUNS:
                self._live.popitem(last=False)
            data = _read_from(folder / "events.jsonl", state.offset, READ_BYTES)
            at = 0
            if state.skipping:                    # the rest of a line too long to be an event of ours
                end = data.find(b"\n")
                if end < 0:
                    state.offset += len(data)
                    data = b""
                else:
                    at, state.skipping = end + 1, False
            while True:                           # a line still being written waits for the next read
                end = data.find(b"\n", at)
                if end < 0:
                    break
                try:
                    _fold(state, json.loads(data[at:end]))
                except Exception:  # noqa: BLE001 - any line that is not an event of ours: counted, skipped
                    state.damaged += 1
                at = end + 1
            if at == 0 and len(data) == READ_BYTES:       # one line longer than a read: skip it, go on after it
                state.damaged += 1
                state.skipping = True
                at = len(data)
            state.offset += at
            return replace(state, waiting=list(state.waiting), peers=list(state.peers), lines=list(state.lines),
                           models={k: dict(v, loss=list(v["loss"])) for k, v in state.models.items()},
                           received={k: list(v) for k, v in state.received.items()})


def _malformed(info: dict) -> str:
    """What is wrong with a ``run.json`` of our format, or ``""``."""
    text = ("task", "family", "party", "role", "started", "error")
    if any(not isinstance(info.get(k), str) for k in text) or info.get("status") not in STATUSES:
        return "its run.json is damaged (a field is missing or of the wrong type)"
    if not isinstance(info.get("parties"), dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                            for k, v in info["parties"].items()):
        return "its run.json is damaged (parties)"
    if not isinstance(info.get("settings"), dict) or not (info.get("ended") is None or isinstance(info["ended"], str)):
        return "its run.json is damaged (settings or end)"
    return ""


def _read_from(path: Path, offset: int, limit: int) -> bytes:
    """Up to ``limit`` bytes of ``path`` from ``offset`` (a link is not followed; none if it cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as f:
        f.seek(offset)
        return f.read(limit)


def _alive(pid) -> bool:
    """Whether process ``pid`` still runs on this machine (no pid, or one not ours to ask about: assumed so)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True
    return True


class _Damaged:
    """A JSON file that exists but does not parse."""


def _json(path: Path):
    """The JSON in ``path`` (``None`` if missing; :class:`_Damaged` if a link, unreadable or not JSON)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError:
        return _Damaged()
    try:
        with os.fdopen(fd, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError, RecursionError):
        return _Damaged()


def _scandir(path: Path):
    try:
        with os.scandir(path) as entries:
            return [e for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _fold(state: Live, event: dict) -> None:
    kind, t = event["event"], float(event.get("t", 0.0))
    state.last = max(state.last, t)
    if kind == "waiting":
        state.waiting = list(event["peers"])
        state.step = "waiting for " + ", ".join(state.waiting)
    elif kind == "connected":
        state.peers, state.waiting = list(event["peers"]), []
        state.step = "connected"
    elif kind == "line":
        state.lines.append((t, str(event["text"])))
    elif kind == "step":
        state.step = str(event["name"])
    elif kind == "model":
        state.models[int(event["index"])] = {"epochs": int(event["epochs"]), "models": int(event.get("models", 1)),
                                             "what": str(event.get("what", "")), "done": 0, "loss": []}
    elif kind == "epoch":
        model = state.models.setdefault(int(event.get("model", 0)),
                                        {"epochs": 0, "models": 1, "what": "", "done": 0, "loss": []})
        model["done"] = max(model["done"], int(event["epoch"]) + 1)
        if event.get("loss") is not None:
            model["loss"] = [p for p in model["loss"] if p[0] != int(event["epoch"])]
            model["loss"].append((int(event["epoch"]), float(event["loss"])))
    elif kind == "message":
        name, nbytes = str(event["name"]), int(event["bytes"])
        if event["direction"] == "received":
            group = state.received.setdefault((name, str(event["peer"]), str(event["kind"])), [0, 0])
            group[0] += 1
            group[1] += nbytes
        state.messages += 1
        state.step = step_of(name, state.task)


#: The step of a run each message belongs to, for the live view and "what this party learned".
STEPS = {
    "setup": {"hello", "ids_digest", "columns", "models", "public_key", "resume", "start", "schedule", "parameters",
              "pipeline_resume", "penalty"},
    "alignment": {"psi_hello", "psi_setup", "psi_hub_points", "psi_spoke_points", "psi_hub_digests", "psi_result",
                  "sfpsi_hello", "sfpsi_setup", "sfpsi_result", "sfpsi_done"},
    "binning": {"bins", "widths"},
    "WOE and IV": {"woe_start", "classes", "counts", "iv_kept"},
    "selection": {"pearson_start", "pearson_columns", "pearson_rows", "pearson_products", "pearson",
                  "own_correlation", "plan", "model_columns"},
    "prediction": {"predict", "rows", "leaf_masks", "masked_scores", "masked_packed_scores", "partial_scores"},
    "stopped": {"abort"},
}


def step_of(name: str, task: str = "train") -> str:
    """The step a message named ``name`` belongs to in a run of ``task`` (its main step unless listed in
    :data:`STEPS`: ``training``, or ``prediction`` in a prediction or a service).  A training run's
    prediction messages are its training-metrics round: the label party's metrics on its own rows."""
    if name.startswith("validation") or name in ("early_stop", "masked_validation"):
        return "validation"
    for step, names in STEPS.items():
        if name in names:
            return "training metrics" if step == "prediction" and task == "train" else step
    return "training" if task == "train" else "prediction"
