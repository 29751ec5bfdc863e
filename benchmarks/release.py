"""``python -m benchmarks --release``: the release check's cost beside the release it guards, and DP's price.

Two parts:

* **cost** — at each size (10^5 and 10^6 rows by default), a feature party of 20
  columns releases its partial scores: the release check
  (:meth:`vfl.protocols.release.ReleasePolicy.release`, one earlier release in the
  ledger to replay) is timed beside the private prediction it guards (packed,
  2048-bit keys, the real role programs in threads), in CPU seconds of this process
  and its workers, median of ``--repeats`` runs, with the share it adds; and the
  same check of a split network's interactive part (a ReLU bottom of 8 units into
  100) is timed beside it.
* **price** (``--data DIR``, FATE's default_credit: guest 13 columns and the label,
  host 10) — logistic regression, trees and a split network each trained federated on
  80% of the rows (the host opted in); the host's releases at prediction (partial
  scores, split sides by randomized response, its part of the network) on the 20%
  held out at ``release_epsilon`` 1, 2, 4, 8 and none: the test AUC the label party
  gets, beside what the host's own release check measured on what it sent.

The check samples at most :data:`vfl.protocols.release.SAMPLE` rows, so its cost
grows with the rows only through evaluating the release (and, for DP, the noise).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def _cpu() -> float:
    from benchmarks.trees import cpu_seconds

    return cpu_seconds()


def check_cost(rows: int, columns: int = 20, repeats: int = 3, key_bits: int = 2048, predict: bool = True) -> dict:
    """CPU seconds of the release check and of the packed private prediction it guards, ``rows`` rows."""
    from benchmarks.data import make_data
    from vfl import inprocess
    from vfl.parties import Coordinator
    from vfl.parties.linear import PartyA, PartyB
    from vfl.protocols.release import (ReleasePolicy, clear_process_ledgers, evaluate, linear_release,
                                       network_release)

    x_a, x_b, _, _ = make_data(rows, columns + 10)
    rng = np.random.default_rng(3)
    weights = rng.normal(scale=0.5, size=(1, x_a.shape[1]))
    out = {"rows": rows, "columns": int(x_a.shape[1]), "check": [], "network_check": [], "prediction": []}
    ids = np.arange(rows)
    for _ in range(repeats):
        clear_process_ledgers()
        policy = ReleasePolicy.in_process("A", f"bench-{rows}")
        policy.release("B", [f"a{j}" for j in range(x_a.shape[1])], x_a[:2000],
                       linear_release(rng.normal(size=(1, x_a.shape[1]))), "an earlier model")
        began = _cpu()
        policy.release("B", [f"a{j}" for j in range(x_a.shape[1])], x_a, linear_release(weights),
                       "its partial scores", ids=ids, values=x_a @ weights.T)
        out["check"].append(_cpu() - began)
        bottom = [(rng.normal(size=(x_a.shape[1], 8)), np.zeros(8), "relu"),
                  (rng.normal(size=(8, 100)), np.zeros(100), "identity")]
        spec = network_release(bottom)
        parts = evaluate(spec, x_a)                   # the release itself: computed for sending anyway
        began = _cpu()
        ReleasePolicy.in_process("A", f"bench-net-{rows}-{_}").release(
            "B", [f"a{j}" for j in range(x_a.shape[1])], x_a, spec, "its interactive part", values=parts)
        out["network_check"].append(_cpu() - began)
    if predict:
        a, b = PartyA(x_a), PartyB(x_b, np.zeros(rows))
        a.params = weights[0].copy()
        b.params = rng.normal(scale=0.5, size=b.params.shape)
        c = Coordinator(key_bits, insecure=key_bits < 2048)
        c.generate_keys()
        inprocess.predict({"A": a, "B": b}, c, {"A": x_a[:64], "B": x_b[:64]}, packing=True)     # tables, workers
        for _ in range(repeats):
            began = _cpu()
            inprocess.predict({"A": a, "B": b}, c, {"A": x_a, "B": x_b}, packing=True)
            out["prediction"].append(_cpu() - began)
    for name in ("check", "network_check", "prediction"):
        out[f"median_{name}"] = float(np.median(out[name])) if out[name] else None
    if out["median_prediction"]:
        out["check_share"] = out["median_check"] / out["median_prediction"]
    return out


def _split(folder):
    import pandas as pd

    from vfl import VerticalDataset

    guest = pd.read_csv(Path(folder) / "default_credit_hetero_guest.csv")
    host = pd.read_csv(Path(folder) / "default_credit_hetero_host.csv")
    order = np.random.default_rng(0).permutation(len(guest))
    cut = int(0.8 * len(order))
    train, test = order[:cut], order[cut:]
    frames = lambda rows, label=True: {"guest": guest.iloc[rows] if label else guest.iloc[rows].drop(columns="y"),  # noqa: E731
                                       "host": host.iloc[rows]}
    return (VerticalDataset(frames(train), label="y", id_column="id"),
            VerticalDataset(frames(test, label=False), id_column="id"), guest["y"].to_numpy()[test])


def _models(key_bits: int):
    from vfl import VerticalGradientBoostingClassifier, VerticalLogisticRegression
    from vfl.neural_network import VerticalMLPClassifier

    insecure = key_bits < 2048
    return {
        "linear": lambda: VerticalLogisticRegression(key_bits=key_bits, insecure=insecure, max_iter=30,
                                                     allow_reconstruction=["host"]),
        "trees": lambda: VerticalGradientBoostingClassifier(key_bits=key_bits, insecure=insecure, max_iter=20,
                                                            max_depth=3, allow_reconstruction=["host"]),
        "network": lambda: VerticalMLPClassifier(hidden_layer_sizes=(16,), max_iter=10, batch_size=500,
                                                 learning_rate_init=0.01, verbose=False,
                                                 allow_reconstruction=["host"]),
    }


def dp_price(folder, epsilons=(1.0, 2.0, 4.0, 8.0, None), clip: float = 1.0, key_bits: int = 1024,
             families=("linear", "trees", "network")) -> list[dict]:
    """default_credit: each family trained once (the host opted in), then its host's releases at prediction (the
    20% held out) at each ``release_epsilon``: the test AUC the label party gets, and what the host's own release
    check measured on what it sent (the worst column: the attack's share of rows rebuilt, a constant guess's).
    The guest alone (the host's part left out) is the floor."""
    from sklearn.metrics import roc_auc_score

    from vfl.protocols.release import ReleaseLedger

    from sklearn.linear_model import LogisticRegression

    data, held, y_test = _split(folder)
    own = LogisticRegression(max_iter=1000).fit(data.features("guest"), data.labels)
    results = [{"family": "guest", "epsilon": "its own columns only (scikit-learn)",
                "auc": float(roc_auc_score(y_test, own.predict_proba(held.features("guest"))[:, 1]))}]
    for family in families:
        model = _models(key_bits)[family]()
        began = _cpu()
        model.fit(data)
        fitted = _cpu() - began
        for epsilon in epsilons:
            model.set_params(release_epsilon=epsilon, release_clip=clip)
            scope = f"bench-{family}-{epsilon}"
            model._release_scopes = {"host": scope}      # each setting a fresh ledger: the budgets do not pile up
            proba = model.predict_proba(held)
            proba = proba if proba.ndim == 1 else proba[:, 1]
            entries = ReleaseLedger.in_memory("host", scope).releases("guest")
            checked = entries[-1]["checked"] if entries and entries[-1].get("checked") else None
            worst = max(checked["findings"], key=lambda f: f["share"] - f["baseline"]) if checked else None
            results.append({"family": family, "epsilon": epsilon, "clip": clip if epsilon is not None else None,
                            "auc": float(roc_auc_score(y_test, proba)), "fit_cpu_seconds": fitted,
                            **({"worst_column": worst["column"], "attack": worst["attack"], "share": worst["share"],
                                "baseline": worst["baseline"]} if worst else {})})
    return results


def main_release(args, machine, load) -> dict:
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB; load average at start: {load()}")
    report = {"machine": info, "cost": [], "price": None}
    for rows in args.release_sizes or [100_000, 1_000_000]:
        entry = check_cost(rows, repeats=args.repeats)
        entry["load_after"] = load()
        report["cost"].append(entry)
        share = entry.get("check_share")
        print(f"{rows:>9,} rows: release check {entry['median_check']:.2f} CPU s, private prediction "
              f"{entry['median_prediction']:.1f} CPU s" + (f" ({100 * share:.1f}%)" if share else "") +
              f"; a network's interactive part (100 values a row) checked in {entry['median_network_check']:.2f} CPU s"
              f"  [load {entry['load_after']}]")
    if args.data:
        report["price"] = dp_price(args.data)
        print("default_credit, the host's releases at prediction (20% held out), each family trained once:")
        print(f"{'family':>8} {'epsilon':>7} {'AUC':>6}  the host's check on what it sent: worst column, attack, "
              "share rebuilt (a constant guess)")
        for r in report["price"]:
            eps = "none" if r["epsilon"] is None else r["epsilon"] if isinstance(r["epsilon"], str) else \
                f"{r['epsilon']:g}"
            line = f"{r['family']:>8} {eps:>7} {r['auc']:6.3f}"
            if "share" in r:
                line += f"  {r['worst_column']}: {r['attack']}, {r['share']:.1%} ({r['baseline']:.1%})"
            print(line)
    return report


if __name__ == "__main__":        # pragma: no cover
    print(check_cost(int(os.environ.get("ROWS", "20000")), repeats=1, predict=False))
