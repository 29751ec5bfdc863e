"""``python -m benchmarks --compute``: where the encrypted work runs, side by side on the same cores.

For each size, training runs (:mod:`benchmarks.run_vfl`, a fresh process each) with
the engine's parallel work on each backend in turn, ``--repeats`` rounds
interleaved so that the machine's other load hits every backend alike:

* ``local``: vfl's own worker processes (the default);
* ``loky``: ``joblib.parallel_config(backend="loky")``, as many workers as cores;
* ``dask``: ``joblib.parallel_config(backend="dask")`` on a ``distributed.LocalCluster``
  with one single-threaded worker process per core, started in the training
  process (its scheduler shares the cores too);
* ``inline``: ``n_jobs=1``, every party doing its own work in its own thread:
  each party's thread CPU time is then all of its work, which gives the cost per
  row on one core.

It prints the median seconds per iteration of each backend, its overhead against
``local``, the calls and tasks sent per iteration, the load average before each
run, and from the ``inline`` runs each party's CPU cost per row and the cores it
needs for 10^6 and 10^7 rows per epoch.
"""

from __future__ import annotations

import sys

import numpy as np

#: Rows per epoch and target epoch times (seconds) of the cores-needed estimate.
SCALES = (1_000_000, 10_000_000)
TARGETS = ((3600.0, "1 h"), (600.0, "10 min"))


def _steady(figures: dict) -> float:
    return float(np.mean(figures["iterations"])) if figures["iterations"] else figures["first"]


def compute_series(args, run_vfl, load, table) -> list[dict]:
    """Run every backend of ``args.compute`` on every size of ``args.sizes``; print the comparison."""
    from tqdm import tqdm

    backends = args.compute
    entries = []
    total = len(args.sizes) * len(backends) * max(1, args.repeats)
    with tqdm(total=total, desc="compute backends", unit="run", file=sys.stderr, leave=False) as bar:
        for rows in args.sizes:
            iterations = args.iterations or (5 if rows < 10_000 else 3)
            runs = {b: [] for b in backends}
            for _ in range(max(1, args.repeats)):
                for backend in backends:
                    before = load()
                    figures = run_vfl(rows, args.features, args.key_bits, iterations, args.engine, 1, False, backend)
                    figures["load_before"], figures["load_after"] = before, load()
                    runs[backend].append(figures)
                    bar.update(1)
            entries.append({"rows": rows, "iterations": iterations, "runs": runs,
                            "median": {b: float(np.median([_steady(r) for r in rs])) for b, rs in runs.items()}})
    calls = overheads(backends, load)
    print()
    print(comparison_table(entries, table))
    print()
    print(table([[c["backend"], f"{c['median_ms']:.2f}", f"{c['p90_ms']:.2f}", c["load_before"].split()[0]]
                 for c in calls], ["backend", "one call of 2 tasks, median ms", "90th percentile ms",
                                   "load avg before"]))
    print()
    for line in cost_lines(entries, args.features):
        print(line)
    print(f"load average at end: {load()}")
    return {"sizes": entries, "call_overhead": calls}


def call_overhead(backend: str, calls: int = 40) -> dict:
    """Round trip of one ``workers.run`` call of two trivial tasks on ``backend`` (median ms), in this process."""
    import time

    from benchmarks.run_vfl import compute_backend
    from vfl.crypto import compute, workers
    from vfl.crypto.fast import _task_product

    tasks = [(2 ** 4096 + 1, [3, 5])] * 2
    with compute_backend(backend) as n_jobs:
        with compute.use(compute.capture(n_jobs)):
            for _ in range(3):
                workers.run(_task_product, tasks)           # start the workers, import vfl in them
            times = []
            for _ in range(calls):
                began = time.perf_counter()
                workers.run(_task_product, tasks)
                times.append(time.perf_counter() - began)
    workers.shutdown()
    return {"backend": backend, "median_ms": float(np.median(times)) * 1e3,
            "p90_ms": float(np.percentile(times, 90)) * 1e3}


def overheads(backends: list, load) -> list[dict]:
    """:func:`call_overhead` of each backend, each in a fresh process."""
    import json
    import subprocess

    out = []
    for backend in backends:
        if backend == "inline":
            continue
        before = load()
        done = subprocess.run([sys.executable, "-m", "benchmarks.compute", backend], stdout=subprocess.PIPE,
                              text=True, check=True)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        figures["load_before"] = before
        out.append(figures)
    return out


def comparison_table(entries: list, table) -> str:
    body = []
    for e in entries:
        local = e["median"].get("local")
        for backend, runs in e["runs"].items():
            median = e["median"][backend]
            tasks = runs[len(runs) // 2].get("tasks", {})
            sent = ", ".join(f"{v:g} {k}" for k, v in sorted(tasks.items()) if v) or "-"
            body.append([e["rows"], backend, f"{median:.3f}", ", ".join(f"{_steady(r):.3f}" for r in runs),
                         f"{(median / local - 1) * 100:+.1f}%" if local and backend != "local" else "-", sent,
                         ", ".join(r["load_before"].split()[0] for r in runs)])
    return table(body, ["rows", "backend", "median s/iter", "runs s/iter (interleaved)", "vs local",
                        "per iteration (median run)", "load avg before each run"])


def cost_lines(entries: list, features: int) -> list[str]:
    """Each party's CPU seconds per row per epoch (from ``inline`` runs) and the cores it needs at scale."""
    measured = [e for e in entries if "inline" in e["runs"]]
    if not measured:
        return ["(no inline runs: add 'inline' to --compute for the cost per row)"]
    e = max(measured, key=lambda e: e["rows"])
    rows = e["rows"]
    lines = [f"CPU cost per row per epoch, one core per party (inline runs, {rows} rows x {features} features, "
             f"full batch; A holds 20 columns, B the other {features - 20} and the intercept):"]
    for party in ("A", "B", "C"):
        per_iter = [r["parties"][party]["cpu"] for r in e["runs"]["inline"] if r["parties"][party]["cpu"]]
        if not per_iter:
            continue
        if party == "C":        # C decrypts a few values per batch: its cost does not grow with the rows
            lines.append(f"  party C: {float(np.median(per_iter)) * 1e3:.0f} ms per batch (it decrypts one value "
                         f"per weight, plus the loss), whatever the rows")
            continue
        per_row = float(np.median(per_iter)) / rows
        needs = "; ".join(f"{n:,} rows in {label}: {n * per_row / seconds:.3g} cores"
                          for n in SCALES for seconds, label in TARGETS)
        lines.append(f"  party {party}: {per_row * 1e6:.0f} us per row  ->  {needs}")
    local, inline = e["median"].get("local"), e["median"].get("inline")
    if local and inline:
        lines.append(f"  (local worker processes against one core per party at {rows} rows: {inline / local:.2f}x)")
    return lines


if __name__ == "__main__":
    import json

    print(json.dumps(call_overhead(sys.argv[1])))
