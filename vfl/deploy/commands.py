"""What every ``vfl`` command shares: one line per failure, exit codes, wrapped help, the options naming a party.

Exit codes: 0 success; 1 the federation failed (a peer gone, silent, refused,
a malformed message...) or an internal error; 2 bad input (configuration, data,
command line); 130 interrupted.  A failure is one line on standard error, never
a traceback.  ``vfl party``, ``vfl predict``, ``vfl align``, ``vfl demo`` and
``vfl serve`` all end through :func:`run_command`.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import warnings
from pathlib import Path

from vfl.errors import ConfigurationError, DataError, FixedPointOverflowError, VFLError


def wrap(text: str) -> str:
    """Descriptions keep their own line breaks (the epilogs are laid out by hand), so wrap them here."""
    return textwrap.fill(" ".join(text.split()), 78)


def add_command(subparsers, name: str, summary: str, description: str, epilog: str | None = None,
                raw: bool = True) -> argparse.ArgumentParser:
    """A subcommand's parser: its one-line ``summary`` in ``vfl --help``, its ``description`` wrapped by :func:`wrap`.

    Parameters
    ----------
    subparsers
        What ``argparse``'s ``add_subparsers`` returned.
    name : str
        The subcommand (``vfl NAME``).
    summary : str
        Its line in the list of subcommands.
    description : str
        Its description, wrapped here (its own line breaks are not kept).
    epilog : str, optional
        Text after the options, laid out by hand (its line breaks are kept).
    raw : bool
        Keep the laid-out text as it is (``argparse.RawDescriptionHelpFormatter``); False: argparse fills it again
        to the terminal's width.

    Returns
    -------
    argparse.ArgumentParser
    """
    kwargs = {"formatter_class": argparse.RawDescriptionHelpFormatter} if raw else {}
    return subparsers.add_parser(name, help=summary, description=wrap(description), epilog=epilog, **kwargs)


def add_party_options(parser: argparse.ArgumentParser,
                      role_help: str = "which party this process is: its name in the federation file") -> None:
    """``--config`` (the federation file) and ``--role NAME`` (this party), both required: how every command run
    by one party of a federation names it.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    role_help : str
        What ``--role`` says of the party (e.g. that it is not the coordinator).
    """
    parser.add_argument("--config", type=Path, required=True, help="the federation file (federation.toml)")
    parser.add_argument("--role", required=True, metavar="NAME", help=role_help)


def party_workdir(workdir, role: str) -> Path:
    """A party's work directory: ``workdir`` as given (``--workdir``), by default ``./vfl-ROLE``.

    Parameters
    ----------
    workdir : path or None
    role : str
        The party's name in the federation.

    Returns
    -------
    Path
    """
    return Path(workdir) if workdir is not None else Path(f"vfl-{role}")


def run_command(args, action) -> int:
    """Run ``action``; any failure ends as one line on standard error and an exit code (:func:`failure`), never a
    traceback."""
    where = f"vfl {args.command}" + (f" {args.role}" if getattr(args, "role", None) else "")

    def show(message, category, *_args, **_kwargs) -> None:     # a warning is one line too, not a source excerpt
        print(f"{where}: warning: {one_line(message)}", file=sys.stderr)

    try:
        with warnings.catch_warnings():
            warnings.showwarning = show
            action()
        return 0
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - even a bug or an unforeseen fault: one line
        code, text = failure(exc)
    print(f"{where}: {'interrupted' if code == 130 else 'error: ' + one_line(text)}", file=sys.stderr)
    return code


def check_installed(command: str, modules, extra: str) -> None:
    """The libraries ``command`` needs (an extra's), or a one-line error saying how to get them."""
    import importlib.util

    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigurationError(f"{command} needs {', '.join(missing)}: pip install -e \".[{extra}]\" (the test "
                                 "extra has them too)")


def failure(exc: BaseException) -> tuple[int, str]:
    """How a command reports ``exc``: its exit code and its text (a run's record says the same).

    1: the federation failed (a peer gone, silent, refused, a protocol error, a peer that
    stopped) or an unexpected internal error; 2: bad input (configuration, data, values
    beyond the fixed-point range, files); 130: interrupted.
    """
    if isinstance(exc, KeyboardInterrupt):
        return 130, "interrupted"
    if isinstance(exc, (ConfigurationError, DataError, FixedPointOverflowError)):
        return 2, str(exc)
    if isinstance(exc, VFLError):
        return 1, str(exc)
    if isinstance(exc, OSError):
        return 2, str(exc)
    return 1, f"internal error ({type(exc).__name__})" + (f": {exc}" if str(exc).strip() else "")


def failure_line(exc: BaseException) -> str:
    """:func:`failure`'s text as one line."""
    return one_line(failure(exc)[1])


def one_line(text: str) -> str:
    """``text`` as one printable line: line breaks become spaces, control characters are escaped.

    Error messages can quote what a peer sent (an abort reason), so nothing in them may
    move the cursor or start a new line in the operator's terminal.

    Parameters
    ----------
    text : str

    Returns
    -------
    str
    """
    text = " ".join(part.strip() for part in str(text).splitlines() if part.strip()) or "(no message)"
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
