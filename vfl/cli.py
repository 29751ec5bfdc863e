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

#: Modules that each contribute one or more subcommands.
SUBCOMMAND_MODULES = (
    "vfl.horizontal.cli",
    "vfl.federation.cli",
    "vfl.serving.cli",
    "vfl.board.cli",
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
