"""The board's web application (FastAPI, Jinja2 templates, SVG drawn here): read-only, one party's runs.

Pages: ``/`` the runs, newest first (``?page=N``); ``/runs/ID`` one run (settings, live
progress, results, what this party learned); fragments the run page polls while the
run is under way: ``/runs/ID/live`` and, for a service, ``/runs/ID/serving``;
``/api/runs/ID`` the same as JSON.  Only GET is served; nothing on the page writes.
"""

from __future__ import annotations

import time
from html import escape
from datetime import datetime
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from vfl.board import charts, learned, results
from vfl.board.runs import PAGE, NotFound, Workdir
from vfl.board.serving import Scraper

HERE = Path(__file__).parent


def create_app(workdir: Workdir, token: str | None = None, access: str | None = None) -> FastAPI:
    """The board of ``workdir``; ``token``: sent to a service's ``/metrics`` when it requires one; ``access``: the
    board's own token, asked for once per browser session (:func:`_require_access`)."""
    app = FastAPI(title="vfl board", docs_url=None, redoc_url=None, openapi_url=None)
    if access is not None:
        _require_access(app, access)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.filters["when"] = _when
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    scraper = Scraper(token)

    def render(request: Request, name: str, status_code: int = 200, **context) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"workdir": str(workdir.path), **context},
                                          status_code=status_code)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound):
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": f"no run {exc.args[0]!r} in this work directory"}, status_code=404)
        return render(request, "missing.html", status_code=404, what=str(exc.args[0]))

    @app.get("/", response_class=HTMLResponse)
    def runs_page(request: Request, page: int = 1):
        runs, total = workdir.page(max(1, page))
        pages = max(1, -(-total // PAGE))
        return render(request, "runs.html", runs=[_row(r) for r in runs], total=total, page_number=max(1, page),
                      pages=pages)

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    def run_page(request: Request, run_id: str, tree: int = 0):
        info, live = workdir.info(run_id), workdir.live(run_id)
        result = workdir.result(run_id)
        folder = workdir.folder(run_id)
        said = learned.statement(info.get("family", ""), info.get("role", ""), info.get("task", "train"))
        return render(request, "run.html", info=_row(info), settings=info.get("settings", {}),
                      live_html=_live_html(info, live, bool((result or {}).get("loss_curve"))),
                      running=info.get("status") == "running",
                      sections=results.sections(info, result, folder, live, tree),
                      received=_received(info, live), kinds=learned.KINDS,
                      statement=said, serving=info.get("task") == "serve" and bool(info.get("http")))

    @app.get("/runs/{run_id}/live", response_class=HTMLResponse)
    def live_fragment(run_id: str):
        info = workdir.info(run_id)
        return HTMLResponse(_live_html(info, workdir.live(run_id)), headers={"X-Run-Status": info["status"]})

    @app.get("/runs/{run_id}/received", response_class=HTMLResponse)
    def received_fragment(request: Request, run_id: str):
        info = workdir.info(run_id)
        live = workdir.live(run_id)
        answer = templates.TemplateResponse(request, "received.html", {
            "received": _received(info, live), "kinds": learned.KINDS,
            "running": info.get("status") == "running"})
        answer.headers["X-Run-Status"] = info["status"]
        return answer

    @app.get("/runs/{run_id}/serving", response_class=HTMLResponse)
    def serving_fragment(run_id: str):
        info = workdir.info(run_id)
        return HTMLResponse(scraper.html(run_id, info), headers={"X-Run-Status": info["status"]})

    @app.get("/api/runs/{run_id}")
    def run_json(run_id: str):
        info, live = workdir.info(run_id), workdir.live(run_id)
        return {"info": info, "step": live.step, "models": live.models, "messages": live.messages,
                "lines": [text for _, text in live.lines[-20:]], "result": workdir.result(run_id)}

    return app


def _received(info: dict, live) -> list[dict]:
    """What the party received in the run, described by family and sender (:func:`vfl.board.learned.received`)."""
    return learned.received(live.received, info.get("family", ""), info.get("parties", {}), info.get("task", "train"))


_COOKIE = "vfl_board"
_LOGIN = """<!doctype html><html><head><meta charset="utf-8"><title>vfl board</title>
<link rel="stylesheet" href="/static/board.css"></head><body><main><h1>vfl board</h1>
<form method="post" action="/login"><p><label>This board's token <input type="password" name="token"
autocomplete="current-password" autofocus></label> <button type="submit">Open</button></p>{problem}</form>
</main></body></html>"""


def _require_access(app: FastAPI, access: str) -> None:
    """Every page but ``/login`` and the static files needs the board's token: a bearer header, or the cookie
    ``/login`` sets (HttpOnly, SameSite=Strict, this browser session) once the token is typed in."""
    import hmac
    from urllib.parse import parse_qs

    from fastapi.responses import RedirectResponse

    from vfl.deploy.webguard import digest

    expected = digest(access.encode())

    def known(value: str | None) -> bool:
        return hmac.compare_digest(digest((value or "").encode("latin-1", "replace")), expected)

    def login_page(problem: str = "", status: int = 200) -> HTMLResponse:
        return HTMLResponse(_LOGIN.format(problem=f"<p>{escape(problem)}</p>" if problem else ""), status_code=status)

    @app.middleware("http")
    async def access_check(request: Request, call_next):
        path = request.url.path
        if path == "/login" or path.startswith("/static/"):
            return await call_next(request)
        scheme, _, bearer = (request.headers.get("authorization") or "").partition(" ")
        if known(request.cookies.get(_COOKIE)) or (scheme.lower() == "bearer" and known(bearer.strip())):
            return await call_next(request)
        if path.startswith("/api/"):
            return JSONResponse({"error": "this board needs its token (header 'Authorization: Bearer TOKEN')"},
                                status_code=401)
        return RedirectResponse("/login", status_code=303)

    @app.get("/login", response_class=HTMLResponse)
    async def login_form():
        return login_page()

    @app.post("/login")
    async def login(request: Request):
        body = (await request.body())[:4096].decode("latin-1", "replace")
        given = (parse_qs(body).get("token") or [""])[0]
        if not known(given):
            return login_page("That is not this board's token.", status=401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(_COOKIE, given, httponly=True, samesite="strict", path="/")
        return response


def _when(value) -> str:
    if not value:
        return "–"
    try:
        return datetime.fromisoformat(value).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError):
        return str(value)


def _row(info: dict) -> dict:
    """``run.json`` with its duration (so far, if running)."""
    row = dict(info)
    try:
        started = datetime.fromisoformat(info["started"])
        ended = datetime.fromisoformat(info["ended"]) if info.get("ended") else None
        seconds = ((ended.timestamp() if ended else time.time()) - started.timestamp())
        row["duration"] = f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"
    except (KeyError, TypeError, ValueError):
        row["duration"] = "–"
    return row


def _live_html(info: dict, live, final_loss: bool = False) -> str:
    """The live panel: the step, each model's epochs done, the loss so far as a growing curve, the last lines.

    ``final_loss``: the result draws the whole loss curve, so the panel does not draw it again.
    """
    status = info.get("status", "")
    parts = [f'<p class="status {_text(status)}" id="run-status">{_text(status)}</p>']
    serving = info.get("task") == "serve"
    if status == "running" and not serving:
        parts.append(f'<p id="step">now: <b>{_text(live.step)}</b></p>')
    elif status == "failed":
        parts.append(f'<p class="error" id="run-error">{_text(info.get("error", ""))}</p>')
    unit = results.unit_of(info.get("family"))
    for index, model in sorted(live.models.items()):
        name = f"model {index + 1}/{model['models']}{model['what']}" if model.get("models", 1) > 1 else "training"
        planned = model["epochs"] or "?"
        parts.append(f'<p class="progress" id="progress-{index}">{_text(name)}: {model["done"]} of {planned} '
                     f'{unit}s <progress value="{model["done"]}" max="{model["epochs"] or 1}"></progress></p>')
        if model["loss"] and not final_loss:
            epochs, losses = zip(*sorted(model["loss"]))
            parts.append(charts.line_chart([("loss", [e + 1 for e in epochs], list(losses))],
                                           f"loss per {unit}, as it trains", unit, "loss", markers=True,
                                           chart_id=f"loss-live-{index}"))
    if not serving:
        parts.append(f'<p class="counts">{live.messages:,} messages sent and received</p>')
    if live.lines:
        parts.append('<pre class="lines">' + "\n".join(_text(text) for _, text in live.lines[-8:]) + "</pre>")
    if live.damaged:
        parts.append(f'<p class="error">{live.damaged} event lines could not be read</p>')
    return "".join(parts)


def _text(value) -> str:
    """Any value of a record as HTML text."""
    return escape(str(value))
