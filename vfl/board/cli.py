"""The ``vfl board`` subcommand: serve one party's board on 127.0.0.1 until stopped."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

from vfl.deploy.commands import check_installed, run_command, wrap
from vfl.errors import ConfigurationError

#: Where a board listens by default.
DEFAULT_PORT = 8765


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "board", help="this party's runs in a browser: progress, curves, trees, IV, what it learned",
        description=wrap(
            "Serve a read-only board of one party's runs (training, prediction, alignment, serving) from its own "
            "work directory: live progress of a run under way, the loss as it trains, the label party's metrics "
            "and curves, trees with this party's own thresholds, the credit pipeline's IV and scorecard, the "
            "messages it received by step beside what its role learns, and a service's metrics. It shows exactly "
            "what this party knows: nothing is fetched from the other parties. Binds to 127.0.0.1 by default."),
        epilog="examples:\n  vfl board --workdir vfl-B\n  vfl board --run my-run   (a folder an estimator's "
               "save_run wrote)\n  vfl board --workdir vfl-B --port 8800 --host 0.0.0.0",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workdir", type=Path, default=None,
                       help="the party's work directory (vfl party --workdir; default: ./vfl-NAME with --role, "
                            "else the current directory)")
    where.add_argument("--run", type=Path, default=None, metavar="PATH",
                       help="a folder written by an estimator's save_run(PATH)")
    p.add_argument("--role", default=None, metavar="NAME", help="the party's name: --workdir defaults to ./vfl-NAME")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the port (default: {DEFAULT_PORT}; 0: any free)")
    p.add_argument("--token-file", type=Path, default=None,
                   help="a file holding a token of this party's vfl serve, for its /metrics when it requires one")
    p.set_defaults(func=_board)


def _board(args) -> int:
    def action():
        check_installed("vfl board", ("fastapi", "uvicorn", "jinja2", "httpx", "prometheus_client"), "board")
        serve_board(_directory(args), args.host, args.port, _token(args.token_file))

    return run_command(args, action)


def _directory(args) -> Path:
    if args.run is not None:
        return args.run
    if args.workdir is not None:
        return args.workdir
    return Path(f"vfl-{args.role}") if args.role else Path(".")


def _token(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise ConfigurationError(f"cannot read the token file {path}: {exc.strerror or exc}") from None
    if not token:
        raise ConfigurationError(f"the token file {path} is empty")
    return token


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; a :class:`ConfigurationError` saying why not."""
    try:
        return socket.create_server((host, port))
    except OSError as exc:
        raise ConfigurationError(f"vfl board cannot listen on {host}:{port}: {exc.strerror or exc} (another "
                                 "board or service there? give --port)") from None


def serve_board(directory, host: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None,
                sock: socket.socket | None = None, announce=print) -> None:
    """Serve the board of ``directory`` until interrupted (``sock``: an already listening socket)."""
    import uvicorn

    from vfl.board.app import create_app
    from vfl.board.runs import Workdir

    workdir = Workdir(directory)
    sock = sock or listen(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    server = uvicorn.Server(uvicorn.Config(create_app(workdir, token), log_level="warning", access_log=False))
    announce(f"vfl board: {workdir.path} on http://{bound_host}:{bound_port}/ (read-only; Ctrl-C stops it)")
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
