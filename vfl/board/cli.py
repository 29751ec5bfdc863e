"""The ``vfl board`` subcommand: serve one party's board on 127.0.0.1 until stopped.

The board is a boundary like ``vfl serve``'s API (:mod:`vfl.deploy.webguard`): it answers only for this
machine's names and addresses (and ``--allow-host`` names), sends the security headers, and listens
beyond this machine only with a token of its own (``--access-token-file``).
"""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

from vfl.deploy.commands import add_command, check_installed, party_workdir, run_command
from vfl.deploy.webguard import Boundary, host_names, is_loopback, port_number, read_token_file
from vfl.errors import ConfigurationError

#: Where a board listens by default.
DEFAULT_PORT = 8765


def register(subparsers) -> None:
    p = add_command(
        subparsers, "board", "this party's runs in a browser: progress, curves, trees, IV, what it learned",
        "Serve a read-only board of one party's runs (training, prediction, alignment, serving) from its own "
        "work directory: live progress of a run under way, the loss as it trains, the label party's metrics "
        "and curves, trees with this party's own thresholds, the credit pipeline's IV and scorecard, the "
        "messages it received by step beside what its role learns, and a service's metrics. It shows exactly "
        "what this party knows: nothing is fetched from the other parties. Binds to 127.0.0.1 by default.",
        epilog="examples:\n  vfl board --workdir vfl-B\n  vfl board --run my-run   (a folder an estimator's "
               "save_run wrote)\n  vfl board --workdir vfl-B --port 8800 --host 0.0.0.0")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workdir", type=Path, default=None,
                       help="the party's work directory (vfl party --workdir; default: ./vfl-NAME with --role, "
                            "else the current directory)")
    where.add_argument("--run", type=Path, default=None, metavar="PATH",
                       help="a folder written by an estimator's save_run(PATH)")
    p.add_argument("--role", default=None, metavar="NAME", help="the party's name: --workdir defaults to ./vfl-NAME")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"the port (default: {DEFAULT_PORT}; 0: any free)")
    p.add_argument("--token-file", type=Path, default=None,
                   help="a file holding a token of this party's vfl serve, for its /metrics when it requires one "
                        "(the board then shows those metrics to whoever may open the board)")
    p.add_argument("--access-token-file", type=Path, default=None, metavar="FILE",
                   help="a file (mode 0600) holding the board's own token: every page then asks for it once (a "
                        "cookie of this browser session); required to listen beyond this machine")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a host name the board answers for besides this machine's names and addresses (a reverse "
                        "proxy's name); any other Host is refused (DNS rebinding)")
    p.set_defaults(func=_board)


def _port(text: str) -> int:
    """``--port``: 0 (any free port) or 1 to 65535, named as out of range otherwise."""
    if str(text).strip() == "0":
        return 0
    try:
        return port_number(text, "--port")
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--port: ")) from None


def _board(args) -> int:
    def action():
        check_installed("vfl board", ("fastapi", "uvicorn", "jinja2", "httpx", "prometheus_client"), "board")
        access = (read_token_file(args.access_token_file, "vfl board: --access-token-file")
                  if args.access_token_file is not None else None)
        check_board_bind(args.host, args.port, access, args.token_file is not None)
        serve_board(_directory(args), args.host, args.port, _token(args.token_file), access=access,
                    allow_hosts=args.allow_host)

    return run_command(args, action)


def _directory(args) -> Path:
    if args.run is not None:
        return args.run
    if args.workdir is not None:
        return args.workdir
    return party_workdir(None, args.role) if args.role else Path(".")


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


def check_board_bind(host: str, port: int, access: str | None, republishes: bool) -> None:
    """Refuse to listen beyond this machine without the board's own token (a :class:`ConfigurationError`)."""
    if access is None and not is_loopback(host):
        what = " and the metrics it reads from vfl serve with its token (--token-file)" if republishes else ""
        raise ConfigurationError(
            f"vfl board would listen on {host}:{port}, beyond this machine, with no token: anyone who reaches it "
            f"could read this party's runs, settings, metrics and shards{what}. Give it a token of its own "
            "(--access-token-file FILE, mode 0600; make one with: python -c \"import secrets; "
            "print(secrets.token_urlsafe(32))\"), or listen on 127.0.0.1 (behind an SSH tunnel or a proxy)")


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; a :class:`ConfigurationError` saying why not."""
    try:
        return socket.create_server((host, port))
    except OSError as exc:
        raise ConfigurationError(f"vfl board cannot listen on {host}:{port}: {exc.strerror or exc} (another "
                                 "board or service there? give --port)") from None


def serve_board(directory, host: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None,
                sock: socket.socket | None = None, announce=print, access: str | None = None,
                allow_hosts=()) -> None:
    """Serve the board of ``directory`` until interrupted (``sock``: an already listening socket; ``access``: the
    board's own token; ``allow_hosts``: names it answers for besides this machine's)."""
    import uvicorn

    from vfl.board.app import create_app
    from vfl.board.runs import Workdir

    workdir = Workdir(directory)
    sock = sock or listen(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    app = Boundary(create_app(workdir, token, access), host_names([host, *allow_hosts]), "vfl board")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    announce(f"vfl board: {workdir.path} on http://{bound_host}:{bound_port}/ (read-only; Ctrl-C stops it)")
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
