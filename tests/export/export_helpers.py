"""Running exported models in their real runtimes on raw rows: onnxruntime, and pypmml (JPMML on Java) for PMML."""

import json
import shutil

import numpy as np
import pytest


def onnx_run(path, frame) -> dict:
    """The ONNX model at ``path`` on the rows of ``frame`` (a DataFrame of its input columns): ``{output: array}``."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {i.name: frame[i.name].to_numpy(dtype=np.float64).reshape(-1, 1) for i in session.get_inputs()}
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def onnx_inputs(path) -> list:
    ort = pytest.importorskip("onnxruntime")
    return [i.name for i in ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).get_inputs()]


def onnx_numbers(path) -> np.ndarray:
    """Every number an ONNX file holds (its initializers), flattened."""
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(path))
    arrays = [onnx.numpy_helper.to_array(t).ravel().astype(np.float64) for t in model.graph.initializer]
    return np.concatenate(arrays) if arrays else np.zeros(0)


def pmml_run(path, frame, columns) -> dict:
    """The PMML model at ``path`` on the rows of ``frame``, evaluated by pypmml (JPMML-Evaluator on Java).

    The rows go as JSON written here at full precision (pypmml's own DataFrame path writes 10 digits, which
    moves values at a bin's edge), NaN as null (a missing value).  Returns ``{output field: array}``.
    """
    pypmml = pytest.importorskip("pypmml")
    if shutil.which("java") is None:
        pytest.skip("pypmml runs JPMML on Java, and no java is on this machine's PATH: the PMML is not evaluated")
    model = pypmml.Model.fromFile(str(path))
    rows = [[None if isinstance(v, float) and np.isnan(v) else float(v) for v in row]
            for row in frame[list(columns)].to_numpy(dtype=np.float64).tolist()]
    result = json.loads(model.predict(json.dumps({"columns": list(columns), "data": rows})))
    names = result["columns"]
    return {name: np.array([row[i] for row in result["data"]], dtype=object) for i, name in enumerate(names)}
