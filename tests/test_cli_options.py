"""No vfl command takes an abbreviated option, and a value given to an option it does not know is never repeated."""

import argparse
import subprocess
import sys

import pytest

from vfl.cli import build_parser


def _parsers(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_parser_refuses_abbreviations():
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 8 and all(not p.allow_abbrev for p in parsers)


@pytest.mark.parametrize("argv", [["serve", "--config", "f.toml", "--role", "A", "--token", "s3cr3t-value"],
                                  ["serve", "--config", "f.toml", "--role", "A", "--token=s3cr3t-value"],
                                  ["board", "--tok", "s3cr3t-value"]])
def test_a_secret_given_to_a_prefix_of_an_option_is_refused_and_not_repeated(argv, tmp_path):
    done = subprocess.run([sys.executable, "-m", "vfl", *argv], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60)
    assert done.returncode == 2
    assert "unrecognized arguments: --tok" in done.stderr and "s3cr3t" not in done.stderr + done.stdout
    assert not list(tmp_path.rglob("run.json"))                    # nothing ran, nothing was recorded
