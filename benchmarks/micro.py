"""Micro figures at one key size: encryptions, multi-exponentiation terms and decryptions per second.

For vfl's default engine (with its worker processes), the same engine in one
process (``VFL_WORKERS=0``), and the textbook ``phe`` calls.
"""

from __future__ import annotations

import contextlib
import os
import time

import gmpy2
import numpy as np


@contextlib.contextmanager
def _workers(count: int | None):
    old = os.environ.get("VFL_WORKERS")
    if count is not None:
        os.environ["VFL_WORKERS"] = str(count)
    try:
        yield
    finally:
        if count is not None:
            if old is None:
                os.environ.pop("VFL_WORKERS", None)
            else:
                os.environ["VFL_WORKERS"] = old


def _rate(fn, count: int, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return count / best


def micro_figures(public_key, private_key, quick: bool = False, progress=None) -> list[dict]:
    """Rows ``{"what", "detail", "implementation", "per_second"}``."""
    from vfl.crypto import FastEngine, mbexp

    tick = progress or (lambda: None)
    engine = FastEngine()
    n_enc = 400 if quick else 2000
    rows_lc, cols_lc = (569, 30)
    rng = np.random.default_rng(0)
    plain = [gmpy2.mpz(int(v)) for v in rng.integers(-2 ** 40, 2 ** 40, max(n_enc, rows_lc))]
    matrix = np.rint(rng.normal(size=(cols_lc, rows_lc)) * 2 ** 32).astype(np.int64)
    out = []

    for label, workers in (("vfl (2 worker processes)", None), ("vfl (one process)", 0)):
        with _workers(workers):
            engine.encrypt(public_key, plain[:64])                     # warm the tables and the workers
            count = n_enc if workers is None else n_enc // 4
            out.append({"what": "encryptions/s", "detail": "DJN, fixed-base comb", "implementation": label,
                        "per_second": _rate(lambda: engine.encrypt(public_key, plain[:count]), count)})
            tick()
            cts = engine.encrypt(public_key, plain[:rows_lc])
            out.append({"what": "multi-exp terms/s", "detail": f"{rows_lc} x {cols_lc}, 32-bit fractions",
                        "implementation": label,
                        "per_second": _rate(lambda: engine.lincomb(public_key, cts, matrix), rows_lc * cols_lc)})
            tick()
            if not quick and workers is None:
                big = engine.encrypt(public_key, plain[:1]) * 10_000    # values do not matter for the cost
                wide = np.rint(rng.normal(size=(cols_lc, 10_000)) * 2 ** 32).astype(np.int64)
                out.append({"what": "multi-exp terms/s", "detail": f"10000 x {cols_lc}, 32-bit fractions",
                            "implementation": label,
                            "per_second": _rate(lambda: engine.lincomb(public_key, big, wide), 10_000 * cols_lc)})
            tick()
            masked = cts[:64]
            out.append({"what": "decryptions/s", "detail": f"CRT, {mbexp.engine()['engine']}", "implementation": label,
                        "per_second": _rate(lambda: engine.decrypt(private_key, masked), len(masked), 2)})
            tick()

    phe_pk, phe_sk = public_key.to_phe(), private_key.to_phe()
    k = 40 if quick else 150
    values = rng.normal(size=k).tolist()
    out.append({"what": "encryptions/s", "detail": "phe encrypt(float)", "implementation": "textbook (phe)",
                "per_second": _rate(lambda: [phe_pk.encrypt(v) for v in values], k)})
    tick()
    enc = [phe_pk.encrypt(v) for v in values]
    xs = rng.normal(size=k).tolist()

    def dot():
        total = enc[0] * xs[0]
        for e, x in zip(enc[1:], xs[1:]):
            total = total + e * x
        return total

    out.append({"what": "multi-exp terms/s", "detail": "EncryptedNumber * float, +", "implementation": "textbook (phe)",
                "per_second": _rate(dot, k)})
    tick()
    out.append({"what": "decryptions/s", "detail": "phe decrypt", "implementation": "textbook (phe)",
                "per_second": _rate(lambda: [phe_sk.decrypt(e) for e in enc[:40]], 40)})
    tick()
    return out


MICRO_STEPS = 11
