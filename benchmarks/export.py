"""``python -m benchmarks.export``: how closely the trees' exports (XGBoost JSON, ONNX) predict what vfl predicts.

Fits boosted trees (binary, three classes, regression) over three parties on generated rows (every party's
first column 30% missing, a coded column of few values, an interaction across parties), exports each with every
party's consent, and scores new generated rows with vfl's private prediction, XGBoost and onnxruntime.  Prints,
per task: rows, trees, the share of (row, tree) pairs where XGBoost reaches vfl's leaf, the largest margin error
of XGBoost and of onnxruntime against vfl's, and the rows in the float32 band (docs/export.md).  Needs the
export extra (``pip install -e ".[export]"``: onnx, onnxruntime) and XGBoost 3.1 or later (the test extra's
``xgboost-cpu``); training uses 1024-bit test keys.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

PARTIES = ("A", "B", "C")           # C holds the label


def make_data(n_rows: int, task: str, seed: int):
    """Three parties' frames of three columns each, C's with the target ``y``."""
    from vfl import VerticalDataset

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, 9))
    x[:, 1] = np.round(x[:, 1] * 2) / 2
    score = 1.5 * (x[:, 0] > 0.3) - x[:, 3] * (x[:, 8] > 0) + 0.8 * x[:, 1] + rng.normal(scale=0.4, size=n_rows)
    if task == "binary":
        y = (score > 0.4).astype(int)
    elif task == "multiclass":
        y = np.digitize(score, [-0.3, 0.9])
    else:
        y = 10 * score + 50
    frames = {}
    for p, name in enumerate(PARTIES):
        block = x[:, 3 * p:3 * p + 3].copy()
        block[rng.random(n_rows) < 0.3, 0] = np.nan
        frame = pd.DataFrame(block, columns=[f"{name.lower()}{j}" for j in range(3)])
        frame.insert(0, "id", np.arange(n_rows))
        frames[name] = frame
    frames["C"]["y"] = y
    return VerticalDataset(frames, label="y", id_column="id")


def measure(task: str, train_rows: int, test_rows: int, iterations: int, folder: Path, certs: dict) -> str:
    import onnxruntime
    import xgboost

    from vfl.ensemble import VerticalGradientBoostingClassifier, VerticalGradientBoostingRegressor
    from vfl.export import trees as exported

    train, test = make_data(train_rows, task, 1), make_data(test_rows, task, 2)
    estimator = VerticalGradientBoostingRegressor if task == "regression" else VerticalGradientBoostingClassifier
    model = estimator(max_iter=iterations, max_depth=4, key_bits=1024, insecure=True, early_stopping=False,
                      verbose=False, allow_reconstruction=["A", "B"]).fit(train)
    paths = {}
    for fmt, suffix in (("xgboost-json", "json"), ("onnx", "onnx")):
        consents = [model.consent(p, key=certs[p].key, certificate=certs[p].certificate, format=fmt)
                    for p in ("A", "B")]
        paths[fmt] = model.export(folder / f"{task}.{suffix}", format=fmt, consents=consents, ca=certs["C"].ca)
    x = np.column_stack([test.features(p) for p in PARTIES])
    vfl_raw = (model.predict(test) if task == "regression" else model.decision_function(test)).reshape(len(x), -1)
    booster = xgboost.Booster()
    booster.load_model(str(paths["xgboost-json"]))
    matrix = xgboost.DMatrix(x, feature_names=booster.feature_names)
    xgb_raw = booster.predict(matrix, output_margin=True).reshape(len(x), -1)
    whole = exported.whole_model(model._shards())
    same_leaf = (booster.predict(matrix, pred_leaf=True).reshape(len(x), -1) == exported.leaves(whole, x)).mean()
    onnx_raw = onnxruntime.InferenceSession(str(paths["onnx"])).run(["margin"], {"X": x})[0]
    return (f"{task:<11} {len(x):>7,} rows {len(whole['trees']):>4} trees  same leaf {same_leaf:8.4%}  "
            f"max |margin error| XGBoost {np.abs(xgb_raw - vfl_raw).max():.2e}, onnxruntime "
            f"{np.abs(onnx_raw - vfl_raw).max():.2e}  (|margin| up to {np.abs(vfl_raw).max():.3g})  "
            f"float32 band: {exported.float32_ambiguous(whole, x)} rows")


def main(argv=None) -> None:
    from vfl.transport.tls import write_federation_certs

    parser = argparse.ArgumentParser(prog="python -m benchmarks.export", description=__doc__.splitlines()[0],
                                     allow_abbrev=False)
    parser.add_argument("--train-rows", type=int, default=4000)
    parser.add_argument("--test-rows", type=int, default=10000)
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        certs = write_federation_certs(Path(tmp) / "certs", PARTIES)
        for task in ("binary", "multiclass", "regression"):
            print(measure(task, args.train_rows, args.test_rows, args.iterations, Path(tmp), certs), flush=True)


if __name__ == "__main__":
    main()
