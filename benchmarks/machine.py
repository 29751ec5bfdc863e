"""Facts every benchmark prints beside its figures: the machine, its load, and how seconds and bytes are shown."""

from __future__ import annotations

import os
import platform


def machine() -> dict:
    import gmpy2

    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        with open("/proc/meminfo") as f:
            mem = int(next(line.split()[1] for line in f if line.startswith("MemTotal"))) / 2 ** 20
    except (OSError, StopIteration):
        mem = float("nan")
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    return {"cpu": model, "cores": cores, "memory_gb": round(mem, 1), "python": platform.python_version(),
            "gmpy2": gmpy2.version(), "gmp": gmpy2.mp_version(), "platform": platform.platform()}


def load() -> str:
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "?"


def _fmt_bytes(b) -> str:
    if b is None:
        return "-"
    for unit, size in (("GB", 2 ** 30), ("MB", 2 ** 20), ("kB", 2 ** 10)):
        if b >= size:
            return f"{b / size:.1f} {unit}"
    return f"{b} B"


def _fmt_s(s, approx=False) -> str:
    if s is None:
        return "-"
    text = f"{s:.3f}" if s < 10 else f"{s:.1f}"
    return ("~" + text) if approx else text
