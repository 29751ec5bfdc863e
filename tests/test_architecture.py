"""The layers import only the layers before them: crypto -> transport -> parties -> protocols -> the rest."""

import ast
from pathlib import Path

import pytest

import vfl

ROOT = Path(vfl.__file__).parent
ORDER = ["crypto", "transport", "parties", "protocols"]
# modules every layer may use
SHARED = {"vfl.errors"}


def vfl_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("vfl"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vfl"):
            found.add(node.module)
    return found


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ORDER else None


@pytest.mark.parametrize("layer", ORDER)
def test_layer_depends_only_on_earlier_layers(layer):
    allowed = set(ORDER[: ORDER.index(layer) + 1])
    for path in (ROOT / layer).rglob("*.py"):
        for module in vfl_imports(path) - SHARED:
            assert layer_of(module) in allowed, f"{path.relative_to(ROOT)} imports {module}"


def test_horizontal_stands_apart():
    for path in (ROOT / "horizontal").rglob("*.py"):
        for module in vfl_imports(path) - SHARED:
            assert module.startswith("vfl.horizontal"), f"{path.relative_to(ROOT)} imports {module}"


def test_nothing_unpickles():
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        for banned in ("pickle.load", "cloudpickle", "dill.load", "marshal.load"):
            assert banned not in text, f"{path.relative_to(ROOT)} uses {banned}"


def test_crypto_randomness_never_from_numpy():
    for layer in ("crypto", "parties", "protocols"):
        for path in (ROOT / layer).rglob("*.py"):
            text = path.read_text()
            for banned in ("np.random.rand", "np.random.randint", "np.random.uniform", "np.random.normal",
                           "import random\n", "random.random("):
                assert banned not in text, f"{path.relative_to(ROOT)} uses {banned}"


def test_fate_is_a_yardstick_never_a_dependency():
    """FATE's side of the benchmarks runs under FATE's own interpreter: vfl imports neither FATE nor those
    scripts, and their folder is no package (pytest and vfl's imports never load it)."""
    fate_side = ROOT / "bench" / "fate_side"
    assert not (fate_side / "__init__.py").exists()
    scripts = {path.stem for path in fate_side.glob("*.py")}
    assert {"fate_common", "fate_lr", "fate_secureboost", "fate_sshe_lr"} <= scripts
    for path in ROOT.rglob("*.py"):
        if fate_side in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                top = name.split(".")[0]
                assert top != "fate" and top not in scripts, f"{path.relative_to(ROOT)} imports {name}"
                assert "fate_side" not in name, f"{path.relative_to(ROOT)} imports {name}"
