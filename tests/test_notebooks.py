"""The teaching notebooks run from start to end, draw their figures, and their attacks do what their text says.

Each notebook in ``examples/notebooks`` is executed with nbclient in a fresh ``python3``
kernel (jupyter_client starts it with this interpreter) whose working directory is the
notebook's folder and whose ``PYTHONPATH`` puts the vfl under test first.  The kernel
draws with matplotlib's inline backend (Agg); a figure is an ``image/png`` output.  A
probe cell appended to each notebook reports which vfl the kernel imported and the
variables the notebook leaves (the ``results`` of notebooks 3, 5 and 6).
"""

import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import vfl

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("*.ipynb"))
EXPECTED = {"01_protocol_step_by_step", "02_what_each_party_sees", "03_attacks", "04_vertical_vs_horizontal",
            "05_trees_step_by_step", "06_split_learning"}
#: Seconds any one cell may take; each whole notebook takes well under two minutes on two cores.
CELL_TIMEOUT = 240
PROBE = ("import json as _json, vfl as _vfl\n"
         "print('PROBE' + _json.dumps({'vfl': _vfl.__file__, 'results': globals().get('results')}, default=str))")


def _execute(path: Path):
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(PROBE))
    package_root = str(Path(vfl.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p))
    env.pop("MPLBACKEND", None)     # a non-inline backend would show no figure in the outputs
    client = NotebookClient(notebook, kernel_name="python3", timeout=CELL_TIMEOUT,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=env)
    probe = "".join(output.get("text", "") for output in notebook.cells[-1].outputs)
    assert probe.startswith("PROBE"), f"{path.name}: the probe cell printed {probe!r}"
    return notebook, json.loads(probe[len("PROBE"):])


@pytest.fixture(scope="module")
def executed():
    """Each notebook executed once per test module: ``(notebook with outputs, probe report)``."""
    done = {}

    def run(path: Path):
        if path not in done:
            done[path] = _execute(path)
        return done[path]

    return run


def _outputs(notebook):
    return [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]


def test_the_notebooks_are_there():
    assert {path.stem for path in NOTEBOOKS} == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_is_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{path.name}: cell {index} keeps its outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_runs_and_draws_a_figure(path, executed):
    notebook, probe = executed(path)
    assert Path(probe["vfl"]).resolve() == Path(vfl.__file__).resolve()     # the kernel ran the vfl under test
    outputs = _outputs(notebook)
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), f"{path.name} draws no figure"


def test_notebook_1s_progress_bar_is_saved_finished(executed):
    """The fits' bars are one output each, redrawn in place: the executed notebook keeps them at their end, not at
    0% (a widget's saved text) nor as one stderr output per redraw."""
    notebook, _ = executed(FOLDER / "01_protocol_step_by_step.ipynb")
    outputs = _outputs(notebook)
    bars = [o["data"]["text/plain"] for o in outputs if o.output_type == "display_data"
            and "vfl training" in o.get("data", {}).get("text/plain", "")]
    assert bars and all(re.search(r"(\d+)/\1 \[", bar) for bar in bars), bars
    assert not [o for o in outputs if o.output_type == "stream" and "vfl training" in o.get("text", "")]


def test_every_attack_succeeds_against_its_weakened_step_and_fails_against_vfl(executed):
    notebook, probe = executed(FOLDER / "03_attacks.ipynb")
    results = probe["results"]
    assert set(results) == {"a", "b", "c", "d", "e"}
    for attack, rates in results.items():
        assert rates["weakened"] >= 0.9, (attack, rates)
        assert rates["vfl"] <= 0.05, (attack, rates)
    printed = "".join(o.get("text", "") for o in _outputs(notebook) if o.output_type == "stream")
    for attack in results:
        assert re.search(rf"^\({attack}\) .*weakened step \d+%, +vfl \d+%$", printed, re.MULTILINE), \
            f"attack {attack} printed no success rates"


def test_notebook_5s_instance_space_attack_beats_the_hidden_mode(executed):
    """Trees: the leaves the standard mode hands A label most rows; hidden membership leaves A its own splits."""
    _, probe = executed(FOLDER / "05_trees_step_by_step.ipynb")
    results = probe["results"]
    assert results["standard"] > results["majority"] + 0.2
    assert results["hidden"] < results["standard"]


def test_notebook_06s_label_attacks_read_plain_split_learning_and_fail_on_vfl(executed):
    """Split learning: Li et al.'s direction attack reads the labels off the per-row gradient plain split learning
    sends; on what A receives in vfl (openings) both attacks are a coin; A's accumulated batch sums beat chance
    without DP and fall back near it at epsilon 1 (means of three CSPRNG starts)."""
    _, probe = executed(FOLDER / "06_split_learning.ipynb")
    results = probe["results"]
    assert results["plain"]["direction"] > 0.9
    for attack in ("norm", "direction"):
        assert 0.35 < results["vfl"][attack] < 0.65, (attack, results["vfl"])
    accumulated = results["accumulated"]
    assert accumulated["no DP"] > 0.65, accumulated
    assert accumulated["epsilon 1"] < 0.65, accumulated
    assert accumulated["epsilon 1"] < accumulated["no DP"], accumulated
    assert results["model"]["no DP"] > 0.9, results["model"]
