"""vfl's own errors end a command or an example script as one line on standard error, never a traceback.

The error names the party, column or setting already; a traceback under it only hides it (a one-column party
refused by the score-span rule printed thirty lines of frames under its one correct sentence).
"""

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vfl.cli import main as vfl_main, run_script
from vfl.errors import ConfigurationError, DataError, PeerError

EXAMPLES = Path(__file__).parents[1] / "examples"


@pytest.mark.parametrize("exc, code", [(ConfigurationError("party A: the model gives B one score per row\n"
                                                            "(second line)"), 2),
                                       (DataError("party A, column 'x', row 3: NaN"), 2),
                                       (PeerError("C: B never appeared"), 1)])
def test_run_script_prints_vfl_s_own_error_as_one_line(capsys, exc, code):
    def main():
        raise exc

    assert run_script(main, prog="example.py") == code
    err = capsys.readouterr().err
    assert err == f"example.py: error: {' '.join(str(exc).splitlines())}\n"


def test_run_script_keeps_a_bug_s_traceback_and_passes_exit_codes_on():
    def bug():
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError):
        run_script(bug)
    assert run_script(lambda: 3) == 3 and run_script(lambda: {"auc": 0.9}) == 0 and run_script(lambda: None) == 0


def test_a_one_column_party_refused_by_the_release_check_is_one_line_in_a_script(tmp_path):
    """The real refusal, in a script of the examples' shape: its message alone, exit code 2 (the fit warns; the
    prediction refuses to release a one-column party's partial scores)."""
    script = tmp_path / "one_column.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, pandas as pd
        from vfl import VerticalDataset, VerticalLogisticRegression
        from vfl.cli import run_script

        def main():
            rng = np.random.default_rng(0)
            x = rng.normal(size=(60, 3))
            a = pd.DataFrame({"id": range(60), "a0": x[:, 0]})
            b = pd.DataFrame({"id": range(60), "b0": x[:, 1], "b1": x[:, 2], "y": (x.sum(1) > 0).astype(int)})
            data = VerticalDataset({"A": a, "B": b}, label="y", id_column="id")
            VerticalLogisticRegression(key_bits=1024, insecure=True, max_iter=2).fit(data).predict(data)

        if __name__ == "__main__":
            raise SystemExit(run_script(main))
        """))
    done = subprocess.run([sys.executable, "-W", "ignore", str(script)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("one_column.py: error: party A: releasing its partial scores at prediction would "
                                  "let the label party B rebuild column 'a0'"), done.stderr


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_every_example_script_ends_through_run_script(path):
    tree = ast.parse(path.read_text())
    mains = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
    assert mains and all("run_script(main)" in ast.unparse(node) for node in mains), path.name


def test_a_subcommand_outside_run_command_still_prints_one_line(monkeypatch, capsys):
    """``vfl fedavg`` catches its own input errors; any other vfl error reaching ``vfl``'s main is one line too."""
    import vfl.horizontal.cli as horizontal

    def refuse(*args, **kwargs):
        raise ConfigurationError("clients: 0 is not a number of clients\n(one line)")

    monkeypatch.setattr(horizontal, "load_clients", refuse)
    assert vfl_main(["fedavg"]) == 2
    assert capsys.readouterr().err == "vfl fedavg: error: clients: 0 is not a number of clients (one line)\n"
