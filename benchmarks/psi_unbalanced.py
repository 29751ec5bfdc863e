"""``python -m benchmarks --psi --psi-unbalanced LARGE,SMALL``: the unbalanced PSI, offline and online.

The large party B (the hub, ``LARGE`` ids) and the small party A (a spoke, ``SMALL`` ids, half of them
B's) run as two processes over TLS on loopback, as in :mod:`benchmarks.psi`, each with its caches in a
temporary folder:

1. **offline**: B alone evaluates its OPRF over its whole set (:func:`vfl.protocols.psi_unbalanced.prepare`),
   in a process of its own: wall and CPU seconds (the process and its workers), the cache file's size;
2. **first run**: A has no copy yet and fetches B's outputs (the once-per-key transfer);
3. **online run**, both caches warm: wall and CPU seconds per party, bytes each party sent.

``python -m benchmarks.psi_unbalanced prepare N FOLDER`` and ``... party ROLE N_LARGE N_SMALL FOLDER PORT_A
PORT_B`` are the processes (used by the bench).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.psi import HUB, SPOKE

LARGE, SMALL = HUB, SPOKE


def ids_of(role: str, n_large: int, n_small: int) -> list[bytes]:
    """B: ``0..n_large-1``; A: ``n_small/2`` of B's ids and ``n_small/2`` others (layout only, nothing secret)."""
    import numpy as np

    if role == LARGE:
        values = np.arange(n_large)
    else:
        half = n_small // 2
        values = np.r_[np.linspace(0, n_large - 1, half).astype(np.int64), n_large + np.arange(n_small - half)]
    np.random.default_rng(3 if role == LARGE else 4).shuffle(values)
    return [b"customer-%09d" % v for v in values.tolist()]


def _cpu(start) -> tuple[float, float]:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    main = me.ru_utime + me.ru_stime - start.ru_utime - start.ru_stime
    return main + kids.ru_utime + kids.ru_stime, main


def prepare(n: int, folder: str) -> dict:
    from vfl.crypto import group, workers
    from vfl.protocols import psi_unbalanced, upsi_cache

    ids = ids_of(LARGE, n, 1)
    cpu0, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    made = psi_unbalanced.prepare(ids, LARGE, Path(folder) / LARGE)
    seconds = time.perf_counter() - start
    workers.shutdown()
    cpu, main = _cpu(cpu0)
    return {"n": n, "seconds": seconds, "cpu_seconds": cpu, "main_cpu_seconds": main, "built": made["built"],
            "file_mb": upsi_cache.own_path(Path(folder) / LARGE).stat().st_size / 2 ** 20,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "curve_engine": group.engine_record()["engine"]}


def run_party(role: str, n_large: int, n_small: int, folder: str, ports: tuple[int, int]) -> dict:
    from vfl.crypto import workers
    from vfl.protocols import psi_unbalanced
    from vfl.transport import Endpoint
    from vfl.transport.network import NetworkTransport
    from vfl.transport.tls import TLSFiles

    ids = ids_of(role, n_large, n_small)
    addresses = {SPOKE: ("127.0.0.1", ports[0]), HUB: ("127.0.0.1", ports[1])}
    transport = NetworkTransport.connect(role, addresses, TLSFiles.in_folder(folder, role))
    peer = SPOKE if role == HUB else HUB
    endpoint = Endpoint(transport, [peer])
    report: dict = {}
    cpu0, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    rows = psi_unbalanced.align_rows(endpoint, ids, HUB, [SPOKE], 1, cache_dir=Path(folder) / role, report=report)
    seconds = time.perf_counter() - start
    transport.close()
    workers.shutdown()
    cpu, main = _cpu(cpu0)
    return {"role": role, "intersection": int(len(rows)), "seconds": seconds, "cpu_seconds": cpu,
            "main_cpu_seconds": main, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "bytes_sent": sum(r[5] for r in endpoint.transcript.records), "built": report["built"],
            "fetched": report["fetched"]}


def _run(cmds: dict) -> dict:
    procs = {role: subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for role, cmd in cmds.items()}
    outputs = {}
    threads = [threading.Thread(target=lambda r=r: outputs.__setitem__(r, procs[r].communicate()[0])) for r in procs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for role, proc in procs.items():
        if proc.returncode != 0:
            raise RuntimeError(f"unbalanced PSI bench: {role} failed with exit code {proc.returncode}")
    return {role: json.loads(outputs[role].strip().splitlines()[-1]) for role in procs}


def run_pair(n_large: int, n_small: int, online_runs: int = 2) -> dict:
    """Offline, the first run (fetch) and ``online_runs`` warm runs of one pair of sizes."""
    from vfl.federation.demo import free_ports
    from vfl.transport.tls import write_federation_certs

    from benchmarks.machine import load

    me = [sys.executable, "-m", "benchmarks.psi_unbalanced"]
    with tempfile.TemporaryDirectory(prefix="vfl-upsi-bench-") as folder:
        write_federation_certs(folder, [SPOKE, HUB])
        out = {"n_large": n_large, "n_small": n_small, "load_before": load()}
        out["offline"] = _run({"prepare": me + ["prepare", str(n_large), folder]})["prepare"]
        out["load_after_offline"] = load()
        out["runs"] = []
        for _ in range(1 + online_runs):
            ports = free_ports(2)
            out["runs"].append(_run({role: me + ["party", role, str(n_large), str(n_small), folder, str(ports[0]),
                                                 str(ports[1])] for role in (HUB, SPOKE)}))
        out["load_after"] = load()
    return out


def main(pairs, json_path=None) -> int:
    from benchmarks.machine import _fmt_s, load, machine
    from benchmarks.sidebyside import table

    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB; Python {info['python']}")
    print(f"load average at start: {load()}")
    print("Unbalanced PSI: the large party B (hub) and the small party A (spoke) as two processes over TLS on "
          "loopback;\nhalf of A's ids are B's.  Offline: B alone.  CPU = the process and its worker processes.")
    results = [run_pair(n_large, n_small) for n_large, n_small in pairs]
    body = []
    for r in results:
        off = r["offline"]
        body.append([f"{r['n_large']:,} x {r['n_small']:,}", "offline (B alone)", _fmt_s(off["seconds"]),
                     _fmt_s(off["cpu_seconds"]), f"{off['cpu_seconds'] / r['n_large'] * 1e6:.1f} µs/id",
                     f"cache {off['file_mb']:.0f} MB", "", r["load_after_offline"]])
        for k, run in enumerate(r["runs"]):
            what = "first run (A fetches)" if k == 0 else f"online run {k}"
            b, a = run[HUB], run[SPOKE]
            body.append(["", what, f"{_fmt_s(b['seconds'])} / {_fmt_s(a['seconds'])}",
                         f"{_fmt_s(b['cpu_seconds'])} / {_fmt_s(a['cpu_seconds'])}", "",
                         f"{b['bytes_sent'] / 1e6:.2f} / {a['bytes_sent'] / 1e6:.2f} MB",
                         f"{b['intersection']:,}", ""])
        body[-1][-1] = r["load_after"]
    print(table(body, ["large x small", "phase", "wall s (B / A)", "CPU s (B / A)", "CPU per large id",
                       "sent (B / A)", "shared", "load after"]))
    print(f"load average at end: {load()}")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"machine": info, "unbalanced": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        print(json.dumps(prepare(int(sys.argv[2]), sys.argv[3])))
    elif sys.argv[1] == "party":
        role, n_large, n_small, folder, port_a, port_b = sys.argv[2:8]
        print(json.dumps(run_party(role, int(n_large), int(n_small), folder, (int(port_a), int(port_b)))))
    else:
        sys.exit(main([(int(a), int(b)) for a, b in (p.split(",") for p in sys.argv[1:])] or [(100_000, 10_000)]))
