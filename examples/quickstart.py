"""Quickstart: vertical logistic regression on breast cancer, split by columns between two parties.

Party A (say, a hospital lab) holds 20 measurements; party B (the clinic) holds the other 10
and the diagnosis.  They train one model with coordinator C, who holds the Paillier private key,
without either party seeing the other's columns.  Prints the federated AUC next to centralized
training on the pooled data.

    python examples/quickstart.py
"""

import time

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from vfl import VerticalDataset, VerticalLogisticRegression
from vfl.centralized import fit_gradient_descent
from vfl.cli import run_script


def split_by_columns(x, y, ids):
    """Party A gets the first 20 columns; party B the last 10 and the label."""
    frame_a = pd.DataFrame(x[:, :20], columns=[f"lab_{j}" for j in range(20)])
    frame_b = pd.DataFrame(x[:, 20:], columns=[f"clinic_{j}" for j in range(10)])
    frame_a.insert(0, "id", ids)
    frame_b.insert(0, "id", ids)
    frame_b["y"] = y
    return VerticalDataset({"A": frame_a, "B": frame_b}, label="y", id_column="id")


def main():
    x, y = load_breast_cancer(return_X_y=True)
    ids = np.arange(len(y))
    x_train, x_test, y_train, y_test, id_train, id_test = train_test_split(
        x, y, ids, test_size=0.3, random_state=0, stratify=y)
    # The columns in their own units: each party standardizes its own (standardize=True, the default).
    train, test = split_by_columns(x_train, y_train, id_train), split_by_columns(x_test, y_test, id_test)

    # The defaults: conjugate gradient on full batches, packed ciphertexts, 2048-bit keys.
    model = VerticalLogisticRegression(alpha=0.01, key_bits=2048)
    began = time.perf_counter()
    model.fit(train)
    seconds = time.perf_counter() - began
    auc = roc_auc_score(y_test, model.predict_proba(test))

    # The same objective trained centrally (pooled data, plain numpy, the same standardization), and
    # scikit-learn's exact log loss.  From the secret start the parties drew (an in-process model holds
    # every party, so it knows it).
    scaler = StandardScaler().fit(x_train)
    x_train, x_test = scaler.transform(x_train), scaler.transform(x_test)
    start = (np.concatenate([model.initial_coef_["A"], model.initial_coef_["B"]]), model.initial_intercept_)
    reference = fit_gradient_descent(x_train, np.where(y_train == 1, 1.0, -1.0), model._settings(), start=start)
    central_auc = roc_auc_score(y_test, x_test @ reference["coef"] + reference["intercept"])
    sklearn_auc = roc_auc_score(y_test, LogisticRegression(max_iter=1000).fit(x_train, y_train)
                                .predict_proba(x_test)[:, 1])
    weight_gap = np.abs(np.concatenate([model.coef_["A"], model.coef_["B"]]) - reference["coef"]).max()
    sent = model.transcript_.groupby(["sender", "receiver"])["bytes"].sum()

    print(f"trained {model.n_iter_} {model.solver_} steps with 2048-bit Paillier keys in {seconds:.1f} s "
          f"({seconds / model.n_iter_:.2f} s per step)")
    print(f"loss decrypted by C: {model.loss_curve_[0]:.4f} -> {model.loss_curve_[-1]:.4f}")
    print(f"test AUC  federated (vfl)                 {auc:.4f}")
    print(f"test AUC  centralized, same objective     {central_auc:.4f}")
    print(f"test AUC  centralized, scikit-learn exact {sklearn_auc:.4f}")
    loss_gap = abs(model.loss_curve_[-1] - reference["loss_curve"][-1])
    # Conjugate gradient's last steps follow gradients ~1e5 times smaller than its first, so the 2^-32
    # fixed-point rounding shows in the weights the objective barely determines; the losses agree.
    print(f"largest weight difference federated vs centralized: {weight_gap:.1e} (final losses: {loss_gap:.1e})")
    print("bytes sent per link: " + ", ".join(f"{s}->{r} {b / 1e6:.2f} MB" for (s, r), b in sent.items()))


if __name__ == "__main__":
    raise SystemExit(run_script(main))
