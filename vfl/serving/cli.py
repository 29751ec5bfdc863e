"""``vfl serve``: run one party of a federation as a long-lived scoring service.

Every party runs it with its own model versions and its own store; the label
party also serves the HTTP API (:mod:`vfl.serving.api`).  It runs until stopped
(Ctrl-C or SIGTERM: exit 0); a failure to start is one line on standard error
and the exit codes of ``vfl party`` (2: bad configuration or data, 1: anything
else).  While it runs, each party logs one line per event (a peer linked or
lost, a model version loaded) on standard error.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import signal
import socket
import sys
import threading
from pathlib import Path

from vfl.deploy.webguard import Boundary, host_names
from vfl.errors import ConfigurationError
from vfl.deploy.commands import (add_command, add_party_options, check_installed, failure_line, party_workdir,
                                 run_command)
from vfl.deploy.record import RunRecord

EXAMPLES = """\
one command per machine, each with its own models and data (see docs/serving.md):
  vfl serve --config federation.toml --role C                                 # the coordinator (linear models;
                                                                              #   split networks: 2+ feature parties)
  vfl serve --config federation.toml --role telco --load-csv telco.csv        # a feature party
  vfl serve --config federation.toml --role bank --http 127.0.0.1:8080        # the label party: the HTTP API
then: curl -s localhost:8080/score -H 'content-type: application/json' -d '{"ids": ["10023"]}'
beyond localhost the API needs its bearer tokens: --token-file, --admin-token-file (or [serving], or the
environment variables VFL_SERVE_TOKEN, VFL_SERVE_ADMIN_TOKEN)
model versions: MODELS/VERSION/model_NAME.json (default MODELS: models/ beside federation.toml)
"""


def register(subparsers) -> None:
    p = add_command(
        subparsers, "serve", "run one party as a long-lived scoring service (the label party: an HTTP API)",
        "Serve a trained model online. Every party runs this command with its own shard of each model version "
        "and its own rows (a SQLite database by default, any SQLAlchemy URL, or a CSV); the parties stay linked "
        "by mutual TLS and relink after a restart. The label party answers POST /score, GET /health and GET "
        "/metrics over HTTP; only it learns the scores.", epilog=EXAMPLES)
    add_party_options(p, "which party this process is")
    p.add_argument("--models", type=Path, default=None,
                   help="the folder of model versions (default: [serving] models, or models/ beside the file)")
    p.add_argument("--version", default=None, help="the label party: the model version to start with "
                                                   "(default: [serving] version, or the last by name)")
    p.add_argument("--store", default=None,
                   help="this party's rows: a SQLAlchemy URL (sqlite:///telco.db, postgresql+psycopg://...) or a "
                        "CSV file (default: [serving] store, or WORKDIR/store_NAME.db)")
    p.add_argument("--load-csv", type=Path, default=None, metavar="FILE",
                   help="first load this CSV (checked as in training) into the store's table, replacing it")
    p.add_argument("--http", default=None, metavar="HOST:PORT",
                   help="the label party: where the HTTP API listens (default: [serving] http, 127.0.0.1:8080)")
    p.add_argument("--token-file", type=Path, default=None, metavar="FILE",
                   help="the label party: a file (mode 0600) holding the bearer token of /score and /metrics "
                        "(default: [serving] token_file, or VFL_SERVE_TOKEN); required unless --http is loopback")
    p.add_argument("--admin-token-file", type=Path, default=None, metavar="FILE",
                   help="the label party: a file (mode 0600) holding the bearer token of /admin/reload (default: "
                        "[serving] admin_token_file, or VFL_SERVE_ADMIN_TOKEN); without it, reload is off once "
                        "there is a scoring token")
    p.add_argument("--workdir", type=Path, default=None, help="where the default store lives (default: ./vfl-NAME)")
    p.add_argument("--access-log", action="store_true", help="the label party: log every HTTP request")
    p.set_defaults(func=_serve)


def _serve(args) -> int:
    return run_command(args, lambda: serve(args))


def serve(args) -> None:
    from vfl.deploy.config import load_config
    from vfl.transport.network import parse_address

    check_installed("vfl serve", ("fastapi", "uvicorn", "sqlalchemy", "prometheus_client", "httpx"), "serve")
    config = load_config(args.config)
    role = args.role
    kind = config.role_of(role)
    http = parse_address(args.http) if args.http else None
    settings = config.serving_of(role).with_options(models=args.models, version=args.version, http=http,
                                                    token_file=args.token_file,
                                                    admin_token_file=args.admin_token_file)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="vfl serve: %(message)s")
    if kind == "coordinator" and not config.family.coordinator:
        print(f"party {role}: {config.family.title} has no coordinator (the label party holds the key pair): nothing "
              "to serve")
        return
    if kind == "coordinator" and config.family.dealer and len(config.roster.features) < 2:
        print(f"party {role}: {config.family.title} with one feature party is served without a coordinator (no "
              "masks to deal): nothing to serve")
        return
    with RunRecord.for_config(_workdir(args, role), "serve", config, role, failure_line) as record:
        record.update(models=str(settings.models))
        _serve_as(args, config, role, kind, settings, record)


def _serve_as(args, config, role: str, kind: str, settings, record) -> None:
    """Serve as party ``role`` (of ``kind``) until stopped."""
    if kind == "coordinator":
        if args.store or args.load_csv:
            raise ConfigurationError(f"party {role} is the coordinator: it holds no rows (leave out --store and "
                                     "--load-csv)")
        from vfl.serving.coordinator import CoordinatorService

        service = CoordinatorService(config, role, _workdir(args, role)).start()
        print(f"party {role}: serving " + ("the masks of the split network's rounds" if config.family.dealer else
                                           f"decryptions with its {config.training.key_bits}-bit key pair (kept in "
                                           f"{_workdir(args, role)})"), flush=True)
        return _until_stopped(service, role)
    credentials = _credentials(role, settings) if kind == "label" else None     # before any rows are loaded
    store = _store(args, config, role, kind, settings)
    if kind == "feature":
        from vfl.serving.feature import FeatureService

        service = FeatureService(config, role, store, settings, _workdir(args, role)).start()
        print(f"party {role}: serving model versions from {settings.models} with {store.description}", flush=True)
        return _until_stopped(service, role)
    _serve_http(config, role, store, settings, credentials, args.access_log, record)


def _credentials(role: str, settings):
    """The HTTP API's tokens, after refusing an address beyond this machine without them."""
    from vfl.serving.auth import check_bind, load_credentials

    credentials = load_credentials(settings, role)
    check_bind(*settings.http, credentials, role)
    return credentials


def _workdir(args, role: str) -> Path:
    """This party's work directory: its default store and its release ledger."""
    return party_workdir(args.workdir, role)


def _store(args, config, role: str, kind: str, settings):
    """This party's store, after ``--load-csv``; None for a label party without one (features come inline)."""
    from vfl.deploy.jsonfile import private_file
    from vfl.serving.store import load_csv_into, open_store

    workdir = _workdir(args, role)
    default = workdir / f"store_{role}.db"
    spec = args.store or settings.store
    label = config.label if kind == "label" else None
    if args.load_csv is not None:
        if spec is not None and "://" not in spec:
            raise ConfigurationError(f"party {role}: --load-csv loads into a database; the store {spec} is a CSV, "
                                     "read as it is")
        if spec is None:
            private_file(default)               # every id and feature value: owner-only, its journals too
        url = spec or f"sqlite:///{default.resolve()}"
        count = load_csv_into(url, settings.table, args.load_csv, role, config.id_column, label,
                              foreign=(config.label,) if kind == "feature" else ())
        print(f"party {role}: loaded {count:,} rows of {args.load_csv} into table {settings.table!r}", flush=True)
        spec = url
    if spec is None:
        if default.exists():
            spec = f"sqlite:///{default.resolve()}"
        elif kind == "label":
            return None
        else:
            raise ConfigurationError(f"party {role} needs its rows: --load-csv FILE.csv (into {default}), --store "
                                     "URL_OR_CSV, or [serving] store in the federation file")
    return open_store(spec, settings.table, config.id_column, role, label)


def _until_stopped(service, role: str) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    service.close()
    print(f"party {role}: stopped", flush=True)


class _Server:
    """uvicorn's server, but the signals are vfl serve's: a stop is a clean end (exit 0), not a re-raised signal."""

    def __new__(cls, config):
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self):
                yield

        return Server(config)


def _serve_http(config, role: str, store, settings, credentials, access_log: bool, record) -> None:
    import uvicorn

    from vfl.serving.api import create_app, http_protocol
    from vfl.serving.label import LabelService
    from vfl.serving.metrics import Metrics

    host, port = settings.http
    try:
        sock = socket.create_server((host, port), reuse_port=False, backlog=2048)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise ConfigurationError(f"party {role}: another process listens on {host}:{port} already; stop it, or "
                                 "give --http another address") from None
    metrics = Metrics()
    service = LabelService(config, role, store, metrics, settings).start()
    # the Host check where there is no token (a page rebinding its name here could score); with tokens, a reverse
    # proxy passing its upstream's name (docs/serving.md) is answered: a rebinding page holds no token
    app = Boundary(create_app(service, metrics, credentials), host_names([host]), "vfl serve",
                   check_host=not credentials.required)
    server = _Server(uvicorn.Config(app, log_level="warning",
                                    access_log=access_log, timeout_graceful_shutdown=5,
                                    http=http_protocol(settings.request_timeout_ms / 1000.0),
                                    timeout_keep_alive=settings.idle_timeout_ms / 1000.0))
    for sig in (signal.SIGINT, signal.SIGTERM):         # a stop finishes the requests under way, then exits 0
        signal.signal(sig, lambda *_: setattr(server, "should_exit", True))
    guard = "bearer tokens required" if credentials.required else "no token: this machine only"
    bound = sock.getsockname()
    record.update(http=f"http://{bound[0]}:{bound[1]}", tokens=credentials.required)
    print(f"party {role}: serving model version {service.current} on http://{host}:{port} (POST /score, GET "
          f"/health, GET /metrics; {guard})" + ("" if store is None else f" with {store.description}"), flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        service.close()
    print(f"party {role}: stopped", flush=True)


