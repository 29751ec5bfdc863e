"""Whole runs measured side by side: fresh processes, systems interleaved, medians and ratios.

The pieces every comparison of vfl with another system shares (``python -m benchmarks --fate`` uses
them; a vfl run plugs in as one more :class:`System`):

* :class:`TreeMemory`: the peak of the summed resident memory (RSS) of a process and all its
  descendants, sampled with psutil every ``interval`` seconds in a thread (a run's workers count),
  and the peak of their summed proportional set size (PSS), read less often;
* :func:`run_measured`: one command in a fresh process, with its wall time, the peak memory of its
  process tree and the load average before and after;
* :func:`side_by_side`: repeats x data sets x systems, the systems interleaved within each repeat so
  that the machine's other load falls on all of them;
* :func:`summarise`: per data set and system the figure of every run, its median, the baseline's
  median over this one and the ratios paired by repeat; :func:`table` prints rows as Markdown.

Summed RSS counts pages that processes share (libraries, copy-on-write) once per process, so it
overstates what the machine gives the run; it is what an operator sees adding up ``ps``. Summed PSS
divides each shared page among the processes that share it, so it adds up to the memory the run
really holds (Linux only; where it cannot be read, it is left at 0).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable


class RunFailed(RuntimeError):
    """One run failed; the comparison reports it and goes on with the others."""


class TreeMemory:
    """Peak summed RSS of process ``pid`` (default: this one) and its descendants, sampled in a thread.

    Use as a context manager around the work, or call :meth:`sample` yourself. ``peak_bytes`` is the
    largest sum of RSS seen (every ``interval`` s), ``peak_processes`` how many processes it summed,
    ``samples`` how many samples were taken. ``peak_pss_bytes`` is the largest sum of PSS seen, read
    at most every ``pss_interval`` s (``None``: never; 0 where PSS cannot be read): reading PSS costs
    the kernel a walk over every mapping (about 5 ms per process holding torch), against a few
    microseconds for RSS, and the sampler shares the cores with what it measures.
    """

    def __init__(self, pid: int | None = None, interval: float = 0.2, pss_interval: float | None = 2.0):
        if interval <= 0 or (pss_interval is not None and pss_interval <= 0):
            raise ValueError(f"the sampling intervals must be positive seconds, got {interval!r} and {pss_interval!r}")
        self.pid = os.getpid() if pid is None else pid
        self.interval = interval
        self.pss_interval = pss_interval
        self.peak_bytes = 0
        self.peak_processes = 0
        self.peak_pss_bytes = 0
        self.samples = 0
        self._cpu = {}               # (pid, start time) -> the process's user + system CPU seconds when last seen
        self._last_pss = None
        self._stop = threading.Event()
        self._thread = None

    def sample(self) -> int:
        """The summed RSS of the tree now (0 once the root has gone); updates the peaks."""
        import psutil

        try:
            root = psutil.Process(self.pid)
            processes = [root] + root.children(recursive=True)
        except psutil.Error:
            return 0
        now = time.monotonic()
        with_pss = self.pss_interval is not None and (self._last_pss is None or now - self._last_pss >= self.pss_interval)
        total = pss = counted = 0
        for process in processes:
            try:
                total += process.memory_info().rss
                counted += 1
                times = process.cpu_times()
                self._cpu[(process.pid, process.create_time())] = times.user + times.system
                if with_pss:
                    pss += getattr(process.memory_full_info(), "pss", 0)
            except psutil.Error:     # it ended between the listing and the reading, or PSS is not readable
                continue
        self.samples += 1
        if total > self.peak_bytes:
            self.peak_bytes, self.peak_processes = total, counted
        if with_pss:
            self._last_pss = now
            self.peak_pss_bytes = max(self.peak_pss_bytes, pss)
        return total

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def start(self) -> "TreeMemory":
        self._thread = threading.Thread(target=self._run, name="tree-memory", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> "TreeMemory":
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self

    def __enter__(self) -> "TreeMemory":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def cpu_seconds(self) -> float:
        """The CPU seconds of every process of the tree as last sampled, added up: what a process spent
        after its last sample (at most ``interval`` s of it) is missed, so this is a lower bound."""
        return sum(self._cpu.values())

    @property
    def peak_mb(self) -> float:
        return self.peak_bytes / 2 ** 20

    @property
    def peak_pss_mb(self) -> float:
        return self.peak_pss_bytes / 2 ** 20


def load_average() -> dict:
    """``uptime``'s line (or the load averages where there is no ``uptime``) and the 1-minute load."""
    loads = os.getloadavg()
    try:
        line = subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        line = ""
    return {"uptime": line or "load average: %.2f, %.2f, %.2f" % loads, "load1": loads[0]}


def run_measured(command: list, *, log_path=None, interval: float = 0.2, pss_interval: float | None = 2.0,
                 env=None, cwd=None) -> dict:
    """Run ``command`` in a fresh process (its output to ``log_path``, or discarded), and measure it.

    Returns ``returncode``, ``wall_s``, ``cpu_s`` (the user and system CPU seconds of the process tree:
    the figure the machine's other load barely moves; the larger of what the kernel counted for the
    descendants that were waited for and the sum of every process's last sample, which also counts
    processes that end without being waited for, as FATE's workers do),
    ``peak_rss_mb`` and ``peak_processes`` (the process tree's peak summed RSS and how many processes
    it summed, sampled every ``interval`` s), ``peak_pss_mb`` (its peak summed PSS, read every
    ``pss_interval`` s), ``memory_samples``, ``load_before`` and ``load_after`` (:func:`load_average`).
    Runs must not overlap: ``cpu_s`` is the change in this process's children's CPU time.
    """
    before = load_average()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    log = open(log_path, "w") if log_path is not None else subprocess.DEVNULL
    try:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, cwd=cwd)
        with TreeMemory(process.pid, interval, pss_interval) as memory:
            returncode = process.wait()
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        if log_path is not None:
            log.close()
    waited = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    cpu = max(waited, memory.cpu_seconds)
    return {"returncode": returncode, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": memory.peak_mb,
            "peak_processes": memory.peak_processes, "peak_pss_mb": memory.peak_pss_mb,
            "memory_samples": memory.samples,
            "load_before": before, "load_after": load_average()}


@dataclass(frozen=True)
class System:
    """One side of a comparison: ``run(dataset)`` makes one run in fresh processes and returns its record
    (a dict of figures; :func:`run_measured`'s keys for memory and load). It raises :class:`RunFailed`
    when the run fails."""

    name: str
    run: Callable[[str], dict]


def side_by_side(systems: list, datasets: list, repeats: int, *, log=print, on_record=None) -> list:
    """``repeats`` rounds of every data set, each running every system in turn; every record gets
    ``system``, ``dataset`` and ``repeat``. A failed run is logged and left out; ``on_record(records)``
    is called after every run (to save them as they come)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    records = []
    for repeat in range(repeats):
        for dataset in datasets:
            for system in systems:
                try:
                    record = system.run(dataset)
                except RunFailed as error:
                    log(f"[{repeat + 1}/{repeats}] {dataset} {system.name}: {error}")
                    continue
                record.update(system=system.name, dataset=dataset, repeat=repeat)
                records.append(record)
                if on_record is not None:
                    on_record(records)
    return records


def median_or_none(values: list):
    return statistics.median(values) if values else None


def summarise(records: list, figure: Callable[[dict], float], *, baseline: str = "FATE") -> list:
    """One row per (data set, system), in the order they first appear in ``records``.

    A row holds ``dataset``, ``system``, ``runs`` (``figure`` of each run, by repeat), ``median``,
    ``ratio`` (the baseline system's median over this one's: how many times faster this one is when
    the figure is a time; ``None`` without a baseline run) and ``paired`` (the same ratio repeat by
    repeat, over the repeats both systems finished).
    """
    keys = list(dict.fromkeys((r["dataset"], r["system"]) for r in records))
    runs = {key: {r["repeat"]: figure(r) for r in records if (r["dataset"], r["system"]) == key} for key in keys}
    rows = []
    for dataset, system in keys:
        mine, base = runs[(dataset, system)], runs.get((dataset, baseline), {})
        median, base_median = median_or_none(list(mine.values())), median_or_none(list(base.values()))
        rows.append({
            "dataset": dataset, "system": system, "runs": list(mine.values()), "median": median,
            "ratio": base_median / median if base_median is not None and median else None,
            "paired": [base[r] / mine[r] for r in mine if r in base and mine[r]],
        })
    return rows


def table(rows: list, header: list) -> str:
    """Rows of cells as a Markdown table, columns right-aligned."""
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(str(v).rjust(w) for v, w in zip(r, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    return "\n".join([line(header), sep] + [line(r) for r in rows])
