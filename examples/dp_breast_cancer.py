"""What differential privacy of the labels costs: test AUC on breast cancer at epsilon = 1, 3, 8.

Trains vfl's federated logistic regression (party A: 20 columns, party B: 10
columns and the label) with ``dp_epsilon`` set, several times per epsilon
(the noise differs every run), and prints the median test AUC beside the
model without DP.  ``dp_delta = 1e-5``; every run has ``max_iter`` epochs
(DP needs ``tol=None``).

    python examples/dp_breast_cancer.py                   # 2048-bit keys, 3 runs each
    python examples/dp_breast_cancer.py --key-bits 1024 --runs 5   # quicker (insecure key: same arithmetic)
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from vfl import VerticalDataset, VerticalLogisticRegression
from vfl.cli import run_script


def split(x, y):
    a = pd.DataFrame(x[:, :20]).add_prefix("a")
    b = pd.DataFrame(x[:, 20:]).add_prefix("b").assign(y=y)
    return VerticalDataset({"A": a, "B": b}, label="y")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--learning-rate", type=float, default=0.5)
    args = parser.parse_args(argv)

    x, y = load_breast_cancer(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)
    scaler = StandardScaler().fit(x_train)
    train, test = split(scaler.transform(x_train), y_train), split(scaler.transform(x_test), y_test)
    common = dict(learning_rate=args.learning_rate, max_iter=args.epochs, alpha=0.01, tol=None,
                  key_bits=args.key_bits, insecure=args.key_bits < 2048)

    print(f"breast cancer, {len(y_train)} training rows, {args.epochs} full-batch epochs, "
          f"{args.key_bits}-bit keys, delta = 1e-5, median of {args.runs} runs")
    print(f"{'epsilon':>8} {'noise sigma':>12} {'test AUC':>9} {'min-max':>15} {'s/run':>6}")
    for epsilon in (None, 8.0, 3.0, 1.0):
        aucs, sigma, began = [], 0.0, time.perf_counter()
        for _ in range(args.runs):
            dp = {} if epsilon is None else dict(dp_epsilon=epsilon, dp_delta=1e-5)
            model = VerticalLogisticRegression(**common, **dp).fit(train)
            sigma = model.dp_noise_std_ or 0.0
            aucs.append(roc_auc_score(y_test, model.predict_proba(test)))
        label = "no DP" if epsilon is None else f"{epsilon:g}"
        print(f"{label:>8} {sigma:12.2f} {np.median(aucs):9.4f} {min(aucs):7.4f}-{max(aucs):.4f} "
              f"{(time.perf_counter() - began) / args.runs:6.1f}")


if __name__ == "__main__":
    raise SystemExit(run_script(main))
