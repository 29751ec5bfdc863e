"""``python -m benchmarks --serve``: online scoring through HTTP, three ``vfl serve`` processes on this machine.

A logistic model of a feature party A (20 columns) and the label party B (10
columns), with the coordinator C, 2048-bit keys (``--key-bits``), each party
its own ``vfl serve`` process with its own SQLite store of ``--rows`` rows
(100,000; 10,000 with ``--quick``).  The model's weights come from a
centralized fit written as the two parties' shards (serving does not depend on
how a model was trained).  The load generator is this process: plain HTTP/1.1
over keep-alive connections (asyncio), timing every request itself from the
moment it was due to its answer, and it reports:

1. **latency**: one client, one id per request, one after the other: p50, p90,
   p99 and the largest (goal: p50 <= 30 ms, p99 <= 100 ms);
2. **throughput**: 64 clients at once, one id per request, for ``--seconds``:
   ids scored per second and the latency distribution (goal: >= 300 ids/s); and
   how full the rounds were (the label party's ``/metrics``);
3. **soak**: requests at half the measured peak rate (open loop: a request is
   due every ``1/rate`` seconds, whether or not the earlier ones were answered)
   for ``--soak`` seconds (600; 60 with ``--quick``), feature party A killed
   and started again halfway: every request must get an answer (200, or 503
   naming A while it is away); each party's memory sampled every 5 s.

Figures depend on the machine and its load, which are printed with them (the load
average before and after the whole run, and before and after the latency and
throughput phases).
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GOALS = {"p50_ms": 30.0, "p99_ms": 100.0, "ids_per_s": 300.0}


class Connection:
    """One keep-alive HTTP/1.1 connection to the service: ``await request(body) -> (status, body)``."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def request(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        try:
            self.writer.write(b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\n\r\n" % (path.encode(), self.host.encode(), len(body)) + body)
            head = await self.reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            return status, await self.reader.readexactly(length)
        except (OSError, asyncio.IncompleteReadError, ValueError, StopIteration):
            self.close()
            raise

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def percentiles(seconds: list[float]) -> dict:
    ms = np.asarray(seconds) * 1000.0
    if not len(ms):
        return {"n": 0}
    return {"n": int(len(ms)), "p50_ms": float(np.percentile(ms, 50)), "p90_ms": float(np.percentile(ms, 90)),
            "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()), "mean_ms": float(ms.mean())}


def _body(key: str) -> bytes:
    return json.dumps({"ids": [key]}).encode()


async def latency_phase(host, port, ids, count) -> dict:
    connection, times, statuses = Connection(host, port), [], {}
    for _ in range(count):
        started = time.perf_counter()
        status, _ = await connection.request("/score", _body(random.choice(ids)))
        times.append(time.perf_counter() - started)
        statuses[status] = statuses.get(status, 0) + 1
    connection.close()
    return dict(percentiles(times), statuses=statuses)


async def throughput_phase(host, port, ids, clients, seconds) -> dict:
    times, statuses, scored = [], {}, [0]
    stop = time.perf_counter() + seconds

    async def client():
        connection = Connection(host, port)
        while time.perf_counter() < stop:
            started = time.perf_counter()
            status, body = await connection.request("/score", _body(random.choice(ids)))
            times.append(time.perf_counter() - started)
            statuses[status] = statuses.get(status, 0) + 1
            scored[0] += status == 200 and b'"score"' in body
        connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    return dict(percentiles(times), statuses=statuses, seconds=elapsed, ids_per_s=scored[0] / elapsed,
                clients=clients)


async def soak_phase(host, port, ids, rate, seconds, restart, sample, every=None) -> dict:
    """Open loop at ``rate`` requests/s; ``restart(k)`` every ``every`` s (default: once, at half time), the
    ``k``-th restart; ``sample()`` every 5 s."""
    every = every or seconds / 2
    pool: asyncio.Queue = asyncio.Queue()
    for _ in range(128):
        pool.put_nowait(Connection(host, port))
    times, statuses, errors, lost = [], {}, {}, [0]
    tasks, memory, restarted, restarting = [], [], [], []

    async def one(due: float):
        connection = await pool.get()
        try:
            status, body = await asyncio.wait_for(connection.request("/score", _body(random.choice(ids))), 30)
            statuses[status] = statuses.get(status, 0) + 1
            if status != 200:
                party = json.loads(body).get("error", {}).get("party")
                errors[f"{status} {party}"] = errors.get(f"{status} {party}", 0) + 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
            lost[0] += 1
            connection.close()
        finally:
            times.append(time.perf_counter() - due)
            pool.put_nowait(connection)

    start = time.perf_counter()
    interval, n, next_sample = 1.0 / rate, 0, start
    while (now := time.perf_counter()) < start + seconds:
        if now >= next_sample:
            memory.append((round(now - start, 1), sample()))
            next_sample += 5.0
        if now >= start + every * (len(restarting) + 1) and now < start + seconds - 1:   # in a thread: the
            k = len(restarting)                                                            # requests keep coming
            restarting.append(asyncio.get_running_loop().run_in_executor(None, restart, k))
            restarted.append({"at_s": round(now - start, 1)})
        due = start + n * interval
        if due > now:
            await asyncio.sleep(due - now)
            continue
        tasks.append(asyncio.get_running_loop().create_task(one(due)))
        n += 1
    await asyncio.gather(*tasks)
    for entry, done in zip(restarted, restarting):
        entry.update(await done)
    memory.append((round(time.perf_counter() - start, 1), sample()))
    return dict(percentiles(times), rate=rate, sent=n, answered=sum(statuses.values()), lost=lost[0],
                statuses=statuses, errors=errors, restart=restarted, memory_mb=memory)


# -- the federation -------------------------------------------------------------------------------------

def build(folder: Path, rows: int, key_bits: int) -> dict:
    """Certificates, federation.toml, both parties' CSVs and shards (a centralized fit of the same split)."""
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    from vfl.deploy.shards.linear import write_shard
    from vfl.deploy.config import load_config, write_config
    from vfl.parties.scaling import Standardizer
    from vfl.transport.tls import write_federation_certs

    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 30)) * rng.uniform(0.5, 50, size=30) + rng.normal(0, 10, size=30)
    logits = (x - x.mean(0)) / x.std(0) @ rng.normal(0, 0.5, size=30)
    y = (logits + rng.logistic(size=rows) > 0).astype(int)
    ids = [f"c{i:07d}" for i in range(rows)]
    columns = {"A": [f"a{j}" for j in range(20)], "B": [f"b{j}" for j in range(10)]}
    blocks = {"A": x[:, :20], "B": x[:, 20:]}
    scalers = {p: Standardizer.fit(blocks[p][:5000], p, columns[p]) for p in "AB"}
    train = np.hstack([scalers[p].transform(blocks[p][:5000]) for p in "AB"])
    fit = LogisticRegression(C=10.0, max_iter=1000).fit(train, y[:5000])
    tls = write_federation_certs(folder / "certs", ["A", "B", "C"])
    ports = _free_ports(4)
    parties = {p: {"address": f"127.0.0.1:{port}", "certificate": tls[p].certificate, "key": tls[p].key}
               for p, port in zip("ABC", ports)}
    training = {"model": "logistic", "key_bits": key_bits, "insecure": key_bits < 2048, "packing": "auto"}
    path = write_config(folder / "federation.toml", tls["A"].ca, parties, training,
                        {"connect_timeout": 60, "timeout": 60}, serving={"B": {"http": f"127.0.0.1:{ports[3]}"}})
    config = load_config(path)
    for p, coef in (("A", fit.coef_[0, :20]), ("B", fit.coef_[0, 20:])):
        frame = {"id": ids, **{c: blocks[p][:, j] for j, c in enumerate(columns[p])}}
        pd.DataFrame(frame).to_csv(folder / f"{p}.csv", index=False)
        params = list(coef) + ([float(fit.intercept_[0])] if p == "B" else [])
        (folder / "models" / "1").mkdir(parents=True, exist_ok=True)
        write_shard(folder / "models" / "1" / f"model_{p}.json", p, "feature" if p == "A" else "label", "logistic",
                    columns[p], params, p == "B", config.fingerprint("train"), [0, 1] if p == "B" else None,
                    "y" if p == "B" else None, scaler=scalers[p])
    return {"config": Path(path), "ids": ids, "http": ("127.0.0.1", ports[3])}


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def start(folder: Path, config: Path, role: str, *extra) -> subprocess.Popen:
    log = open(folder / f"{role}.log", "a")
    return subprocess.Popen([sys.executable, "-m", "vfl", "serve", "--config", str(config), "--role", role,
                             "--workdir", str(folder / role), *map(str, extra)], stdout=log, stderr=log)


def wait_healthy(host: str, port: int, timeout: float = 300.0) -> float:
    import httpx

    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        try:
            if httpx.get(f"http://{host}:{port}/health", timeout=5).json().get("status") == "ok":
                return time.perf_counter() - started
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the services did not become healthy within {timeout} s")


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (vfl's worker processes), in MB."""
    total = 0
    for p in [pid, *_children(pid)]:
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
        except (OSError, StopIteration):
            pass
    return round(total / 1024, 1)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(v) for v in f.read().split()]
    except OSError:
        return []
    return kids + [k for kid in kids for k in _children(kid)]


def round_fill(host: str, port: int) -> float | None:
    """Mean ids per round, from the label party's ``/metrics``."""
    import httpx

    text = httpx.get(f"http://{host}:{port}/metrics", timeout=10).text
    values = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
              if line.startswith("vfl_serve_round_ids_")}
    count = values.get("vfl_serve_round_ids_count", 0)
    return values.get("vfl_serve_round_ids_sum", 0) / count if count else None


def main_serve(args, machine, load) -> dict:
    """Each query mode (``--queries``, default private then by id) in turn on the same federation and data."""
    quick = args.quick
    rows = args.rows or (10_000 if quick else 100_000)
    soak = args.soak if args.soak is not None else (60 if quick else 600)
    seconds = 8 if quick else 20
    folder = Path(tempfile.mkdtemp(prefix="vfl-bench-serve-"))
    report = {"machine": machine(), "load_before": load(), "key_bits": args.key_bits, "rows": rows,
              "folder": str(folder), "modes": {}}
    print(f"serving benchmark in {folder}: {rows:,} rows per party, {args.key_bits}-bit keys; load {load()}",
          flush=True)
    built = build(folder, rows, args.key_bits)
    for mode in args.queries or ["private", "by_id"]:
        print(f"-- queries = {mode!r}", flush=True)
        report["modes"][mode] = one_mode(folder / mode, built, mode, seconds, soak, quick, load, args.restart_every)
        soak = 0 if args.soak is None else soak            # the soak once, in the first mode, unless asked
    report["load_after"] = load()
    report["goals"] = {mode: goals(figures) for mode, figures in report["modes"].items()}
    print(json.dumps(report["goals"], indent=1))
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    return report


def one_mode(folder: Path, built: dict, mode: str, seconds: float, soak: int, quick: bool, load,
             restart_every: float | None = None) -> dict:
    """Start the three services with ``[serving.B] queries = mode``; latency, throughput, refresh, soak."""
    folder.mkdir(parents=True)
    config = folder / "federation.toml"
    config.write_text(built["config"].read_text().replace(f'http = "{built["http"][0]}:{built["http"][1]}"',
                                                          f'http = "{built["http"][0]}:{built["http"][1]}"\n'
                                                          f'queries = "{mode}"'))
    (folder / "models").symlink_to(built["config"].parent / "models")
    (host, port), ids, data = built["http"], built["ids"], built["config"].parent
    report: dict = {}
    procs = {"C": start(folder, config, "C"), "A": start(folder, config, "A", "--load-csv", data / "A.csv"),
             "B": start(folder, config, "B", "--load-csv", data / "B.csv")}
    cpu = {p: _cpu_seconds(proc.pid) for p, proc in procs.items()}
    try:
        report["ready_s"] = round(wait_healthy(host, port, 3600.0), 1)
        report["ready_cpu_s"] = {p: round(_cpu_seconds(proc.pid) - cpu[p], 1) for p, proc in procs.items()}
        if mode == "private":
            report["table"] = table_figures(folder)
        asyncio.run(latency_phase(host, port, ids, 30))                  # warm-up
        began = load()
        report["latency"] = asyncio.run(latency_phase(host, port, ids, 200 if quick else 1000))
        report["latency"]["load"] = [began, load()]                    # latency is what load disturbs most
        _show("latency, 1 client", report["latency"])
        began = load()
        report["throughput"] = asyncio.run(throughput_phase(host, port, ids, 64, seconds))
        report["throughput"]["load"] = [began, load()]
        report["throughput"]["ids_per_round"] = round_fill(host, port)
        _show("throughput, 64 clients", report["throughput"])
        if mode == "private":
            report["refresh"] = refresh(host, port, folder, procs)
            _show("refresh (reload of the version in use: every table built again)", report["refresh"])
        rate = max(1.0, report["throughput"]["ids_per_s"] / 2)

        def restart(k: int) -> dict:
            """The k-th restart: the feature party A and the coordinator C in turn (killed, started again)."""
            party = "AC"[k % 2]
            procs[party].send_signal(signal.SIGKILL)
            procs[party].wait()
            began = time.perf_counter()
            procs[party] = start(folder, config, party)
            return {"party": party, "healthy_again_s": round(wait_healthy(host, port, 3600.0), 2),
                    "took_s": round(time.perf_counter() - began, 2)}

        def sample() -> dict:
            return {p: rss_mb(proc.pid) for p, proc in procs.items()}

        if soak:
            report["soak"] = asyncio.run(soak_phase(host, port, ids, rate, soak, restart, sample, restart_every))
            _show(f"soak at {rate:.0f} requests/s for {soak} s, A and C restarted in turn every "
                  f"{restart_every or soak / 2:.0f} s", report["soak"])
        report["memory_mb"] = sample()
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
    return report


def refresh(host: str, port: int, folder: Path, procs: dict) -> dict:
    """``POST /admin/reload`` of the version in use while one client keeps scoring: its time, and what failed."""
    import httpx

    cpu = {p: _cpu_seconds(proc.pid) for p, proc in procs.items()}
    statuses: dict = {}
    stop = [False]

    def client():
        with httpx.Client(timeout=30) as http:
            while not stop[0]:
                code = http.post(f"http://{host}:{port}/score", json={"ids": ["c0000001"]}).status_code
                statuses[code] = statuses.get(code, 0) + 1

    import threading

    thread = threading.Thread(target=client)
    thread.start()
    began = time.perf_counter()
    try:
        answer = httpx.post(f"http://{host}:{port}/admin/reload", json={"version": "1"}, timeout=3600)
    finally:
        took = time.perf_counter() - began
        stop[0] = True
        thread.join()
    return {"status": answer.status_code, "seconds": round(took, 1), "requests_meanwhile": statuses,
            "cpu_s": {p: round(_cpu_seconds(proc.pid) - cpu[p], 1) for p, proc in procs.items()},
            "table": table_figures(folder)}


def table_figures(folder: Path) -> dict:
    """The last table built and fetched, from A's and B's logs: entries, bytes, build seconds."""
    import re

    built = re.findall(r"private table \S+ of model version \S+: (\d+) rows in (\d+) entries of (\d+) bytes, "
                       r"built in ([\d.]+) s", (folder / "A.log").read_text())
    if not built:
        return {}
    rows, entries, size, seconds = built[-1]
    return {"rows": int(rows), "entries": int(entries), "entry_bytes": int(size),
            "mb": round(int(entries) * int(size) / 1e6, 1), "build_s": float(seconds)}


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process and its children (vfl's worker processes)."""
    import os

    total = 0.0
    for p in [pid, *_children(pid)]:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def goals(report: dict) -> dict:
    latency, throughput = report["latency"], report["throughput"]
    out = {"p50_ms": [round(latency["p50_ms"], 1), GOALS["p50_ms"], latency["p50_ms"] <= GOALS["p50_ms"]],
            "p99_ms": [round(latency["p99_ms"], 1), GOALS["p99_ms"], latency["p99_ms"] <= GOALS["p99_ms"]],
            "ids_per_s": [round(throughput["ids_per_s"], 1), GOALS["ids_per_s"],
                          throughput["ids_per_s"] >= GOALS["ids_per_s"]]}
    if "soak" in report:
        soak = report["soak"]
        memory = [m["B"] for _, m in soak["memory_mb"]]
        half = len(memory) // 2
        out["soak_lost"] = [soak["lost"], 0, soak["lost"] == 0 and soak["answered"] == soak["sent"]]
        out["soak_label_party_mb_first_half_max_vs_second_half_max"] = [max(memory[:half] or [0]),
                                                                        max(memory[half:] or [0])]
        # every process's memory after its last restart (or the start): its first sample a third of the way
        # in against its last, as a growth in per cent (goal: within 2)
        growth = {}
        for party in soak["memory_mb"][0][1]:
            series = [(t, m[party]) for t, m in soak["memory_mb"]]
            since = max([r["at_s"] for r in soak["restart"] if r.get("party") == party] + [0.0])
            kept = [m for t, m in series if t >= since + (series[-1][0] - since) / 3]
            if len(kept) >= 2 and kept[0]:
                growth[party] = round(100 * (kept[-1] - kept[0]) / kept[0], 1)
        out["soak_memory_growth_percent"] = growth
    return out


def _show(title: str, figures: dict) -> None:
    shown = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in figures.items() if k != "memory_mb"}
    print(f"{title}: {shown}", flush=True)
