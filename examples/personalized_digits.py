"""Personalized and hierarchical federated learning on non-IID digits.

Part 1, personalization.  scikit-learn's digits dealt to K = 20 clients by
four non-IID splits: McMahan's pathological shards (two shards, so mostly two
labels, per client) and Dirichlet label skew with alpha = 0.1, 0.5 and 10
(very skewed to nearly IID).  Every client's rows are split into its own
training and test rows label by label (``load_clients``), so each client is
scored on its own distribution.  Four methods, softmax regression, all
clients in every round and five full-batch local steps per round (on
average, for L2GD) with step 0.3:

* FedAvg (one global model),
* L2GD (one model per client pulled toward their mean, Hanzely & Richtárik
  2020), ``lam`` chosen per split and seed by validation,
* Per-FedAvg (HF) (a meta-model each client adapts in one gradient step,
  Fallah et al. 2020), ``alpha`` chosen the same way,
* local-only training (no communication).

``lam`` and ``alpha`` are chosen per split on validation rows held out of
each client's *training* rows (20 %, label by label): the value with the best
mean per-client validation accuracy, averaged over the seeds.  The test rows
are used once, by the final models, trained on all training rows.  Reported:
the distribution of per-client test accuracy (mean over clients, and the mean
of the worst 10 % = 2 clients), and the communication rounds until the mean
per-client test accuracy reaches ``--target``; means (rounds: medians) over
``--seeds`` seeds of partition, split and coin flips.

Part 2, hierarchy.  HierFAVG (Liu et al. 2020) on the pathological split with
4 edge servers of 5 clients: cloud rounds to reach ``--target`` test accuracy
as kappa2 (edge rounds per cloud round) grows with kappa1 = 5, against FedAvg
doing the same local work between cloud rounds without edge aggregation.

Prints both tables as Markdown and writes a figure (``--figure``, default
docs/figures/personalized_digits.png).  Runs in about two minutes on 2 cores
(two worker processes) and prints its total time and the load average.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny matrices: BLAS threads only add overhead

import argparse  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from vfl.cli import run_script  # noqa: E402
from vfl.horizontal import (  # noqa: E402
    L2GD,
    FedAvg,
    HierFAVG,
    LocalOnly,
    PerFedAvg,
    load_clients,
    train_test_split_clients,
    worst_fraction_mean,
)

ROOT = Path(__file__).resolve().parents[1]
FIGURE = ROOT / "docs" / "figures" / "personalized_digits.png"

N_CLIENTS, TEST_SIZE, VALIDATION_SIZE = 20, 0.25, 0.2
RATE, STEPS, L2 = 0.3, 5, 1e-3            # local step, local steps per round, ridge: the same for every method
P = 1 / STEPS                             # L2GD: 1/p = 5 local steps per round on average
LAMS = (0.01, 0.05, 0.2, 0.8)             # 0.8 is near the largest allowed, P / ((1 - P) RATE) = 0.83
ALPHAS = (0.03, 0.3, 1.0, 3.0)
GRIDS = {"L2GD": LAMS, "Per-FedAvg (HF)": ALPHAS}
#: name -> (partition method, its options)
SPLITS = {
    "pathological": ("pathological", {}),
    "Dirichlet 0.1": ("dirichlet", {"alpha": 0.1}),
    "Dirichlet 0.5": ("dirichlet", {"alpha": 0.5}),
    "Dirichlet 10": ("dirichlet", {"alpha": 10.0}),
}
METHODS = ("FedAvg", "L2GD", "Per-FedAvg (HF)", "local only")
#: HierFAVG settings (kappa1, kappa2); kappa2 = 1 is FedAvg with kappa1 local steps per round
HIERARCHY = [(5, 1), (5, 2), (5, 5), (5, 10), (10, 1), (25, 1), (50, 1)]
N_EDGES = 4


def make(method: str, rounds: int, seed: int, knob=None):
    """The estimator of ``method`` (``knob``: L2GD's lam or Per-FedAvg's alpha)."""
    common = dict(num_rounds=rounds, batch_size=None, l2=L2, random_state=seed)
    if method == "FedAvg":
        return FedAvg(fraction_fit=1.0, local_epochs=STEPS, learning_rate=RATE, **common)
    if method == "L2GD":
        return L2GD(lam=knob, p=P, learning_rate=RATE, **common)
    if method == "Per-FedAvg (HF)":
        return PerFedAvg(fraction_fit=1.0, tau=STEPS, alpha=knob, beta=RATE, variant="hf", **common)
    return LocalOnly(local_epochs=STEPS, learning_rate=RATE, **common)


def pooled(tests):
    return np.vstack([X for X, _ in tests]), np.concatenate([y for _, y in tests])


def clients_for(split: str, seed: int):
    method, options = SPLITS[split]
    return load_clients("digits", N_CLIENTS, method, test_size=TEST_SIZE, seed=seed, **options)


def validation_task(task):
    """Mean per-client validation accuracy of one method and knob, trained on the other training rows."""
    split, seed, rounds, method, knob = task
    train, _ = clients_for(split, seed)
    fit_rows, validation = train_test_split_clients(train, VALIDATION_SIZE, seed=seed + 1000)
    est = make(method, rounds, seed, knob).fit(fit_rows, classes=np.arange(10))
    return task, float(est.client_accuracies(validation).mean())


def final_task(task):
    """Per-client test accuracies and the per-round mean of one method, trained on all training rows."""
    split, seed, rounds, method, knob = task
    train, tests = clients_for(split, seed)
    est = make(method, rounds, seed, knob).fit(train, *pooled(tests), client_tests=tests, classes=np.arange(10))
    return task, {"accuracies": est.client_accuracies(tests), "curve": est.history_["client_accuracy_mean"].to_numpy()}


def personalization(pool, seeds, rounds):
    """Validate the knobs, choose one per split and method, then train and test every method."""
    tasks = [(split, seed, rounds, method, knob) for split in SPLITS for method, grid in GRIDS.items()
             for knob in grid for seed in seeds]
    scores = dict(pool.map(validation_task, tasks))
    validation = {(split, method): [np.mean([scores[(split, seed, rounds, method, knob)] for seed in seeds])
                                    for knob in grid] for split in SPLITS for method, grid in GRIDS.items()}
    chosen = {key: GRIDS[key[1]][int(np.argmax(curve))] for key, curve in validation.items()}
    tasks = [(split, seed, rounds, method, chosen.get((split, method))) for split in SPLITS for method in METHODS
             for seed in seeds]
    finals = {(split, seed, method): result for (split, seed, _, method, _), result in pool.map(final_task, tasks)}
    return finals, chosen, validation


def rounds_to(curve, target):
    """First round (1-based) whose value reaches ``target``; inf if none."""
    hits = np.flatnonzero(np.asarray(curve) >= target)
    return float(hits[0] + 1) if hits.size else np.inf


def hierarchy_task(task):
    kappa1, kappa2, seed, rounds, target = task
    train, tests = clients_for("pathological", seed)
    est = HierFAVG(num_rounds=rounds, kappa1=kappa1, kappa2=kappa2, edges=N_EDGES, learning_rate=RATE, l2=L2,
                   random_state=seed).fit(train, *pooled(tests), classes=np.arange(10))
    return task, rounds_to(est.history_["test_accuracy"], target)


def personalization_table(finals, chosen, seeds, target, rounds):
    print(f"\nPer-client test accuracy on digits, K={N_CLIENTS} clients, softmax regression, {rounds} rounds, "
          f"means over {len(seeds)} seeds (rounds: median); target = mean per-client accuracy {target:.0%}")
    print("| split | method | mean | worst 10 % | rounds to target | chosen on validation |")
    print("| --- | --- | --- | --- | --- | --- |")
    for split in SPLITS:
        for method in METHODS:
            accuracies = [finals[(split, seed, method)]["accuracies"] for seed in seeds]
            mean = np.mean([a.mean() for a in accuracies])
            worst = np.mean([worst_fraction_mean(a) for a in accuracies])
            if method == "local only":
                reached = sum(a.mean() >= target for a in accuracies)
                count = {len(seeds): "0 (no communication)", 0: "never"}.get(
                    reached, f"0 in {reached} of {len(seeds)} seeds, else never")
            else:
                needed = np.median([rounds_to(finals[(split, seed, method)]["curve"], target) for seed in seeds])
                count = f"not in {rounds}" if np.isinf(needed) else f"{needed:.0f}"
            knob = {"L2GD": "lambda = {:g}", "Per-FedAvg (HF)": "alpha = {:g}"}.get(method, "{}")
            print(f"| {split} | {method} | {mean:.3f} | {worst:.3f} | {count} | "
                  f"{knob.format(chosen.get((split, method), ''))} |")


def hierarchy_table(found, seeds, target, rounds):
    vector = 650 * 8  # bytes of one softmax-regression parameter vector (64 pixels + 1, 10 classes)
    print(f"\nHierFAVG on the pathological split: {N_CLIENTS} clients, {N_EDGES} edges of "
          f"{N_CLIENTS // N_EDGES}; cloud rounds to {target:.0%} test accuracy (median of {len(seeds)} seeds), "
          f"and the bytes sent on each kind of link until then")
    print("| kappa1 | kappa2 | local steps per cloud round | cloud rounds | edge-cloud bytes | client-edge bytes |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kappa1, kappa2 in HIERARCHY:
        needed = np.median([found[(kappa1, kappa2, seed, rounds, target)] for seed in seeds])
        label = " (= FedAvg)" if kappa2 == 1 else ""
        if np.isinf(needed):
            print(f"| {kappa1} | {kappa2}{label} | {kappa1 * kappa2} | not in {rounds} | | |")
            continue
        edge_cloud, client_edge = needed * 2 * N_EDGES * vector, needed * 2 * kappa2 * N_CLIENTS * vector
        print(f"| {kappa1} | {kappa2}{label} | {kappa1 * kappa2} | {needed:.0f} | {edge_cloud / 1e3:,.0f} kB | "
              f"{client_edge / 1e3:,.0f} kB |")
    print(f"(kappa2 = 1 trains the FedAvg model; FedAvg without edge servers would send all "
          f"{2 * N_CLIENTS * vector / 1e3:,.0f} kB of each round over the long client-cloud links.)")


def plot(finals, validation, seeds, target, rounds, path: Path):
    colors = dict(zip(METHODS, ("tab:blue", "tab:red", "tab:green", "tab:gray")))
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    ax = axes[0, 0]
    width = 0.2
    for i, split in enumerate(SPLITS):
        for j, method in enumerate(METHODS):
            values = np.concatenate([finals[(split, seed, method)]["accuracies"] for seed in seeds])
            x = i + (j - 1.5) * width
            box = ax.boxplot(values, positions=[x], widths=width * 0.8, patch_artist=True,
                             flierprops={"markersize": 3})
            box["boxes"][0].set_facecolor(colors[method])
            ax.plot(x, values.mean(), "k^", markersize=5)
    low = sum(int(np.sum(finals[key]["accuracies"] < 0.6)) for key in finals)
    ax.set_ylim(0.6, 1.01)
    ax.set_xticks(range(len(SPLITS)), list(SPLITS))
    ax.set_ylabel("per-client test accuracy")
    ax.set_title(f"Per-client test accuracy, {len(seeds)} seeds x {N_CLIENTS} clients (triangle: mean; "
                 f"{low} below 0.6 not shown)", fontsize=10)
    ax.legend([plt.Rectangle((0, 0), 1, 1, color=colors[m]) for m in METHODS], METHODS, loc="lower left",
              fontsize=8)
    ax = axes[0, 1]
    for split, style in (("pathological", "-"), ("Dirichlet 10", "--")):
        for method in METHODS:
            curve = finals[(split, seeds[0], method)]["curve"]
            if method == "local only":
                ax.axhline(curve[-1], color=colors[method], ls=style, lw=0.8)
            else:
                ax.plot(np.arange(1, curve.size + 1), curve, style, color=colors[method], label=f"{method}, {split}")
    ax.axhline(target, color="black", lw=0.6)
    ax.set(xlabel="communication round", ylabel="mean per-client test accuracy", ylim=(0.8, 1.0),
           title=f"Per round, seed {seeds[0]} (gray: local only; black: target)")
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    for ax, method, symbol in ((axes[1, 0], "L2GD", "lambda"), (axes[1, 1], "Per-FedAvg (HF)", "alpha")):
        for split in SPLITS:
            ax.plot(GRIDS[method], validation[(split, method)], "o-", label=split)
        ax.set_xscale("log")
        ax.set(xlabel=symbol, ylabel="mean per-client validation accuracy",
               title=f"{method}: choosing {symbol} on validation rows (mean of {len(seeds)} seeds)")
        ax.legend(fontsize=8)
    fig.suptitle("Personalized federated learning on non-IID digits (softmax regression)")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds of partition, split and coins (default: 3)")
    parser.add_argument("--rounds", type=int, default=100, help="communication rounds (default: 100)")
    parser.add_argument("--target", type=float, default=0.95, help="accuracy target (default: 0.95)")
    parser.add_argument("--cloud-rounds", type=int, default=40, help="HierFAVG cloud rounds (default: 40)")
    parser.add_argument("--figure", type=Path, default=FIGURE, metavar="PATH",
                        help="where to write the PNG figure (default: docs/figures/personalized_digits.png)")
    parser.add_argument("--skip-hierarchy", action="store_true", help="leave out part 2 (HierFAVG)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    seeds = list(range(args.seeds))
    with ProcessPoolExecutor(max_workers=2) as pool:
        finals, chosen, validation = personalization(pool, seeds, args.rounds)
        found = {}
        if not args.skip_hierarchy:
            tasks = [(k1, k2, seed, args.cloud_rounds, args.target) for k1, k2 in HIERARCHY for seed in seeds]
            found = dict(pool.map(hierarchy_task, tasks))
    personalization_table(finals, chosen, seeds, args.target, args.rounds)
    if found:
        hierarchy_table(found, seeds, args.target, args.cloud_rounds)
    plot(finals, validation, seeds, args.target, args.rounds, args.figure)
    print(f"\nfigure written to {args.figure}")
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"total time {time.perf_counter() - start:.0f} s on {os.cpu_count()} cores, load average {load}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main))
