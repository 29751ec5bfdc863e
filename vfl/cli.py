"""The ``vfl`` command.

Each subcommand lives in the module that owns its feature; that module exposes
``register(subparsers)``, which adds an ``argparse`` sub-parser whose ``func``
default takes the parsed arguments and returns an exit code.  This file only
lists the modules, so adding a subcommand never means editing another feature.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from vfl.deploy.commands import failure, one_line
from vfl.errors import VFLError

#: Modules that each contribute one or more subcommands.
SUBCOMMAND_MODULES = (
    "vfl.horizontal.cli",
    "vfl.federation.cli",
    "vfl.serving.cli",
    "vfl.board.cli",
    "vfl.export.cli",
)


class Parser(argparse.ArgumentParser):
    """vfl's parsers: no abbreviated options (``--token`` is not read as ``--token-file``), and an argument it does
    not know is named, its value not repeated (it may be a secret given to the wrong option).

    Subcommands' parsers are of the same class (argparse makes them of their parent's).
    """

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            shown = [a.split("=", 1)[0] + ("=…" if "=" in a else "") if a.startswith("-") else "…" for a in extras]
            self.error("unrecognized arguments: " + " ".join(shown) + " (values are not repeated: they may be "
                       "secrets; options are never abbreviated)")
        return namespace


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="vfl",
        description="Vertical federated learning with Paillier encryption, and horizontal FedAvg.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("vfl: interrupted", file=sys.stderr)
        return 130
    except VFLError as exc:     # a subcommand that does not end through run_command: still one line
        code, text = failure(exc)
        print(f"vfl {args.command}: error: {one_line(text)}", file=sys.stderr)
        return code


def run_script(main_function, *args, prog: str | None = None) -> int:
    """Run a script's ``main_function(*args)`` as the ``vfl`` command runs its subcommands: vfl's own errors
    (:class:`vfl.errors.VFLError`, which name the party, column, row or setting) end as one line on standard
    error and an exit code (2 bad input, 1 a failed federation, 130 interrupted), never a traceback; any other
    exception (a bug) keeps its traceback.

    The examples end with ``raise SystemExit(run_script(main))``.

    Parameters
    ----------
    main_function : callable
        The script's entry point; what it returns is ignored unless it is an int (its exit code).
    prog : str, optional
        The name the error line starts with (default: the script's file name).

    Returns
    -------
    int
        The exit code.
    """
    prog = prog or Path(sys.argv[0]).name or "vfl"
    try:
        result = main_function(*args)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except VFLError as exc:
        code, text = failure(exc)
        print(f"{prog}: error: {one_line(text)}", file=sys.stderr)
        return code
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
