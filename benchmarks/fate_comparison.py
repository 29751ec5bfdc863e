"""vfl on FATE's example data sets, beside the results FATE publishes for them.

Not part of the package or the tests: it needs FATE's CSV files, which a user of vfl does not have.

    python benchmarks/fate_comparison.py --data-dir ../shared/datasets/fate [--key-bits 2048]

FATE trains on data already intersected by private set intersection; here the rows are aligned by
sorting both parties' files on their id column (vfl expects aligned rows).  FATE's breast run uses
RMSprop; vfl uses plain gradient descent, so the same settings are not the same optimiser.
"""

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import mean_squared_error, r2_score, roc_auc_score

from vfl import VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression


def load(data_dir: Path, name: str, id_column: str, label: str) -> VerticalDataset:
    guest = pd.read_csv(data_dir / f"{name}_hetero_guest.csv").sort_values(id_column).reset_index(drop=True)
    host = pd.read_csv(data_dir / f"{name}_hetero_host.csv").sort_values(id_column).reset_index(drop=True)
    host = host.rename(columns={c: f"host_{c}" for c in host.columns if c != id_column})
    return VerticalDataset({"host": host, "guest": guest}, label=label, id_column=id_column)


def pooled(data: VerticalDataset) -> np.ndarray:
    return np.hstack([data.features(data.feature_party), data.features(data.label_party)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="folder with FATE's *_hetero_*.csv files")
    parser.add_argument("--key-bits", type=int, default=2048)
    args = parser.parse_args()
    keys = dict(key_bits=args.key_bits, insecure=args.key_bits < 2048)
    rows = []

    data = load(args.data_dir, "breast", "id", "y")
    for iters in (5, 30):
        model = VerticalLogisticRegression(learning_rate=0.15, max_iter=iters, alpha=0.01, tol=None, **keys)
        start = time.perf_counter()
        model.fit(data)
        seconds = time.perf_counter() - start
        auc = roc_auc_score(data.labels, model.predict_proba(data))
        rows.append(("breast, hetero LR", f"vfl GD lr 0.15, L2 0.01, full batch, {iters} it", "train AUC",
                     f"{auc:.6f}", f"{seconds / iters:.2f}"))
    rows.append(("breast, hetero LR", "FATE (published) RMSprop lr 0.15, L2 0.01, 5 it", "train AUC", "0.975186", ""))
    sk = LogisticRegression(max_iter=1000).fit(pooled(data), data.labels)
    rows.append(("breast, hetero LR", "scikit-learn LogisticRegression, pooled", "train AUC",
                 f"{roc_auc_score(data.labels, sk.predict_proba(pooled(data))[:, 1]):.6f}", ""))

    data = load(args.data_dir, "motor", "idx", "motor_speed")
    model = VerticalLinearRegression(learning_rate=0.13, max_iter=6, alpha=0.01, batch_size=100, tol=None,
                                     random_state=0, **keys)
    start = time.perf_counter()
    model.fit(data)
    seconds = time.perf_counter() - start
    pred = model.predict(data)
    rmse = mean_squared_error(data.labels, pred) ** 0.5
    rows.append(("motor, hetero LinR", "vfl SGD lr 0.13, L2 0.01, batch 100, 6 epochs", "train RMSE / R2",
                 f"{rmse:.5f} / {r2_score(data.labels, pred):.5f}", f"{seconds / 6:.2f}"))
    rows.append(("motor, hetero LinR", "FATE (published), same settings, 1024-bit", "train RMSE / R2",
                 "0.31400 / 0.90314", ""))
    lin = LinearRegression().fit(pooled(data), data.labels)
    pred = lin.predict(pooled(data))
    rows.append(("motor, hetero LinR", "scikit-learn LinearRegression, pooled (exact)", "train RMSE / R2",
                 f"{mean_squared_error(data.labels, pred) ** 0.5:.5f} / {r2_score(data.labels, pred):.5f}", ""))

    table = pd.DataFrame(rows, columns=["data", "method", "metric", "value", "s/epoch"])
    print(f"key bits: {args.key_bits}")
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
