"""The label party's HTTP API (FastAPI on uvicorn): ``POST /score``, ``GET /health``, ``GET /metrics``.

========================  =====================================================================
``POST /score``           ``{"ids": [...], "features": [...]?, "deadline_ms": n?}``: one answer per id
``GET /health``           every party's state; 200 when all can score, 503 (degraded) otherwise
``GET /metrics``          Prometheus text format (:mod:`vfl.serving.metrics`)
``POST /admin/reload``    ``{"version": "4"}``: every party switches to that model version
``GET /openapi.json``     this API's OpenAPI description; ``/docs`` shows it
========================  =====================================================================

A request is checked before anything of it goes anywhere: at most ``max_ids``
ids, each an id as training reads them (text or an integer; no duplicates, at
most 256 bytes), the features (if any) one object per id with exactly the
model's columns of the label party, each a finite number (``null``, a missing
value, for trees only), a deadline within ``max_deadline_ms``, a body within its
bound.  A bad request is a 4xx whose body names what is wrong::

    {"error": {"code": "invalid_request", "message": "ids[2]: the id is empty"}}

Answers: 200 with ``{"model_version", "results": [one per id]}``, each result a
score (and for classifiers ``probability`` and ``prediction``) or an
``error`` with its ``code`` (``unknown_id``, ``incomplete_row``...), the ``party``
and a ``message``; a round that failed as a whole (a party unavailable: 503, the
deadline: 504) answers with that status and an ``error`` naming the party.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from vfl.datachecks import canonical_id
from vfl.errors import ConfigurationError, DataError
from vfl.serving.batching import MicroBatcher
from vfl.serving.label import RoundError
from vfl.serving.messages import MAX_ID_BYTES
from vfl.serving.metrics import CONTENT_TYPE
from vfl.serving.models import MissingVersion

#: Bytes of request body per id allowed (features included), and at least.
_BODY_PER_ID, _BODY_MIN = 8192, 65536


class ScoreRequest(BaseModel):
    """The ids to score, and optionally the label party's own features of each (instead of its store)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"ids": ["10023"]}, {"ids": ["10023", "10024"], "features": [{"income": 52000, "age": 31}, None]}]})
    ids: list[Any] = Field(description="The ids to score: text or integers, as in the parties' data.")
    features: list[dict[str, Any] | None] | None = Field(
        None, description="One object per id (or null: look it up in the label party's store) with the label "
                          "party's own columns of the model.")
    deadline_ms: int | None = Field(None, description="Answer within this many milliseconds (default: "
                                                      "[serving] deadline_ms).")


class ScoreResult(BaseModel):
    """One id's answer: a score (classifiers: probability and prediction), or an error."""

    id: str
    score: float | None = None
    probability: float | None = None
    prediction: Any = None
    scores: dict[str, float] | None = None
    probabilities: dict[str, float] | None = None
    error: dict[str, Any] | None = Field(None, description="code, party and message, when the id was not scored")


class ScoreResponse(BaseModel):
    model_version: str
    results: list[ScoreResult]


class ReloadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: str = Field(description="The model version every party switches to (a folder name).")


class Invalid(Exception):
    """A request that is refused before anything of it is used: 400 (or ``status``) with this message."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _error(status: int, code: str, message: str, party: str | None = None, **more) -> JSONResponse:
    error = {"code": code, "message": message}
    if party is not None:
        error["party"] = party
    return JSONResponse({"error": error, **more}, status_code=status)


def check_request(body: ScoreRequest, settings, share) -> tuple[list[str], list, float]:
    """The canonical ids, the inline features (or None per id) and the deadline in seconds; else :class:`Invalid`."""
    ids = body.ids
    if not ids:
        raise Invalid("ids: give at least one id")
    if len(ids) > settings.max_ids:
        raise Invalid(f"ids: {len(ids)} ids, more than the {settings.max_ids} one request may hold ([serving] max_ids)")
    keys = []
    for i, value in enumerate(ids):
        try:
            key = canonical_id(value)
        except ValueError as exc:
            raise Invalid(f"ids[{i}]: {exc}") from None
        if len(key.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
            raise Invalid(f"ids[{i}]: longer than {MAX_ID_BYTES} bytes")
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            raise Invalid(f"ids[{i}]: not valid Unicode text") from None
        keys.append(key)
    if len(set(keys)) != len(keys):
        seen = set()
        first = next(k for k in keys if k in seen or seen.add(k))
        raise Invalid(f"ids: {first!r} appears twice (ids are compared as text without surrounding spaces, and 7 "
                      "and 7.0 are one id)")
    inline = [None] * len(keys)
    if body.features is not None:
        if len(body.features) != len(keys):
            raise Invalid(f"features: {len(body.features)} entries for {len(keys)} ids; give one per id (null to "
                          "look the id up in the label party's store)")
        inline = [None if row is None else _features(i, row, share) for i, row in enumerate(body.features)]
    deadline_ms = settings.deadline_ms if body.deadline_ms is None else body.deadline_ms
    if not 1 <= deadline_ms <= settings.max_deadline_ms:
        raise Invalid(f"deadline_ms: {deadline_ms} is not from 1 to {settings.max_deadline_ms} ([serving] "
                      "max_deadline_ms)")
    return keys, inline, deadline_ms / 1000.0


def _features(i: int, row: dict, share) -> dict:
    columns = share.columns
    missing, unknown = [c for c in columns if c not in row], [c for c in row if c not in columns]
    if missing or unknown:
        raise Invalid(f"features[{i}]: " + "; ".join(
            part for part in (f"missing column(s) {missing}" if missing else "",
                              f"unknown column(s) {unknown[:10]}" if unknown else "") if part)
            + f" (model version {share.version} takes the label party's columns {columns})")
    for column in columns:
        value = row[column]
        if value is None:
            if share.kind == "linear":
                raise Invalid(f"features[{i}].{column}: null, but a linear model needs every value")
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Invalid(f"features[{i}].{column}: {type(value).__name__} is not a number")
        try:
            finite = math.isfinite(float(value))
        except OverflowError:                   # an integer beyond a float's range
            finite = False
        if not finite:
            shown = repr(value) if len(repr(value)) <= 24 else repr(value)[:20] + "..."
            raise Invalid(f"features[{i}].{column}: {shown} is not a finite number")
    return {c: None if row[c] is None else float(row[c]) for c in columns}


class _BodyLimit:
    """ASGI middleware: a request body above ``limit`` bytes is refused with 413 before it is read whole."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await _refuse(send, self.limit)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge()
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await _refuse(send, self.limit)


class _TooLarge(Exception):
    pass


async def _refuse(send, limit: int) -> None:
    response = _error(413, "request_too_large", f"the request body is above {limit} bytes")
    await send({"type": "http.response.start", "status": 413, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})


def create_app(service, metrics) -> FastAPI:
    """The API of a started :class:`~vfl.serving.label.LabelService`, reporting to ``metrics``."""
    settings = service.settings
    state: dict = {}

    @contextlib.asynccontextmanager
    async def lifespan(app):
        state["batcher"] = MicroBatcher(service.score, settings.max_batch, settings.batch_wait_ms / 1000.0,
                                        settings.max_rounds, settings.max_queue, metrics)
        metrics.service = service
        yield
        await state["batcher"].close()

    app = FastAPI(title="vfl scoring service", version="1",
                  description="Scores applications with a vertical federated model: every party looks its own "
                              "rows up, and only this party (the label party) learns the scores. See "
                              "docs/serving.md.", lifespan=lifespan)
    app.add_middleware(_BodyLimit, limit=max(_BODY_MIN, _BODY_PER_ID * settings.max_ids))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        problems = []
        for error in exc.errors()[:5]:
            where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
            problems.append(f"{where or 'body'}: {error.get('msg', 'invalid')}")
        if request.url.path == "/score":
            metrics.answered(422, 0.0)
        return _error(422, "invalid_request", "; ".join(problems))

    @app.post("/score", response_model=ScoreResponse, responses={
        400: {"description": "A bad request: the message says what is wrong"},
        502: {"description": "A party's answer broke the protocol (the error names it)"},
        503: {"description": "A party is unavailable (the error names it), or the service is overloaded"},
        504: {"description": "The deadline passed (the error names the party that did not answer)"}})
    async def score(body: ScoreRequest):
        started = time.perf_counter()
        try:
            ids, inline, seconds = check_request(body, settings, service.share)
            version, answers = await state["batcher"].submit(ids, inline, time.monotonic() + seconds)
        except Invalid as exc:
            metrics.answered(exc.status, time.perf_counter() - started)
            return _error(exc.status, "invalid_request", str(exc))
        except RoundError as exc:
            metrics.answered(exc.status, time.perf_counter() - started)
            return _error(exc.status, exc.code, str(exc), exc.party, model_version=service.current)
        metrics.answered(200, time.perf_counter() - started, answers)
        return JSONResponse({"model_version": version, "results": answers})

    @app.get("/health", responses={503: {"description": "Degraded: a party cannot take part in a round"}})
    async def health():
        report = service.health()
        return JSONResponse(report, status_code=200 if report["status"] == "ok" else 503)

    @app.get("/metrics")
    async def prometheus():
        return Response(metrics.text(), media_type=CONTENT_TYPE)

    @app.post("/admin/reload", responses={
        404: {"description": "This party has no shard of that version"},
        409: {"description": "A party refused the version (its message says why)"},
        503: {"description": "A party is unavailable: nothing was switched"}})
    async def reload(body: ReloadRequest):
        try:
            result = await asyncio.get_running_loop().run_in_executor(None, service.reload, body.version)
        except ConfigurationError as exc:
            metrics.reloads.labels("refused").inc()
            return _error(404 if isinstance(exc, MissingVersion) else 400, "version_refused", str(exc), service.role)
        except DataError as exc:
            metrics.reloads.labels("refused").inc()
            return _error(409, "version_refused", str(exc), service.role)
        except RoundError as exc:
            metrics.reloads.labels("refused").inc()
            return _error(exc.status, exc.code, str(exc), exc.party)
        metrics.reloads.labels("switched").inc()
        return JSONResponse(result)

    return app
