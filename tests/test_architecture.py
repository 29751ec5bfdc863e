"""The layers import only the layers before them: crypto -> transport -> parties -> protocols -> the rest."""

import ast
from pathlib import Path

import pytest

import vfl

ROOT = Path(vfl.__file__).parent
REPOSITORY = ROOT.parent
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
    """FATE's side of the benchmarks runs under FATE's own interpreter: neither vfl nor the benchmarks import
    FATE or those scripts, and their folder is no package (pytest and vfl's imports never load it)."""
    fate_side = REPOSITORY / "benchmarks" / "fate_side"
    assert not (fate_side / "__init__.py").exists()
    scripts = {path.stem for path in fate_side.glob("*.py")}
    assert {"fate_common", "fate_lr", "fate_secureboost", "fate_sshe_lr"} <= scripts
    for path in [*ROOT.rglob("*.py"), *(REPOSITORY / "benchmarks").rglob("*.py")]:
        if fate_side in path.parents:
            continue
        for name in imported_names(path):
            top = name.split(".")[0]
            assert top != "fate" and top not in scripts, f"{path} imports {name}"
            assert "fate_side" not in name, f"{path} imports {name}"


def imported_names(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        names += ([a.name for a in node.names] if isinstance(node, ast.Import) else
                  [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
    return names


def test_the_library_ships_without_its_benchmarks_and_their_tools():
    """The benchmarks live beside the package, not in it: nothing in vfl imports them, nor psutil or matplotlib
    (extras: ``bench``, ``plot``), and no default names a path of one machine."""
    assert not (ROOT / "bench").exists()
    for path in ROOT.rglob("*.py"):
        for name in imported_names(path):
            assert name.split(".")[0] not in {"benchmarks", "psutil", "matplotlib"}, f"{path.relative_to(ROOT)} imports {name}"
    for path in (REPOSITORY / "benchmarks").rglob("*.py"):
        assert "/work/" not in path.read_text(), f"{path.relative_to(REPOSITORY)} names a path of one machine"


FACES = ("serving", "federation", "board")


@pytest.mark.parametrize("face", FACES)
def test_the_deployment_faces_never_import_each_other(face):
    """``vfl serve``, ``vfl party`` and ``vfl board`` share what they need through :mod:`vfl.deploy`, below them;
    the estimators import none of them."""
    others = tuple(f"vfl.{other}" for other in FACES if other != face)
    for path in (ROOT / face).rglob("*.py"):
        for name in imported_names(path):
            assert not name.startswith(others), f"{path.relative_to(ROOT)} imports {name}"
    faces = tuple(f"vfl.{f}" for f in FACES)
    for path in [*(ROOT / "deploy").rglob("*.py"), *(ROOT / n for n in ("linear_model.py", "ensemble.py",
                                                                         "neural_network.py", "preprocessing.py",
                                                                         "fitted_runs.py"))]:
        for name in imported_names(path):
            assert not name.startswith(faces), f"{path.relative_to(ROOT)} imports {name}"


def test_the_board_reads_only_records():
    """The board imports the run records, the reports' words, the HTTP faces' guard (deploy) and the registry (a
    family's unit word), never a party, protocol or crypto: a model's views are in its record (``view.json``)."""
    for path in (ROOT / "board").rglob("*.py"):
        for name in imported_names(path):
            if name.startswith("vfl."):
                assert name.startswith(("vfl.board", "vfl.deploy.record", "vfl.deploy.narration",
                                        "vfl.deploy.commands", "vfl.deploy.webguard", "vfl.errors",
                                        "vfl.families")), f"{path.relative_to(ROOT)} imports {name}"


FAMILIES = ("linear", "trees", "credit", "mlp")
#: The credit pipeline's model is a logistic regression: credit may use the linear family, nothing else crosses.
BUILT_ON = {("credit", "linear")}


def family_of(module: str) -> str | None:
    """The family a module belongs to (a part of its dotted name is the family's folder), or None."""
    found = [part for part in module.split(".")[1:] if part in FAMILIES]
    return found[0] if found else None


def test_the_families_stand_side_by_side():
    """No module of one family, in any layer, imports another's (credit may use linear, its model), and the shared
    floors (``vfl.parties``, ``vfl.protocols`` outside a family folder) import no family; the faces and the
    registry may import every family."""
    for path in ROOT.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
        mine = family_of(module)
        if mine is None and not module.startswith(("vfl.parties", "vfl.protocols")):
            continue                            # a face, the registry, or a floor of its own
        for name in imported_names(path):
            theirs = family_of(name) if name.startswith("vfl.") else None
            if theirs is None or theirs == mine or (mine, theirs) in BUILT_ON:
                continue
            where = f"the shared floor's {module}" if mine is None else f"{module} ({mine})"
            assert False, f"{where} imports {name} ({theirs}): move what both need to the shared floor"


def _names_family(node) -> bool:
    """Whether an expression names a run's or a model's family (``family``, ``family.name``, ``info["family"]``,
    ``info.get("family")``, ``config.family.name``...)."""
    return any((isinstance(n, ast.Name) and "family" in n.id) or (isinstance(n, ast.Attribute) and "family" in n.attr)
               or (isinstance(n, ast.Constant) and n.value == "family") for n in ast.walk(node))


def _names_model_kind(node) -> bool:
    """Whether an expression names a served model's kind (``share.kind``, ``table.kind``: a share's family word)."""
    return any(isinstance(n, ast.Attribute) and n.attr == "kind" for n in ast.walk(node))


def _family_tests(tree, words, serving: bool) -> list:
    """The comparisons in ``tree`` of a family (in ``vfl/serving`` also a model's ``kind``) with one of ``words``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        named = [s for s in sides if isinstance(s, ast.Constant) and s.value in words] + [
            e for s in sides if isinstance(s, (ast.Tuple, ast.List, ast.Set)) for e in s.elts
            if isinstance(e, ast.Constant) and e.value in words]
        if named and any(_names_family(s) or (serving and _names_model_kind(s)) for s in sides):
            found.append(node)
    return found


def test_only_a_family_s_own_folders_and_the_registry_test_which_family_it_is():
    """Outside a family's own modules (a part of its dotted name is the family's word) and the registry
    (``vfl/families.py``), nothing compares a family with a family's word: it asks the registry's entry instead
    (an attribute, or one of the family's modules), so that a fifth family is its folders and one registry line.
    In ``vfl/serving`` a share's ``kind`` is its family's word: the services ask the share or its family's scorer
    (``vfl/serving/scorers/<family>.py``), never compare its kind."""
    from vfl.families import FAMILIES as REGISTERED

    words = set(REGISTERED)
    found = []
    for path in ROOT.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
        if family_of(module) is not None or module == "vfl.families":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _family_tests(tree, words, serving=module.startswith("vfl.serving")):
            found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "tests a family's name outside its folders (ask vfl.families):\n" + "\n".join(found)


def test_the_family_test_finds_what_it_is_meant_to():
    """The check above would see the tests it forbids, written any of these ways (and not a model's objective, nor
    a party's or a message's kind)."""
    words = set(FAMILIES)
    for source, serving, seen in (('family == "trees"', False, True), ('info.get("family") != "credit"', False, True),
                                  ('config.family.name in ("mlp", "linear")', False, True),
                                  ('objective == "linear"', False, False), ('share.kind == "linear"', True, True),
                                  ('share.kind != "mlp" or n == 1', True, True), ('"trees" == table.kind', True, True),
                                  ('share.kind == "linear"', False, False), ('kind == "coordinator"', True, False),
                                  ('message.kind == "plaintext"', True, False)):
        assert bool(_family_tests(ast.parse(source), words, serving)) == seen, source


#: What the faces call of each module a registry entry names.
CALLED = {"run": ("train_feature", "train_label"), "shard": ("read_shard",),
          "party": ("train", "predict", "say_trained", "say_predicted"), "scorer": ("load_share", "score")}


@pytest.mark.parametrize("name", FAMILIES)
def test_each_registry_entry_names_modules_that_import_and_hold_what_the_faces_call(name):
    """``vfl/families.py``'s entry of each family names its run, shard, ``vfl party``, message-table and serving
    modules and its settings class by dotted name: each imports, has what the faces use, and reads ``[training]``."""
    from vfl.families import FAMILIES as REGISTERED

    family = REGISTERED[name]
    assert family.name == name and family.unit in ("epoch", "iteration")
    for part, functions in CALLED.items():
        module = family.module(part)
        assert family_of(module.__name__) == name, f"{name}'s {part} module is {module.__name__}, not in its folders"
        for function in functions:
            assert callable(getattr(module, function, None)), f"{module.__name__} has no {function}()"
    messages = family.module("messages")
    assert family_of(messages.__name__) == name and isinstance(messages.MESSAGES, dict)
    board_view = getattr(family.module("shard"), "board_view", None)
    assert board_view is None or callable(board_view)
    if family.export is not None:               # its consented export: the contract of vfl/export/__init__.py
        export = family.module("export")
        assert family_of(export.__name__) == name and isinstance(export.FORMATS, dict) and callable(export.split)
    settings = family.settings_class()
    assert callable(getattr(settings, "from_table", None)) and callable(getattr(settings, "to_dict", None))
    table = {"task": "binary"} if name == "mlp" else {}        # a split network's task has no default
    read = family.read_training("federation.toml [training]", table, {"A": "feature", "B": "label"})
    assert isinstance(read, settings) and read == settings(**table)


#: Yang et al.'s letters: teaching names, defined beside the role names they alias.
TEACHING = {"PartyA", "PartyB", "run_a", "run_b", "run_c", "predict_a", "predict_b", "predict_c"}
#: where they may be used: their definitions and re-exports, and the hand-built teaching face
TEACHING_HOMES = {"parties/__init__.py", "parties/linear/__init__.py", "parties/linear/feature_party.py",
                  "parties/linear/label_party.py", "protocols/__init__.py", "protocols/linear/__init__.py",
                  "protocols/linear/training.py", "protocols/linear/inference.py", "protocols/linear/shared.py",
                  "inprocess.py"}


def teaching_uses(source: str) -> list[str]:
    """The teaching names ``source`` uses in code: imported, called, named (never in strings or docstrings)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            found += [a.name for a in node.names if a.name in TEACHING]
        elif isinstance(node, ast.Name) and node.id in TEACHING and isinstance(node.ctx, ast.Load):
            found.append(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in TEACHING:
            found.append(node.attr)
    return found


def test_the_code_says_the_role_and_yang_s_letters_stay_teaching_names():
    """Internal code names a party by its role (LinearLabelParty, train_feature); the letters are aliases for the
    notebooks and vfl.inprocess, used nowhere else in the package."""
    assert teaching_uses("from vfl.parties.linear import PartyB\nprotocol.run_a(ep)\n") == ["PartyB", "run_a"]
    assert teaching_uses('"""PartyA is Yang\'s A."""\n') == []
    for path in ROOT.rglob("*.py"):
        where = path.relative_to(ROOT).as_posix()
        if where not in TEACHING_HOMES and not where.startswith("horizontal/"):
            assert not teaching_uses(path.read_text()), f"{where} uses Yang's letters {teaching_uses(path.read_text())}"


def test_an_estimator_s_defaults_are_its_settings_defaults():
    """A parameter is declared once: where an estimator takes a field of its family's settings (which
    ``federation.toml`` reads), its default is the field's, so the estimator and ``vfl party`` train the same
    model from the same tables by default."""
    import dataclasses
    import inspect

    from vfl import ensemble, linear_model, neural_network
    from vfl.protocols.linear.settings import TrainingSettings
    from vfl.protocols.mlp.settings import MLPSettings
    from vfl.protocols.trees.settings import TreeSettings
    estimators = [(linear_model.VerticalLogisticRegression, TrainingSettings),
                  (linear_model.VerticalLinearRegression, TrainingSettings),
                  (ensemble.VerticalGradientBoostingClassifier, TreeSettings),
                  (ensemble.VerticalGradientBoostingRegressor, TreeSettings),
                  (neural_network.VerticalMLPClassifier, MLPSettings), (neural_network.VerticalMLPRegressor, MLPSettings)]
    checked = 0
    for estimator, settings in estimators:
        params = inspect.signature(estimator.__init__).parameters
        for f in dataclasses.fields(settings):
            if not f.init or f.name not in params or f.default is dataclasses.MISSING:
                continue                # a factory default (bottom_sizes' table) is the estimator's own form
            checked += 1
            assert params[f.name].default == f.default, (
                f"{estimator.__name__}({f.name}={params[f.name].default!r}) but {settings.__name__}.{f.name} "
                f"defaults to {f.default!r}")
    assert checked > 60
