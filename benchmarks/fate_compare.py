"""``python -m benchmarks --fate [lr|secureboost|sshe-lr|hetero-nn]``: FATE 2.2 beside vfl on FATE's own example data.

Not part of the tests: it needs FATE's CSV files (``--data-dir``; a user of vfl does not have them)
and FATE itself, in a virtualenv of its own (never a dependency of vfl; its pins, e.g. numpy<2 and
scikit-learn 1.4.1, would clash with vfl's)::

    python -m venv ~/fate-venv
    ~/fate-venv/bin/pip install pyfate==2.2.0 'pandas<3'   # FATE-ML 2.2.0, fate_utils (its Rust Paillier)
    export VFL_FATE_PYTHON=~/fate-venv/bin/python

pyfate does not pin pandas, and FATE 2.2's SecureBoost fails under pandas 3 (see
``benchmarks/fate_side/fate_common.py``). ``--fate-python PATH`` names that interpreter (default:
``$VFL_FATE_PYTHON``; there is no default path: FATE lives wherever you installed it).

The FATE side is the scripts in ``benchmarks/fate_side/``, which FATE's interpreter runs by path
(they import ``fate``; vfl never imports them). Each runs one of FATE's algorithms through FATE's
multiprocess launcher (one process per party, FATE's standalone computing and federation, PSI first)
and writes its figures as JSON; their docstrings say what each figure measures. The functions
:func:`run_fate_lr`, :func:`run_fate_secureboost`, :func:`run_fate_sshe_lr` and :func:`run_fate_hetero_nn`
run FATE once in
fresh processes and return those figures with the load average before and after and the peak
summed RSS of the whole process tree (:mod:`benchmarks.sidebyside`). The comparisons interleave the
systems over ``--repeats`` rounds and report medians::

    python -m benchmarks --fate --data-dir ../shared/datasets/fate                 # LR: FATE, vfl, vfl packed
    python -m benchmarks --fate --data-dir ../shared/datasets/fate --repeats 1 --datasets breast
    python -m benchmarks --fate --data-dir ../shared/datasets/fate --datasets breast --lr-settings matched
    python -m benchmarks --fate --data-dir ../shared/datasets/fate --datasets breast --lr-settings defaults
    python -m benchmarks --fate --data-dir ../shared/datasets/fate --quality       # LR accuracy only, no FATE
    python -m benchmarks --fate secureboost --data-dir ../shared/datasets/fate     # FATE's SecureBoost
    python -m benchmarks --fate sshe-lr --data-dir ../shared/datasets/fate         # FATE's SSHE-LR
    python -m benchmarks --fate hetero-nn --data-dir ../shared/datasets/fate       # FATE's Hetero-NN

**LR** (``--fate``, ``--fate lr``): FATE's hetero coordinated LR (guest, host, arbiter), vfl
unpacked and vfl packed, every run in a fresh process: per-epoch training time (the median of each
run's epochs after the first, which includes key generation; vfl's also its DJN tables and worker
processes) and the whole ``fit`` over the epochs, the train AUC (FATE's own prediction at its guest;
vfl's private prediction), the prediction time of all training rows, peak memory, load.

Quality beside time: both sides record the train AUC after every epoch on the rows FATE evaluates (all
training rows): FATE's from the weights its guest and host hold at the end of each epoch
(``fate_side/fate_lr.py``; the two partial scores summed, as FATE's prediction does, the last one equal
to FATE's own prediction), vfl's from each data party's weights as it ends the epoch (:func:`_timed_fit`;
the last one equal to the private prediction's). Both also record the CPU seconds of their whole process
tree from the start of ``fit`` to the end of each epoch. vfl runs ``--reach-epochs`` epochs (default four
times FATE's), so the table gives, per system, the AUC after FATE's number of epochs and at the end, and
the epochs, seconds and CPU seconds from the start of ``fit`` to FATE's final AUC (the median of FATE's
runs, less :data:`REACH_TOLERANCE`) for good: the epoch from which the AUC stays there to the end of the
run (RMSprop at a fixed rate swings: the first epoch above it may be a passing peak, given in brackets),
or "not reached" (:func:`time_to_reach`, :func:`add_reach`).
``--lr-settings`` chooses what runs:

* ``fate-config`` (the default): FATE's benchmark config below, each system with its own random start;
* ``matched`` (:data:`LR_MATCHED`): the same config, both from zero weights, vfl not re-standardizing
  FATE's z-scored columns: the same RMSprop from the same point;
* ``defaults`` (:data:`LR_DEFAULTS`): FATE's ``coordinated_lr`` component defaults (20 epochs, SGD 0.01,
  L2 1.0, full batch, unseeded uniform start, early stop at a loss change below 1e-4) against
  ``VerticalLogisticRegression()`` (conjugate gradient until ``tol``), 2048-bit keys on both.

FATE's benchmark config, FATE's settings where vfl has them (2048-bit Paillier keys, logistic regression,
intercept):

* breast (569 rows; guest 10 columns and the label, host 20): RMSprop, learning rate 0.15, L2 0.01,
  full batch, 5 epochs, FATE's uniform random start (seed 42) / vfl's secret random start;
* default_credit (30,000 rows; guest 13 columns and the label, host 10): FATE's
  ``examples/benchmark_quality/lr/default_credit_config.yaml``: RMSprop, learning rate 0.12 under a
  linear schedule from 0.7x over 1,000 steps (0.084 to 0.0845 over 16 epochs; vfl: constant 0.084),
  L2 0.1, batches of 10,000, 16 epochs, zero start.

Both run every epoch (FATE's arbiter tolerance 0, vfl's ``tol=None``); both RMSprops average squared
gradients with 0.99. What still differs: which rows form each batch (FATE's DataLoader, vfl's seeded
shuffle); FATE encodes with 23 fractional bits, vfl with 32; FATE's arbiter decrypts every gradient
in the clear, vfl's coordinator sees only masked values; FATE's prediction sends the host's partial
scores to the guest in the clear, vfl's only lets B learn the scores. FATE aligns the rows by its
ECDH PSI (not timed); vfl gets the rows aligned by sorting both files on the id.

**SecureBoost** (``--fate secureboost``): FATE's hetero SecureBoost (guest, host) with depth 3,
32 bins, learning rate 0.3, binary log loss, 2048-bit Paillier, FATE's defaults otherwise
(:data:`SECUREBOOST_PARAMETERS`; the JSON records them all); 5 trees on breast, 3 on default_credit.
Figures: seconds per tree (median of every tree, each from its start to the next's), the seconds
FATE spends packing and encrypting g/h per tree, where the rest goes, train AUC, prediction time,
trees and leaves built, peak memory.

**SSHE-LR** (``--fate sshe-lr``): FATE's SSHE logistic regression (guest, host; secret-shared
weights, Paillier products), with the LR comparison's settings where SSHE-LR has them: breast full
batch, learning rate 0.15, 5 epochs, uniform random start (seed 42); default_credit batches of
10,000, 16 epochs, zero start, learning rate 0.084 (the LR comparison's effective rate). SSHE-LR has
no optimizer choice and no penalty: plain gradient descent at a constant rate, without L2.

**Hetero-NN** (``--fate hetero-nn``): FATE's Hetero-NN (guest, host) with the SSHE aggregation layer
(secret-shared interactive weights, Paillier products; ``--key-bits``) and with FedPass (passport
obfuscation, no cryptography), ``--nn-agg`` choosing which: guest bottom Linear(q_guest, 8) + ReLU, host
bottom Linear(q_host, 8) + ReLU, the aggregation layer to 8 units, ReLU, Linear(8, 1), Sigmoid; BCE, Adam
at 0.01 (the SSHE layer's own SGD at 0.01), batches of 256 (``--nn-batch-size``), 5 epochs on breast, 3 on
default_credit (:data:`HETERO_NN`). Figures: seconds per epoch (the median of the epochs after the first,
and every epoch), the CPU seconds of the whole run, peak summed RSS, train AUC at the guest. What each
party receives in each step is in ``benchmarks/fate_side/fate_hetero_nn.py``'s docstring. Only FATE's rows
so far: a vfl network plugs in as one more :class:`~benchmarks.sidebyside.System`
(``compare_hetero_nn(args, fate_python, [System("vfl", run)])``), and the table's ratios are FATE SSHE's
medians over each system's.

The SSHE-LR comparison runs vfl's shared protocol (``protocol="shared"``: the weights stay additively
shared, no party learns a gradient; :func:`run_vfl_shared_here`) beside FATE with the same settings:
plain gradient descent on the same Taylor loss, no penalty, the same rate, batches, epochs and kind of
start. The vfl column of the SecureBoost comparison comes from another run plugged in as
:class:`benchmarks.sidebyside.System` (``compare_secureboost(args, [System("vfl", run)])``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.sidebyside import RunFailed, System, run_measured, side_by_side, summarise, table

HERE = Path(__file__).resolve().parent
FATE_SIDE = HERE / "fate_side"
INSTALL = ("python -m venv ~/fate-venv && ~/fate-venv/bin/pip install pyfate==2.2.0 'pandas<3' "
           "(then --fate-python ~/fate-venv/bin/python, or VFL_FATE_PYTHON)")
GUEST, HOST, ARBITER = "guest:9999", "host:10000", "arbiter:10000"
LR_SYSTEMS = ("FATE", "vfl", "vfl packed")

#: The LR comparison, per data set: FATE's settings (fate_lr.py arguments) and vfl's.
LR = {
    "breast": {
        "epochs": 5,
        "fate": ["--lr", "0.15", "--alpha", "0.01", "--batch_size", "0", "--init", "random_uniform",
                 "--random_state", "42", "--scheduler", "constant"],
        "vfl": dict(learning_rate=0.15, alpha=0.01, batch_size=None, init="random", solver="gd"),
    },
    "default_credit": {
        "epochs": 16,
        "fate": ["--lr", "0.12", "--alpha", "0.1", "--batch_size", "10000", "--init", "zeros",
                 "--scheduler", "linear", "--start_factor", "0.7", "--total_iters", "1000"],
        "vfl": dict(learning_rate=0.12 * 0.7, alpha=0.1, batch_size=10000, init="zeros", solver="gd"),
    },
}

#: The LR comparison with the same settings on both sides where the two allow it (``--lr-settings matched``):
#: FATE's benchmark config as :data:`LR`, both starting from zero weights (FATE's ``init_param`` zeros;
#: vfl's ``init="zeros"``, acknowledged by ``insecure=True``) and vfl not re-standardizing FATE's columns
#: (they are z-scored already), so both run the same RMSprop from the same point.
LR_MATCHED = {
    "breast": {
        "epochs": 5,
        "fate": ["--lr", "0.15", "--alpha", "0.01", "--batch_size", "0", "--init", "zeros",
                 "--scheduler", "constant"],
        "vfl": dict(learning_rate=0.15, alpha=0.01, batch_size=None, init="zeros", solver="gd", standardize=False),
    },
    "default_credit": {
        "epochs": 16,
        "fate": LR["default_credit"]["fate"],
        "vfl": dict(LR["default_credit"]["vfl"], standardize=False),
    },
}

#: FATE's defaults against vfl's (``--lr-settings defaults``): FATE 2.2's ``coordinated_lr`` component as it
#: stands when a job sets nothing (20 epochs, full batch, SGD at 0.01, L2 alpha 1.0, its "linear" schedule
#: from factor 1.0, i.e. constant, uniform random start without a seed, early stop on a loss change below
#: 1e-4) and ``VerticalLogisticRegression()`` (``"vfl"``: conjugate gradient, full batch, at most 100 steps,
#: tol 1e-5, its secret random start). Both with 2048-bit keys (FATE's component default is 1024).
FATE_DEFAULTS = ["--optimizer", "sgd", "--lr", "0.01", "--alpha", "1.0", "--batch_size", "0",
                 "--init", "random_uniform", "--random_state", "-1", "--scheduler", "linear",
                 "--start_factor", "1.0", "--tol", "1e-4"]
LR_DEFAULTS = {name: {"epochs": 20, "fate": FATE_DEFAULTS, "vfl": None} for name in ("breast", "default_credit")}

#: ``--lr-settings``: FATE's benchmark config (each system's own start), matched settings, each one's defaults.
LR_SETTINGS = {"fate-config": LR, "matched": LR_MATCHED, "defaults": LR_DEFAULTS}

#: How far below FATE's final AUC still counts as reaching it (one pair of rows ordered the other way
#: moves breast's AUC by 1/(212 x 357) = 1.3e-5).
REACH_TOLERANCE = 1e-4

#: SecureBoost's settings beyond FATE's defaults (fate_secureboost.py records every parameter).
SECUREBOOST_PARAMETERS = {"max_depth": 3, "max_bin": 32, "learning_rate": 0.3, "objective": "binary:bce"}
SECUREBOOST_TREES = {"breast": 5, "default_credit": 3}

#: SSHE-LR per data set (fate_sshe_lr.py arguments): the LR comparison's settings where it has them.
SSHE = {
    "breast": {"epochs": 5, "learning_rate": 0.15, "batch_size": 0, "init": "random_uniform", "random_state": 42},
    "default_credit": {"epochs": 16, "learning_rate": 0.084, "batch_size": 10000, "init": "zeros"},
}

#: Hetero-NN per data set (fate_hetero_nn.py arguments); the network is the same on both.
HETERO_NN = {"breast": {"epochs": 5, "batch_size": 256}, "default_credit": {"epochs": 3, "batch_size": 256}}
#: FATE's aggregation layers the Hetero-NN comparison runs (fate_hetero_nn.py's --agg), by system name.
HETERO_NN_MODES = {"sshe": "FATE SSHE", "fedpass": "FATE FedPass"}


class FateMissing(RuntimeError):
    """FATE's interpreter is missing or unusable; the message says how to install it."""


# --------------------------------------------------------------------------- FATE's interpreter

def default_fate_python() -> str | None:
    """``$VFL_FATE_PYTHON`` where it is set, else ``None`` (no machine path is assumed)."""
    return os.environ.get("VFL_FATE_PYTHON") or None


def check_fate_python(path: str | None, *, need_pandas_2: bool = False) -> dict:
    """The versions of FATE and pandas under the interpreter ``path``; :class:`FateMissing` if there is
    none there, it cannot import FATE, or (``need_pandas_2``) it has pandas 3."""
    if not path:
        raise FateMissing(f"FATE's interpreter was not found (no --fate-python, no VFL_FATE_PYTHON); "
                          f"install FATE 2.2 in a virtualenv of its own: {INSTALL}")
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise FateMissing(f"FATE's interpreter {path} does not exist or is not executable; install FATE 2.2 "
                          f"in a virtualenv of its own: {INSTALL}")
    probe = "import json, fate, pandas; print(json.dumps({'fate': fate.__version__, 'pandas': pandas.__version__}))"
    try:
        done = subprocess.run([path, "-c", probe], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as error:
        raise FateMissing(f"{path} could not be run ({error}); install FATE 2.2 with: {INSTALL}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise FateMissing(f"{path} cannot import FATE ({last}); install FATE 2.2 into it with: {INSTALL}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if need_pandas_2 and int(found["pandas"].split(".")[0]) >= 3:
        raise FateMissing(f"FATE 2.2 needs pandas 2 and {path} has pandas {found['pandas']}: install "
                          f"pandas<3 into FATE's virtualenv ({Path(path).parent}/pip install 'pandas<3')")
    return found


# --------------------------------------------------------------------------- one FATE run

def run_fate(script: str, arguments: list, *, data_dir, dataset: str, fate_python: str, parties: list,
             interval: float = 0.2) -> dict:
    """One FATE run: ``benchmarks/fate_side/SCRIPT`` under FATE's interpreter, every party in a fresh process.

    Returns the guest's JSON figures, the host's under ``host`` (where the script writes them), and
    :func:`~benchmarks.sidebyside.run_measured`'s wall time, peak memory of the process tree and loads.
    Raises :class:`~benchmarks.sidebyside.RunFailed` with the end of FATE's log when the run fails.
    """
    data_dir = Path(data_dir)
    with tempfile.TemporaryDirectory(prefix="fate-run-") as tmp:
        out, log = Path(tmp) / "result.json", Path(tmp) / "log.txt"
        command = [fate_python, str(FATE_SIDE / script), "--parties", *parties, "--log_level", "WARNING",
                   "--data_dir", str(Path(tmp) / "store"),
                   "--guest_data", str(data_dir / f"{dataset}_hetero_guest.csv"),
                   "--host_data", str(data_dir / f"{dataset}_hetero_host.csv"),
                   "--out", str(out), *map(str, arguments)]
        measured = run_measured(command, log_path=log, interval=interval)
        if measured["returncode"] != 0 or not out.exists():
            tail = log.read_text(errors="replace").splitlines()[-40:]
            raise RunFailed(f"the FATE run ({script}) on {dataset} failed (exit code {measured['returncode']}); "
                            f"the end of its log:\n" + "\n".join(tail))
        record = json.loads(out.read_text())
        host = Path(str(out) + ".host.json")
        if host.exists():
            record["host"] = json.loads(host.read_text())
    record.update(measured)
    record["script"] = script
    return record


def run_fate_lr(data_dir, dataset: str, *, epochs: int | None = None, key_bits: int = 2048,
                fate_python: str | None = None, settings: list | str | None = None) -> dict:
    """FATE's coordinated LR once (guest, host, arbiter) with the LR comparison's settings for ``dataset``
    (``settings``: a name of :data:`LR_SETTINGS`, or fate_lr.py arguments). Adds ``epoch_auc``, the train
    AUC after each epoch (:func:`fate_epoch_aucs`)."""
    chosen = LR_SETTINGS[settings if isinstance(settings, str) else "fate-config"][dataset]
    epochs = epochs or chosen["epochs"]
    arguments = ["--epochs", epochs, "--key_bits", key_bits, *(settings if isinstance(settings, list) else chosen["fate"])]
    record = run_fate("fate_lr.py", arguments, data_dir=data_dir, dataset=dataset,
                      fate_python=fate_python or default_fate_python(), parties=[GUEST, HOST, ARBITER])
    record["epochs"] = len(record["epoch_s"])       # FATE's early stop may end the run sooner
    record["epoch_auc"] = fate_epoch_aucs(record, data_dir, dataset)
    return record


def fate_epoch_aucs(record: dict, data_dir, dataset: str, id_column: str = "id", label: str = "y") -> list:
    """FATE's train AUC after each epoch, from the weights its guest and host recorded then (fate_lr.py):
    every row's score is the guest's partial score (its columns, intercept last) plus the host's, the rows
    joined on the id, as FATE's prediction forms it."""
    import pandas as pd

    data_dir = Path(data_dir)
    guest = pd.read_csv(data_dir / f"{dataset}_hetero_guest.csv")
    host = pd.read_csv(data_dir / f"{dataset}_hetero_host.csv").set_index(id_column).loc[guest[id_column]]
    host_record = record.get("host", {})
    parts = [(guest[record["header"]].to_numpy(float), record["epoch_weights"], True),
             (host[host_record["header"]].to_numpy(float), host_record["epoch_weights"], False)]
    return epoch_aucs(parts, guest[label].to_numpy())


def epoch_aucs(parts: list, labels) -> list:
    """The AUC after each epoch of a model split by columns: ``parts`` holds, per party, its features
    (rows in the labels' order), its weights after each epoch, and whether the last weight is the intercept.
    Epochs a party has no weights for (a run stopped early) are left out."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    epochs = min(len(weights) for _, weights, _ in parts)
    aucs = []
    for epoch in range(epochs):
        scores = np.zeros(len(labels))
        for features, weights, intercept in parts:
            w = np.asarray(weights[epoch], dtype=float)
            scores += features @ (w[:-1] if intercept else w) + (w[-1] if intercept else 0.0)
        aucs.append(float(roc_auc_score(labels, scores)))
    return aucs


def cumulative(record: dict) -> list:
    """Seconds from the start of ``fit`` to the end of each epoch (set-up before the first epoch included)."""
    total, out = record.get("setup_s") or 0.0, []
    for seconds in record["epoch_s"]:
        total += seconds
        out.append(total)
    return out


def time_to_reach(aucs: list, seconds: list, cpu_s: list | None, target: float,
                  tolerance: float = REACH_TOLERANCE) -> dict:
    """When a run reaches ``target`` (less ``tolerance``) for good: ``epochs``, the first epoch (counted from 1)
    from which the AUC stays at or above it to the end of the run, and ``seconds`` and ``cpu_s`` from the start
    of ``fit`` to that epoch's end (``None`` where not known); ``first``, the first epoch at or above it,
    which may be a passing peak (RMSprop at a fixed rate swings); ``reached`` False (``epochs``: all of them,
    ``seconds`` and ``cpu_s`` None) when the run ends below it."""
    if not aucs:
        raise ValueError("no AUC to read: the run recorded no epoch")
    above = [auc >= target - tolerance for auc in aucs]
    first = next((epoch + 1 for epoch, ok in enumerate(above) if ok), None)
    if not above[-1]:
        return {"reached": False, "epochs": len(aucs), "first": first, "auc": max(aucs), "seconds": None, "cpu_s": None}
    epoch = len(above) - 1
    while epoch > 0 and above[epoch - 1]:
        epoch -= 1
    return {"reached": True, "epochs": epoch + 1, "first": first, "auc": aucs[epoch],
            "seconds": seconds[epoch] if epoch < len(seconds) else None,
            "cpu_s": cpu_s[epoch] if cpu_s and epoch < len(cpu_s) else None}


def add_reach(records: list, tolerance: float = REACH_TOLERANCE) -> None:
    """Give every record with a per-epoch AUC ``target`` (the median final AUC of FATE's runs of its data set)
    and ``reach`` (:func:`time_to_reach`)."""
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        fate = [r["auc"] for r in _runs_of(records, dataset, "FATE")]
        if not fate:
            continue
        target = statistics.median(fate)
        for r in records:
            if r["dataset"] == dataset and r.get("epoch_auc"):
                r["target"] = target
                r["reach"] = time_to_reach(r["epoch_auc"], cumulative(r), r.get("epoch_cpu_s"), target, tolerance)


def run_fate_secureboost(data_dir, dataset: str, *, trees: int | None = None, key_bits: int = 2048,
                         fate_python: str | None = None, **parameters) -> dict:
    """FATE's hetero SecureBoost once (guest, host); ``parameters`` override :data:`SECUREBOOST_PARAMETERS`
    (any fate_secureboost.py argument). Adds ``tree_median_s``, ``encrypt_gh_s`` (per tree) and the
    host's split features and values to the guest's trees."""
    trees = trees or SECUREBOOST_TREES[dataset]
    settings = {**SECUREBOOST_PARAMETERS, **parameters, "num_trees": trees, "key_bits": key_bits}
    arguments = [item for name, value in settings.items() for item in (f"--{name}", value)]
    record = run_fate("fate_secureboost.py", arguments, data_dir=data_dir, dataset=dataset,
                      fate_python=fate_python or default_fate_python(), parties=[GUEST, HOST])
    for tree, splits in zip(record["trees"], record.get("host", {}).get("splits", [])):
        for node in tree:
            if str(node["nid"]) in splits:
                node.update(splits[str(node["nid"])])
    record["tree_median_s"] = statistics.median(record["tree_s"])
    record["encrypt_gh_s"] = [phase["encrypt_gh"][0] for phase in record["phases"]]
    return record


def run_fate_sshe_lr(data_dir, dataset: str, *, epochs: int | None = None, key_bits: int = 2048,
                     fate_python: str | None = None, **settings) -> dict:
    """FATE's SSHE-LR once (guest, host) with :data:`SSHE`'s settings for ``dataset``; ``settings``
    override them (any fate_sshe_lr.py argument)."""
    chosen = {**SSHE[dataset], **settings}
    chosen["epochs"] = epochs or chosen["epochs"]
    arguments = [item for name, value in {**chosen, "key_bits": key_bits}.items() for item in (f"--{name}", value)]
    record = run_fate("fate_sshe_lr.py", arguments, data_dir=data_dir, dataset=dataset,
                      fate_python=fate_python or default_fate_python(), parties=[GUEST, HOST])
    record["epochs"] = chosen["epochs"]
    return record


def run_fate_hetero_nn(data_dir, dataset: str, *, agg: str = "sshe", epochs: int | None = None,
                       batch_size: int | None = None, key_bits: int = 2048, fate_python: str | None = None,
                       **settings) -> dict:
    """FATE's Hetero-NN once (guest, host) with the aggregation layer ``agg`` (``"sshe"`` or ``"fedpass"``)
    and :data:`HETERO_NN`'s settings for ``dataset``; ``settings`` override them (any fate_hetero_nn.py
    argument). Adds ``epochs`` and ``steady_s`` (the median of the epochs after the first)."""
    if agg not in HETERO_NN_MODES:
        raise ValueError(f"agg must be one of {', '.join(HETERO_NN_MODES)}, got {agg!r}")
    chosen = {**HETERO_NN[dataset], **settings, "agg": agg}
    chosen["epochs"] = epochs or chosen["epochs"]
    chosen["batch_size"] = batch_size or chosen["batch_size"]
    arguments = [item for name, value in {**chosen, "key_bits": key_bits}.items() for item in (f"--{name}", value)]
    record = run_fate("fate_hetero_nn.py", arguments, data_dir=data_dir, dataset=dataset,
                      fate_python=fate_python or default_fate_python(), parties=[GUEST, HOST])
    record["epochs"] = chosen["epochs"]
    record["steady_s"] = steady(record)
    return record


# --------------------------------------------------------------------------- vfl's LR, in its own process

def load(data_dir: Path, name: str, id_column: str = "id", label: str = "y"):
    """FATE's hetero files as a VerticalDataset, rows aligned by sorting both on the id."""
    import pandas as pd

    from vfl import VerticalDataset

    guest = pd.read_csv(data_dir / f"{name}_hetero_guest.csv").sort_values(id_column).reset_index(drop=True)
    host = pd.read_csv(data_dir / f"{name}_hetero_host.csv").sort_values(id_column).reset_index(drop=True)
    host = host.rename(columns={c: f"host_{c}" for c in host.columns if c != id_column})
    return VerticalDataset({"host": host, "guest": guest}, label=label, id_column=id_column)


def tree_cpu_seconds() -> float:
    """User and system CPU seconds, so far, of this process and every live process below it (vfl's workers)."""
    import psutil

    root = psutil.Process()
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _timed_fit(model, data, key_bits: int, curve: bool = False) -> dict:
    """Fit ``model`` on ``data`` and predict every row, in this process: the seconds of the fit, of each
    epoch (as the estimator ends it) and of the prediction, and the train AUC.

    ``curve``: also ``epoch_auc``, the train AUC after each epoch (step, for conjugate gradient), from the
    weights each data party holds as it ends the epoch (read in the clear here, where every party runs;
    copying them costs microseconds), and ``epoch_cpu_s``, the CPU seconds of this process and its workers
    from the start of ``fit`` to the end of each epoch. ``curve_check``: how far the last epoch's AUC read
    so lies from the private prediction's (0: the same weights).
    """
    from sklearn.metrics import roc_auc_score

    import vfl
    import vfl.linear_model as linear_model
    from vfl.protocols.linear import validation

    marks, cpu_marks, snapshots = [], [], {}

    class EpochClock:   # stands in for the progress bar: the estimator calls step() as each epoch ends
        def step(self, loss=None):
            marks.append(time.perf_counter())
            if curve:
                cpu_marks.append(tree_cpu_seconds())

        def close(self):
            pass

    end_of_epoch = validation.end_of_epoch

    def recording(ep, party, epoch, settings, roster):     # every data party, as it ends an epoch
        snapshots.setdefault(id(party), (party, []))[1].append(party.params.copy())
        return end_of_epoch(ep, party, epoch, settings, roster)

    linear_model._progress = lambda verbose, total: EpochClock()
    if curve:
        validation.end_of_epoch = recording
    start_cpu = tree_cpu_seconds()
    start = time.perf_counter()
    try:
        model.fit(data)
    finally:
        validation.end_of_epoch = end_of_epoch
    end = time.perf_counter()
    proba = model.predict_proba(data)
    predict_s = time.perf_counter() - end
    bounds = [start] + marks
    record = {"rows": data.n_rows, "auc": float(roc_auc_score(data.labels, proba)), "fit_s": end - start,
              "epoch_s": [b - a for a, b in zip(bounds, bounds[1:])], "predict_s": predict_s,
              "versions": {"vfl": vfl.__version__, "python": platform.python_version()},
              "key_bits": key_bits}
    if curve:
        parts = [(party.features, weights, party.fit_intercept) for party, weights in snapshots.values()]
        record["epoch_auc"] = epoch_aucs(parts, data.labels)
        record["epoch_cpu_s"] = [c - start_cpu for c in cpu_marks]
        record["curve_check"] = abs(record["epoch_auc"][-1] - record["auc"])
        record["solver"] = model.solver_
    return record


def vfl_lr_model(dataset: str, settings: str, packing: bool, key_bits: int, epochs: int):
    """vfl's estimator for the LR comparison ``settings`` (a name of :data:`LR_SETTINGS`) on ``dataset``."""
    from vfl import VerticalLogisticRegression

    chosen = LR_SETTINGS[settings][dataset]["vfl"]
    if chosen is None:          # vfl's defaults: nothing set but the key length (2048, its default)
        return VerticalLogisticRegression(key_bits=key_bits, insecure=key_bits < 2048)
    # FATE's run starts at zero: init="zeros" is acknowledged by insecure=True
    return VerticalLogisticRegression(optimizer="rmsprop", max_iter=epochs, tol=None, key_bits=key_bits,
                                      insecure=key_bits < 2048 or chosen["init"] == "zeros",
                                      random_state=0, packing=packing, **chosen)


def run_vfl_lr_here(data_dir: Path, dataset: str, packing: bool, key_bits: int, epochs: int,
                    settings: str = "fate-config") -> dict:
    """Train and predict with vfl once, in this process; the LR comparison's figures, the AUC after each epoch."""
    model = vfl_lr_model(dataset, settings, packing, key_bits, epochs)
    record = _timed_fit(model, load(data_dir, dataset), key_bits, curve=True)
    record["settings"] = settings
    return record


def run_vfl_shared_here(data_dir: Path, dataset: str, key_bits: int, epochs: int, init: str | None = None) -> dict:
    """vfl's shared protocol (``protocol="shared"``) once, in this process, with SSHE-LR's settings: the
    SSHE-LR comparison's figures."""
    from vfl import VerticalLogisticRegression

    chosen = SSHE[dataset]
    # SSHE-LR's model: plain gradient descent on the Taylor loss, no penalty, a constant rate; FATE's columns
    # are standardized already (and SSHE-LR does not scale them)
    model = VerticalLogisticRegression(protocol="shared", solver="gd", optimizer="sgd", penalty="none", alpha=0.0,
                                       learning_rate=chosen["learning_rate"], batch_size=chosen["batch_size"] or None,
                                       max_iter=epochs, tol=None, standardize=False, key_bits=key_bits,
                                       init=init or ("zeros" if chosen["init"] == "zeros" else "random"),
                                       insecure=key_bits < 2048, random_state=0)
    record = _timed_fit(model, load(data_dir, dataset), key_bits)
    record["loss"] = [float(v) for v in model.loss_curve_]
    return record


def run_vfl_lr(data_dir, dataset: str, *, packing: bool | str, epochs: int | None = None, key_bits: int = 2048,
               init: str | None = None, settings: str = "fate-config") -> dict:
    """vfl's LR once in a fresh process (``python -m benchmarks.fate_compare``), measured as FATE's runs are.

    ``settings``: a name of :data:`LR_SETTINGS`; ``epochs`` (default: FATE's) is vfl's budget, and with
    vfl's defaults its own ``max_iter`` and ``tol`` decide. ``packing="shared"`` runs the shared protocol
    with SSHE-LR's settings instead (:func:`run_vfl_shared_here`; ``init="zeros"`` starts it from zero weights
    whatever the data set's setting).
    """
    epochs = epochs or (SSHE if packing == "shared" else LR_SETTINGS[settings])[dataset]["epochs"]
    mode = "shared" if packing == "shared" else "packed" if packing else "unpacked"
    record = _fresh_run([str(Path(data_dir)), dataset, mode, str(epochs), str(key_bits),
                         *(["--init", init] if init else []),
                         *(["--settings", settings] if packing != "shared" else [])], f"the vfl run on {dataset}", epochs)
    record["epochs"] = len(record["epoch_s"])
    return record


def _fresh_run(arguments: list, what: str, epochs: int) -> dict:
    """``python -m benchmarks.fate_compare ARGUMENTS`` in a fresh process, measured: its JSON line and figures."""
    with tempfile.TemporaryDirectory(prefix="vfl-run-") as tmp:
        log = Path(tmp) / "log.txt"
        measured = run_measured([sys.executable, "-m", "benchmarks.fate_compare", *arguments], log_path=log)
        lines = log.read_text(errors="replace").splitlines()
    found = [line for line in lines if line.startswith('{"rows"')]   # stderr shares the log: warnings may follow
    if measured["returncode"] != 0 or not found:
        raise RunFailed(f"{what} failed (exit code {measured['returncode']}):\n" + "\n".join(lines[-40:]))
    record = json.loads(found[-1])
    record.update(measured, epochs=epochs)
    return record


def run_vfl_mlp_here(data_dir: Path, dataset: str, epochs: int, batch_size: int, dp_epsilon: float | None = None) -> dict:
    """vfl's split network once, in this process, with the Hetero-NN comparison's network: a bottom of 8
    ReLU units per party, an interactive layer of 8, ReLU, the logistic output; Adam at 0.01."""
    from sklearn.metrics import roc_auc_score

    import vfl
    import vfl.neural_network as neural_network

    marks = []

    class EpochClock:   # stands in for the progress bar: the estimator steps it as each epoch ends
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def step(self, loss=None):
            marks.append(time.perf_counter())

    neural_network.ProgressBar = EpochClock
    model = vfl.VerticalMLPClassifier((8,), bottom_sizes=(8,), activation="relu", solver="adam",
                                      learning_rate_init=0.01, batch_size=batch_size, max_iter=epochs, tol=0.0,
                                      alpha=0.0, dp_epsilon=dp_epsilon, dp_delta=None if dp_epsilon is None else 1e-5)
    data = load(data_dir, dataset)
    start = time.perf_counter()
    model.fit(data)
    end = time.perf_counter()
    proba = model.predict_proba(data)[:, 1]
    predict_s = time.perf_counter() - end
    bounds = [start] + marks
    sent = model.transcript_.to_frame()["bytes"].sum()
    return {"rows": data.n_rows, "auc": float(roc_auc_score(data.labels, proba)), "fit_s": end - start,
            "epoch_s": [b - a for a, b in zip(bounds, bounds[1:])], "predict_s": predict_s,
            "bytes_per_epoch": float(sent) / epochs, "agg": "shares" + (f", DP eps {dp_epsilon:g}" if dp_epsilon else ""),
            "versions": {"vfl": vfl.__version__, "python": platform.python_version()}}


def run_vfl_mlp(data_dir, dataset: str, *, epochs: int | None = None, batch_size: int | None = None,
                dp_epsilon: float | None = None) -> dict:
    """vfl's split network once in a fresh process (``python -m benchmarks.fate_compare ... mlp``), measured as
    FATE's Hetero-NN runs are (CPU seconds and peak memory of the whole process tree)."""
    epochs = epochs or HETERO_NN[dataset]["epochs"]
    batch_size = batch_size or HETERO_NN[dataset]["batch_size"]
    return _fresh_run([str(Path(data_dir)), dataset, "mlp", str(epochs), "0", "--batch-size", str(batch_size),
                       *(["--dp-epsilon", str(dp_epsilon)] if dp_epsilon else [])],
                      f"the vfl split-network run on {dataset}", epochs)


# --------------------------------------------------------------------------- figures

def steady(record: dict) -> float:
    """Median seconds of the run's epochs after the first."""
    epochs = record["epoch_s"]
    return statistics.median(epochs[1:] if len(epochs) > 1 else epochs)


def _fmt(value, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _loads(runs: list) -> str:
    return "; ".join(f"{r['load_before']['load1']:.2f}/{r['load_after']['load1']:.2f}" for r in runs)


def _memory(runs: list) -> str:
    """Median peak summed RSS and PSS of the runs' process trees, in MB."""
    return (f"{_median(runs, lambda r: r['peak_rss_mb']):.0f} / "
            f"{_median(runs, lambda r: r.get('peak_pss_mb', 0)):.0f}")


def _median(runs: list, figure) -> float:
    return statistics.median(figure(r) for r in runs)


def _runs_of(records: list, dataset: str, system: str) -> list:
    return [r for r in records if r["dataset"] == dataset and r["system"] == system]


def _at_epoch(record: dict, epochs: int, key: str):
    """``record[key]`` after ``epochs`` epochs (its last value if the run was shorter), or None."""
    values = record.get(key) or []
    return values[min(epochs, len(values)) - 1] if values else None


def _reach_cell(runs: list, key: str, digits: int = 1) -> str:
    """The runs' figure ``key`` of :func:`time_to_reach`, median over the runs that reached the target,
    with how many did."""
    reached = [r["reach"][key] for r in runs if r.get("reach", {}).get("reached") and r["reach"][key] is not None]
    if not any(r.get("reach") for r in runs):
        return "-"
    if not reached:
        return f"not reached in {max(r['reach']['epochs'] for r in runs if r.get('reach'))}"
    text = _fmt(statistics.median(reached), digits)
    return text if len(reached) == len(runs) else f"{text} ({len(reached)} of {len(runs)} runs)"


def lr_table(records: list) -> tuple[str, list]:
    """The LR comparison's table (one row per data set and system, medians over repeats) and its lines:
    time per epoch beside the train AUC after FATE's number of epochs, and, where the runs recorded their AUC
    after each epoch (:func:`add_reach`), the epochs, seconds and CPU seconds from the start of ``fit`` each
    system needs to reach FATE's final AUC."""
    rows, lines = [], []
    summary = summarise(records, steady)
    for row in summary:
        runs = _runs_of(records, row["dataset"], row["system"])
        fate_runs = _runs_of(records, row["dataset"], "FATE")
        n = int(statistics.median(r["epochs"] for r in fate_runs)) if fate_runs else runs[0]["epochs"]
        at_n = [_at_epoch(r, n, "epoch_auc") for r in runs]
        cpu_n = [c for c in (_at_epoch(r, n, "epoch_cpu_s") for r in runs) if c is not None]
        rows.append([row["dataset"], row["system"], ", ".join(str(r["epochs"]) for r in runs),
                     ", ".join(f"{v:.2f}" for v in row["runs"]), _fmt(row["median"], 3), _fmt(row["ratio"]),
                     ", ".join("-" if a is None else f"{a:.4f}" for a in at_n), ", ".join(f"{r['auc']:.4f}" for r in runs),
                     _fmt(statistics.median(cpu_n), 1) if cpu_n else "-",
                     ", ".join(_epochs_cell(r["reach"]) for r in runs if r.get("reach")) or "-",
                     _reach_cell(runs, "seconds"), _reach_cell(runs, "cpu_s"),
                     _fmt(_median(runs, lambda r: r["predict_s"]), 3), _memory(runs), _loads(runs)])
        if row["system"] != "FATE" and row["ratio"] is not None:
            fate = next(r for r in summary if r["dataset"] == row["dataset"] and r["system"] == "FATE")
            fate_auc = statistics.median(r["auc"] for r in fate_runs)
            quality = (f"; train AUC after FATE's {n} epochs {', '.join('-' if a is None else f'{a:.4f}' for a in at_n)} "
                       f"against FATE's {fate_auc:.4f}")
            lines.append(f"{row['dataset']}: {row['system']} trains {row['ratio']:.2f}x faster per epoch than FATE "
                         f"(medians {row['median']:.2f} s against {fate['median']:.2f} s; paired ratios by repeat "
                         f"{', '.join(f'{p:.2f}' for p in row['paired'])}){quality}")
            lines.extend(_reach_line(row["dataset"], row["system"], runs, fate_runs))
    by = {(r["dataset"], r["system"]): r for r in summary}
    if ("default_credit", "FATE") in by and ("default_credit", "vfl packed") in by:
        fate, packed = by[("default_credit", "FATE")]["median"], by[("default_credit", "vfl packed")]["median"]
        ratio, need = fate / packed, fate / 8
        verdict = ("met" if ratio >= 8 else f"missed: {8 / ratio:.2f}x too slow ({packed:.2f} s, needs <= {need:.2f} s)")
        lines.append(f"goal >= 8x FATE per epoch on default_credit, packed vfl: {ratio:.2f}x, {verdict} (per epoch; "
                     f"the AUCs and the time to FATE's AUC are above)")
        fate_p = _median(_runs_of(records, "default_credit", "FATE"), lambda r: r["predict_s"])
        for system in LR_SYSTEMS[1:]:
            runs = _runs_of(records, "default_credit", system)
            if runs:
                p = _median(runs, lambda r: r["predict_s"])
                lines.append(f"default_credit prediction of 30,000 rows: {system} {p:.2f} s, FATE {fate_p:.2f} s "
                             f"(FATE / {system} = {fate_p / p:.2f})")
    header = ["data", "system", "epochs run", "s/epoch (runs)", "s/epoch median", "FATE / this",
              "train AUC after FATE's epochs", "train AUC at the end", "CPU s for FATE's epochs, median",
              "epochs to FATE's final AUC for good (first above it)", "s to it, median", "CPU s to it, median",
              "predict s median", "peak MB median: RSS / PSS", "load before/after"]
    return table(rows, header), lines


def _epochs_cell(reach: dict) -> str:
    """``stays-from (first)`` epochs of :func:`time_to_reach`; "not reached" where the run ended below."""
    first = "" if reach["first"] in (None, reach["epochs"]) else f" ({reach['first']})"
    return f"{reach['epochs']}{first}" if reach["reached"] else f"not reached{first}"


def _reach_line(dataset: str, system: str, runs: list, fate_runs: list) -> list:
    """One line: what ``system`` needs to reach FATE's final AUC, beside what FATE needs."""
    if not runs or not runs[0].get("reach") or not fate_runs or not fate_runs[0].get("reach"):
        return []

    def needs(group, name):
        done = [r["reach"] for r in group if r["reach"]["reached"]]
        if not done:
            return f"{name} not in {max(r['reach']['epochs'] for r in group)} epochs (best {max(r['reach']['auc'] for r in group):.4f})", None
        cpu = [d["cpu_s"] for d in done if d["cpu_s"] is not None]
        cpu_median = statistics.median(cpu) if cpu else None
        return (f"{name} {_fmt(statistics.median(d['epochs'] for d in done), 0)} epochs, "
                f"{_fmt(statistics.median(d['seconds'] for d in done if d['seconds'] is not None), 1)} s, "
                f"{_fmt(cpu_median, 1)} CPU s" + ("" if len(done) == len(group) else f" ({len(done)} of {len(group)} runs)"),
                cpu_median)

    target = runs[0]["target"]
    mine, my_cpu = needs(runs, system)
    theirs, fate_cpu = needs(fate_runs, "FATE")
    ratio = f"; FATE / {system} in CPU s: {fate_cpu / my_cpu:.2f}" if my_cpu and fate_cpu else ""
    return [f"{dataset}: to reach FATE's final train AUC {target:.4f} for good (within {REACH_TOLERANCE:g}, staying "
            f"there to the end of the run; medians from the start of fit): {mine}; {theirs}{ratio}"]


def secureboost_table(records: list) -> str:
    """SecureBoost: per data set and system, seconds per tree and the rest (medians over repeats)."""
    rows = []
    cpu_ratio = {(row["dataset"], row["system"]): row["ratio"] for row in summarise(records, lambda r: r["cpu_s"])}
    for row in summarise(records, lambda r: r["tree_median_s"]):
        runs = _runs_of(records, row["dataset"], row["system"])
        encrypt = [statistics.median(r["encrypt_gh_s"]) for r in runs if r.get("encrypt_gh_s")]
        rows.append([row["dataset"], row["system"], ", ".join(str(len(r["tree_s"])) for r in runs),
                     ", ".join(f"{v:.1f}" for v in row["runs"]), _fmt(row["median"]), _fmt(row["ratio"]),
                     _fmt(statistics.median(encrypt)) if encrypt else "-",
                     _fmt(_median(runs, lambda r: r["fit_s"]), 1), _fmt(_median(runs, lambda r: r["cpu_s"]), 1),
                     _fmt(cpu_ratio.get((row["dataset"], row["system"]))),
                     ", ".join(f"{r['auc']:.4f}" for r in runs),
                     _fmt(_median(runs, lambda r: r["predict_s"])),
                     _memory(runs),
                     "; ".join("/".join(str(s["leaves"]) for s in r.get("tree_shapes", [])) for r in runs),
                     _loads(runs)])
    return table(rows, ["data", "system", "trees", "s/tree (runs)", "s/tree median", "FATE / this",
                        "encrypt g/h s/tree median", "fit s median", "CPU s of the run median", "CPU: FATE / this",
                        "train AUC", "predict s median",
                        "peak MB median: RSS / PSS", "leaves per tree", "load before/after"])


def secureboost_phases(records: list) -> str:
    """Where FATE's SecureBoost time goes: median seconds per tree of each wrapped method, guest and host."""
    rows = []
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        runs = _runs_of(records, dataset, "FATE")
        if not runs:
            continue
        for side, get in (("guest", lambda r: r["phases"]), ("host", lambda r: r.get("host", {}).get("phases", []))):
            labels = list(dict.fromkeys(label for r in runs for phase in get(r) for label in phase))
            for label in labels:
                values = [phase[label][0] for r in runs for phase in get(r) if label in phase]
                share = [phase[label][0] / t for r in runs for phase, t in zip(get(r), r["tree_s"]) if label in phase]
                rows.append([dataset, side, label, _fmt(statistics.median(values)),
                             f"{100 * statistics.median(share):.0f}%"])
    return table(rows, ["data", "party", "FATE method (see fate_secureboost.py)", "s/tree median",
                        "share of the guest's tree time (median)"])


def sshe_table(records: list) -> str:
    """SSHE-LR: per data set and system, seconds per epoch, CPU seconds and the rest (medians over repeats),
    then a line per data set with the paired ratios and the issue's goal (>= 3x FATE per epoch, the same AUC)."""
    rows, lines = [], []
    cpu = {(row["dataset"], row["system"]): row for row in summarise(records, lambda r: r["cpu_s"] / r["epochs"])}
    for row in summarise(records, steady):
        runs = _runs_of(records, row["dataset"], row["system"])
        per_cpu = cpu[(row["dataset"], row["system"])]
        rows.append([row["dataset"], row["system"], ", ".join(str(r["epochs"]) for r in runs),
                     ", ".join(f"{v:.2f}" for v in row["runs"]), _fmt(row["median"]), _fmt(row["ratio"]),
                     ", ".join(f"{p:.2f}" for p in row["paired"]) or "-",
                     _fmt(_median(runs, lambda r: r["fit_s"] / r["epochs"])),
                     ", ".join(f"{r['cpu_s']:.1f}" for r in runs), _fmt(per_cpu["median"]), _fmt(per_cpu["ratio"]),
                     ", ".join(f"{r['auc']:.4f}" for r in runs),
                     _fmt(_median(runs, lambda r: r["predict_s"])), _memory(runs), _loads(runs)])
        if row["system"] != "FATE" and row["ratio"] is not None:
            fate_auc = _median(_runs_of(records, row["dataset"], "FATE"), lambda r: r["auc"])
            auc = _median(runs, lambda r: r["auc"])
            lines.append(f"{row['dataset']}: {row['system']} {row['ratio']:.2f}x FATE's SSHE-LR per epoch (paired "
                         f"{', '.join(f'{p:.2f}' for p in row['paired'])}; goal >= 3x: "
                         f"{'met' if row['ratio'] >= 3 else 'missed'}), {_fmt(per_cpu['ratio'])}x in CPU seconds per "
                         f"epoch of the whole run; median train AUC {auc:.4f} against {fate_auc:.4f}")
    header = ["data", "system", "epochs", "s/epoch (runs)", "s/epoch median", "FATE / this", "paired FATE / this",
              "fit/epochs median", "CPU s of each run", "CPU s/epoch median", "CPU: FATE / this", "train AUC",
              "predict s median", "peak MB median: RSS / PSS", "load before/after"]
    return "\n".join([table(rows, header), "", *lines])


def sshe_phases(records: list) -> str:
    rows = []
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        runs = _runs_of(records, dataset, "FATE")
        labels = [label for label in dict.fromkeys(l for r in runs for p in r["phases"] for l in p) if label != "epoch"]
        for label in labels:
            values = [p[label][0] for r in runs for p in (r["phases"][1:] or r["phases"])]
            rows.append([dataset, label, _fmt(statistics.median(values))])
    return table(rows, ["data", "FATE method (see fate_sshe_lr.py)", "s/epoch median (epochs after the first)"])


def hetero_nn_table(records: list, baseline: str = HETERO_NN_MODES["sshe"]) -> str:
    """Hetero-NN: one row per data set and system (FATE's aggregation layers and any other system), seconds per
    epoch, CPU seconds, memory and AUC (medians over repeats); ratios are ``baseline``'s medians over each row's."""
    rows = []
    cpu = {(row["dataset"], row["system"]): row
           for row in summarise(records, lambda r: r["cpu_s"] / r["epochs"], baseline=baseline)}
    for row in summarise(records, steady, baseline=baseline):
        runs = _runs_of(records, row["dataset"], row["system"])
        per_cpu = cpu[(row["dataset"], row["system"])]
        rows.append([row["dataset"], row["system"], ", ".join(str(r.get("agg", "-")) for r in runs),
                     ", ".join(str(r["epochs"]) for r in runs), ", ".join(f"{v:.2f}" for v in row["runs"]),
                     _fmt(row["median"]), _fmt(row["ratio"]),
                     "; ".join(", ".join(f"{e:.1f}" for e in r["epoch_s"]) for r in runs),
                     ", ".join(f"{r['cpu_s']:.1f}" for r in runs), _fmt(per_cpu["median"]), _fmt(per_cpu["ratio"]),
                     ", ".join(f"{r['auc']:.4f}" for r in runs), _fmt(_median(runs, lambda r: r["predict_s"])),
                     _memory(runs), _loads(runs)])
    header = ["data", "system", "agg layer", "epochs", "s/epoch (runs)", "s/epoch median", f"{baseline} / this",
              "every epoch's s", "CPU s of each run", "CPU s/epoch median", f"CPU: {baseline} / this", "train AUC",
              "predict s median", "peak MB median: RSS / PSS", "load before/after"]
    return table(rows, header)


def hetero_nn_phases(records: list) -> str:
    """Where FATE's SSHE aggregation layer spends an epoch (epochs after the first), guest and host."""
    rows = []
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        runs = [r for r in _runs_of(records, dataset, HETERO_NN_MODES["sshe"]) if r.get("phases")]
        for side, get in (("guest", lambda r: r["phases"]), ("host", lambda r: r.get("host", {}).get("phases", []))):
            labels = list(dict.fromkeys(label for r in runs for phase in get(r) for label in phase))
            for label in labels:
                values = [p[label][0] for r in runs for p in (get(r)[1:] or get(r)) if label in p]
                rows.append([dataset, side, label, _fmt(statistics.median(values))])
    return table(rows, ["data", "party", "FATE method (see fate_hetero_nn.py)", "s/epoch median (epochs after the first)"])


# --------------------------------------------------------------------------- the comparisons

def machine() -> str:
    model = platform.processor()
    try:
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), model)
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True)
    return f"{model}, {os.cpu_count()} CPUs, Python {platform.python_version()}, vfl at {commit.stdout.strip() or '?'}"


def _progress(figure, unit: str):
    """An ``on_record`` that prints each run's line as it ends."""
    def show(records):
        r = records[-1]
        print(f"[{r['repeat'] + 1}] {r['dataset']:14s} {r['system']:10s} {unit} {figure(r):7.2f} "
              f"(fit {r['fit_s']:.1f} s) AUC {r['auc']:.6f} predict {r['predict_s']:.2f} s "
              f"peak {r['peak_rss_mb']:.0f} MB RSS, {r.get('peak_pss_mb', 0):.0f} MB PSS; load {r['load_before']['load1']:.2f} -> {r['load_after']['load1']:.2f}",
              flush=True)
    return show


def _saving(args, show):
    def on_record(records):
        show(records)
        if args.json:
            Path(args.json).write_text(json.dumps(records, indent=1))
    return on_record


def compare_lr(args, fate_python: str, extra_systems=()) -> list:
    """The LR comparison with ``args.lr_settings`` (:data:`LR_SETTINGS`): FATE, vfl, vfl packed (with vfl's
    defaults: FATE and ``vfl``, packed as its default is) and ``extra_systems``, interleaved; vfl runs
    ``args.reach_epochs`` epochs (default four times FATE's) to find when it reaches FATE's final AUC."""
    settings = getattr(args, "lr_settings", "fate-config")
    chosen = LR_SETTINGS[settings]
    epochs = {"breast": args.breast_epochs or chosen["breast"]["epochs"],
              "default_credit": args.credit_epochs or chosen["default_credit"]["epochs"]}
    budget = {d: getattr(args, "reach_epochs", None) or 4 * e for d, e in epochs.items()}

    def vfl(name, packing):
        return System(name, lambda d: run_vfl_lr(args.data_dir, d, packing=packing, epochs=budget[d],
                                                 key_bits=args.key_bits, settings=settings))

    systems = [System("FATE", lambda d: run_fate_lr(args.data_dir, d, epochs=epochs[d], key_bits=args.key_bits,
                                                    fate_python=fate_python, settings=settings)),
               *([vfl("vfl", "auto")] if settings == "defaults" else [vfl("vfl", False), vfl("vfl packed", True)]),
               *extra_systems]
    print(f"LR settings: {settings}; FATE's epochs {epochs}; vfl's budget {budget if settings != 'defaults' else 'its own max_iter and tol'}")
    records = side_by_side(systems, args.datasets, args.repeats, on_record=_saving(args, _progress(steady, "s/epoch")))
    add_reach(records)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    text, lines = lr_table(records)
    print(text)
    for line in lines:
        print(line)
    return records


def compare_secureboost(args, fate_python: str, extra_systems=()) -> list:
    """FATE's SecureBoost, vfl's trees in the standard and the hidden-membership mode (and ``extra_systems``),
    interleaved."""
    from benchmarks.trees import secureboost_systems

    trees = {"breast": args.breast_trees or SECUREBOOST_TREES["breast"],
             "default_credit": args.credit_trees or SECUREBOOST_TREES["default_credit"]}
    systems = [System("FATE", lambda d: run_fate_secureboost(args.data_dir, d, trees=trees[d], key_bits=args.key_bits,
                                                             fate_python=fate_python)),
               *secureboost_systems(args.data_dir, args.key_bits, trees), *extra_systems]
    records = side_by_side(systems, args.datasets, args.repeats,
                           on_record=_saving(args, _progress(lambda r: r["tree_median_s"], "s/tree")))
    print(secureboost_table(records))
    print()
    print(secureboost_phases(records))
    return records


def compare_sshe_lr(args, fate_python: str, extra_systems=()) -> list:
    """FATE's SSHE-LR and vfl's shared protocol with the same settings (and ``extra_systems``), interleaved."""
    epochs = {"breast": args.breast_epochs or SSHE["breast"]["epochs"],
              "default_credit": args.credit_epochs or SSHE["default_credit"]["epochs"]}
    zeros = getattr(args, "sshe_init", None) == "zeros"        # both from zero weights: the same trajectory
    systems = [System("FATE", lambda d: run_fate_sshe_lr(args.data_dir, d, epochs=epochs[d], key_bits=args.key_bits,
                                                         fate_python=fate_python,
                                                         **({"init": "zeros"} if zeros else {}))),
               System("vfl shared", lambda d: run_vfl_lr(args.data_dir, d, packing="shared", epochs=epochs[d],
                                                         key_bits=args.key_bits, init="zeros" if zeros else None)),
               *extra_systems]
    records = side_by_side(systems, args.datasets, args.repeats, on_record=_saving(args, _progress(steady, "s/epoch")))
    print(sshe_table(records))
    print()
    print(sshe_phases(records))
    return records


def compare_hetero_nn(args, fate_python: str, extra_systems=()) -> list:
    """FATE's Hetero-NN with each aggregation layer of ``args.nn_agg`` (and ``extra_systems``), interleaved."""
    epochs = {"breast": args.breast_epochs or HETERO_NN["breast"]["epochs"],
              "default_credit": args.credit_epochs or HETERO_NN["default_credit"]["epochs"]}
    modes = [m.strip() for m in getattr(args, "nn_agg", "sshe,fedpass").split(",") if m.strip()]

    def fate(agg):
        return System(HETERO_NN_MODES[agg], lambda d: run_fate_hetero_nn(
            args.data_dir, d, agg=agg, epochs=epochs[d], batch_size=getattr(args, "nn_batch_size", None),
            key_bits=args.key_bits, fate_python=fate_python))

    def vfl(dp_epsilon=None):
        name = "vfl" + (f" DP eps {dp_epsilon:g}" if dp_epsilon else "")
        return System(name, lambda d: run_vfl_mlp(args.data_dir, d, epochs=epochs[d], dp_epsilon=dp_epsilon,
                                                  batch_size=getattr(args, "nn_batch_size", None)))

    systems = [*(fate(agg) for agg in modes), vfl(), vfl(1.0), *extra_systems]
    records = side_by_side(systems, args.datasets, args.repeats, on_record=_saving(args, _progress(steady, "s/epoch")))
    print(hetero_nn_table(records))
    print()
    print(hetero_nn_phases(records))
    return records


# --------------------------------------------------------------------------- LR accuracy only (no FATE, no timing)

def quality(args) -> None:
    """vfl on breast and motor beside the results FATE publishes and scikit-learn on the pooled data."""
    import numpy as np
    import pandas as pd
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.metrics import mean_squared_error, r2_score, roc_auc_score

    from vfl import VerticalLinearRegression, VerticalLogisticRegression

    def pooled(data):
        return np.hstack([data.features(data.feature_party), data.features(data.label_party)])

    keys = dict(key_bits=args.key_bits, insecure=args.key_bits < 2048)
    rows = []
    data = load(args.data_dir, "breast")
    for iters in (5, 30):
        model = VerticalLogisticRegression(learning_rate=0.15, max_iter=iters, alpha=0.01, tol=None, **keys)
        model.fit(data)
        auc = roc_auc_score(data.labels, model.predict_proba(data))
        rows.append(("breast, hetero LR", f"vfl GD lr 0.15, L2 0.01, full batch, {iters} it", "train AUC",
                     f"{auc:.6f}"))
    rows.append(("breast, hetero LR", "FATE (published) RMSprop lr 0.15, L2 0.01, 5 it", "train AUC", "0.975186"))
    sk = LogisticRegression(max_iter=1000).fit(pooled(data), data.labels)
    rows.append(("breast, hetero LR", "scikit-learn LogisticRegression, pooled", "train AUC",
                 f"{roc_auc_score(data.labels, sk.predict_proba(pooled(data))[:, 1]):.6f}"))

    data = load(args.data_dir, "motor", "idx", "motor_speed")
    model = VerticalLinearRegression(learning_rate=0.13, max_iter=6, alpha=0.01, batch_size=100, tol=None,
                                     random_state=0, **keys)
    model.fit(data)
    pred = model.predict(data)
    rows.append(("motor, hetero LinR", "vfl SGD lr 0.13, L2 0.01, batch 100, 6 epochs", "train RMSE / R2",
                 f"{mean_squared_error(data.labels, pred) ** 0.5:.5f} / {r2_score(data.labels, pred):.5f}"))
    rows.append(("motor, hetero LinR", "FATE (published), same settings, 1024-bit", "train RMSE / R2",
                 "0.31400 / 0.90314"))
    lin = LinearRegression().fit(pooled(data), data.labels)
    pred = lin.predict(pooled(data))
    rows.append(("motor, hetero LinR", "scikit-learn LinearRegression, pooled (exact)", "train RMSE / R2",
                 f"{mean_squared_error(data.labels, pred) ** 0.5:.5f} / {r2_score(data.labels, pred):.5f}"))
    print(f"key bits: {args.key_bits}")
    print(pd.DataFrame(rows, columns=["data", "method", "metric", "value"]).to_string(index=False))


# --------------------------------------------------------------------------- entry points

ALGORITHMS = {"lr": (compare_lr, LR), "secureboost": (compare_secureboost, SECUREBOOST_TREES),
              "sshe-lr": (compare_sshe_lr, SSHE), "hetero-nn": (compare_hetero_nn, HETERO_NN)}


def main_fate(args) -> int:
    """``python -m benchmarks --fate ...`` (arguments parsed by :func:`benchmarks.__main__.parse_args`)."""
    compare, known = ALGORITHMS[args.fate]
    if args.data is None:
        print("error: --fate needs --data-dir DIR, the folder of FATE's *_hetero_guest.csv and *_hetero_host.csv "
              "(FATE's examples/data; vfl does not ship them)", file=sys.stderr)
        return 2
    args.data_dir = Path(args.data).resolve()
    args.datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    names = ["breast", "motor"] if args.quality and args.fate == "lr" else args.datasets
    unknown = [d for d in args.datasets if d not in known]
    if unknown and not (args.quality and args.fate == "lr"):
        print(f"error: --datasets: {', '.join(unknown)} not among {', '.join(known)} for --fate {args.fate}",
              file=sys.stderr)
        return 2
    missing = [str(args.data_dir / f"{d}_hetero_{side}.csv") for d in names for side in ("guest", "host")
               if not (args.data_dir / f"{d}_hetero_{side}.csv").is_file()]
    if missing:
        print(f"error: --data-dir {args.data_dir} lacks {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.quality:
        if args.fate != "lr":
            print("error: --quality with --fate is the LR accuracy table (--fate lr)", file=sys.stderr)
            return 2
        quality(args)
        return 0
    if args.fate == "hetero-nn":
        unknown = [m for m in args.nn_agg.split(",") if m.strip() and m.strip() not in HETERO_NN_MODES]
        if unknown or not args.nn_agg.strip(","):
            print(f"error: --nn-agg: {', '.join(unknown) or 'nothing'} given, choose among "
                  f"{', '.join(HETERO_NN_MODES)}", file=sys.stderr)
            return 2
    fate_python = args.fate_python or default_fate_python()
    try:
        found = check_fate_python(fate_python, need_pandas_2=args.fate == "secureboost")
    except FateMissing as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"machine: {machine()}; key bits {args.key_bits}; {args.repeats} repeats; FATE {found['fate']} "
          f"(pandas {found['pandas']}) at {fate_python}", flush=True)
    records = compare(args, fate_python)
    fate = next((r["versions"] for r in records if r["system"].startswith("FATE")), {})
    print(f"FATE versions: {fate}")
    return 0 if records else 1


def _single(argv: list) -> None:
    """``python -m benchmarks.fate_compare DATA_DIR DATASET packed|unpacked|shared|mlp EPOCHS KEY_BITS``: one vfl
    run (LR; ``shared``: the shared protocol with SSHE-LR's settings; ``mlp``: the split network of the
    Hetero-NN comparison, KEY_BITS unused), its figures as one line of JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fate_compare", description=_single.__doc__)
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("dataset", choices=sorted(set(LR) | set(HETERO_NN)))
    parser.add_argument("packing", choices=["packed", "unpacked", "shared", "mlp"])
    parser.add_argument("epochs", type=int)
    parser.add_argument("key_bits", type=int)
    parser.add_argument("--init", choices=["zeros"], default=None, help="shared: start from zero weights")
    parser.add_argument("--batch-size", type=int, default=256, help="mlp: rows per batch")
    parser.add_argument("--dp-epsilon", type=float, default=None, help="mlp: label DP")
    parser.add_argument("--settings", choices=sorted(LR_SETTINGS), default="fate-config",
                        help="packed / unpacked: the LR comparison's settings")
    a = parser.parse_args(argv)
    if a.packing == "mlp":
        print(json.dumps(run_vfl_mlp_here(a.data_dir.resolve(), a.dataset, a.epochs, a.batch_size, a.dp_epsilon)))
        return
    if a.packing == "shared":
        print(json.dumps(run_vfl_shared_here(a.data_dir.resolve(), a.dataset, a.key_bits, a.epochs, a.init)))
        return
    print(json.dumps(run_vfl_lr_here(a.data_dir.resolve(), a.dataset, a.packing == "packed", a.key_bits, a.epochs,
                                     a.settings)))


if __name__ == "__main__":
    _single(sys.argv[1:])
