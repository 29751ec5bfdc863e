"""``python -m benchmarks --shared``: the price of hiding the gradients, the shared protocol beside Yang's.

For each size it trains the same logistic regression (same data, settings and start:
:mod:`benchmarks.run_shared`) with Yang's protocol unpacked, Yang's packed (vfl's
default) and the shared protocol unpacked and packed (``--shared-protocols`` picks some),
every run in a fresh process, interleaved in each of ``--repeats`` rounds so that the machine's other load falls on all of them.
It prints, per size and protocol, the median seconds per epoch (the first epoch, with
key generation and start-up, left out) with every run's figure and the load average
before it, the shared protocol's time over Yang's (medians of the per-round ratios, wall and CPU), and where the work and the bytes
go: per party, encryptions, re-randomizations, multi-exponentiation terms, long-exponent
terms, decryptions and bytes sent per epoch, and the seconds each party spends on each
message it sends.  The shared run's weights are checked against Yang's (the same
gradient descent from zero: equal within the fixed-point precision), and the packed
shared run's against the unpacked one's (bit-identical).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import numpy as np

PROTOCOLS = ("yang", "yang-packed", "shared", "shared-packed")
#: (numerator, denominator) of the ratios printed, when both ran
RATIOS = (("shared", "yang"), ("shared", "yang-packed"), ("shared-packed", "yang-packed"), ("shared-packed", "shared"))
COUNTS = (("encryptions", "enc"), ("rerandomizations", "rerand"), ("multiexp_terms", "multiexp terms"),
          ("long_exponent_terms", "long-exp terms"), ("scalar_products", "scalar prod"),
          ("decryptions", "dec"))


def run_one(protocol: str, rows: int, features: int, key_bits: int, epochs: int, batch_size: int | None,
            feature_parties: int = 1) -> dict:
    """One training run in a fresh process (:mod:`benchmarks.run_shared`)."""
    command = [sys.executable, "-m", "benchmarks.run_shared", protocol, str(rows), str(features), str(key_bits),
               str(epochs), str(batch_size or 0), str(feature_parties)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    # the CPU seconds of the whole run, its worker processes' too: what another job's load barely moves
    figures["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return figures


def steady(run: dict) -> float:
    """Seconds per epoch after the first."""
    later = run["epochs"][1:] or run["epochs"]
    return float(np.median(later))


def _chosen(args) -> tuple:
    chosen = tuple(args.shared_protocols or PROTOCOLS)
    unknown = set(chosen) - set(PROTOCOLS)
    if unknown:
        raise SystemExit(f"--shared-protocols: unknown {sorted(unknown)}; choose from {', '.join(PROTOCOLS)}")
    return chosen


def _largest_difference(a: dict, b: dict) -> float:
    return max(float(np.max(np.abs(np.subtract(a["params"][party], b["params"][party])))) for party in a["params"])


def steady_cpu(run: dict) -> float:
    """CPU seconds per epoch after the first (the parties' process and its workers)."""
    later = run["cpu_epochs"][1:] or run["cpu_epochs"]
    return float(np.median(later))


def series(args, load, progress=None) -> list[dict]:
    """Every size: ``--repeats`` rounds of the chosen protocols, interleaved; their runs and medians."""
    epochs = args.iterations or 4
    chosen = _chosen(args)
    out = []
    for rows in args.sizes:
        runs = {p: [] for p in chosen}
        for _ in range(args.repeats):
            for protocol in chosen:
                before = load()
                figures = run_one(protocol, rows, args.features, args.key_bits, epochs, args.shared_batch_size)
                figures["load_before"], figures["load_after"] = before, load()
                runs[protocol].append(figures)
                if progress:
                    progress()
        medians = {p: float(np.median([steady(r) for r in rs])) for p, rs in runs.items()}
        cpu_medians = {p: float(np.median([steady_cpu(r) for r in rs])) for p, rs in runs.items()}
        ratios = {f"{a} / {b}": {"wall": [steady(x) / steady(y) for x, y in zip(runs[a], runs[b])],
                                 "cpu": [x["cpu_s"] / y["cpu_s"] for x, y in zip(runs[a], runs[b])],
                                 "cpu_epoch": cpu_medians[a] / cpu_medians[b]}
                  for a, b in RATIOS if a in runs and b in runs}
        differences = {f"{a} - {b}": _largest_difference(runs[a][0], runs[b][0])
                       for a, b in (("shared", "yang"), ("shared-packed", "shared"), ("shared-packed", "yang"))
                       if a in runs and b in runs}
        out.append({"rows": rows, "features": args.features, "key_bits": args.key_bits, "epochs": epochs,
                    "batch_size": args.shared_batch_size, "runs": runs, "median_seconds": medians,
                    "median_cpu_seconds": cpu_medians,
                    "ratios": ratios, "max_weight_differences": differences})
    return out


def tables(results: list[dict], table) -> str:
    """The timing table, then per size the work and bytes per epoch by party, then where the time goes."""
    lines = []
    body = []
    for e in results:
        for protocol, runs in e["runs"].items():
            body.append([e["rows"], protocol, f"{e['median_cpu_seconds'][protocol]:.2f}",
                         ", ".join(f"{steady_cpu(r):.2f}" for r in runs), f"{e['median_seconds'][protocol]:.3f}",
                         ", ".join(f"{steady(r):.2f}" for r in runs),
                         ", ".join(f"{r['cpu_s']:.1f}" for r in runs),
                         ", ".join(r["load_before"].split()[0] for r in runs),
                         _bytes(np.median([r["bytes"]["all"] for r in runs]))])
    lines.append(table(body, ["rows", "protocol", "median CPU s/epoch", "runs CPU s/epoch", "median s/epoch",
                              "runs s/epoch (interleaved)",
                              f"CPU s of each whole run ({results[0]['epochs'] if results else '-'} epochs, start-up too)",
                              "load avg before each run", "bytes/epoch"]))
    for e in results:
        for name, ratio in e["ratios"].items():
            lines.append(f"{e['rows']} rows: {name} {ratio['cpu_epoch']:.2f}x in CPU seconds per epoch (ratio of the "
                         f"medians); {float(np.median(ratio['wall'])):.2f}x wall per epoch (median of the rounds: "
                         f"{', '.join(f'{v:.2f}' for v in ratio['wall'])}); CPU seconds of the whole run "
                         f"{float(np.median(ratio['cpu'])):.2f}x")
        for name, value in e["max_weight_differences"].items():
            lines.append(f"{e['rows']} rows: largest weight difference {name} {value:.1e}")
    for e in results:
        body = []
        for protocol, runs in e["runs"].items():
            for party, counts in runs[0]["counts"].items():
                body.append([protocol, party, *[f"{counts[key]:,.0f}" for key, _ in COUNTS],
                             _bytes(runs[0]["bytes"][party])])
        lines.append("")
        lines.append(f"{e['rows']} rows x {e['features']} features, per epoch:")
        lines.append(table(body, ["protocol", "party", *[label for _, label in COUNTS], "bytes sent"]))
        body = []
        for protocol, runs in e["runs"].items():
            seconds = {}
            for run in runs:
                for message, value in run["seconds"].items():
                    seconds.setdefault(message, []).append(value)
            top = sorted(((float(np.median(v)), m) for m, v in seconds.items()), reverse=True)[:5]
            body.append([protocol, "; ".join(f"{m} {s:.2f}" for s, m in top if s >= 0.005)])
        lines.append(table(body, ["protocol", "seconds per epoch a party spends on each message it sends (median)"]))
    return "\n".join(lines)


def _bytes(b) -> str:
    for unit, size in (("MB", 2 ** 20), ("kB", 2 ** 10)):
        if b >= size:
            return f"{b / size:.1f} {unit}"
    return f"{b:.0f} B"


def main_shared(args, machine, load, table) -> dict:
    """``--shared``: prints the tables; returns every figure (for ``--json``)."""
    from tqdm import tqdm

    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB; Python {info['python']}")
    print(f"load average at start: {load()}")
    total = len(args.sizes) * args.repeats * len(_chosen(args))
    with tqdm(total=total, desc="shared vs Yang", unit="run", file=sys.stderr, leave=False) as bar:
        results = series(args, load, bar.update)
    print()
    print(tables(results, table))
    print(f"\nload average at end: {load()}")
    return {"machine": info, "shared": results}
