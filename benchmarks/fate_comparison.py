"""vfl against FATE 2.2 on FATE's own example data, measured side by side on this machine.

Not part of the package or the tests: it needs FATE's CSV files (which a user of vfl does not have)
and, for the FATE side, FATE itself in a virtualenv of its own (see ``benchmarks/fate_run.py`` for
the install commands; FATE is never a dependency of vfl).

    python benchmarks/fate_comparison.py --data-dir ../shared/datasets/fate                # the timed comparison
    python benchmarks/fate_comparison.py --data-dir ../shared/datasets/fate --repeats 1 --datasets breast
    python benchmarks/fate_comparison.py --data-dir ../shared/datasets/fate --quality      # accuracy only, no FATE

The timed comparison runs, for each repeat and each data set, FATE, vfl unpacked and vfl packed one
after the other (interleaved, so that the machine's other load falls on all three), every run in a
fresh process, and reports medians over the repeats:

* per-epoch training time: the median of each run's epochs after the first (the first includes
  key generation; vfl's also its DJN tables and worker processes), and the whole ``fit`` divided
  by the epochs;
* the train AUC of each (FATE's own prediction at its guest; vfl's private prediction);
* the prediction time of all training rows (30,000 on default_credit);
* the load average (``uptime``) before and after every run.

Settings, FATE's where vfl has them (2048-bit Paillier keys, logistic regression, intercept):

* breast (569 rows; guest 10 columns and the label, host 20): RMSprop, learning rate 0.15, L2 0.01,
  full batch, 5 epochs, FATE's uniform random start (seed 42) / vfl's secret random start;
* default_credit (30,000 rows; guest 13 columns and the label, host 10): FATE's
  ``examples/benchmark_quality/lr/default_credit_config.yaml``: RMSprop, learning rate 0.12 under a
  linear schedule from 0.7x over 1,000 steps (0.084 to 0.0845 over 16 epochs; vfl: constant 0.084),
  L2 0.1, batches of 10,000, 16 epochs, zero start.

Both run every epoch (FATE's arbiter tolerance 0, vfl's ``tol=None``); both RMSprops average squared
gradients with 0.99 (torch's default; vfl's ``rho`` since 1f96244, 0.9 before: docs/fate_comparison.md
measures what that changed, with ``python -m vfl.bench --quality``).  What still differs: which rows
form each batch (FATE's DataLoader, vfl's seeded shuffle); FATE encodes with 23 fractional bits,
vfl with 32; FATE's arbiter decrypts every gradient in the clear, vfl's coordinator sees only masked
values; FATE's prediction sends the host's partial scores to the guest in the clear, vfl's only
lets B learn the scores.  FATE aligns the rows by its ECDH PSI (not timed); vfl gets the rows
aligned by sorting both files on the id.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import mean_squared_error, r2_score, roc_auc_score

HERE = Path(__file__).resolve().parent
SYSTEMS = ("FATE", "vfl", "vfl packed")

#: Per data set: the files' stem, FATE's settings (fate_run.py arguments) and vfl's.
DATASETS = {
    "breast": {
        "epochs": 5,
        "fate": ["--lr", "0.15", "--alpha", "0.01", "--batch_size", "0", "--init", "random_uniform",
                 "--random_state", "42", "--scheduler", "constant"],
        "vfl": dict(learning_rate=0.15, alpha=0.01, batch_size=None, init="random", solver="gd"),
    },
    "default_credit": {
        "epochs": 16,
        "fate": ["--lr", "0.12", "--alpha", "0.1", "--batch_size", "10000", "--init", "zeros",
                 "--scheduler", "linear", "--start_factor", "0.7", "--total_iters", "1000"],
        "vfl": dict(learning_rate=0.12 * 0.7, alpha=0.1, batch_size=10000, init="zeros", insecure=True, solver="gd"),
    },
}


def load(data_dir: Path, name: str, id_column: str = "id", label: str = "y"):
    """FATE's hetero files as a VerticalDataset, rows aligned by sorting both on the id."""
    from vfl import VerticalDataset

    guest = pd.read_csv(data_dir / f"{name}_hetero_guest.csv").sort_values(id_column).reset_index(drop=True)
    host = pd.read_csv(data_dir / f"{name}_hetero_host.csv").sort_values(id_column).reset_index(drop=True)
    host = host.rename(columns={c: f"host_{c}" for c in host.columns if c != id_column})
    return VerticalDataset({"host": host, "guest": guest}, label=label, id_column=id_column)


def pooled(data) -> np.ndarray:
    return np.hstack([data.features(data.feature_party), data.features(data.label_party)])


def load_average() -> dict:
    """``uptime``'s line and the 1-minute load average."""
    line = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"uptime": line, "load1": os.getloadavg()[0]}


# --------------------------------------------------------------------------- one run, in its own process

def run_vfl(data_dir: Path, dataset: str, packing: bool, key_bits: int, epochs: int) -> dict:
    """Train and predict with vfl once; the figures of :func:`summarise`'s records."""
    import vfl
    import vfl.linear_model as linear_model
    from vfl import VerticalLogisticRegression

    marks = []

    class EpochClock:   # stands in for the progress bar: the estimator calls epoch() as each epoch ends
        def epoch(self, epoch, loss):
            marks.append(time.perf_counter())

        def close(self):
            pass

    linear_model._progress = lambda verbose, total: EpochClock()
    data = load(data_dir, dataset)
    model = VerticalLogisticRegression(optimizer="rmsprop", max_iter=epochs, tol=None, key_bits=key_bits,
                                       # FATE's run starts at zero: init="zeros" is acknowledged by insecure=True
                                       insecure=key_bits < 2048 or DATASETS[dataset]["vfl"]["init"] == "zeros",
                                       random_state=0, packing=packing, **DATASETS[dataset]["vfl"])
    start = time.perf_counter()
    model.fit(data)
    end = time.perf_counter()
    start_predict = time.perf_counter()
    proba = model.predict_proba(data)
    predict_s = time.perf_counter() - start_predict
    bounds = [start] + marks
    return {"rows": data.n_rows, "auc": float(roc_auc_score(data.labels, proba)), "fit_s": end - start,
            "epoch_s": [b - a for a, b in zip(bounds, bounds[1:])], "predict_s": predict_s,
            "versions": {"vfl": vfl.__version__, "python": platform.python_version()},
            "key_bits": key_bits}


def run_fate(args, dataset: str, epochs: int) -> dict:
    """One FATE run: ``fate_run.py`` under FATE's interpreter, its three parties in three processes."""
    with tempfile.TemporaryDirectory(prefix="fate-run-") as tmp:
        out, log = Path(tmp) / "result.json", Path(tmp) / "log.txt"
        command = [args.fate_python, str(HERE / "fate_run.py"),
                   "--parties", "guest:9999", "host:10000", "arbiter:10000", "--log_level", "WARNING",
                   "--data_dir", str(Path(tmp) / "store"),
                   "--guest_data", str(args.data_dir / f"{dataset}_hetero_guest.csv"),
                   "--host_data", str(args.data_dir / f"{dataset}_hetero_host.csv"),
                   "--epochs", str(epochs), "--key_bits", str(args.key_bits), "--out", str(out),
                   *DATASETS[dataset]["fate"]]
        with open(log, "w") as handle:
            code = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT).returncode
        if code != 0 or not out.exists():
            tail = log.read_text(errors="replace").splitlines()[-40:]
            raise RuntimeError(f"the FATE run on {dataset} failed (exit code {code}); the end of its log:\n"
                               + "\n".join(tail))
        return json.loads(out.read_text())


def run_one(args, system: str, dataset: str, epochs: int) -> dict:
    """One run in a fresh process (FATE: its own interpreter; vfl: this script with ``--single``)."""
    before = load_average()
    if system == "FATE":
        record = run_fate(args, dataset, epochs)
    else:
        command = [sys.executable, str(Path(__file__).resolve()), "--data-dir", str(args.data_dir),
                   "--key-bits", str(args.key_bits), "--single", system, dataset, str(epochs)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"the {system} run on {dataset} failed:\n{done.stderr[-3000:]}")
        record = json.loads(done.stdout.strip().splitlines()[-1])
    after = load_average()
    record.update(system=system, dataset=dataset, epochs=epochs, load_before=before, load_after=after)
    return record


# --------------------------------------------------------------------------- the table

def steady(record: dict) -> float:
    """Median seconds of the run's epochs after the first."""
    epochs = record["epoch_s"]
    return statistics.median(epochs[1:] if len(epochs) > 1 else epochs)


def summarise(records: list, datasets: list) -> tuple[pd.DataFrame, list]:
    """One row per data set and system (medians over repeats), and the ratio lines."""
    rows, lines = [], []
    for dataset in datasets:
        by = {s: [r for r in records if r["dataset"] == dataset and r["system"] == s] for s in SYSTEMS}
        median = {s: statistics.median(steady(r) for r in by[s]) for s in SYSTEMS if by[s]}
        for system in SYSTEMS:
            runs = by[system]
            if not runs:
                continue
            rows.append({
                "data": dataset, "system": system,
                "s/epoch (runs)": ", ".join(f"{steady(r):.2f}" for r in runs),
                "s/epoch median": round(median[system], 3),
                "fit/epochs median": round(statistics.median(r["fit_s"] / r["epochs"] for r in runs), 3),
                "FATE / this": round(median["FATE"] / median[system], 2) if "FATE" in median else None,
                "AUC": ", ".join(f"{r['auc']:.6f}" for r in runs),
                "predict s median": round(statistics.median(r["predict_s"] for r in runs), 3),
                "load before/after": "; ".join(f"{r['load_before']['load1']:.2f}/{r['load_after']['load1']:.2f}"
                                               for r in runs),
            })
        if "FATE" not in median:
            continue
        for system in SYSTEMS[1:]:
            if system not in median:
                continue
            paired = [steady(f) / steady(v) for f, v in zip(by["FATE"], by[system])]
            lines.append(f"{dataset}: {system} trains {median['FATE'] / median[system]:.2f}x faster per epoch than "
                         f"FATE (medians {median[system]:.2f} s against {median['FATE']:.2f} s; paired "
                         f"ratios by repeat {', '.join(f'{p:.2f}' for p in paired)})")
        if dataset == "default_credit" and "vfl packed" in median:
            ratio, need = median["FATE"] / median["vfl packed"], median["FATE"] / 8
            verdict = ("met" if ratio >= 8 else
                       f"missed: {8 / ratio:.2f}x too slow ({median['vfl packed']:.2f} s, needs <= {need:.2f} s)")
            lines.append(f"goal >= 8x FATE per epoch on default_credit, packed vfl: {ratio:.2f}x, {verdict}")
            fate_p = statistics.median(r["predict_s"] for r in by["FATE"])
            for system in SYSTEMS[1:]:
                p = statistics.median(r["predict_s"] for r in by[system])
                lines.append(f"default_credit prediction of 30,000 rows: {system} {p:.2f} s, FATE {fate_p:.2f} s "
                             f"(FATE / {system} = {fate_p / p:.2f})")
    return pd.DataFrame(rows), lines


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True)
    return f"{model}, {os.cpu_count()} CPUs, Python {platform.python_version()}, vfl at {commit.stdout.strip()}"


def compare(args) -> None:
    datasets = args.datasets.split(",")
    epochs = {"breast": args.breast_epochs or DATASETS["breast"]["epochs"],
              "default_credit": args.credit_epochs or DATASETS["default_credit"]["epochs"]}
    print(f"machine: {machine()}; key bits {args.key_bits}; {args.repeats} repeats", flush=True)
    records = []
    for repeat in range(args.repeats):
        for dataset in datasets:
            for system in SYSTEMS:
                try:
                    record = run_one(args, system, dataset, epochs[dataset])
                except RuntimeError as error:   # one failed run is reported and left out, the others go on
                    print(f"[{repeat + 1}/{args.repeats}] {dataset} {system}: {error}", flush=True)
                    continue
                record["repeat"] = repeat
                records.append(record)
                print(f"[{repeat + 1}/{args.repeats}] {dataset:14s} {system:10s} s/epoch {steady(record):7.2f} "
                      f"(fit {record['fit_s']:.1f} s) AUC {record['auc']:.6f} predict {record['predict_s']:.2f} s; "
                      f"load {record['load_before']['load1']:.2f} -> {record['load_after']['load1']:.2f}",
                      flush=True)
                if args.json:
                    Path(args.json).write_text(json.dumps(records, indent=1))
    table, lines = summarise(records, datasets)
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 60):
        print(table.to_string(index=False))
    for line in lines:
        print(line)
    fate = next((r["versions"] for r in records if r["system"] == "FATE"), {})
    print(f"FATE versions: {fate}")


# --------------------------------------------------------------------------- accuracy only (no FATE, no timing)

def quality(args) -> None:
    """vfl on breast and motor beside the results FATE publishes and scikit-learn on the pooled data."""
    from vfl import VerticalLinearRegression, VerticalLogisticRegression

    keys = dict(key_bits=args.key_bits, insecure=args.key_bits < 2048)
    rows = []
    data = load(args.data_dir, "breast")
    for iters in (5, 30):
        model = VerticalLogisticRegression(learning_rate=0.15, max_iter=iters, alpha=0.01, tol=None, **keys)
        model.fit(data)
        auc = roc_auc_score(data.labels, model.predict_proba(data))
        rows.append(("breast, hetero LR", f"vfl GD lr 0.15, L2 0.01, full batch, {iters} it", "train AUC",
                     f"{auc:.6f}"))
    rows.append(("breast, hetero LR", "FATE (published) RMSprop lr 0.15, L2 0.01, 5 it", "train AUC", "0.975186"))
    sk = LogisticRegression(max_iter=1000).fit(pooled(data), data.labels)
    rows.append(("breast, hetero LR", "scikit-learn LogisticRegression, pooled", "train AUC",
                 f"{roc_auc_score(data.labels, sk.predict_proba(pooled(data))[:, 1]):.6f}"))

    data = load(args.data_dir, "motor", "idx", "motor_speed")
    model = VerticalLinearRegression(learning_rate=0.13, max_iter=6, alpha=0.01, batch_size=100, tol=None,
                                     random_state=0, **keys)
    model.fit(data)
    pred = model.predict(data)
    rows.append(("motor, hetero LinR", "vfl SGD lr 0.13, L2 0.01, batch 100, 6 epochs", "train RMSE / R2",
                 f"{mean_squared_error(data.labels, pred) ** 0.5:.5f} / {r2_score(data.labels, pred):.5f}"))
    rows.append(("motor, hetero LinR", "FATE (published), same settings, 1024-bit", "train RMSE / R2",
                 "0.31400 / 0.90314"))
    lin = LinearRegression().fit(pooled(data), data.labels)
    pred = lin.predict(pooled(data))
    rows.append(("motor, hetero LinR", "scikit-learn LinearRegression, pooled (exact)", "train RMSE / R2",
                 f"{mean_squared_error(data.labels, pred) ** 0.5:.5f} / {r2_score(data.labels, pred):.5f}"))
    print(f"key bits: {args.key_bits}")
    print(pd.DataFrame(rows, columns=["data", "method", "metric", "value"]).to_string(index=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="folder with FATE's *_hetero_*.csv files")
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--fate-python", default="/work/fate-venv/bin/python",
                        help="the interpreter of the virtualenv holding pyfate 2.2.0")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--datasets", default="breast,default_credit")
    parser.add_argument("--breast-epochs", type=int, default=None, help="default: 5")
    parser.add_argument("--credit-epochs", type=int, default=None,
                        help="default: 16, FATE's config (each FATE epoch takes over a minute here)")
    parser.add_argument("--json", help="also write every run's figures to this file")
    parser.add_argument("--quality", action="store_true", help="the accuracy table only (vfl GD, motor, scikit-learn)")
    parser.add_argument("--single", nargs=3, metavar=("SYSTEM", "DATASET", "EPOCHS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.data_dir = args.data_dir.resolve()
    if args.single:
        system, dataset, epochs = args.single
        print(json.dumps(run_vfl(args.data_dir, dataset, system == "vfl packed", args.key_bits, int(epochs))))
    elif args.quality:
        quality(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
