"""``python -m benchmarks --trees``: gradient boosting's cost per tree, against its arithmetic floor (and FATE's).

Each run trains in a fresh process (``python -m benchmarks.trees``, the
estimator's in-process parties with vfl's worker processes), with 2048-bit keys
by default, FATE's SecureBoost settings where vfl has them (depth 3, 32 bins,
learning rate 0.3), every tree with the feature party (``label_party_trees=0``,
so that each tree costs what FATE's does), and reports:

* seconds per tree (each boosting iteration, from the label party's callbacks;
  the first includes the key pair and the encryption tables), the whole fit,
  and the private prediction of every training row;
* the training AUC (the label party's scores);
* the peak memory of the process and its worker processes, summed (sampled
  from outside by :class:`benchmarks.sidebyside.TreeMemory`), and the run's CPU seconds;
* the work per tree, counted as it happens: encryptions of gradients, ciphertext
  multiplications of the encrypted histograms (one per row per feature of every
  node whose sums are computed), the squarings that combine candidates several
  to a ciphertext, re-randomizations and decryptions; and the time each kind took;
* the *arithmetic floor* the issue names: those encryptions, histogram
  multiplications and decryptions at their single-core speed measured in the same
  process, divided by the cores; beside it the measured time per tree.

Data: FATE's breast (569 rows; guest 10 columns and the label, host 20) and
default_credit (30,000 rows; guest 13, host 10) from ``--data DIR`` when given
(the files a vfl user does not have); otherwise generated tables of the same
shapes (:func:`generated`), so the command runs from a fresh clone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

#: Per data set: rows, guest (label party) columns, host (feature party) columns, FATE's tree count.
SHAPES = {"breast": (569, 10, 20, 5), "default_credit": (30_000, 13, 10, 3)}


def generated(name: str, seed: int = 0, shape: tuple | None = None):
    """A table of ``name``'s shape (or ``shape``: rows, guest columns, host columns): guest columns and a binary
    label, host columns; a nonlinear target."""
    import pandas as pd

    rows, guest, host = shape or SHAPES[name][:3]
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, guest + host))
    z = x[:, 0] - x[:, guest] + 0.8 * (x[:, 1] > 0.5) * x[:, guest + 1] + rng.normal(scale=0.7, size=rows)
    ids = np.arange(rows)
    g = pd.DataFrame(x[:, :guest], columns=[f"x{j}" for j in range(guest)]).assign(y=(z > 0).astype(int))
    h = pd.DataFrame(x[:, guest:], columns=[f"x{j}" for j in range(host)])
    g.insert(0, "id", ids)
    h.insert(0, "id", ids)
    return g, h


def load(name: str, data_dir: str | None, shape: tuple | None = None):
    """``(guest, host)`` frames: FATE's CSVs from ``data_dir``, or generated ones (of ``shape`` if given)."""
    import pandas as pd

    if data_dir is None or shape is not None:
        return generated(name, shape=shape)
    folder = Path(data_dir)
    return (pd.read_csv(folder / f"{name}_hetero_guest.csv"), pd.read_csv(folder / f"{name}_hetero_host.csv"))


# -- the measured run (in its own process) ---------------------------------------------------------
class Counter:
    """Counts and times the crypto calls of a run by wrapping them (the bench's own instrumentation)."""

    def __init__(self):
        self.counts: dict[str, int] = {}
        self.seconds: dict[str, float] = {}

    def add(self, kind: str, count: int, seconds: float) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + int(count)
        self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds

    def install(self) -> None:
        from vfl.crypto import fast, histogram, slots
        from vfl.parties.trees import feature_party, label_party

        counter = self

        def timed(kind, size):
            def wrap(fn):
                def inner(*args, **kwargs):
                    started = time.perf_counter()
                    out = fn(*args, **kwargs)
                    counter.add(kind, size(args, kwargs, out), time.perf_counter() - started)
                    return out
                return inner
            return wrap

        engine = fast.FastEngine
        engine.encrypt = timed("encryptions", lambda a, k, o: len(o))(engine.encrypt)
        if hasattr(engine, "encrypt_owned"):              # (absent from a checkout before the key owner's tables)
            engine.encrypt_owned = timed("encryptions", lambda a, k, o: len(o))(engine.encrypt_owned)
        engine.decrypt = timed("decryptions", lambda a, k, o: len(o))(engine.decrypt)
        engine.rerandomize = timed("re-randomizations", lambda a, k, o: len(o))(engine.rerandomize)
        products = timed("histogram multiplications", lambda a, k, o: a[2].size)(histogram.bucket_products)
        feature_party.bucket_products = products
        squarings = lambda a, k, o: sum(len(a[2][i:i + a[3].per_plaintext(a[0].key_bits)]) - 1
                                        for i in range(0, len(a[2]), max(1, a[3].per_plaintext(a[0].key_bits)))
                                        ) * a[3].width
        feature_party.combine = timed("combining squarings", squarings)(slots.combine)
        del label_party                                     # (its encryptions go through the engine)


def unit_costs(key_bits: int) -> dict:
    """CPU seconds per operation on one core: a DJN encryption, a ciphertext multiplication, a decryption.

    Timed with ``time.process_time`` in this process (everything inline), so another job's load on the
    machine barely moves them.
    """
    import gmpy2

    from vfl.crypto import compute, generate_keypair, get_engine, mbexp
    from vfl.crypto.fast import _crt_decrypt_many

    public, private = generate_keypair(key_bits, insecure=key_bits < 2048)
    engine = get_engine()
    clock = time.process_time
    with compute.use(compute.INLINE):
        engine.encrypt(public, [1])                                     # the tables
        started = clock()
        ciphertexts = engine.encrypt(public, list(range(400)))
        encrypt = (clock() - started) / 400
        started = clock()
        acc, n2 = gmpy2.mpz(1), public.nsquare
        for c in ciphertexts * 5:
            acc = acc * c % n2
        multiply = (clock() - started) / 2000
        key = engine._crt_key(private)
        started = clock()
        _crt_decrypt_many(key, ciphertexts[:96])            # eight at a time where the multi-buffer engine runs
        decrypt = (clock() - started) / 96
    return {"encryption": encrypt, "multiplication": multiply, "decryption": decrypt,
            "decryption_engine": mbexp.record()}


def child(args) -> dict:
    """One measured training and prediction; the figures as a dict (printed as JSON by :func:`child_main`)."""
    from sklearn.metrics import roc_auc_score

    from vfl import VerticalDataset, inprocess
    from vfl.ensemble import VerticalGradientBoostingClassifier
    from vfl.parties.trees.feature_party import BoostingFeatureParty
    from vfl.parties.trees.label_party import BoostingLabelParty
    from vfl.protocols import Roster
    from vfl.transport import Transcript

    unit = unit_costs(args.key_bits)                      # before the counters: their calls are not the run's
    counter = Counter()
    counter.install()
    guest, host = load(args.dataset, args.data, args.shape)
    data = VerticalDataset({"host": host, "guest": guest}, label="y", id_column="id")
    model = VerticalGradientBoostingClassifier(
        max_iter=args.trees, learning_rate=0.3, max_depth=3, max_bins=32, min_samples_leaf=1, min_child_weight=1.0,
        l2_regularization=0.1, early_stopping=False, label_party_trees=0, hide_membership=args.mode == "hidden",
        key_bits=args.key_bits, insecure=args.key_bits < 2048)
    settings = model._settings()
    roster = Roster(("host",), "guest", None)
    parties = {"host": BoostingFeatureParty(data.features("host"), "host", data.columns("host"), max_bins=32),
               "guest": BoostingLabelParty(data.features("guest"), data.labels, "guest", data.columns("guest"),
                                           max_bins=32)}
    marks, cpu = [time.perf_counter()], [cpu_seconds()]

    def mark(iteration, state):
        marks.append(time.perf_counter())
        cpu.append(cpu_seconds())

    transcript = Transcript()
    with _cluster(args.dask):
        inprocess.boost(parties, settings, roster, transcript, on_iteration=mark)
    fit = marks[-1] - marks[0]
    label = parties["guest"]
    auc = float(roc_auc_score(label.y, label.raw[:, 0]))
    started = time.perf_counter()
    codes = {name: party.codes for name, party in parties.items()}
    raw = inprocess.predict_boosted(parties, codes, roster)
    predict = time.perf_counter() - started
    assert np.allclose(raw, label.raw)                     # prediction gives the training scores back
    return {"dataset": args.dataset, "mode": args.mode, "rows": data.n_rows, "trees": args.trees,
            "columns": {"guest": len(data.columns("guest")), "host": len(data.columns("host"))}, "dask": args.dask,
            "per_tree": np.diff(marks).tolist(), "cpu_per_tree": np.diff(cpu).tolist(), "fit_s": fit,
            "predict_s": predict, "auc": auc,
            "tree_shapes": [{"leaves": int(len(t["tree"].leaves))} for t in label.trees],
            "bytes": int(transcript.to_frame()["bytes"].sum()), "counts": counter.counts,
            "seconds": counter.seconds, "unit": unit, "cores": _cores()}


def cpu_seconds() -> float:
    """CPU seconds (user and system) of this process and its worker processes so far: a figure the machine's
    other load barely moves, unlike the wall clock."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:            # it ended meanwhile
            continue
    return total


def _cluster(workers: int | None):
    """With ``workers``: every party's encrypted work on a Dask LocalCluster of that many single-threaded
    worker processes, through joblib (as ``joblib.parallel_config(backend="dask")`` does for a user)."""
    import contextlib

    if not workers:
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    import joblib
    from distributed import Client, LocalCluster

    cluster = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                               dashboard_address=None))
    stack.enter_context(Client(cluster))
    stack.enter_context(joblib.parallel_config(backend="dask"))
    return stack


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def child_main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.trees")
    p.add_argument("--dataset", choices=sorted(SHAPES), required=True)
    p.add_argument("--mode", choices=("standard", "hidden"), default="standard")
    p.add_argument("--trees", type=int, default=None)
    p.add_argument("--key-bits", type=int, default=2048)
    p.add_argument("--data", default=None)
    p.add_argument("--shape", type=lambda t: tuple(int(v) for v in t.lower().split("x")), default=None,
                   metavar="ROWSxGUESTxHOST", help="generated data of this shape instead (e.g. 100000x10x50)")
    p.add_argument("--dask", type=int, default=None, metavar="WORKERS",
                   help="run the encrypted work on a Dask LocalCluster of WORKERS processes")
    args = p.parse_args(argv)
    args.trees = args.trees or SHAPES[args.dataset][3]
    print(json.dumps(child(args)))
    return 0


# -- the driver -------------------------------------------------------------------------------------
def run_vfl(dataset: str, mode: str, trees: int | None, key_bits: int, data_dir: str | None) -> dict:
    """One measured run in a fresh process (:func:`benchmarks.sidebyside.run_measured`: wall and CPU seconds,
    the peak memory of its process tree, the load before and after), with the figures the child printed and
    the keys :mod:`benchmarks.fate_compare` reads beside FATE's SecureBoost (``tree_s``, ``tree_median_s``)."""
    import statistics
    import tempfile

    from benchmarks.sidebyside import RunFailed, run_measured

    command = [sys.executable, "-m", "benchmarks.trees", "--dataset", dataset, "--mode", mode,
               "--key-bits", str(key_bits)] + (["--trees", str(trees)] if trees else []) + \
              (["--data", str(data_dir)] if data_dir else [])
    with tempfile.TemporaryDirectory(prefix="vfl-trees-") as tmp:
        log = Path(tmp) / "log.txt"
        measured = run_measured(command, log_path=log)
        lines = log.read_text(errors="replace").strip().splitlines()
    if measured["returncode"] != 0 or not lines:
        raise RunFailed(f"the vfl trees run ({dataset}, {mode}) failed (exit code {measured['returncode']}); "
                        "the end of its log:\n" + "\n".join(lines[-20:]))
    result = json.loads(lines[-1])
    result.update(measured)
    result["peak_mb"] = measured["peak_rss_mb"]
    result["tree_s"] = result["per_tree"]
    result["tree_median_s"] = statistics.median(result["per_tree"])
    return result


def secureboost_systems(data_dir, key_bits: int, trees: dict, modes=("standard", "hidden")) -> list:
    """vfl's trees as :class:`~benchmarks.sidebyside.System` s beside FATE's SecureBoost (``trees``: per data set)."""
    from benchmarks.sidebyside import System

    names = {"standard": "vfl", "hidden": "vfl hidden"}
    return [System(names[mode], lambda d, mode=mode: run_vfl(d, mode, trees[d], key_bits, data_dir)) for mode in modes]


def floor(result: dict) -> dict:
    """The arithmetic floor per tree (seconds): the run's encryptions, histogram multiplications, decryptions."""
    unit, counts, trees = result["unit"], result["counts"], result["trees"]
    parts = {"encryptions": counts.get("encryptions", 0) * unit["encryption"],
             "histogram multiplications": counts.get("histogram multiplications", 0) * unit["multiplication"],
             "decryptions": counts.get("decryptions", 0) * unit["decryption"]}
    return {k: v / trees / result["cores"] for k, v in parts.items()}


def floor_cpu(result: dict) -> float:
    """The floor in CPU seconds per tree (every core's work added up): to set beside the measured CPU seconds."""
    return sum(floor(result).values()) * result["cores"]


def report(result: dict) -> list[str]:
    """Lines for one run: time per tree beside the floor, and where the time went."""
    trees = result["trees"]
    steady = result["per_tree"][1:] or result["per_tree"]
    per_tree = float(np.median(steady))
    parts = floor(result)
    cpu = float(np.median(result["cpu_per_tree"][1:] or result["cpu_per_tree"]))
    lines = [f"{result['dataset']} ({result['rows']:,} rows), {result['mode']} mode: {per_tree:.2f} s per tree "
             f"({cpu:.2f} CPU s; median of trees 2..{trees}; first {result['per_tree'][0]:.2f} s with key and tables), "
             f"fit {result['fit_s']:.1f} s, AUC {result['auc']:.4f}, peak {result['peak_mb']:,.0f} MB, "
             f"prediction of {result['rows']:,} rows {result['predict_s']:.2f} s",
             f"  floor {sum(parts.values()):.2f} s per tree on {result['cores']} cores ({floor_cpu(result):.2f} CPU s): "
             + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items())]
    work = ", ".join(f"{k} {v / trees:,.0f} ({result['seconds'][k] / trees:.2f} s)"
                     for k, v in result["counts"].items())
    lines.append(f"  per tree: {work}")
    engine = result["unit"].get("decryption_engine") or {}
    if engine.get("engine"):
        why = f" ({engine['reason']})" if engine.get("reason") else ""
        lines.append(f"  decryption's exponentiations: {engine['engine']}{why}")
    return lines


def main_trees(args, machine) -> dict:
    """``--trees``: every data set and mode, repeated and interleaved; the medians and each run's work."""
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB; Python {info['python']}")
    datasets = args.tree_datasets or list(SHAPES)
    modes = args.tree_modes or ["standard", "hidden"]
    runs = []
    for repeat in range(args.repeats):
        for dataset in datasets:
            for mode in modes:
                result = run_vfl(dataset, mode, args.trees_per_run, args.key_bits, args.data)
                result.update(repeat=repeat)
                runs.append(result)
                print(f"[repeat {repeat + 1}, load {result['load_before']['load1']:.2f} -> "
                      f"{result['load_after']['load1']:.2f}; {result['cpu_s']:.1f} CPU s in all]")
                for line in report(result):
                    print(line)
    print("\nmedians over repeats (seconds per tree, trees 2 and later):")
    for dataset in datasets:
        for mode in modes:
            mine = [r for r in runs if r["dataset"] == dataset and r["mode"] == mode]
            steady = [float(np.median(r["per_tree"][1:] or r["per_tree"])) for r in mine]
            print(f"  {dataset:15s} {mode:9s} {np.median(steady):7.2f} s per tree "
                  f"(runs: {', '.join(f'{s:.2f}' for s in steady)}), floor "
                  f"{np.median([sum(floor(r).values()) for r in mine]):.2f} s, peak "
                  f"{np.median([r['peak_mb'] for r in mine]):,.0f} MB, AUC {mine[0]['auc']:.4f}")
    return {"machine": info, "runs": runs}


if __name__ == "__main__":
    sys.exit(child_main())
