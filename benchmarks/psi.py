"""``python -m benchmarks --psi``: the private set intersection at 10^4, 10^5 and 10^6 ids per party.

For each size, the hub (B) and one spoke (A) run as two processes talking TLS
1.3 over loopback (fresh certificates in a temporary folder), exactly as two
parties of a federation would, each with its own lanes for the curve work
(threads of its process on the fast engine, worker processes on libsodium).  B holds
ids ``0..n-1`` and A holds ``n/2..3n/2-1``, each in its own random order, so
half are in common (``--psi-overlap F``: A holds the ``n - F*n`` following ones, so
``F*n`` are in common).  Each party process reports, as one JSON line:

* ``seconds``: wall time from connected to aligned;
* ``own_seconds``: of which hashing and blinding its own ids;
* ``cpu_seconds``: CPU time of the party process and its workers (``main_cpu_seconds``: the party process's);
* ``rss_mb`` / ``worker_rss_mb``: peak RSS of the party process / of its largest worker; ``workers``: how many
  worker processes it ran (the DH PSI's curve work on libsodium: one per core but one, the party's own thread
  working as the last lane); ``threads``: the lanes of its curve work when they were threads of the party
  process (the fast engine: one per core, the party's own thread among them), else 0.

* ``curve_engine``: the X25519 engine its ladders ran on (:func:`vfl.crypto.group.engine`), and if not
  Intel's multi-buffer one, why.

``--curve-engine ipp|libsodium|both`` chooses the engine (``VFL_CURVE_ENGINE`` in the party processes;
``both`` runs every size with each).

``--psi-protocol dh|kkrt|both`` chooses vfl's protocol: the Diffie–Hellman PSI (the default) or KKRT's
OPRF-based PSI (:mod:`vfl.protocols.psi_kkrt`, no worker processes, no curve per id: the X25519 engine
does not matter to it, so it runs once per size).  Each row then also gives the bytes a party sent per id
and what both directions together would take on a 100 Mbit/s and a 1 Gbit/s link.

Before the sizes, it times one party's crypto alone (no peer running): own ids
hashed and blinded, and a peer's points validated and blinded, per second, in
one process and with the worker processes.

On one 2-core machine **the two parties share the two cores**, so their wall
times are about twice what each would take on two cores of its own; the
report prints that estimate as a party's CPU seconds over 2.

``--against secretflow`` runs SecretFlow's PSI on the same ids beside it
(:mod:`benchmarks.psi_secretflow`, in SecretFlow's own interpreter).

``--psi-unbalanced LARGE,SMALL`` measures the unbalanced protocol (``psi_protocol = "unbalanced"``)
instead: the large party's offline OPRF, the small party's one fetch and the warm runs
(:mod:`benchmarks.psi_unbalanced`).

``python -m benchmarks.psi party ROLE N FOLDER PORT_A PORT_B [--progress] [--overlap F] [--protocol P]`` is
one party (used by the bench).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HUB, SPOKE = "B", "A"
#: The share of each party's ids the other holds too, by default.
OVERLAP = 0.5


def party_ids(role: str, n: int, overlap: float = OVERLAP) -> list[bytes]:
    """The bench's ids: B holds 0..n-1, A the n following n - overlap*n (by default n/2..3n/2-1); each in its
    own (non-secret) shuffled order.  benchmarks/secretflow_side/sf_psi.py makes the same ones."""
    import numpy as np

    start = 0 if role == HUB else n - int(round(overlap * n))
    values = np.arange(start, start + n)
    np.random.default_rng(1 if role == HUB else 2).shuffle(values)   # data layout only, nothing secret
    return [b"customer-%09d" % v for v in values.tolist()]


def run_party(role: str, n: int, folder: str, ports: tuple[int, int], progress: bool = False,
              overlap: float = OVERLAP, protocol: str = "dh") -> dict:
    """One party of the bench: connect, intersect, report."""
    from vfl.crypto import group, workers
    from vfl.protocols import psi_kkrt
    from vfl.protocols.psi import align_rows
    from vfl.transport import Endpoint
    from vfl.transport.network import NetworkTransport
    from vfl.transport.tls import TLSFiles

    ids = party_ids(role, n, overlap)
    addresses = {SPOKE: ("127.0.0.1", ports[0]), HUB: ("127.0.0.1", ports[1])}
    transport = NetworkTransport.connect(role, addresses, TLSFiles.in_folder(folder, role))
    peer = SPOKE if role == HUB else HUB
    endpoint = Endpoint(transport, [peer])
    marks: dict[str, float] = {}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(desc=f"PSI {n:,} x {n:,} (party {role})", unit="id", unit_scale=True, leave=False,
                   file=sys.stderr, mininterval=0.5)

    def on_progress(done: int, total: int) -> None:
        if done >= n and "own" not in marks:
            marks["own"] = time.perf_counter()
        if bar is not None:
            bar.total = total
            bar.update(done - bar.n)

    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    align = psi_kkrt.align_rows if protocol == "kkrt" else align_rows
    rows = align(endpoint, ids, HUB, [SPOKE], min_rows=1, on_progress=on_progress)
    seconds = time.perf_counter() - start
    if bar is not None:
        bar.close()
    transport.close()
    worker_rss = _worker_peak_rss_mb()
    worker_count = len([w for pool in list(workers._POOLS.values()) for w in pool.workers])
    workers.shutdown()
    engine = group.engine()
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"role": role, "n": n, "protocol": protocol, "intersection": int(len(rows)), "seconds": seconds,
            "own_seconds": marks.get("own", start) - start,
            "cpu_seconds": (me.ru_utime + me.ru_stime - cpu0.ru_utime - cpu0.ru_stime) + kids.ru_utime + kids.ru_stime,
            "main_cpu_seconds": me.ru_utime + me.ru_stime - cpu0.ru_utime - cpu0.ru_stime,
            "rss_mb": me.ru_maxrss / 1024, "worker_rss_mb": worker_rss,
            "workers": worker_count,
            "threads": workers.thread_lanes() if workers.STATS["thread tasks"] else 0,
            "bytes_sent": sum(r[5] for r in endpoint.transcript.records),
            "curve_engine": {k: engine.get(k) for k in ("engine", "reason", "ran", "curve_check", "version")}}


def _worker_peak_rss_mb() -> float:
    """The largest peak RSS (VmHWM) among this party's live worker processes, in MiB (0 if unknown)."""
    from vfl.crypto import workers

    peaks = [0.0]
    for worker in [w for pool in list(workers._POOLS.values()) for w in pool.workers]:
        try:
            with open(f"/proc/{worker.process.pid}/status") as f:
                peaks += [int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:")]
        except OSError:
            pass
    return max(peaks)


def micro(count: int = 1 << 15) -> list[dict]:
    """Hash-and-blind and blind rates, in this thread alone and on the plan's lanes (threads on the fast engine,
    worker processes on libsodium; both cores)."""
    import os

    from vfl.crypto import group, mb, workers

    ids = [b"customer-%09d" % i for i in range(count)]
    scalar = group.random_scalar()
    out = []
    saved = os.environ.get("VFL_WORKERS")
    try:
        for label, setting in (("1 process", "0"), ("worker processes", None)):
            if setting is None:
                os.environ.pop("VFL_WORKERS", None)
            else:
                os.environ["VFL_WORKERS"] = setting
            group.hash_to_group(ids[:64], b"warm-up")                  # start the workers outside the timing
            best = [float("inf"), float("inf")]
            for _ in range(2):                                          # best of two: less scheduling noise
                start = time.perf_counter()
                points = group.hash_and_blind(ids, b"bench", scalar)
                middle = time.perf_counter()
                group.blind(points, scalar)
                end = time.perf_counter()
                best = [min(best[0], middle - start), min(best[1], end - middle)]
            if setting is None:
                label = f"{workers.thread_lanes()} lanes ({'threads' if mb.releases_gil() else 'worker processes'})"
            out.append({"how": label, "workers": workers.worker_count() if setting is None else 0,
                        "hash_and_blind_per_s": count / best[0], "blind_per_s": count / best[1],
                        "engine": group.engine()["engine"]})
    finally:
        if saved is None:
            os.environ.pop("VFL_WORKERS", None)
        else:
            os.environ["VFL_WORKERS"] = saved
        workers.shutdown()
    return out


def run_size(n: int, progress: bool = True, overlap: float = OVERLAP, curve_engine: str = "auto",
             protocol: str = "dh") -> dict:
    """Both parties of one size as two processes (``VFL_CURVE_ENGINE=curve_engine``); their reports by role."""
    import os

    from vfl.federation.demo import free_ports
    from vfl.transport.tls import write_federation_certs

    with tempfile.TemporaryDirectory(prefix="vfl-psi-bench-") as folder:
        write_federation_certs(folder, [SPOKE, HUB])
        ports = free_ports(2)
        procs = {}
        for role in (HUB, SPOKE):
            cmd = [sys.executable, "-m", "benchmarks.psi", "party", role, str(n), folder, str(ports[0]),
                   str(ports[1]), "--overlap", repr(overlap), "--protocol", protocol] + \
                (["--progress"] if progress and role == HUB else [])
            procs[role] = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                                           env={**os.environ, "VFL_CURVE_ENGINE": curve_engine})
        outputs = {}
        threads = [threading.Thread(target=lambda r=r: outputs.__setitem__(r, procs[r].communicate()[0]))
                   for r in procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        reports = {}
        for role, proc in procs.items():
            if proc.returncode != 0:
                raise RuntimeError(f"PSI bench: party {role} failed with exit code {proc.returncode}")
            reports[role] = json.loads(outputs[role].strip().splitlines()[-1])
    return reports


def main_psi(sizes, json_path=None, overlap: float = OVERLAP, against: str | None = None,
             secretflow_python: str | None = None, curve_engines=("auto",), protocols=("dh",)) -> int:
    """Run the PSI bench for ``sizes`` (ids per party) and print the table.

    ``against="secretflow"`` also runs SecretFlow's PSI (ECDH, RR22, KKRT) on the same ids under the
    interpreter ``secretflow_python`` and prints both side by side.
    """
    if against == "secretflow":
        from benchmarks.psi_secretflow import check_secretflow_python

        check_secretflow_python(secretflow_python)          # before any run: a missing venv is said at once
    from benchmarks.machine import _fmt_s, load, machine
    from benchmarks.sidebyside import table

    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB; Python {info['python']}")
    print(f"load average at start: {load()}")
    print("PSI: hub B and spoke A as two processes over TLS on loopback, each with its own curve lanes (threads on "
          "the fast engine, worker processes on libsodium);")
    print(f"on one machine they share its cores.  {overlap:.0%} of each party's ids are in common.")
    import os

    from vfl.crypto import mb

    rates, results = [], []
    saved = os.environ.get("VFL_CURVE_ENGINE")
    try:
        for protocol in protocols:
            for choice in (curve_engines if protocol == "dh" else ("auto",)):
                os.environ["VFL_CURVE_ENGINE"] = choice
                if protocol == "dh":
                    print(f"X25519 engine ({choice}): {mb.describe()}")
                    rates += micro()
                for n in sizes:
                    load_before = load()
                    reports = run_size(n, overlap=overlap, curve_engine=choice, protocol=protocol)
                    results.append({"n": n, "reports": reports, "load_before": load_before, "load_after": load(),
                                    "curve_engine": choice, "protocol": protocol})
    finally:
        if saved is None:
            os.environ.pop("VFL_CURVE_ENGINE", None)
        else:
            os.environ["VFL_CURVE_ENGINE"] = saved
    print()
    header = ["ids per party", "protocol", "party", "wall s (cores shared)", "of which own ids", "CPU s",
              "CPU µs per id", "ids/s (wall)",
              "est. s on 2 own cores", "peak RSS party + workers", "sent", "sent B/id", "intersection"]
    body = []
    for result in results:
        for role in (HUB, SPOKE):
            r = result["reports"][role]
            how = "kkrt" if result.get("protocol") == "kkrt" else f"dh, {r['curve_engine']['engine']}"
            body.append([f"{result['n']:,}", how, f"{role} ({'hub' if role == HUB else 'spoke'})",
                         _fmt_s(r["seconds"]), _fmt_s(r["own_seconds"]), _fmt_s(r["cpu_seconds"]),
                         f"{r['cpu_seconds'] / result['n'] * 1e6:.1f}", f"{result['n'] / r['seconds']:,.0f}",
                         _fmt_s(r["cpu_seconds"] / (1 if result.get("protocol") == "kkrt"
                                                    or (r.get("workers") == 0 and not r.get("threads")) else 2)),
                         f"{r['rss_mb']:.0f} MB, {r['threads']} threads" if r.get("threads") else
                         f"{r['rss_mb']:.0f} + {r.get('workers', 2)} x {r['worker_rss_mb']:.0f} MB",
                         f"{r['bytes_sent'] / 2 ** 20:.1f} MB", f"{r['bytes_sent'] / result['n']:.0f}",
                         f"{r['intersection']:,}"])
    print(table(body, header))
    print("est. s on 2 own cores = the party's CPU seconds (its process, its threads and its workers) / 2 (kkrt, and a "
          "small set whose curve work stayed in the party's thread: its CPU seconds, one core); CPU µs per id = CPU s / ids "
          "per party")
    for result in results:
        both = sum(r["bytes_sent"] for r in result["reports"].values())
        print(f"{result['n']:,} ids, {result.get('protocol', 'dh')}: {both / result['n']:.0f} bytes per id on the "
              f"wire (both ways, vfl's frames; TLS records add about 0.2%): {both * 8 / 1e8:.1f} s at 100 Mbit/s, "
              f"{both * 8 / 1e9:.2f} s at 1 Gbit/s; load {result.get('load_before')} before, "
              f"{result['load_after']} after")
    for result in results:
        why = result["reports"][HUB]["curve_engine"].get("reason")
        if why and result.get("protocol", "dh") == "dh":
            print(f"{result['n']:,} ids ({result['curve_engine']}): libsodium ran because {why}")
    if rates:
        print()
        print(table([[m["how"], m["engine"], f"{m['hash_and_blind_per_s']:,.0f}", f"{m['blind_per_s']:,.0f}",
                      _fmt_s(1e6 / m["hash_and_blind_per_s"] + 1e6 / m["blind_per_s"])] for m in rates],
                    ["one party alone", "X25519", "own ids hashed + blinded /s", "peer points validated + blinded /s",
                     "crypto s for 10^6 x 10^6"]))
    others = []
    if against == "secretflow":
        from benchmarks.psi_secretflow import compare, rows

        print()
        others = compare(sizes, overlap, secretflow_python)
        print(table(rows(others, results), ["ids per party", "system", "party", "wall s (cores shared)",
                                            "CPU s (process, threads, children)", "sent", "intersection"]))
        print("both systems found the same intersection at every size (checked); SecretFlow's bytes are counted "
              "on the wire (TLS records), vfl's are its messages' bytes")
    print(f"\nload average at end: {load()}")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"machine": info, "overlap": overlap, "psi": results, "micro": rates,
                       "secretflow": others}, f, indent=2)
    return 0


def _party_main(argv) -> int:
    role, n, folder, port_a, port_b = argv[:5]
    overlap = float(argv[argv.index("--overlap") + 1]) if "--overlap" in argv else OVERLAP
    protocol = argv[argv.index("--protocol") + 1] if "--protocol" in argv else "dh"
    report = run_party(role, int(n), folder, (int(port_a), int(port_b)), progress="--progress" in argv,
                       overlap=overlap, protocol=protocol)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "party":
        sys.exit(_party_main(sys.argv[2:]))
    sys.exit(main_psi([10_000, 100_000]))
