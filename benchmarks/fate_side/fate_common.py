"""What the FATE-side runners share: their common arguments, reading a party's CSV through FATE's PSI,
a clock on FATE's own methods, the JSON they write.

Run by FATE's interpreter only (everything here imports ``fate``); vfl never imports this folder
(it has no ``__init__.py``). The runners import this file by its name: Python puts a script's folder
first on ``sys.path``, and FATE's launcher starts each party with ``spawn``, which passes that path on.
"""

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class CommonArguments:
    guest_data: str = field(default=None, metadata={"help": "guest CSV: id, y and the guest's columns"})
    host_data: str = field(default=None, metadata={"help": "host CSV: id and the host's columns"})
    out: str = field(default=None, metadata={"help": "where the guest writes the JSON result (the host: OUT.host.json)"})
    id_name: str = field(default="id")
    label_name: str = field(default="y")
    key_bits: int = field(default=2048, metadata={"help": "Paillier key length"})


#: What FATE's venv needs beside ``pip install pyfate==2.2.0``, which does not pin pandas.
PANDAS_NEEDED = "pandas<3"


def check_pandas() -> None:
    """Refuse to run FATE under pandas 3, with what to install instead.

    FATE 2.2 was written for pandas 2, and pyfate does not pin it. Under pandas 3 SecureBoost fails:
    its binary log loss reads ``s[0]`` from a row Series with named columns (``BCELoss.compute_loss``),
    a positional fallback pandas 3 removed (``KeyError: 0``), and FATE's federation refuses pandas 3's
    pickles of ``Index`` and of its string arrays (its allowlist names pandas 2's classes).
    """
    import pandas

    if int(pandas.__version__.split(".")[0]) >= 3:
        raise RuntimeError(f"FATE 2.2 needs pandas 2 (this interpreter has pandas {pandas.__version__}): "
                           f"install it into FATE's virtualenv with: pip install '{PANDAS_NEEDED}'")


def host_out(out: str) -> str:
    """Where the host writes its own figures, beside the guest's file."""
    return out + ".host.json"


def read_frame(ctx, args: CommonArguments):
    """The party's CSV as a FATE DataFrame: float64, 4 partitions, as FATE's benchmark jobs upload it."""
    from fate.arch import dataframe

    if ctx.is_on_guest:
        reader = dataframe.CSVReader(match_id_name=args.id_name, label_name=args.label_name, label_type="int64",
                                     dtype="float64", partition=4)
        return reader.to_frame(ctx, args.guest_data)
    reader = dataframe.CSVReader(match_id_name=args.id_name, dtype="float64", partition=4)
    return reader.to_frame(ctx, args.host_data)


def read_and_intersect(ctx, args: CommonArguments):
    """``(frame, seconds)``: the party's rows after FATE's ECDH PSI (curve25519), as FATE's psi component
    runs it; the seconds count reading the CSV and the PSI."""
    from fate.arch.protocol.psi import psi_run

    start = time.perf_counter()
    data = psi_run(ctx.sub_ctx("psi"), read_frame(ctx, args), "ecdh_psi", "curve25519")
    return data, time.perf_counter() - start


class Clock:
    """Start and end of every call of the functions it wraps, by label; FATE's computation is unchanged.

    ``wrap(owner, name, label)`` replaces ``owner.name`` (a class's method or a module's function) by a
    function that calls the original and records ``(start, end)`` in ``calls[label]``; ``restore()``
    puts the originals back.
    """

    def __init__(self):
        self.calls = defaultdict(list)
        self._originals = []

    def wrap(self, owner, name: str, label: str) -> None:
        original = getattr(owner, name)
        calls = self.calls[label]

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                calls.append((start, time.perf_counter()))

        setattr(owner, name, timed)
        self._originals.append((owner, name, original))

    def restore(self) -> None:
        for owner, name, original in reversed(self._originals):
            setattr(owner, name, original)
        self._originals.clear()

    def starts(self, label: str) -> list:
        return [start for start, _ in self.calls[label]]

    def per_interval(self, bounds: list) -> list:
        """For each interval ``[bounds[i], bounds[i + 1])``: ``{label: [seconds, calls]}`` of the calls
        that started in it."""
        spans = []
        for low, high in zip(bounds, bounds[1:]):
            span = {}
            for label, calls in self.calls.items():
                inside = [end - start for start, end in calls if low <= start < high]
                span[label] = [sum(inside), len(inside)]
            spans.append(span)
        return spans

    def totals(self) -> dict:
        return {label: [sum(end - start for start, end in calls), len(calls)] for label, calls in self.calls.items()}


def auc(frame) -> float:
    """Train AUC of FATE's prediction frame (its ``label`` and ``predict_score`` columns)."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(frame["label"].astype(int), frame["predict_score"].astype(float)))


def tree_cpu_seconds() -> float:
    """User and system CPU seconds, so far, of the whole run: this party's parent (FATE's launcher) and every
    process below it (the parties and their computing workers); processes that already ended are not counted."""
    import os

    import psutil

    root = psutil.Process(os.getppid())
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def versions() -> dict:
    from importlib.metadata import version

    import fate

    return {"fate": fate.__version__, "fate_utils": version("fate_utils"), "torch": version("torch")}


def write_json(path: str, record: dict) -> None:
    with open(path, "w") as handle:
        json.dump(record, handle)
