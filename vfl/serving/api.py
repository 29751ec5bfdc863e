"""The label party's HTTP API (FastAPI on uvicorn): ``POST /score``, ``GET /health``, ``GET /metrics``.

========================  =====================================================================
``POST /score``           ``{"ids": [...], "features": [...]?, "deadline_ms": n?}``: one answer per id
``GET /health``           every party's state; 200 when all can score, 503 (degraded) otherwise
``GET /metrics``          Prometheus text format (:mod:`vfl.serving.metrics`)
``POST /admin/reload``    ``{"version": "4"}``: every party switches to that model version
``GET /openapi.json``     this API's OpenAPI description (no ``/docs`` page: it would load scripts
                          from a CDN)
========================  =====================================================================

Who may call what is :mod:`vfl.serving.auth`'s (a scoring and an admin bearer
token).  Before a request reaches the application, :class:`_Guard` checks its
token, its content type (415 unless ``application/json``) and reads its body
within ``request_timeout_ms`` (else 408) and its size bound (else 413, also for a
chunked body); the connection is closed after each of these refusals.
:func:`http_protocol` closes connections that stay silent or never finish a
request's head.  Every error, FastAPI's own included (404, 405, 422), is
``{"error": {"code", "message", "party"?}}``.

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
import logging
import math
import os
import re
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt
from starlette.exceptions import HTTPException

from vfl.datachecks import canonical_id
from vfl.errors import ConfigurationError, DataError
from vfl.serving.auth import Credentials
from vfl.serving.batching import MicroBatcher
from vfl.serving.label import RoundError
from vfl.serving.messages import MAX_ID_BYTES
from vfl.serving.metrics import CONTENT_TYPE
from vfl.serving.models import MissingVersion

log = logging.getLogger("vfl.serving")
#: Bytes of request body per id allowed (features included), and at least.
_BODY_PER_ID, _BODY_MIN = 8192, 65536
#: The endpoints that take a JSON body.
_JSON_PATHS = {"/score", "/admin/reload"}


class ScoreRequest(BaseModel):
    """The ids to score, and optionally the label party's own features of each (instead of its store)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"ids": ["10023"]}, {"ids": ["10023", "10024"], "features": [{"income": 52000, "age": 31}, None]}]})
    ids: list[Any] = Field(description="The ids to score: text or integers, as in the parties' data.")
    features: list[dict[str, Any] | None] | None = Field(
        None, description="One object per id (or null: look it up in the label party's store) with the label "
                          "party's own columns of the model.")
    deadline_ms: StrictInt | None = Field(None, description="Answer within this many milliseconds, a whole "
                                                            "number (default: [serving] deadline_ms).")


class ScoreResult(BaseModel):
    """One id's answer: a score (classifiers: probability and prediction), or an error."""

    id: str
    score: float | None = None
    probability: float | None = None
    prediction: Any = None
    scores: dict[str, float] | None = None
    probabilities: dict[str, float] | None = None
    log_odds: float | None = Field(None, description="The credit pipeline: the scorecard's log-odds of the event.")
    reasons: list[Any] | None = Field(
        None, description="With [serving] reasons = k: the codes of the id's k largest contributions toward the "
                          "adverse side, worst first (a column of the label party, a feature party's consented code, "
                          "or \"information from <party>\"). The credit pipeline: what cost the most points.")
    error: dict[str, Any] | None = Field(None, description="code, party and message, when the id was not scored")


class ScoreResponse(BaseModel):
    model_version: str
    results: list[ScoreResult]


class ReloadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: str = Field(description="The model version every party switches to (a folder name).")


class Invalid(Exception):
    """A request that is refused before anything of it is used: 400 (or ``status``) with this message."""

    def __init__(self, message: str, status: int = 400, code: str = "invalid_request"):
        super().__init__(message)
        self.status, self.code = status, code


_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/(?:[^\s'\"/]+/)+(?=[^\s'\"/]*)")


def _on_this_machine(path: str) -> bool:
    """Whether ``path`` (``/a/b/``) lies in a folder of this machine's root (``/a``): a file path, not a URL's."""
    first = path.strip("/").split("/", 1)[0]
    return bool(first) and os.path.isdir("/" + first)


def _error(status: int, code: str, message: str, party: str | None = None, headers=None, **more) -> JSONResponse:
    """An error answer; any absolute path of this server's in ``message`` keeps its file name only (the full
    message goes to the server's log)."""
    hidden = _ABSOLUTE_PATH.sub(lambda m: "…/" if _on_this_machine(m.group(0)) else m.group(0), message)
    if hidden != message:                       # a folder of this server's (not a URL path): its name only
        log.info("answered %s %s: %s", status, code, message)
        message = hidden
    error = {"code": code, "message": message}
    if party is not None:
        error["party"] = party
    return JSONResponse({"error": error, **more}, status_code=status, headers=headers)


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
        if not settings.allow_inline_features and any(row is not None for row in body.features):
            raise Invalid("features: this service takes no features inline ([serving] allow_inline_features is "
                          "false, the default): a client that sends the label party's features and reads the scores "
                          "can solve for its weights (docs/serving.md); send ids only", 403, "inline_features_off")
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
            if not share.inline_null:
                raise Invalid(f"features[{i}].{column}: null, but a {share.noun} needs every value")
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


class _Guard:
    """ASGI middleware: a request's token, content type and body, checked before the application sees it.

    The body is read here whole (the application gets it from memory): above
    ``limit`` bytes it is refused with 413 as soon as the bound is passed
    (declared or chunked), and a body that does not arrive within ``timeout``
    seconds with 408.  These refusals, and 401, 403 and 415, close the
    connection; those of ``/score`` are counted in ``metrics`` by status.
    """

    def __init__(self, app, limit: int, timeout: float, credentials: Credentials, metrics=None):
        self.app, self.limit, self.timeout, self.credentials = app, limit, timeout, credentials
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refusal, body = await self._check(scope, receive)
        if refusal is not None:
            status = refusal[0]
            await _refuse(send, *refusal, **({"www-authenticate": "Bearer"} if status == 401 else {}))
            if scope["path"] == "/score" and self.metrics is not None:
                self.metrics.answered(status, 0.0)
        elif body is not None:
            await self.app(scope, _replay(body, receive), send)

    async def _check(self, scope, receive) -> tuple[tuple[int, str, str] | None, bytes | None]:
        """``(refusal, None)``, or ``(None, body)``; ``(None, None)`` if the client left."""
        headers = dict(scope.get("headers") or [])
        method, path = scope["method"], scope["path"]
        refusal = self.credentials.refusal(method, path, headers.get(b"authorization"))
        if refusal is not None:
            return refusal, None
        if path in _JSON_PATHS and method == "POST":
            kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            if kind != b"application/json":
                shown = kind.decode("latin-1") or "none"
                return (415, "unsupported_media_type", f"{method} {path} takes a JSON body: send 'content-type: "
                        f"application/json' (the request's content type: {shown})"), None
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return self._too_large(), None
        try:
            return None, await asyncio.wait_for(self._body(receive), self.timeout)
        except _TooLarge:
            return self._too_large(), None
        except asyncio.TimeoutError:
            return (408, "request_timeout", f"the request's body did not arrive within {self.timeout * 1000:.0f} ms "
                    "([serving] request_timeout_ms)"), None
        except _Disconnected:
            return None, None

    def _too_large(self) -> tuple[int, str, str]:
        return 413, "request_too_large", f"the request body is above {self.limit} bytes"

    async def _body(self, receive) -> bytes:
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                raise _TooLarge()
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)


def _replay(body: bytes, receive):
    """An ASGI ``receive`` that gives ``body`` first, then whatever the connection says (a disconnect)."""
    given = False

    async def replayed():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class _TooLarge(Exception):
    pass


class _Disconnected(Exception):
    pass


async def _refuse(send, status: int, code: str, message: str, **headers) -> None:
    """An error answer from the middleware, closing the connection (the rest of the request is never read)."""
    response = _error(status, code, message, headers={"connection": "close", **headers})
    await send({"type": "http.response.start", "status": status, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})


def http_protocol(request_timeout: float):
    """uvicorn's HTTP protocol, closing a connection that sends nothing, or not a whole request head, in time.

    uvicorn closes a connection idle after a response (``timeout_keep_alive``),
    but neither one that never sends a byte nor one that stops halfway through a
    request's head.  This protocol closes the first after the keep-alive timeout
    too, and the second ``request_timeout`` seconds after the head's first byte.
    """
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class Protocol(AutoHTTPProtocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._done, self._head = None, None
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                                self.timeout_keep_alive_handler)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._waiting() and self._head is None:
                self._head = self.loop.call_later(request_timeout, self._head_late)

        def on_response_complete(self) -> None:
            self._done = self.cycle
            self._cancel_head()
            super().on_response_complete()

        def connection_lost(self, exc) -> None:
            self._cancel_head()
            super().connection_lost(exc)

        def _waiting(self) -> bool:
            """No request under way: what has come since the last one is the start of the next head."""
            return self.cycle is None or (self.cycle is self._done and self.cycle.response_complete)

        def _cancel_head(self) -> None:
            if self._head is not None:
                self._head.cancel()
                self._head = None

        def _head_late(self) -> None:
            self._head = None
            if self._waiting() and not self.transport.is_closing():
                self.transport.close()

    return Protocol


def create_app(service, metrics, credentials: Credentials | None = None) -> FastAPI:
    """The API of a started :class:`~vfl.serving.label.LabelService`, reporting to ``metrics``.

    ``credentials``: the tokens it asks for (:mod:`vfl.serving.auth`; None: none, a loopback service).
    """
    settings = service.settings
    credentials = credentials or Credentials()
    state: dict = {}
    reloading = asyncio.Lock()

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
                              "docs/serving.md.", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.add_middleware(_Guard, limit=max(_BODY_MIN, _BODY_PER_ID * settings.max_ids),
                       timeout=settings.request_timeout_ms / 1000.0, credentials=credentials, metrics=metrics)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        where = f"{request.method} {request.url.path}"
        if exc.status_code == 400 and request.url.path in _JSON_PATHS:    # a body JSON could not parse (not UTF-8,
            if request.url.path == "/score":                                # an integer beyond 4300 digits): as
                metrics.answered(422, 0.0)                                  # malformed JSON is answered
            return _error(422, "invalid_request", "body: it could not be parsed as JSON (UTF-8 text, with numbers of "
                                                  "at most 4300 digits)")
        code, message = {404: ("not_found", f"{where}: no such endpoint (POST /score, GET /health, GET /metrics, "
                                            "POST /admin/reload)"),
                         405: ("method_not_allowed", f"{where}: the endpoint does not take {request.method}")
                         }.get(exc.status_code, ("http_error", f"{where}: {exc.detail}"))
        return _error(exc.status_code, code, message, headers=exc.headers)

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception):
        log.error("party %s: %s %s failed: %r", service.role, request.method, request.url.path, exc)
        return _error(500, "internal_error", "the service failed on this request; the label party's log says why")

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
            return _error(exc.status, exc.code, str(exc))
        except RoundError as exc:
            metrics.answered(exc.status, time.perf_counter() - started)
            return _error(exc.status, exc.code, str(exc), exc.party, model_version=service.current)
        metrics.answered(200, time.perf_counter() - started, answers)
        return JSONResponse({"model_version": version, "results": answers})

    @app.get("/health", responses={503: {"description": "Degraded: a party cannot take part in a round"}})
    async def health(request: Request):
        report = service.health()
        if credentials.required and not credentials.rights(request.headers.get("authorization")):
            report = {"status": report["status"]}       # without a token: the status only
        return JSONResponse(report, status_code=200 if report["status"] == "ok" else 503)

    @app.get("/metrics")
    async def prometheus():
        return Response(metrics.text(), media_type=CONTENT_TYPE)

    @app.post("/admin/reload", responses={
        404: {"description": "This party has no shard of that version"},
        409: {"description": "A party refused the version (its message says why), or a reload is under way"},
        503: {"description": "A party is unavailable: nothing was switched"}})
    async def reload(body: ReloadRequest):
        if reloading.locked():          # one at a time: a retry while one runs would only queue behind it
            metrics.reloads.labels("refused").inc()
            return _error(409, "reload_in_progress", "a reload is under way (a refresh of private tables takes "
                          "minutes); wait for its answer, or watch GET /health and model_version", service.role)
        async with reloading:
            return await _reload(body.version)

    async def _reload(version: str):
        try:
            result = await asyncio.get_running_loop().run_in_executor(None, service.reload, version)
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
