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
  host 10) — logistic regression trained federated on 80% of the rows; the host's
  partial scores released on the 20% held out at ``release_epsilon`` 1, 2, 4, 8 and
  none: the test AUC the label party gets, beside what the release check's attacks
  rebuild of the host's columns from the (noisy) release at each epsilon.

The check samples at most :data:`vfl.protocols.release.SAMPLE` rows, so its cost
grows with the rows only through evaluating the release (and, for DP, the noise).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np


def _cpu() -> float:
    from benchmarks.trees import cpu_seconds

    return cpu_seconds()


def check_cost(rows: int, columns: int = 20, repeats: int = 3, key_bits: int = 2048, predict: bool = True) -> dict:
    """CPU seconds of the release check and of the packed private prediction it guards, ``rows`` rows."""
    from benchmarks.data import make_data
    from vfl import inprocess
    from vfl.parties import Coordinator, PartyA, PartyB
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


def dp_price(folder, epsilons=(1.0, 2.0, 4.0, 8.0, None), clips=(1.0, 4.0), key_bits: int = 1024) -> list[dict]:
    """default_credit: test AUC and the attacks' figures on the host's columns at each ``release_epsilon``."""
    import pandas as pd
    from sklearn.metrics import roc_auc_score

    from vfl import VerticalDataset, VerticalLogisticRegression
    from vfl.protocols.release import assess

    guest = pd.read_csv(Path(folder) / "default_credit_hetero_guest.csv")
    host = pd.read_csv(Path(folder) / "default_credit_hetero_host.csv")
    order = np.random.default_rng(0).permutation(len(guest))
    cut = int(0.8 * len(order))
    train, test = order[:cut], order[cut:]
    frames = lambda rows, label=True: {"guest": guest.iloc[rows] if label else guest.iloc[rows].drop(columns="y"),  # noqa: E731
                                       "host": host.iloc[rows]}
    data = VerticalDataset(frames(train), label="y", id_column="id")
    held = VerticalDataset(frames(test, label=False), id_column="id")
    y_test = guest["y"].to_numpy()[test]
    host_columns = [c for c in host.columns if c != "id"]
    x_host = host[host_columns].to_numpy()[test]
    model = VerticalLogisticRegression(key_bits=key_bits, insecure=key_bits < 2048, allow_reconstruction=["host"],
                                       max_iter=30)
    model.fit(data)
    own = ((guest.drop(columns=["id", "y"]).to_numpy()[test] - model.mean_["guest"]) / model.scale_["guest"]
           @ model.coef_["guest"] + model.intercept_)
    results = [{"epsilon": "guest alone", "clip": None, "auc": float(roc_auc_score(y_test, own))}]
    for clip in clips:
        for epsilon in epsilons:
            if epsilon is None and clip != clips[-1]:
                continue
            model.set_params(release_epsilon=epsilon, release_clip=clip, allow_reconstruction=["host"])
            model._release_scopes = {}            # each setting a fresh ledger: the budgets do not pile up here
            scores = model.decision_function(held)
            released = scores - own                       # what the label party holds of the host per row
            found = assess(x_host, released, host_columns)
            worst = found.worst()
            results.append({"epsilon": epsilon, "clip": clip if epsilon is not None else None,
                            "auc": float(roc_auc_score(y_test, scores)),
                            "worst_column": worst.column, "attack": worst.attack, "share": worst.share,
                            "baseline": worst.baseline, "rows_given_away": found.rows_given_away,
                            "passes": found.passes()})
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
        print("default_credit, host's partial scores at prediction (20% held out):")
        print(f"{'epsilon':>11} {'clip':>4} {'AUC':>6}  worst column: attack, share rebuilt (constant guess), "
              "rows whole, check")
        for r in report["price"]:
            eps = "none" if r["epsilon"] is None else r["epsilon"] if isinstance(r["epsilon"], str) else \
                f"{r['epsilon']:g}"
            clip = "" if r["clip"] is None else f"{r['clip']:g}"
            line = f"{eps:>11} {clip:>4} {r['auc']:6.3f}"
            if "share" in r:
                line += (f"  {r['worst_column']}: {r['attack']}, {r['share']:.1%} ({r['baseline']:.1%}), "
                         f"{r['rows_given_away']:.1%}, {'passes' if r['passes'] else 'refused'}")
            print(line)
    return report


if __name__ == "__main__":        # pragma: no cover
    print(check_cost(int(os.environ.get("ROWS", "20000")), repeats=1, predict=False))
