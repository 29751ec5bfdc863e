"""Credit scoring across three organisations: the options a credit team asks for, done the private way.

A bank holds repayment history and the default label; a telco holds usage
columns; a retailer holds spending columns.  The data are generated here
(about 11% defaults, like a real book), split by columns, and trained with
Adam, an elastic-net penalty, early stopping on a held-out tenth (scored by
private prediction: only the bank sees the scores) and balanced class weights
(the bank's secret).  The script prints the test AUC and KS beside the same
training done centrally (same options, same start) and scikit-learn's
LogisticRegression.

    python examples/credit_scoring.py                    # 2048-bit keys
    python examples/credit_scoring.py --key-bits 1024    # quicker (insecure key: same arithmetic)
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from vfl import VerticalDataset, VerticalLogisticRegression
from vfl.centralized import fit_gradient_descent
from vfl.metrics import ks_statistic
from vfl.parties import class_weights
from vfl.cli import run_script

COLUMNS = {"bank": ["months_on_book", "utilisation", "late_payments", "income"],
           "telco": ["tenure", "monthly_bill", "plan_changes"],
           "shop": ["basket_size", "returns", "night_orders"]}


def make_book(n_rows: int = 3000, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """A generated loan book: every column, and whether the customer defaulted (1) or not (0)."""
    rng = np.random.default_rng(seed)
    names = [c for cols in COLUMNS.values() for c in cols]
    mixing = np.eye(len(names)) + 0.3 * rng.normal(size=(len(names), len(names)))
    x = rng.normal(size=(n_rows, len(names))) @ mixing
    w = np.array([-0.4, 1.2, 1.0, -0.8, -0.5, 0.3, 0.4, -0.2, 0.6, 0.5])
    y = (x @ w + rng.logistic(size=n_rows) > 3.5).astype(int)     # about 11% defaults
    return pd.DataFrame(x, columns=names), y


def split(frame: pd.DataFrame, y: np.ndarray) -> VerticalDataset:
    frames = {party: frame[cols].reset_index(drop=True) for party, cols in COLUMNS.items()}
    frames["bank"] = frames["bank"].assign(default=y)
    return VerticalDataset(frames, label="default")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--rows", type=int, default=3000)
    args = parser.parse_args(argv)

    frame, y = make_book(args.rows)
    x_train, x_test, y_train, y_test = train_test_split(frame, y, test_size=0.3, random_state=0, stratify=y)
    scaler = StandardScaler().fit(x_train)   # each party would scale its own columns; the same here
    x_train = pd.DataFrame(scaler.transform(x_train), columns=frame.columns)
    x_test = pd.DataFrame(scaler.transform(x_test), columns=frame.columns)
    train, test = split(x_train, y_train), split(x_test, y_test)

    options = dict(optimizer="adam", learning_rate=0.05, penalty="elasticnet", alpha=0.01, l1_ratio=0.5,
                   batch_size=256, max_iter=40, early_stopping=True, validation_fraction=0.1, n_iter_no_change=4,
                   scoring="roc_auc", tol=1e-4, class_weight="balanced", random_state=0)
    model = VerticalLogisticRegression(key_bits=args.key_bits, insecure=args.key_bits < 2048, **options)
    began = time.perf_counter()
    model.fit(train)
    seconds = time.perf_counter() - began
    score = model.predict_proba(test)

    # The same training centrally: pooled columns in the parties' order, same options, same start.
    order = [c for party in (*model.feature_parties_, model.label_party_) for c in COLUMNS[party]]
    start = (np.concatenate([model.initial_coef_[p] for p in (*model.feature_parties_, model.label_party_)]),
             model.initial_intercept_)
    central = fit_gradient_descent(x_train[order].to_numpy(), np.where(y_train == 1, 1.0, -1.0), model._settings(),
                                   start=start, sample_weight=class_weights(y_train, "balanced"))
    central_score = x_test[order].to_numpy() @ central["coef"] + central["intercept"]
    sklearn = LogisticRegression(class_weight="balanced", max_iter=1000).fit(x_train, y_train)
    sklearn_score = sklearn.predict_proba(x_test)[:, 1]

    print(f"{len(y_train)} training rows ({y_train.mean():.1%} defaults), parties bank (label, "
          f"{len(COLUMNS['bank'])} columns), telco ({len(COLUMNS['telco'])}), shop ({len(COLUMNS['shop'])}); "
          f"{args.key_bits}-bit keys")
    print(f"adam + elastic net + early stopping on roc_auc + balanced class weights: stopped after "
          f"{model.n_iter_} epochs, best epoch {model.best_iteration_} ({seconds:.1f} s)")
    print(f"{'':38s} {'test AUC':>8s} {'KS':>6s}")
    for name, s in (("federated (vfl)", score), ("centralized, same options and start", central_score),
                    ("scikit-learn LogisticRegression", sklearn_score)):
        print(f"{name:38s} {roc_auc_score(y_test, s):8.4f} {ks_statistic(y_test, s):6.3f}")
    gap = max(np.max(np.abs(model.coef_[p] - c)) for p, c in
              zip((*model.feature_parties_, model.label_party_),
                  np.split(central["coef"], np.cumsum([len(COLUMNS[p]) for p in model.feature_parties_]))))
    print(f"largest weight difference federated vs centralized: {gap:.1e}")


if __name__ == "__main__":
    raise SystemExit(run_script(main))
