"""McMahan et al. (2017), Table 2 in miniature, on scikit-learn's digits.

Communication rounds needed to reach a target test accuracy with the "2NN"
MLP (two ReLU hidden layers, here 64 units each for the 8x8 digits), for
FedSGD (E=1, B=infinity) and FedAvg with more local computation (larger E,
smaller B), with K=20 clients of which C=0.25 (5 clients) take part in each
round, for an IID split and McMahan's pathological non-IID split (sorted by
label, 2 shards per client).  As in the paper the learning rate is tuned per
setting on a small grid; the reported number is the median over three seeds
(partition, initialisation, client sampling).  A final section compares
FedAvg with Agnostic Federated Learning on a Dirichlet label-skewed split.

Prints the tables and writes a figure (``--figure PATH``, default
docs/figures/fedavg_digits.png).  Runs in about 40 s on 2 shared cores (two
worker processes; measured 38 s), and prints its total time.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny matrices: BLAS threads only add overhead

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from vfl.cli import run_script  # noqa: E402
from vfl.horizontal import AgnosticFL, FedAvg, load_dataset, partition, split_clients  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIGURE = ROOT / "docs" / "figures" / "fedavg_digits.png"

N_CLIENTS, FRACTION, TARGET, MAX_ROUNDS, SEEDS = 20, 0.25, 0.95, 150, (0, 1, 2)
HIDDEN = (64, 64)
#: (name, E, B); B=None is McMahan's B = infinity (the whole local set).
SETTINGS = [("FedSGD", 1, None), ("FedAvg", 5, None), ("FedAvg", 1, 10), ("FedAvg", 5, 10), ("FedAvg", 20, 10)]
PARTITIONS = {"IID": "iid", "non-IID": "pathological"}


def learning_rates(batch_size):
    """Full-batch steps tolerate larger rates than minibatch ones (grid per setting, as McMahan)."""
    return (0.5, 1.0, 2.0) if batch_size is None else (0.1, 0.2, 0.3)


def clients_for(part: str, seed: int):
    X_train, X_test, y_train, y_test = load_dataset("digits", seed=0)
    parts = partition(y_train, N_CLIENTS, part, seed=seed)
    return split_clients(X_train, y_train, parts), X_test, y_test


def rounds_to_target(task):
    part, epochs, batch, lr, seed = task
    clients, X_test, y_test = clients_for(part, seed)
    est = FedAvg("mlp", num_rounds=MAX_ROUNDS, fraction_fit=FRACTION, local_epochs=epochs, batch_size=batch,
                 learning_rate=lr, hidden_layer_sizes=HIDDEN, target_accuracy=TARGET, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a too-large rate diverges: it just never reaches
        est.fit(clients, X_test, y_test)
    return task, est.rounds_to_target_


def accuracy_curve(task):
    part, epochs, batch, lr, seed = task
    clients, X_test, y_test = clients_for(part, seed)
    est = FedAvg("mlp", num_rounds=60, fraction_fit=FRACTION, local_epochs=epochs, batch_size=batch,
                 learning_rate=lr, hidden_layer_sizes=HIDDEN, random_state=seed).fit(clients, X_test, y_test)
    return task, est.history_["test_accuracy"].to_numpy()


def median_rounds(values):
    finite = [np.inf if v is None else v for v in values]
    return float(np.median(finite))


def table2(pool):
    tasks = [(part, e, b, lr, seed) for part in PARTITIONS.values() for _, e, b in SETTINGS
             for lr in learning_rates(b) for seed in SEEDS]
    results = dict(pool.map(rounds_to_target, tasks))
    best = {}  # (part, E, B) -> (median rounds, lr)
    for part in PARTITIONS.values():
        for _, e, b in SETTINGS:
            options = [(median_rounds([results[(part, e, b, lr, s)] for s in SEEDS]), lr) for lr in learning_rates(b)]
            best[(part, e, b)] = min(options)
    rows_per_client = sum(len(y) for _, y in clients_for("iid", 0)[0]) / N_CLIENTS
    print(f"\nRounds to reach {TARGET:.0%} test accuracy, 2NN {HIDDEN}, K={N_CLIENTS}, C={FRACTION} "
          f"(median of {len(SEEDS)} seeds; '-' = not within {MAX_ROUNDS} rounds)")
    header = f"{'':8s}{'E':>3s}{'B':>5s}{'u':>6s}"
    for label in PARTITIONS:
        header += f" | {label + ' rounds':>16s} {'eta':>5s}"
    print(header)
    for name, e, b in SETTINGS:
        u = e * (1 if b is None else rows_per_client / b)
        line = f"{name:8s}{e:3d}{'inf' if b is None else b:>5}{u:6.1f}"
        for part in PARTITIONS.values():
            rounds, lr = best[(part, e, b)]
            base = best[(part, 1, None)][0]
            text = "-" if np.isinf(rounds) else f"{rounds:.0f} ({base / rounds:.1f}x)"
            line += f" | {text:>16s} {lr:5.2f}"
        print(line)
    ratios = [best[(PARTITIONS["non-IID"], e, b)][0] / best[(PARTITIONS["IID"], e, b)][0] for _, e, b in SETTINGS]
    print(f"non-IID / IID rounds per setting: {' '.join(f'{r:.1f}x' for r in ratios)} "
          f"(range {min(ratios):.1f}x to {max(ratios):.1f}x)")
    return best


def plot(best, curves, path: Path):
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = [f"{n}\nE={e}, B={'inf' if b is None else b}" for n, e, b in SETTINGS]
    x = np.arange(len(SETTINGS))
    for offset, (label, part) in zip((-0.2, 0.2), PARTITIONS.items()):
        values = [best[(part, e, b)][0] for _, e, b in SETTINGS]
        shown = [MAX_ROUNDS if np.isinf(v) else v for v in values]
        left.bar(x + offset, shown, width=0.4, label=label)
    left.set_xticks(x, labels, fontsize=8)
    left.set_ylabel(f"rounds to {TARGET:.0%} test accuracy (median)")
    left.set_title("Communication rounds to target (lower is better)")
    left.legend()
    for (part, e, b, lr, _), acc in curves.items():
        style = "-" if part == "iid" else "--"
        name = "FedSGD" if (e, b) == (1, None) else f"FedAvg E={e}, B={b}"
        label = {v: k for k, v in PARTITIONS.items()}[part]
        right.plot(np.arange(1, acc.size + 1), acc, style, label=f"{name}, {label} (eta={lr})")
    right.axhline(TARGET, color="gray", lw=0.8)
    right.set_ylim(0.7, 1.0)
    right.set_xlabel("communication round")
    right.set_ylabel("test accuracy")
    right.set_title("Test accuracy per round (seed 0)")
    right.legend(fontsize=8)
    fig.suptitle("FedSGD vs FedAvg on digits (McMahan et al. 2017, Table 2 in miniature)")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def domain_test_losses(est, clients, X_test, y_test):
    """Test log loss re-weighted to each client's label mix (its domain)."""
    proba = est.predict_proba(X_test)
    losses = -np.log(np.clip(proba[np.arange(y_test.size), np.searchsorted(est.classes_, y_test)], 1e-300, None))
    per_class = np.array([losses[y_test == c].mean() for c in est.classes_])
    return np.array([np.bincount(y, minlength=per_class.size) / y.size @ per_class for _, y in clients])


def afl_section():
    X_train, X_test, y_train, y_test = load_dataset("digits", seed=0)
    parts = partition(y_train, 10, "dirichlet", alpha=0.2, seed=3)
    clients = split_clients(X_train, y_train, parts)
    kw = dict(num_rounds=300, fraction_fit=1.0, batch_size=None, learning_rate=0.5, l2=0.01, random_state=0)
    print("\nAgnostic FL vs FedAvg: digits, 10 clients = 10 domains, Dirichlet(0.2) label skew, "
          f"sizes {min(map(len, parts))}..{max(map(len, parts))}; softmax regression, 300 rounds")
    print(f"{'':8s}{'worst-domain train loss':>25s}{'mean train loss':>17s}{'worst-domain test loss':>24s}"
          f"{'test accuracy':>15s}")
    for name, est in (("FedAvg", FedAvg(**kw)), ("AFL", AgnosticFL(lambda_learning_rate=0.5, **kw))):
        est.fit(clients, X_test, y_test)
        train = est.client_losses(clients)
        test = domain_test_losses(est, clients, X_test, y_test)
        mean = np.average(train, weights=[len(p) for p in parts])
        print(f"{name:8s}{train.max():25.3f}{mean:17.3f}{test.max():24.3f}{est.score(X_test, y_test):15.3f}")
        if name == "AFL":
            print("AFL mixture weights lambda:", " ".join(f"{v:.2f}" for v in est.lambda_))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--figure", type=Path, default=FIGURE, metavar="PATH",
                        help="where to write the PNG figure (default: docs/figures/fedavg_digits.png)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=2) as pool:
        best = table2(pool)
        shown = [(1, None), (5, 10)]
        tasks = [(part, e, b, best[(part, e, b)][1], 0) for part in PARTITIONS.values() for e, b in shown]
        curves = dict(pool.map(accuracy_curve, tasks))
    plot(best, curves, args.figure)
    print(f"figure written to {args.figure}")
    afl_section()
    print(f"\ntotal time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main))
