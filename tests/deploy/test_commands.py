"""What every vfl command shares (vfl.deploy.commands): one line per failure and its exit code, the options that
name a party, a party's default work folder."""

import argparse
from pathlib import Path

import pytest

from vfl.deploy.commands import add_command, add_party_options, party_workdir, run_command
from vfl.errors import ConfigurationError, PeerError


def _fail(exc):
    def action():
        raise exc
    return action


@pytest.mark.parametrize("exc, code, line", [
    (ConfigurationError("federation.toml: [training]\niterations must be positive"), 2,
     "vfl party bank: error: federation.toml: [training] iterations must be positive"),
    (PeerError("party telco stopped"), 1, "vfl party bank: error: party telco stopped"),
    (ValueError("a bug"), 1, "vfl party bank: error: internal error (ValueError): a bug"),
    (KeyboardInterrupt(), 130, "vfl party bank: interrupted"),
])
def test_a_failure_is_one_line_naming_the_command_and_the_party_and_its_exit_code(capsys, exc, code, line):
    assert run_command(argparse.Namespace(command="party", role="bank"), _fail(exc)) == code
    assert capsys.readouterr().err == line + "\n"


def test_a_warning_is_one_line_and_success_is_exit_0(capsys):
    import warnings

    assert run_command(argparse.Namespace(command="serve"), lambda: warnings.warn("slow\nstore")) == 0
    assert capsys.readouterr().err == "vfl serve: warning: slow store\n"


def test_the_party_options_and_the_default_work_folder():
    parser = argparse.ArgumentParser(prog="vfl")
    p = add_command(parser.add_subparsers(dest="command"), "party", "run one party", "Run   one\nparty.")
    add_party_options(p)
    args = parser.parse_args(["party", "--config", "f.toml", "--role", "bank"])
    assert (args.config, args.role) == (Path("f.toml"), "bank")
    assert p.description == "Run one party."
    with pytest.raises(SystemExit):
        parser.parse_args(["party", "--config", "f.toml"])          # --role is required
    assert party_workdir(None, "bank") == Path("vfl-bank")
    assert party_workdir("work/b", "bank") == Path("work/b")
