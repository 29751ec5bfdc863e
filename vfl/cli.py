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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
