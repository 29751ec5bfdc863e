"""``python -m benchmarks.woe`` (or ``python -m benchmarks --woe``): WOE/IV of a feature party's columns against its floor.

The WOE/IV step of :mod:`vfl.protocols.credit.woe` in-process (the label party and
one feature party in threads, vfl's worker processes on every core), 2048-bit keys
by default, on generated rows: the feature party's ``--columns`` columns binned in
``--bins`` quantile bins (a tenth of one column missing), the label party's one
column and a binary label.  It prints:

* the seconds of the step (key pair apart), wall clock, and the CPU seconds it
  took in this process and vfl's worker processes (read from ``/proc``);
* the **floor** the issue names: one encryption per row (the label party's one-hot
  classes) and one ciphertext multiplication per row per column (the feature
  party's bins), each at its single-core CPU cost measured in this process: in CPU
  seconds, and divided by the cores as the wall-clock floor of an idle machine;
* the load average before and after, and the machine.

On a machine shared with other jobs the wall clock and the single-core figures
move with the load; the CPU seconds (the step's against the floor's) do not, so
their ratio is the figure to quote.

The full default (10^6 rows by 50 columns) takes several minutes on 2 cores;
``--rows 100000`` about a tenth of it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import gmpy2
import numpy as np


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.woe", description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--columns", type=int, default=50, help="the feature party's columns")
    p.add_argument("--bins", type=int, default=10, help="quantile bins per column (a missing bin besides)")
    p.add_argument("--key-bits", type=int, default=2048)
    p.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    return p.parse_args(argv)


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def unit_costs(public_key, engine, samples: int = 2_000) -> dict:
    """CPU seconds of one encryption (a one-hot plaintext) and one multiplication modulo n^2, on one core."""
    from vfl.crypto import compute

    with compute.use(compute.capture(1)):                 # inline: one core, no worker processes
        plaintexts = [gmpy2.mpz(1) << (22 * (i % 2)) for i in range(samples)]
        start = time.process_time()
        ciphertexts = engine.encrypt(public_key, plaintexts)
        encrypt = (time.process_time() - start) / samples
    n2 = public_key.nsquare
    acc = gmpy2.mpz(1)
    start = time.process_time()
    for c in ciphertexts * 50:
        acc = acc * c % n2
    multiply = (time.process_time() - start) / (50 * samples)
    return {"encrypt": encrypt, "multiply": multiply}


def cpu_seconds() -> float:
    """CPU seconds so far of this process and of its live worker processes (user and system)."""
    from vfl.crypto import workers

    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK")
    for worker in [w for pool in list(workers._POOLS.values()) for w in pool.workers]:
        try:
            with open(f"/proc/{worker.process.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


def run(args) -> dict:
    from vfl import inprocess
    from vfl.crypto import compute, generate_keypair
    from vfl.crypto.workers import worker_count
    from vfl.parties.binning import Binner
    from vfl.parties.credit.feature_party import WOEFeatureParty
    from vfl.parties.credit.label_party import WOELabelParty
    from vfl.protocols import Roster
    from vfl.transport import Transcript

    rng = np.random.default_rng(0)
    n, m = args.rows, args.columns
    x = rng.normal(size=(n, m)).astype(np.float64)
    x[rng.random(n) < 0.1, 0] = np.nan
    own = rng.normal(size=(n, 1))
    y = (x[:, 1] + own[:, 0] + rng.normal(size=n) > 1).astype(int)
    started = time.perf_counter()
    binner = Binner(args.bins).fit(x)
    codes = binner.transform(x)
    own_binner = Binner(args.bins).fit(own)
    binning = time.perf_counter() - started
    feature = WOEFeatureParty(codes, binner, "telco")
    label = WOELabelParty(own_binner.transform(own), own_binner, y, "bank")
    del x
    load_before = _load()
    transcript = Transcript()
    insecure = args.key_bits < 2048
    started = time.perf_counter()
    generate_keypair(args.key_bits, insecure=insecure)        # what the step's key pair costs, apart
    keys = time.perf_counter() - started
    cpu = cpu_seconds()                                     # workers started now count from their start
    started = time.perf_counter()
    inprocess.woe({"telco": feature, "bank": label}, Roster(("telco",), "bank", None), args.key_bits, insecure,
                  transcript)
    total = time.perf_counter() - started
    cpu = cpu_seconds() - cpu
    load_after = _load()
    cores = max(1, worker_count() or os.cpu_count() or 1)
    costs = unit_costs(label.context.public_key, label.context.engine)
    frame = transcript.to_frame()
    floor_cpu = n * costs["encrypt"] + n * m * costs["multiply"]
    return {"rows": n, "columns": m, "bins": args.bins, "key_bits": args.key_bits, "cores": cores,
            "machine": platform.processor() or platform.machine(), "cpu": _cpu(),
            "load_before": load_before, "load_after": load_after, "binning_seconds": binning,
            "key_pair_seconds": keys, "step_seconds": total, "step_cpu_seconds": cpu,
            "floor_cpu_seconds": floor_cpu, "floor_seconds": floor_cpu / cores,
            "encrypt_us": costs["encrypt"] * 1e6, "multiply_us": costs["multiply"] * 1e6,
            "bytes": int(frame["bytes"].sum()), "iv_top": float(np.max(label.ivs("telco")))}


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.key_bits < 2048:
        print(f"warning: {args.key_bits}-bit keys are insecure; use them to try the benchmark, not to quote it")
    print(f"WOE/IV of {args.rows:,} rows x {args.columns} feature-party columns, {args.bins} bins, "
          f"{args.key_bits}-bit keys; load average {_load()}", flush=True)
    report = run(args)
    print(f"machine: {report['cpu']}, {report['cores']} cores; load average before {report['load_before']}, "
          f"after {report['load_after']}")
    print(f"one core, CPU time: one encryption {report['encrypt_us']:.1f} us, one multiplication mod n^2 "
          f"{report['multiply_us']:.2f} us")
    print(f"the step (key pair apart, {report['key_pair_seconds']:.2f} s): {report['step_seconds']:.1f} s wall clock, "
          f"{report['step_cpu_seconds']:.1f} CPU seconds; its floor (one encryption per row, one multiplication per "
          f"row and column): {report['floor_cpu_seconds']:.1f} CPU seconds, {report['floor_seconds']:.1f} s over "
          f"{report['cores']} idle cores; CPU ratio {report['step_cpu_seconds'] / report['floor_cpu_seconds']:.2f}")
    print(f"binning (each party, local): {report['binning_seconds']:.1f} s; bytes sent: {report['bytes']:,}; "
          f"largest IV {report['iv_top']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
