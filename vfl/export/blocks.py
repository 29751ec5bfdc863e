"""What the family converters (linear, credit, mlp) share: the shards' common checks, whole-file writing, and
small builders for ONNX graphs and PMML documents.

**The input convention** of every model these converters write: one input per raw column the model reads,
named exactly as the column, ``tensor(double)`` of shape ``[rows, 1]`` in ONNX, a continuous ``double``
``DataField`` in PMML.  A party's part (``split``) takes that party's own columns the same way.

Nothing here knows a family: a family module passes what its shards mean.  ``onnx`` is imported only when an
ONNX file is built, so that the family modules (and the registry that lists their formats) import without it.
"""

from __future__ import annotations

import json
import os
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vfl.errors import ConfigurationError, DataError

#: The ONNX operator set the graphs use (every operator here exists there in double precision).
OPSET = 17
#: The ONNX file format version written (readable by onnxruntime 1.10 and later).
IR_VERSION = 8
#: The PMML namespace and version written.
PMML_NS = "http://www.dmg.org/PMML-4_4"
PMML_VERSION = "4.4"
#: The format of the ``combiner.json`` that :func:`split` writes beside the parties' parts.
COMBINER_FORMAT = "vfl-export-combiner/1"


def onnx_module():
    """The ``onnx`` package, or a :class:`ConfigurationError` saying how to install it."""
    try:
        import onnx
    except ImportError:
        raise ConfigurationError("ONNX export needs the onnx package: pip install 'vfl[export]' "
                                 "(or pip install onnx)") from None
    return onnx


# --------------------------------------------------------------------------- the shards' common checks

def check_shards(shards, family: str, outputs=()) -> tuple[str, list[str]]:
    """The checks every family's writer makes first; returns the label party's name and the feature parties'.

    ``shards`` must map each party's name to its shard (as the family's ``read_shard`` returns it): the names
    must be the shards' own ``party``, exactly one shard the label party's, every shard trained in the same
    run (one ``trained_with``), and no column held by two parties or named as one of ``outputs`` (the
    exported model's output names).

    Raises
    ------
    DataError
        Naming the party and what is wrong.
    """
    if not isinstance(shards, dict) or not shards:
        raise DataError(f"a {family} export needs every party's shard, as {{party name: shard}}; got "
                        f"{type(shards).__name__ if not isinstance(shards, dict) else 'no shard'}")
    _check_each(shards, outputs)
    labels = [name for name, shard in shards.items() if shard["role"] == "label"]
    features = [name for name, shard in shards.items() if shard["role"] == "feature"]
    if len(labels) != 1:
        raise DataError(f"a {family} model has one label party; the shards given hold "
                        f"{len(labels)} ({', '.join(labels) or 'none'}): give every party's shard, once")
    if not features:
        raise DataError(f"a {family} model has at least one feature party; only the label party {labels[0]}'s "
                        "shard was given")
    _check_one_run(shards, labels[0])
    return labels[0], features


def check_whole(shards, family: str, outputs, listed) -> tuple[str, list[str]]:
    """:func:`check_shards`, then the shards against the label party's own record of the model's parties,
    ``listed(label party's shard)`` (``None``: an older shard that keeps none)."""
    label, features = check_shards(shards, family, outputs)
    parties = listed(shards[label])
    if parties is not None:
        check_roster(shards, parties, family)
    return label, features


def _check_each(shards: dict, outputs) -> None:
    """Each shard given under its own party's name, with a role, and no column twice or named as an output."""
    owner = {}
    for name, shard in shards.items():
        if not isinstance(shard, dict):
            raise DataError(f"party {name}: its shard must be a dict (as read_shard returns it), got "
                            f"{type(shard).__name__}")
        if shard.get("party") != name:
            raise DataError(f"party {name}: the shard given under its name is party {shard.get('party')!r}'s")
        role = shard.get("role")
        if role not in ("feature", "label"):
            raise DataError(f"party {name}: its shard's role must be 'feature' or 'label', got {role!r}")
        for column in shard.get("columns", []):
            if column in owner:
                raise DataError(f"party {name}: column {column!r} is also party {owner[column]}'s; an exported "
                                "model takes each column once, by its name: rename one of them")
            if column in outputs:
                raise DataError(f"party {name}: column {column!r} has the name of one of the model's outputs "
                                f"{list(outputs)}: rename the column")
            owner[column] = name


def _check_one_run(shards: dict, first: str) -> None:
    """Every shard trained in the run of party ``first``'s (one ``trained_with``)."""
    expected = shards[first].get("trained_with")
    for name, shard in shards.items():
        if shard.get("trained_with") != expected:
            raise DataError(f"party {name}: its shard was trained in another run (trained_with "
                            f"{shard.get('trained_with')!r}) than party {first}'s ({expected!r}): give the shards "
                            "of one model")


def split_roster(shards, roles, family: str, outputs=()) -> tuple[str, list[str]]:
    """The checks of a split export, which may be given some parties' shards only; returns the label party's
    name and the feature parties' (in ``roles``' order).

    ``roles`` maps every data party of the model to its role, in the model's order (public to the parties that
    consent: the federation's roster); ``None`` takes the shards' own roles, every party's shard being given.
    Each shard must be its party's, of the role the roster gives it, and all of one run; with every party's
    shard, the whole model's checks (:func:`check_shards`) are made too.

    Raises
    ------
    DataError
        Naming the party and what is wrong.
    """
    if roles is None:
        return check_shards(shards, family, outputs)
    roles = dict(roles)
    labels = [name for name, role in roles.items() if role == "label"]
    features = [name for name, role in roles.items() if role == "feature"]
    if len(labels) != 1 or not features or len(labels) + len(features) != len(roles):
        raise DataError(f"a {family} model has one label party and at least one feature party; the roster given "
                        f"is {roles}")
    if not isinstance(shards, dict) or not shards:
        raise DataError(f"a {family} split export needs the exporting party's own shard, as {{party name: shard}}")
    for name in shards:
        if name not in roles:
            raise DataError(f"party {name} is not a data party of this {family} model (its parties: {list(roles)})")
    _check_each(shards, outputs)
    for name, shard in shards.items():
        if shard["role"] != roles[name]:
            raise DataError(f"party {name}: the shard given is a {shard['role']} party's, but {name} is the "
                            f"{roles[name]} party of this model: give {name}'s own shard")
    _check_one_run(shards, next(iter(shards)))
    if len(shards) == len(roles):
        check_shards(shards, family, outputs)
    return labels[0], features


def check_roster(shards: dict, listed, family: str) -> None:
    """Refuse shards (or a roster, ``{party: role}``) that are not exactly the parties ``listed`` (the model's own
    record of its parties)."""
    listed = list(listed)
    missing = [p for p in listed if p not in shards]
    if missing:
        raise DataError(f"the {family} model was trained with the parties {listed}: the shard of party "
                        f"{missing[0]} is missing")
    extra = [p for p in shards if p not in listed]
    if extra:
        raise DataError(f"party {extra[0]} is not a party of this {family} model (its parties: {listed})")


def check_listed(roles: dict, label: str, listed, family: str) -> None:
    """Refuse a roster (``{party: role}``) that is not the parties the label party's shard lists (``listed``:
    ``None`` when an older shard lists none)."""
    if listed is None:
        return
    listed = list(listed)
    odd = [p for p in listed if p not in roles] + [p for p in roles if p not in listed]
    if odd:
        raise DataError(f"the label party {label}'s shard lists the {family} model's parties {listed}, the roster "
                        f"{list(roles)}: party {odd[0]} is in one only; export with the federation.toml the model "
                        "was trained with")


def party_order(label: str, features: list[str]) -> list[str]:
    """The order a model takes its parties in: the feature parties as given, the label party last."""
    return [*features, label]


def part_file(party: str, suffix: str) -> str:
    """The file name of party ``party``'s part in a split export (``<party><suffix>``)."""
    if not party or "/" in party or "\\" in party or party.startswith("."):
        raise ConfigurationError(f"party {party!r}: its name cannot be a file name")
    if party == "combiner":
        raise ConfigurationError("a party is named 'combiner', the name split() gives the combining file: "
                                 "rename the party")
    return f"{party}{suffix}"


def combiner_parts(parties, output: str, width: int, suffix: str) -> dict:
    """The combiner's ``parts``: for each party with a part, in the order they are summed, its file (the name
    its own split export gives it), its output and that output's width."""
    return {p: {"file": part_file(p, suffix), "output": output, "width": int(width)} for p in parties}


def write_split(folder, parts: dict[str, bytes], combiner: dict | None, suffix: str) -> dict[str, Path]:
    """Write the parts (``{party: file contents}``, each as ``<party><suffix>``) and the label party's
    ``combiner`` (as ``combiner.json``, when given) into ``folder`` (made if missing), every file whole or none.
    Returns ``{party: path}`` and, with a combiner, ``{"combiner": path}``."""
    if not parts and combiner is None:
        raise DataError(f"the shards of the parties given make no part of this model: they hold "
                        "no column it reads")
    folder = Path(folder)
    files = {name: folder / part_file(name, suffix) for name in parts}
    contents = {files[name]: data for name, data in parts.items()}
    if combiner is not None:
        files["combiner"] = folder / "combiner.json"
        contents[files["combiner"]] = (json.dumps({"format": COMBINER_FORMAT, **combiner}, indent=2) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    write_files(contents)
    return files


# --------------------------------------------------------------------------- writing whole files

def write_files(contents: dict[Path, bytes]) -> None:
    """Write every file whole, or none: each goes to a temporary file in its folder first, then all are moved
    into place (``os.replace``) once every one is written."""
    staged = []
    try:
        for path, data in contents.items():
            path = Path(path)
            if not path.parent.is_dir():
                raise ConfigurationError(f"cannot write {path}: the folder {path.parent} does not exist")
            handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            staged.append((temp, path))
            with os.fdopen(handle, "wb") as out:
                out.write(data)
        for temp, path in staged:
            os.replace(temp, path)
    finally:
        for temp, _ in staged:
            if os.path.exists(temp):
                os.unlink(temp)


def write_file(path, data: bytes) -> Path:
    """Write one file whole (see :func:`write_files`); returns its path."""
    write_files({Path(path): data})
    return Path(path)


# --------------------------------------------------------------------------- a party's standardized columns

@dataclass
class ScaledParty:
    """A party's columns and their standardization (``(x - mean) / scale``), where its part of a model starts."""

    name: str
    columns: list
    mean: np.ndarray
    scale: np.ndarray


# --------------------------------------------------------------------------- ONNX

class OnnxGraph:
    """An ONNX graph built node by node in double precision.

    Inputs are the raw columns (``[rows, 1]`` doubles, named as the columns); every other name is made here,
    ``vfl.<hint>.<n>``, and never one of the ``reserved`` names (the columns and the outputs).
    """

    def __init__(self, name: str, reserved=()):
        self.onnx = onnx_module()
        self.name = name
        self.reserved = set(reserved)
        self.nodes, self.initializers, self.inputs, self.outputs = [], [], [], []
        self._count = 0

    def fresh(self, hint: str) -> str:
        while True:
            self._count += 1
            name = f"vfl.{hint}.{self._count}"
            if name not in self.reserved:
                return name

    def column(self, name: str) -> str:
        """A raw column as an input of shape ``[rows, 1]``."""
        self.inputs.append(self.onnx.helper.make_tensor_value_info(name, self.onnx.TensorProto.DOUBLE,
                                                                   ["rows", 1]))
        return name

    def const(self, values, hint: str = "const", dtype=np.float64) -> str:
        name = self.fresh(hint)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs, hint: str | None = None, **attributes) -> str:
        out = self.fresh(hint or op_type.lower())
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), [out], **attributes))
        return out

    def columns(self, names) -> str:
        """The party's columns side by side, ``[rows, len(names)]``."""
        names = [self.column(n) for n in names]
        return names[0] if len(names) == 1 else self.op("Concat", names, "columns", axis=1)

    def dense(self, x: str, weights, intercept=None, hint: str = "dense") -> str:
        """``x W (+ b)``."""
        out = self.op("MatMul", [x, self.const(weights, hint + ".w")], hint)
        return out if intercept is None else self.op("Add", [out, self.const(intercept, hint + ".b")], hint)

    def total(self, names: list[str], hint: str = "sum") -> str:
        """The sum of same-shaped values (one name: itself)."""
        return names[0] if len(names) == 1 else self.op("Sum", names, hint)

    def output(self, value: str, name: str, width: int, dtype=None) -> None:
        """Expose ``value`` as the output ``name`` of shape ``[rows, width]`` (doubles unless ``dtype``)."""
        self.nodes.append(self.onnx.helper.make_node("Identity", [value], [name]))
        self.outputs.append(self.onnx.helper.make_tensor_value_info(
            name, self.onnx.TensorProto.DOUBLE if dtype is None else dtype, ["rows", int(width)]))

    def label(self, index: str, classes) -> None:
        """The output ``label`` ``[rows, 1]``: each row's class, ``classes[index]`` (``index``: int64
        ``[rows, 1]``).  Integer classes stay integers (int64), other numbers doubles, anything else text."""
        values = list(classes)
        if all(isinstance(c, int) and not isinstance(c, bool) for c in values):
            table, dtype = np.asarray(values, dtype=np.int64), self.onnx.TensorProto.INT64
        elif all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in values):
            table, dtype = np.asarray(values, dtype=np.float64), self.onnx.TensorProto.DOUBLE
        else:
            table, dtype = np.asarray([str(c) for c in values], dtype=object), self.onnx.TensorProto.STRING
        name = self.fresh("classes")
        if dtype == self.onnx.TensorProto.STRING:
            self.initializers.append(self.onnx.helper.make_tensor(name, dtype, [len(values)],
                                                                  [str(c).encode() for c in values]))
        else:
            self.initializers.append(self.onnx.numpy_helper.from_array(table, name))
        self.output(self.op("Gather", [name, index], "label", axis=0), "label", 1, dtype)

    def to_bytes(self, doc: str, metadata: dict | None = None) -> bytes:
        """The checked, serialized model (``metadata``: text key/value pairs kept with it)."""
        helper = self.onnx.helper
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.initializers,
                                  doc_string=doc)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="vfl", doc_string=doc)
        model.ir_version = IR_VERSION
        for key, value in (metadata or {}).items():
            entry = model.metadata_props.add()
            entry.key, entry.value = str(key), str(value)
        self.onnx.checker.check_model(model, full_check=True)
        return model.SerializeToString()


def standardized(graph: OnnxGraph, x: str, mean, scale, hint: str = "scaled") -> str:
    """``(x - mean) / scale`` column by column (``mean`` and ``scale`` finite, ``scale`` > 0)."""
    return graph.op("Div", [graph.op("Sub", [x, graph.const(mean, hint + ".mean")], hint),
                            graph.const(scale, hint + ".scale")], hint)


def scaler_parts(scaler, n_columns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A party's standardization as ``(mean, scale, kept)``: a constant column left out at training (infinite
    scale: it standardizes to 0 in every row) gets scale 1 and ``kept`` 0, by which its weights are multiplied
    — the same 0 for every finite value.  Without a scaler: mean 0, scale 1, every column kept."""
    if scaler is None:
        return np.zeros(n_columns), np.ones(n_columns), np.ones(n_columns)
    scale = np.asarray(scaler.scale, dtype=np.float64)
    kept = np.isfinite(scale).astype(np.float64)
    return np.asarray(scaler.mean, dtype=np.float64), np.where(kept > 0, scale, 1.0), kept


# --------------------------------------------------------------------------- PMML

def number(value) -> str:
    """A float as PMML text that reads back to the same double (Python's shortest round-trip form)."""
    value = float(value)
    if not np.isfinite(value):
        raise DataError(f"a model parameter is {value}: PMML has no such number")
    return repr(value)


def pmml_document(description: str) -> tuple[ET.Element, ET.Element]:
    """A ``<PMML>`` root with its ``Header`` and an empty ``DataDictionary``; returns both."""
    root = ET.Element("PMML", {"xmlns": PMML_NS, "version": PMML_VERSION})
    header = ET.SubElement(root, "Header", {"description": description})
    ET.SubElement(header, "Application", {"name": "vfl"})
    return root, ET.SubElement(root, "DataDictionary")


def pmml_inputs(description: str, columns) -> tuple[ET.Element, ET.Element]:
    """:func:`pmml_document` with a continuous double ``DataField`` for each raw column."""
    root, dictionary = pmml_document(description)
    for column in columns:
        data_field(dictionary, column)
    return root, dictionary


def add(parent: ET.Element, tag: str, **attributes) -> ET.Element:
    """A child element; attribute values are given as text (``None``: left out)."""
    return ET.SubElement(parent, tag, {k: str(v) for k, v in attributes.items() if v is not None})


def data_field(dictionary: ET.Element, name: str, optype: str = "continuous", data_type: str = "double",
               values=()) -> ET.Element:
    field = add(dictionary, "DataField", name=name, optype=optype, dataType=data_type)
    for value in values:
        add(field, "Value", value=value)
    dictionary.set("numberOfFields", str(len(dictionary)))
    return field


def apply(function: str, *arguments) -> ET.Element:
    """A free ``<Apply function=...>`` (to append where it is used); each argument a field name (str), a
    number (float) or another expression (an element)."""
    node = ET.Element("Apply", {"function": function})
    for argument in arguments:
        if isinstance(argument, str):
            add(node, "FieldRef", field=argument)
        elif isinstance(argument, ET.Element):
            node.append(argument)
        else:
            add(node, "Constant", dataType="double").text = number(argument)
    return node


def pmml_bytes(root: ET.Element) -> bytes:
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
