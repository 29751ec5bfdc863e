"""A party's record of each run, on its own disk: what ``vfl board`` reads.

Every ``vfl party``, ``vfl predict``, ``vfl align``, ``vfl serve`` and ``vfl export`` writes one folder
under ``WORKDIR/runs/`` (a fitted estimator writes one with ``save_run``)::

    runs/20261127T085141.123456Z-train-4711/
        run.json        what ran, where and how it ended (rewritten whole, atomically)
        events.jsonl    one JSON object per line, appended and flushed as things happen
        result.json     what the run gave this party (written once, at the end)
        model.json ...  copies of the files it wrote that a board shows (its shard, statistics)
        view.json       a training run's views of its model, by its family's shard module (vfl.deploy.shards)

Nothing in a record is more than the party knew already: its own settings, the
messages it sent and received (name, kind, size: never their values), its progress
as it printed it, and its summary (the label party's metrics and curves, a feature
party's selected columns...).  Events are written as they happen, so a reader is at
most one ``flush`` behind the party's own narration.

``run.json``::

    {"format": "vfl-run/1", "id", "task": "train" | "predict" | "align" | "serve" | "export",
     "family": "linear" | "trees" | "mlp" | "credit" | "alignment" | "serving",
     "party", "role", "parties": {name: role}, "settings", "started", "ended",
     "status": "running" | "finished" | "failed", "error", "pid", "record_error" (if any)}

Owner-only: the folders 0700, every file 0600.  A record that cannot be written (a full
disk) never stops the run: it stops being written and ``record_error`` says why.

Events (``"event"`` names the kind; ``"t"``: seconds since the epoch):
``waiting`` (``peers``), ``connected`` (``peers``, ``seconds``), ``line`` (``text``), ``step`` (``name``: a
step no message names, such as the pipeline's statistics or binning),
``model`` (``index``, ``models``, ``epochs``), ``epoch`` (``model``, ``epoch``,
optional ``loss``), ``message`` (``direction``: ``"sent"`` | ``"received"``, ``peer``,
``name``, ``kind``, ``bytes``, ``iteration``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from vfl.deploy.jsonfile import open_private, write_json
from vfl.families import FAMILIES as REGISTRY

FORMAT = "vfl-run/1"
#: A run record's id, its folder name: its start (UTC, to the microsecond), its task and the process id (not the
#: training run id the label party gives every party, :func:`vfl.deploy.checkpoint.run_id`).
RECORD_ID = re.compile(r"^\d{8}T\d{6}\.\d{6}Z-[a-z]+-\d+\Z")
#: The files of a summary a record keeps a copy of: summary key -> name in the record.
#: The views of a training run's model the record keeps (:meth:`RunRecord._keep_view`).
VIEW = "view.json"
KEPT = {"model": "model.json", "statistics": "statistics.csv", "psi": "psi.csv", "explanations": "explanations.csv"}
#: Larger files are not copied (the record then names them only).
KEEP_BYTES = 64 * 2 ** 20
#: The families, as ``run.json`` names them: the model families (:data:`vfl.families.FAMILIES`), and the runs of
#: no model family (``vfl align``, ``vfl serve``).
FAMILIES = (*REGISTRY, "alignment", "serving")


def model_view(info: dict, read, result: dict) -> dict | None:
    """The views of a training run's model (``read()``: its ``model.json``, read, or None) as its family's shard
    module gives them (``board_view``), or None: another task, no model kept, a family without views.

    A model the view cannot read gives ``{"damaged": why}``: the board says so, the run goes on.  The record keeps
    them (``view.json``); the board makes them so from a record written before records kept them.
    """
    family = REGISTRY.get(info.get("family"))
    view = getattr(family.module("shard"), "board_view", None) if family is not None else None
    if view is None or info.get("task") != "train":
        return None
    try:
        model = read()
        return None if model is None else {"views": view(model, result)}
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign shard: said in the record, never fatal
        return {"damaged": f"its model's view could not be made ({type(exc).__name__})"}


def plain_json(value):
    """``value`` with numpy arrays and scalars made JSON's, non-finite floats made ``None``."""
    if isinstance(value, dict):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain_json(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


class RunRecord:
    """One run's folder under ``workdir/runs``; a context manager that ends it as finished or failed.

    Parameters
    ----------
    workdir : path
        The party's work directory.
    task : {"train", "predict", "align", "serve", "export"}
    family : str
        One of :data:`FAMILIES`.
    party : str
        The party's name.
    role : {"feature", "label", "coordinator"}
    parties : dict
        Every party's name and role.
    settings : dict
        The settings this party ran with (JSON).
    describe_failure : callable, optional
        ``exception -> one line``: how the command reports a failure (the record says the same).
    """

    def __init__(self, workdir, task: str, family: str, party: str, role: str, parties: dict, settings: dict,
                 describe_failure=None):
        started = datetime.now(timezone.utc)
        self.id = f"{started.strftime('%Y%m%dT%H%M%S.%fZ')}-{task}-{os.getpid()}"
        runs = Path(workdir) / "runs"
        runs.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.folder = runs / self.id
        self.folder.mkdir(mode=0o700)
        self.info = {"format": FORMAT, "id": self.id, "task": task, "family": family, "party": party, "role": role,
                     "parties": dict(parties), "settings": plain_json(settings), "started": started.isoformat(),
                     "ended": None, "status": "running", "error": "", "pid": os.getpid()}
        self._describe = describe_failure or (lambda exc: str(exc) or type(exc).__name__)
        self._lock = threading.Lock()
        #: why the record stopped being written, if it did (a full disk): the run itself goes on
        self.broken = ""
        self._write_info()
        fd = os.open(self.folder / "events.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._events = os.fdopen(fd, "a", encoding="utf-8")

    @classmethod
    def for_config(cls, workdir, task: str, config, party: str, describe_failure=None) -> "RunRecord":
        """The record of ``party``'s ``task`` under a federation file (family, roles and settings read from it)."""
        family = "alignment" if task == "align" else "serving" if task == "serve" else config.family.name
        shared = config.shared("predict" if task == "serve" else task)
        return cls(workdir, task, family, party, config.role_of(party), shared.pop("roles"), shared, describe_failure)

    # -- what happens --------------------------------------------------------------------------------------
    def event(self, event: str, **fields) -> None:
        """Append one event and flush it (a reader sees it at once).

        A record that cannot be written (a full disk) stops being written, and says so when the run
        ends; it never stops the run.
        """
        line = json.dumps({"t": round(time.time(), 3), "event": event, **plain_json(fields)}, allow_nan=False)
        with self._lock:
            if self._events.closed or self.broken:
                return
            try:
                self._events.write(line + "\n")
                self._events.flush()
            except OSError as exc:
                self.broken = f"the record stopped being written: {exc.strerror or exc}"

    def message(self, direction: str, peer: str, message, nbytes: int) -> None:
        """A message this party sent or received: its name, kind and size (never its values)."""
        direction = {"->": "sent", "<-": "received"}.get(direction, direction)
        self.event("message", direction=direction, peer=peer, name=message.name, kind=message.kind,
                   bytes=int(nbytes), iteration=message.iteration)

    def update(self, **fields) -> None:
        """Add or change fields of ``run.json`` (e.g. a service's address)."""
        with self._lock:
            self.info.update(plain_json(fields))
            self._write_info(quiet=True)

    # -- how it ends ---------------------------------------------------------------------------------------
    def finish(self, result: dict | None = None) -> None:
        """The run ended well; ``result``: what it gave this party (its summary).

        The files the summary names under :data:`KEPT` (its shard, statistics, stability) are copied
        into the record, so the run shows what it made even after a later run writes over them.
        """
        if result is not None:
            try:
                for key in KEPT:
                    source = result.get(key)
                    if isinstance(source, str) and Path(source).is_file() \
                            and Path(source).stat().st_size <= KEEP_BYTES:
                        _copy_private(Path(source), self.folder / KEPT[key])
                write_json(self.folder / "result.json", plain_json(result), private=True)
                self._keep_view(result)
            except OSError as exc:
                self.broken = self.broken or f"the record of its result could not be written: {exc.strerror or exc}"
        self._end("finished", "")

    def _keep_view(self, result: dict) -> None:
        """``view.json``: what the board shows of the model a training run kept (:func:`model_view`), so that the
        board reads records only."""
        model = self.folder / KEPT["model"]
        kept = model_view(self.info, lambda: json.loads(model.read_text(encoding="utf-8")) if model.is_file() else None,
                          result)
        if kept is not None:
            write_json(self.folder / VIEW, plain_json(kept), private=True)

    def fail(self, error: str) -> None:
        self._end("failed", error)

    def _end(self, status: str, error: str) -> None:
        with self._lock:
            if self.info["status"] != "running":
                return
            self.info.update(status=status, error=error, ended=datetime.now(timezone.utc).isoformat())
            if self.broken:
                self.info["record_error"] = self.broken
            self._write_info(quiet=True)
            try:
                self._events.close()
            except OSError:
                pass

    def _write_info(self, quiet: bool = False) -> None:
        """Rewrite ``run.json`` whole; ``quiet``: a failure marks the record broken instead of raising."""
        try:
            write_json(self.folder / "run.json", self.info, private=True)
        except OSError as exc:
            if not quiet:
                raise
            self.broken = self.broken or f"the record stopped being written: {exc.strerror or exc}"

    def __enter__(self) -> "RunRecord":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self._end("finished", "")
        elif issubclass(exc_type, KeyboardInterrupt):
            self.fail("interrupted")
        else:
            self.fail(self._describe(exc))


def _copy_private(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target``, owner-only from the start (a temporary file, then renamed)."""
    tmp = target.with_name(f".{target.name}.tmp")
    with open_private(tmp, "wb") as out, open(source, "rb") as f:
        shutil.copyfileobj(f, out)
    os.replace(tmp, target)


def save_fitted(path, *, family: str, party: str, parties: dict, settings: dict, transcript, loss_curve=None,
                result: dict | None = None, files: dict | None = None, span=None) -> Path:
    """The record of a fit run in one process (an estimator's), as party ``party`` saw it; returns its folder.

    ``transcript``: every message, as :meth:`vfl.transport.Transcript.to_frame` gives them; only those
    ``party`` sent or received are recorded.  ``loss_curve`` (one list, or one per model): only
    if ``party`` learns the loss.  ``result``: its summary (metrics and curves); ``files``:
    ``{name: writer(path)}`` of what the record keeps beside it (``model.json``: its shard).  ``span``:
    ``(started, ended)`` of the fit, as ``time.time()`` (:meth:`vfl.transport.Transcript.span`), recorded as the
    run's start and end (else the record's own, a moment apart).
    """
    with RunRecord(path, "train", family, party, parties[party], parties, settings) as record:
        for row in transcript.itertuples(index=False):
            if party in (row.receiver, row.sender):
                record.event("message", direction="received" if row.receiver == party else "sent",
                             peer=row.sender if row.receiver == party else row.receiver, name=row.name,
                             kind=row.kind, bytes=int(row.bytes), iteration=row.iteration)
        if loss_curve is not None and len(loss_curve):
            curves = loss_curve if isinstance(loss_curve[0], (list, tuple, np.ndarray)) else [loss_curve]
            for index, curve in enumerate(curves):
                record.event("model", index=index, models=len(curves), epochs=len(curve), what="")
                for epoch, loss in enumerate(curve):
                    record.event("epoch", model=index, epoch=epoch, loss=float(loss))
            result = {**(result or {}), "loss_curve": plain_json(loss_curve)}
        for name, write in (files or {}).items():
            write(record.folder / name)
        record.finish(result or {})
        if span is not None:            # the fit's own start and end, not the moments this record was written
            record.info.update(started=datetime.fromtimestamp(span[0], timezone.utc).isoformat(),
                               ended=datetime.fromtimestamp(span[1], timezone.utc).isoformat())
            record._write_info(quiet=True)
    return record.folder
