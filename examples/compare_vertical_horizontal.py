"""Vertical vs horizontal federated learning on the breast-cancer data.

The same 30 features and labels are split two ways:

* **by columns** (vertical, ``vfl``'s Paillier protocol): party A holds 20
  columns (the "mean" and "worst" measurements), party B holds the 10
  "standard error" columns and the label; both know the same patients.
* **by rows** (horizontal, :class:`vfl.horizontal.FedAvg`): K = 2, 5 or 10
  clients each hold all 30 columns for their own patients (IID split).

Beside them: *centralized* training on the pooled data (the accuracy ceiling,
whose cost is shipping the raw data) and *local-only* training (what a data
holder gets alone, the floor a federation has to beat).  All models are L2
logistic regression; features are standardised with a scaler fitted on the
training rows.  Prints a table and writes docs/figures/compare_vertical_horizontal.png.

When each paradigm applies
--------------------------
* Horizontal (FedAvg) when the holders have *different people, same features*:
  hospitals with their own patients and the same lab panel, phones with their
  own users.  Only model vectors travel; cost grows with rounds x clients x
  model size, not with the data.
* Vertical when they have *the same people, different features*: a bank and a
  retailer sharing customers, the label at one of them.  Needs entity alignment
  (the id column) and per-iteration encrypted exchanges whose size grows with
  the number of shared rows.
* Centralized only when the raw data may legally be pooled; local-only when
  nothing may leave a holder at all.

Run: ``python examples/compare_vertical_horizontal.py`` (about a minute on 2
cores with the default 2048-bit keys, nearly all of it Paillier arithmetic;
``--key-bits 1024`` is faster but insecure and flagged as such in the table).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import accuracy_score, roc_auc_score  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from vfl.horizontal import FedAvg, partition, split_clients  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIGURE = ROOT / "docs" / "figures" / "compare_vertical_horizontal.png"
L2 = 0.01  # ridge strength for every model (vertical: alpha; sklearn: C = 1 / (L2 * n))
B_COLUMNS = list(range(10, 20))  # the "standard error" features, held by the label party B
A_COLUMNS = [j for j in range(30) if j not in B_COLUMNS]


def load():
    data = load_breast_cancer()
    X_train, X_test, y_train, y_test = train_test_split(
        data.data, data.target, test_size=0.2, random_state=0, stratify=data.target)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test, list(data.feature_names)


def sklearn_logreg(X, y):
    return LogisticRegression(C=1.0 / (L2 * len(y)), max_iter=5000).fit(X, y)


def row(setting, paradigm, y_test, proba, bytes_sent, seconds, note=""):
    return {"setting": setting, "paradigm": paradigm, "accuracy": accuracy_score(y_test, proba >= 0.5),
            "auc": roc_auc_score(y_test, proba), "bytes": int(bytes_sent), "seconds": seconds, "note": note}


def vertical_frames(X, y, names, id_offset):
    ids = np.arange(X.shape[0]) + id_offset
    frame_a = pd.DataFrame(X[:, A_COLUMNS], columns=[names[j] for j in A_COLUMNS])
    frame_b = pd.DataFrame(X[:, B_COLUMNS], columns=[names[j] for j in B_COLUMNS])
    frame_a.insert(0, "id", ids)
    frame_b.insert(0, "id", ids)
    if y is not None:
        frame_b["y"] = y
    return frame_a, frame_b


def run_vertical(X_train, X_test, y_train, y_test, names, key_bits, max_iter):
    try:
        from vfl import VerticalDataset, VerticalLogisticRegression
    except ImportError as exc:
        print(f"[vertical skipped: {exc}]")
        return None
    train_a, train_b = vertical_frames(X_train, y_train, names, 0)
    test_a, test_b = vertical_frames(X_test, None, names, 100_000)
    train = VerticalDataset({"A": train_a, "B": train_b}, label="y", id_column="id")
    test = VerticalDataset({"A": test_a, "B": test_b}, label="y", id_column="id")
    model = VerticalLogisticRegression(learning_rate=0.15, max_iter=max_iter, alpha=L2, batch_size=None,
                                       tol=1e-4, fit_intercept=True, key_bits=key_bits,
                                       insecure=key_bits < 2048, random_state=0)
    start = time.perf_counter()
    model.fit(train)
    seconds = time.perf_counter() - start
    sent = model.transcript_["bytes"].sum()
    note = f"{key_bits}-bit Paillier" + (" (insecure=True, demo only)" if key_bits < 2048 else "")
    return row("vertical FL, A+B", "vertical", y_test, model.predict_proba(test), sent, seconds, note)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--key-bits", type=int, default=2048,
                        help="Paillier key size; 1024 is faster but insecure, for demos only (default: 2048)")
    parser.add_argument("--max-iter", type=int, default=30, help="vertical iterations (default: 30)")
    parser.add_argument("--rounds", type=int, default=30, help="FedAvg rounds (default: 30)")
    parser.add_argument("--clients", type=int, nargs="+", default=[2, 5, 10], help="K values (default: 2 5 10)")
    parser.add_argument("--skip-vertical", action="store_true", help="horizontal and baselines only")
    args = parser.parse_args(argv)

    X_train, X_test, y_train, y_test, names = load()
    n, d = X_train.shape
    rows = []

    start = time.perf_counter()
    central = sklearn_logreg(X_train, y_train)
    rows.append(row("centralized (pooled rows)", "centralized", y_test, central.predict_proba(X_test)[:, 1],
                    n * (d + 1) * 8, time.perf_counter() - start, "bytes = raw training data as float64"))
    only_b = sklearn_logreg(X_train[:, B_COLUMNS], y_train)
    rows.append(row("local only: party B's 10 columns", "vertical baseline", y_test,
                    only_b.predict_proba(X_test[:, B_COLUMNS])[:, 1], 0, 0.0, "A has no labels: cannot train"))

    if not args.skip_vertical:
        vertical = run_vertical(X_train, X_test, y_train, y_test, names, args.key_bits, args.max_iter)
        if vertical is not None:
            rows.append(vertical)

    for K in args.clients:
        clients = split_clients(X_train, y_train, partition(y_train, K, "iid", seed=0))
        start = time.perf_counter()
        est = FedAvg("logreg", num_rounds=args.rounds, fraction_fit=1.0, local_epochs=2, batch_size=16,
                     learning_rate=0.05, l2=L2, random_state=0).fit(clients, X_test, y_test)
        rows.append(row(f"FedAvg, K={K} clients", "horizontal", y_test, est.predict_proba(X_test)[:, 1],
                        est.history_["bytes_total"].iloc[-1], time.perf_counter() - start,
                        f"C=1, E=2, B=16, {args.rounds} rounds"))
        local = [row("", "", y_test, sklearn_logreg(Xk, yk).predict_proba(X_test)[:, 1], 0, 0.0)
                 for Xk, yk in clients]
        rows.append({"setting": f"local only: mean of K={K} clients", "paradigm": "horizontal baseline",
                     "accuracy": np.mean([r["accuracy"] for r in local]),
                     "auc": np.mean([r["auc"] for r in local]), "bytes": 0, "seconds": 0.0,
                     "note": f"worst client accuracy {min(r['accuracy'] for r in local):.3f}"})

    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(table.to_string(index=False, formatters={"accuracy": "{:.3f}".format, "auc": "{:.4f}".format,
                                                       "bytes": "{:,}".format, "seconds": "{:.1f}".format}))
    plot(table)
    print(f"figure written to {FIGURE.relative_to(ROOT)}")
    return 0


def plot(table: pd.DataFrame) -> None:
    colors = {"centralized": "tab:gray", "vertical": "tab:red", "vertical baseline": "salmon",
              "horizontal": "tab:blue", "horizontal baseline": "lightsteelblue"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    y = np.arange(len(table))[::-1]
    bar_colors = [colors[p] for p in table["paradigm"]]
    left.barh(y + 0.2, table["accuracy"], height=0.4, color=bar_colors, label="accuracy")
    left.barh(y - 0.2, table["auc"], height=0.4, color=bar_colors, alpha=0.5, hatch="//", label="AUC")
    left.set_xlim(np.floor(table[["accuracy", "auc"]].min().min() * 20) / 20, 1.0)
    left.set_yticks(y, table["setting"])
    left.set_xlabel("test accuracy (solid) and AUC (hatched)")
    sent = table["bytes"].where(table["bytes"] > 0, np.nan)
    right.barh(y, sent, color=bar_colors)
    right.set_xscale("log")
    for yi, value in zip(y, table["bytes"]):
        if value > 0:
            right.text(value, yi, f" {value / 1e3:,.0f} kB", va="center", fontsize=8)
    right.set_xlim(right.get_xlim()[0], right.get_xlim()[1] * 8)
    right.set_xlabel("bytes exchanged during training (log scale; local-only = 0)")
    fig.suptitle("Breast cancer: split by columns (vertical) vs by rows (horizontal FedAvg)")
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
