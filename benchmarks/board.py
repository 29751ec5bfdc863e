"""``python -m benchmarks.board`` (or ``python -m benchmarks --board``): how fast ``vfl board`` answers.

A work directory of ``--runs`` finished run records (10,000 by default) beside one
run of ``--messages`` message events (a long boosting run's worth) is served by
``vfl board`` itself, a separate process on 127.0.0.1, and fetched over HTTP:

* the runs page (the first and a middle page of the list);
* the page of the long run (its first fetch folds every event of the file; later ones only what was
  appended), and its live panel (the fragment a running run's page
  refetches every 0.5 s) when 100 new events were appended since the last fetch;
* how long after an event is written the live panel shows it (the record is
  flushed at once; the page asks every 0.5 s, so add up to 0.5 s).

Each figure is the median of ``--repeats`` fetches, with the load average before
and after and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace


def _records(folder: Path, runs: int, messages: int) -> str:
    from vfl.deploy.record import RunRecord

    template = {"format": "vfl-run/1", "task": "train", "family": "trees", "party": "bank", "role": "label",
                "parties": {"bank": "label", "telco": "feature"}, "settings": {}, "status": "finished",
                "error": "", "started": "2026-11-27T08:00:00+00:00", "ended": "2026-11-27T08:01:00+00:00"}
    for k in range(runs):
        run_id = f"20250101T{k // 3600 % 24:02d}{k // 60 % 60:02d}{k % 60:02d}.{k:06d}Z-train-1"
        (folder / "runs" / run_id).mkdir(parents=True)
        (folder / "runs" / run_id / "run.json").write_text(json.dumps(dict(template, id=run_id)))
    long = RunRecord(folder, "train", "trees", "bank", "label", {"bank": "label", "telco": "feature"}, {})
    long.event("model", index=0, models=1, epochs=messages // 100, what="")
    for k in range(messages):
        long.message("<-" if k % 2 else "->", "telco", SimpleNamespace(name="candidates", kind="ciphertext",
                                                                       iteration=k // 100), 40_000)
        if k % 100 == 99:
            long.event("epoch", model=0, epoch=k // 100, loss=1.0 / (k + 1))
    return long


def _median_ms(client, url: str, repeats: int, before=None) -> float:
    times = []
    for _ in range(repeats):
        if before:
            before()
        started = time.perf_counter()
        answer = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        answer.raise_for_status()
    return round(statistics.median(times), 1)


def main(argv=None) -> int:
    import httpx

    from benchmarks.machine import machine

    p = argparse.ArgumentParser(prog="python -m benchmarks.board", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10_000, help="finished runs in the work directory (default: 10,000)")
    p.add_argument("--messages", type=int, default=20_000, help="message events of the long run (default: 20,000)")
    p.add_argument("--repeats", type=int, default=20, help="fetches per figure (default: 20)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = p.parse_args(argv)
    load_before = " ".join(f"{v:.2f}" for v in os.getloadavg())
    folder = Path(tempfile.mkdtemp(prefix="vfl-bench-board-"))
    board = None
    try:
        started = time.perf_counter()
        long = _records(folder, args.runs, args.messages)
        written_s = time.perf_counter() - started
        board = subprocess.Popen([sys.executable, "-m", "vfl", "board", "--workdir", str(folder), "--port", "0"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        url = re.search(r"(http://\S+?)/? ", board.stdout.readline()).group(1)
        with httpx.Client(base_url=url, timeout=60) as client:
            figures = {"runs": args.runs, "messages": args.messages, "repeats": args.repeats,
                       "records_written_s": round(written_s, 1),
                       "runs_page_ms": _median_ms(client, "/", args.repeats),
                       "middle_page_ms": _median_ms(client, f"/?page={args.runs // 100}", args.repeats),
                       "long_run_first_page_ms": _median_ms(client, f"/runs/{long.id}", 1),
                       "long_run_page_ms": _median_ms(client, f"/runs/{long.id}", args.repeats)}

            def append():
                for k in range(100):
                    long.message("<-", "telco", SimpleNamespace(name="candidates", kind="ciphertext", iteration=0),
                                 40_000)

            figures["live_panel_100_new_events_ms"] = _median_ms(client, f"/runs/{long.id}/live", args.repeats,
                                                                 append)
            lags = []
            for k in range(args.repeats):
                long.event("line", text=f"marker {k}")
                written = time.perf_counter()
                while f"marker {k}" not in client.get(f"/runs/{long.id}/live").text:
                    pass
                lags.append((time.perf_counter() - written) * 1000)
            figures["event_to_panel_ms"] = round(statistics.median(lags), 1)
        figures.update(load_before=load_before, load_after=" ".join(f"{v:.2f}" for v in os.getloadavg()),
                       machine=machine())
        print(json.dumps(figures, indent=1))
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1))
        return 0
    finally:
        if board is not None:
            board.terminate()
            board.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
