"""``python -m benchmarks.modexp``: Paillier with and without Intel's multi-buffer exponentiation (``mbx_exp_mb8``).

Two parts, each with ``VFL_MODEXP_ENGINE=ipp`` (the fast engine or fail) and ``gmpy2``:

* **unit costs** in this process, one thread, ``time.process_time``: CRT decryptions per CPU
  second at the key size, and what encryption would cost on the multi-buffer engine beside the
  fixed-base tables vfl uses (``h_s^r mod n^2`` with an exponent of ``exponent_bits`` bits; the
  key owner's ``mod p^2`` and ``mod q^2``).  The library's exponentiation takes the same time
  whatever the exponent's bits (fixed windows), so a batch with one random exponent costs what a
  batch of eight different ones would.
* **whole trainings**: a gradient-boosting fit and a logistic-regression fit (the estimators, their
  parties in threads of one fresh process each, vfl's worker processes) on generated data, runs of
  the two engines interleaved; for each the process tree's CPU seconds (``getrusage`` of the run
  and of its reaped worker processes), the CPU seconds of the key holder's decryptions (each
  decryption call's thread CPU time, in whichever thread runs it), the decryptions counted, the
  wall seconds, and the training AUC (the same on either engine: the plaintexts are identical).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time


def unit_costs(key_bits: int, count: int = 256) -> dict:
    """CPU seconds per operation on one core, under this process's ``VFL_MODEXP_ENGINE``."""
    import gmpy2

    from vfl.crypto import compute, generate_keypair, get_engine, mbexp
    from vfl.crypto.djn import exponent_bits, owner_tables
    from vfl.crypto.fast import _crt_decrypt_many

    public, private = generate_keypair(key_bits, insecure=key_bits < 2048)
    engine = get_engine("fast")
    clock = time.process_time
    out = {"engine": mbexp.record(), "key_bits": key_bits}
    with compute.use(compute.INLINE):
        engine.encrypt(public, [1])                                     # the tables
        started = clock()
        ciphertexts = engine.encrypt(public, list(range(count)))
        out["encryption_tables"] = (clock() - started) / count
        owner = owner_tables(int(private.p), int(private.q))
        owner.random_powers(8)
        started = clock()
        owner.random_powers(count)
        out["owner_obfuscator_tables"] = (clock() - started) / count
        key = engine._crt_key(private)
        _crt_decrypt_many(key, ciphertexts[:16])
        started = clock()
        plain = _crt_decrypt_many(key, ciphertexts)
        out["decryption"] = (clock() - started) / count
        assert [int(m) for m in plain] == list(range(count))
        r = gmpy2.mpz(int.from_bytes(os.urandom(exponent_bits(key_bits) // 8), "little")) | 1
        hs = public.h_s
        started = clock()
        mbexp.powmod_many([hs] * count, r, public.nsquare)
        out["obfuscator_powmod"] = (clock() - started) / count
        p, q = gmpy2.mpz(private.p), gmpy2.mpz(private.q)
        started = clock()
        mbexp.powmod_many([hs] * count, r, p * p)
        mbexp.powmod_many([hs] * count, r, q * q)
        out["owner_obfuscator_powmod"] = (clock() - started) / count     # the CRT combination left out: a floor
    return out


# -- one training in a fresh process ---------------------------------------------------------------
def _decryption_clock():
    """Wrap the CRT decryption entry points so each call's thread CPU time and count add up."""
    import vfl.crypto.fast as fast

    totals = {"cpu_s": 0.0, "count": 0}
    lock, inside = threading.Lock(), threading.local()

    def timed(fn, many: bool):
        def inner(key, arg):
            if getattr(inside, "on", False):
                return fn(key, arg)
            inside.on = True
            started = time.thread_time()
            try:
                return fn(key, arg)
            finally:
                inside.on = False
                with lock:
                    totals["cpu_s"] += time.thread_time() - started
                    totals["count"] += len(arg) if many else 1
        return inner

    fast._crt_decrypt_many = timed(fast._crt_decrypt_many, True)
    fast._crt_decrypt = timed(fast._crt_decrypt, False)
    return totals


def child(args) -> dict:
    import resource

    from sklearn.metrics import roc_auc_score

    from benchmarks.trees import generated
    from vfl import VerticalDataset
    from vfl.crypto import FastEngine, mbexp, workers

    totals = _decryption_clock()
    guest, host = generated("x", seed=0, shape=(args.rows, args.guest, args.host))
    data = VerticalDataset({"host": host, "guest": guest}, label="y", id_column="id")
    if args.model == "trees":
        from vfl.ensemble import VerticalGradientBoostingClassifier

        model = VerticalGradientBoostingClassifier(max_iter=args.iterations, learning_rate=0.3, max_depth=3,
                                                   max_bins=32, label_party_trees=0, early_stopping=False,
                                                   key_bits=args.key_bits, insecure=args.key_bits < 2048,
                                                   random_state=0, verbose=False)
    else:
        from vfl.linear_model import VerticalLogisticRegression

        model = VerticalLogisticRegression(max_iter=args.iterations, key_bits=args.key_bits,
                                           insecure=args.key_bits < 2048, random_state=0, verbose=False)
    started = time.perf_counter()
    model.fit(data)
    fit_s = time.perf_counter() - started
    fit_decrypt = dict(totals)
    proba = model.predict_proba(data)
    scores = proba[:, 1] if proba.ndim == 2 else proba
    auc = float(roc_auc_score(guest["y"], scores))
    workers.shutdown()                                           # reaped: their CPU time joins RUSAGE_CHILDREN
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return {"model": args.model, "rows": args.rows, "key_bits": args.key_bits, "iterations": args.iterations,
            "engine": FastEngine.decrypt_engine(), "engine_env": os.environ.get("VFL_MODEXP_ENGINE", "auto"),
            "fit_s": fit_s, "fit_decrypt_cpu_s": fit_decrypt["cpu_s"], "fit_decryptions": fit_decrypt["count"],
            "decrypt_cpu_s": totals["cpu_s"], "decryptions": totals["count"],
            "cpu_s": sum(u.ru_utime + u.ru_stime for u in usage), "auc": auc}


def run_child(model: str, engine: str, args) -> dict:
    command = [sys.executable, "-m", "benchmarks.modexp", "--child", "--model", model, "--rows", str(args.rows),
               "--key-bits", str(args.key_bits), "--iterations", str(args.tree_iterations if model == "trees"
                                                                        else args.linear_iterations)]
    load = os.getloadavg()[0]
    done = subprocess.run(command, env={**os.environ, "VFL_MODEXP_ENGINE": engine}, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{model} with {engine} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["load_before"] = load
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.modexp", description=__doc__.split("\n")[0])
    p.add_argument("--key-bits", type=int, default=2048)
    p.add_argument("--rows", type=int, default=4000)
    p.add_argument("--guest", type=int, default=10)
    p.add_argument("--host", type=int, default=20)
    p.add_argument("--repeats", type=int, default=2, help="runs of each engine per model, interleaved")
    p.add_argument("--models", default="trees,linear")
    p.add_argument("--tree-iterations", type=int, default=3)
    p.add_argument("--linear-iterations", type=int, default=10)
    p.add_argument("--no-units", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", default="trees", help=argparse.SUPPRESS)
    p.add_argument("--iterations", type=int, default=3, help=argparse.SUPPRESS)
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    from benchmarks.machine import machine

    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores; load {os.getloadavg()}")
    report = {"machine": info, "units": {}, "runs": []}
    if not args.no_units:
        for engine in ("gmpy2", "ipp"):
            command = [sys.executable, "-c", "import json, sys; from benchmarks.modexp import unit_costs; "
                       f"print(json.dumps(unit_costs({args.key_bits})))"]
            done = subprocess.run(command, env={**os.environ, "VFL_MODEXP_ENGINE": engine}, capture_output=True,
                                  text=True, check=True)
            unit = report["units"][engine] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{engine}: {1 / unit['decryption']:,.0f} decryptions per CPU s; encryption "
                  f"{unit['encryption_tables'] * 1e3:.3f} ms (tables) vs {unit['obfuscator_powmod'] * 1e3:.3f} ms "
                  f"(h_s^r, {engine}); owner {unit['owner_obfuscator_tables'] * 1e3:.3f} ms (tables) vs "
                  f"{unit['owner_obfuscator_powmod'] * 1e3:.3f} ms ({engine}) [{unit['engine']['engine']}]")
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        for _ in range(args.repeats):
            for engine in ("ipp", "gmpy2"):
                r = run_child(model, engine, args)
                report["runs"].append(r)
                print(f"{model} {engine:5s} [{r['engine']['engine']}]: fit {r['fit_s']:.1f} s, {r['cpu_s']:.1f} CPU s "
                      f"in all, decryptions {r['fit_decryptions']} in the fit taking {r['fit_decrypt_cpu_s']:.2f} CPU s "
                      f"({r['decryptions']} / {r['decrypt_cpu_s']:.2f} CPU s with the prediction), AUC {r['auc']:.6f}, "
                      f"load before {r['load_before']:.2f}", flush=True)
    for model in {r["model"] for r in report["runs"]}:
        for engine in ("ipp", "gmpy2"):
            runs = [r for r in report["runs"] if r["model"] == model and r["engine_env"] == engine]
            print(f"median {model} {engine}: {statistics.median(r['cpu_s'] for r in runs):.1f} CPU s in all, "
                  f"decryption {statistics.median(r['decrypt_cpu_s'] for r in runs):.2f} CPU s")
    print(f"load at end: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
