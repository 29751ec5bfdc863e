"""``python -m benchmarks --predict ROWS``: private prediction, unpacked against packed, interleaved.

Both variants run the real role programs (:func:`vfl.inprocess.predict`, three
threads, messages framed as bytes) on the same rows, the same weights and the
same key; the key and the DJN tables are made before timing.  Each run's CPU seconds
(this process's and its worker processes') are taken beside the wall clock.  Runs alternate
(unpacked, packed, unpacked, ...) so that a load change on a shared machine hits
both; the figures are medians, and the load average is recorded with each run.
The two variants' scores are compared bit for bit.
"""

from __future__ import annotations

import os
import time

import numpy as np


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def predict_series(rows: int, features: int = 30, key_bits: int = 2048, repeats: int = 3, engine=None,
                   progress=None) -> dict:
    """Seconds and bytes of private prediction of ``rows`` rows, unpacked and packed, ``repeats`` runs each."""
    from vfl import inprocess
    from benchmarks.data import make_data
    from benchmarks.trees import cpu_seconds
    from vfl.parties import Coordinator
    from vfl.parties.linear import PartyA, PartyB
    from vfl.transport import Transcript

    x_a, x_b, _, _ = make_data(rows, features)
    rng = np.random.default_rng(1)
    a, b = PartyA(x_a), PartyB(x_b, np.zeros(rows))
    a.params = rng.normal(scale=0.5, size=a.params.shape)
    b.params = rng.normal(scale=0.5, size=b.params.shape)
    parties, x = {"A": a, "B": b}, {"A": x_a, "B": x_b}
    c = Coordinator(key_bits, insecure=key_bits < 2048, engine=engine)
    c.generate_keys()
    warm = {"A": x_a[:64], "B": x_b[:64]}
    for packing in (False, True):       # DJN tables and worker processes, before any timing
        inprocess.predict(parties, c, warm, engine=engine, packing=packing)
    runs = {"unpacked": [], "packed": []}
    scores = {}
    for _ in range(repeats):
        for name, packing in (("unpacked", False), ("packed", True)):
            load_before = _load()
            transcript = Transcript()
            began, cpu = time.perf_counter(), cpu_seconds()
            scores[name] = inprocess.predict(parties, c, x, transcript=transcript, engine=engine, packing=packing)
            seconds, cpu = time.perf_counter() - began, cpu_seconds() - cpu
            frame = transcript.to_frame()
            runs[name].append({"seconds": seconds, "cpu_seconds": cpu, "bytes": int(frame.bytes.sum()),
                               "load_before": load_before, "load_after": _load()})
            if progress:
                progress(1)
    out = {"rows": rows, "features": features, "key_bits": key_bits, "runs": runs,
           "identical": bool(np.array_equal(scores["unpacked"], scores["packed"]))}
    for name in runs:
        out[name] = {"median_seconds": float(np.median([r["seconds"] for r in runs[name]])),
                     "median_cpu_seconds": float(np.median([r["cpu_seconds"] for r in runs[name]])),
                     "bytes": runs[name][-1]["bytes"]}
    out["speedup"] = out["unpacked"]["median_seconds"] / out["packed"]["median_seconds"]
    return out
