"""``vfl demo``: three parties as three processes on 127.0.0.1, narrated for a learner.

1. Make a CA and one certificate per party in a temporary folder.
2. Split scikit-learn's breast cancer data by columns: party A gets 20 lab
   measurements, party B the 10 "worst" ones and the diagnosis.  With
   ``feature_parties=K`` (2 to 5), parties A1 ... AK share A's 20 columns
   (10 + 10 for K = 2).  Each party's CSV lists the rows in its own order; the
   id column aligns them.
3. Start ``vfl party`` for every party (A, B and C) as its own process; they
   connect over mutually authenticated TLS and train logistic regression with
   Paillier keys.
4. Start ``vfl predict`` for every party on held-out rows; B writes the scores.
5. Print the AUC beside centralized training, and the bytes on every link.
"""

from __future__ import annotations

import queue
import re
import socket
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from vfl.errors import ConfigurationError, PeerError
from vfl.deploy.jsonfile import read_json
from vfl.deploy.config import load_config, write_config
from vfl.protocols import Roster
from vfl.transport.tls import write_federation_certs

_LOSS_LINE = re.compile(r"^\[C\] epoch (\d+)/(\d+) done")
_BATCH_LOSS_LINE = re.compile(r"^\[C\] epoch \d+/\d+  C decrypts \[\[L\]\]")
#: Full batches by default: with mini-batches a feature party infers the labels (LabelLeakWarning).
DEFAULTS = {"iterations": 5, "batch_size": None}
#: Feature parties the demo can run besides B and C.
MAX_FEATURE_PARTIES = 5
_NUMBERS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}


def demo_roster(feature_parties: int = 1) -> Roster:
    """The demo's parties: A, B and C; with ``K >= 2`` feature parties, A1 ... AK, B and C."""
    if isinstance(feature_parties, bool) or not isinstance(feature_parties, int) \
            or not 1 <= feature_parties <= MAX_FEATURE_PARTIES:
        raise ConfigurationError(f"the demo runs 1 to {MAX_FEATURE_PARTIES} feature parties, got {feature_parties!r}")
    if feature_parties == 1:
        return Roster(("A",), "B", "C")
    return Roster(tuple(f"A{k}" for k in range(1, feature_parties + 1)), "B", "C")


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports that were free a moment ago."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def prepare(folder: Path, key_bits: int = 2048, iterations: int = 5, batch_size: int | None = None, seed: int = 0,
            feature_parties: int = 1, protocol: str = "yang") -> dict:
    """Certificates, the parties' CSVs and federation.toml in ``folder``; returns paths and the held-out labels."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    roster = demo_roster(feature_parties)
    folder.mkdir(parents=True, exist_ok=True)
    tls = write_federation_certs(folder / "certs", roster.everyone)
    bunch = load_breast_cancer()
    names = [str(n).replace(" ", "_") for n in bunch.feature_names]
    ids = np.array([f"patient-{i:04d}" for i in range(len(bunch.target))])
    frame = pd.DataFrame(bunch.data, columns=names)
    train_idx, test_idx = train_test_split(np.arange(len(ids)), test_size=0.3, random_state=seed,
                                           stratify=bunch.target)
    # The feature parties share the 20 lab measurements (in order); B keeps the 10 "worst" ones.
    shares = np.array_split(np.arange(20), len(roster.features))
    columns = {name: [names[j] for j in share] for name, share in zip(roster.features, shares)}
    columns[roster.label] = names[20:]
    rng = np.random.default_rng(seed)
    files = {}
    for role, cols in columns.items():
        # Each party standardizes its own columns with its own training rows.
        mean, std = frame.loc[train_idx, cols].mean(), frame.loc[train_idx, cols].std(ddof=0)
        for split, rows in (("train", train_idx), ("test", test_idx)):
            part = ((frame.loc[rows, cols] - mean) / std).round(6)
            part.insert(0, "id", ids[rows])
            if role == roster.label:     # held-out rows too: vfl predict then records their metrics at B
                part["diagnosis"] = np.where(bunch.target[rows] == 1, "benign", "malignant")
            part = part.iloc[rng.permutation(len(part))]  # every party keeps its own row order
            files[(role, split)] = folder / f"{role}_{split}.csv"
            part.to_csv(files[(role, split)], index=False)
    ports = free_ports(len(roster.everyone))
    parties = {name: {"role": roster.role_of(name), "address": f"127.0.0.1:{port}",
                      "certificate": f"certs/{tls[name].certificate.name}", "key": f"certs/{tls[name].key.name}"}
               for name, port in zip(roster.everyone, ports)}
    training = {"model": "logistic", "learning_rate": 0.15, "iterations": iterations, "batch_size": batch_size,
                "alpha": 0.01, "tol": 0, "fit_intercept": True, "key_bits": key_bits,
                "insecure": key_bits < 2048, "frac_bits": 32, "random_state": seed, "protocol": protocol}
    config = write_config(folder / "federation.toml", "certs/ca.pem", parties, training,
                          network={"connect_timeout": 60, "timeout": 120}, label="diagnosis")
    return {"config": config, "files": files, "frame": frame, "target": bunch.target, "train": train_idx,
            "test": test_idx, "columns": columns, "roster": roster}


class Processes:
    """Party processes whose output lines are merged, prefixed, into one stream."""

    def __init__(self):
        self.procs: dict[str, subprocess.Popen] = {}
        self.lines: queue.Queue = queue.Queue()
        self.errors: dict[str, list[str]] = {}

    def start(self, role: str, args: list[str]) -> None:
        proc = subprocess.Popen([sys.executable, "-m", "vfl", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, bufsize=1)
        self.procs[role] = proc
        self.errors[role] = []
        threading.Thread(target=self._pump, args=(proc.stdout, None), daemon=True).start()
        threading.Thread(target=self._pump, args=(proc.stderr, role), daemon=True).start()

    def _pump(self, stream, error_role) -> None:
        for line in stream:
            line = line.rstrip("\n")
            if error_role is not None:
                self.errors[error_role].append(line)
                line = f"[{error_role}] {line}"
            self.lines.put(line)

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs.values())

    def wait(self, on_line, deadline: float) -> dict[str, int]:
        """Forward every line to ``on_line`` until all processes exit (killed past ``deadline``)."""
        while self.running() or not self.lines.empty():
            try:
                on_line(self.lines.get(timeout=0.1))
            except queue.Empty:
                pass
            if any(p.poll() not in (None, 0) for p in self.procs.values()):
                deadline = min(deadline, time.monotonic() + 15)  # the others stop by themselves, or are stopped
            if time.monotonic() > deadline:
                self.kill()
        for proc in self.procs.values():
            proc.wait()
        time.sleep(0.05)
        while not self.lines.empty():
            on_line(self.lines.get())
        return {role: proc.returncode for role, proc in self.procs.items()}

    def kill(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()


class EpochProgress:
    """Progress over the training epochs, below the narration.

    In a terminal, a progress bar on standard error stays at the bottom while the
    narration scrolls above it.  When standard error is not a terminal (a log
    file, a pipe), there is no bar, whose redraws would clutter the log: each
    finished epoch prints a plain line ``progress: epoch 3/5`` instead.

    Parameters
    ----------
    total : int
        The number of epochs.
    """

    def __init__(self, total: int):
        from tqdm.auto import tqdm

        self.total, self.done = total, 0
        self.bar = tqdm(total=total, desc="training", unit="epoch", file=sys.stderr, disable=None)

    def write(self, line: str) -> None:
        """Print a line of narration on standard output, above the bar."""
        if self.bar.disable:
            print(line, flush=True)
        else:
            self.bar.write(line, file=sys.stdout)

    def epoch_done(self) -> None:
        """Advance by one epoch."""
        self.done += 1
        if self.bar.disable:
            print(f"progress: epoch {self.done}/{self.total}", flush=True)
        else:
            self.bar.update(1)

    def close(self) -> None:
        """Take the bar off the screen (nothing to do without one)."""
        self.bar.close()


def run_parties(command: str, prep: dict, folder: Path, quiet: bool, progress: EpochProgress | None = None,
                limit: float = 600) -> None:
    """Run ``vfl COMMAND`` for every party; raise :class:`PeerError` if any fails.

    Every line the parties print goes to standard output (through ``progress``
    if given, whose epochs advance on C's loss lines).
    """
    procs = Processes()
    for role in prep["roster"].everyone:
        args = [command, "--config", str(prep["config"]), "--role", role, "--workdir", str(folder / role)]
        if role != "C":
            args += ["--data", str(prep["files"][(role, "train" if command == "party" else "test")])]
        if not quiet:
            args.append("--narrate")
        if command == "party" and quiet and role == "C":
            args.append("--narrate")  # C's loss lines drive the progress bar
        procs.start(role, args)

    def on_line(line: str) -> None:
        match = _LOSS_LINE.match(line)
        if quiet and not match and not _BATCH_LOSS_LINE.match(line) and "error" not in line:
            return
        if progress is None:
            print(line, flush=True)
            return
        progress.write(line)
        if match:
            progress.epoch_done()

    codes = procs.wait(on_line, time.monotonic() + limit)
    failed = {r: c for r, c in codes.items() if c != 0}
    if failed:
        detail = "; ".join(f"{r} exited with {c}: {(procs.errors[r] or ['?'])[-1]}" for r, c in failed.items())
        raise PeerError(f"vfl {command} failed: {detail}")


def run_demo(iterations: int | None = None, batch_size: int | None = None, key_bits: int = 2048,
             quiet: bool = False, keep: Path | None = None, feature_parties: int = 1, protocol: str = "yang",
             board: bool = False) -> dict:
    """The whole demo; returns the AUCs, the per-link bytes and the time taken.

    ``feature_parties`` (1 to 5): with 1, parties A, B and C; with ``K >= 2``,
    feature parties A1 ... AK beside B and C, ``K + 2`` processes in all.
    ``protocol``: ``"yang"`` or ``"shared"`` (no party learns a gradient; docs/protocol.md).
    ``board``: start ``vfl board`` for every party before training (their addresses are
    printed) and keep them open after the demo until interrupted.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    roster = demo_roster(feature_parties)
    iterations = iterations or DEFAULTS["iterations"]
    batch_size = batch_size or DEFAULTS["batch_size"]
    start = time.perf_counter()
    boards: dict = {}
    tmp = None if keep else tempfile.TemporaryDirectory(prefix="vfl-demo-")
    folder = Path(keep) if keep else Path(tmp.name)
    try:
        prep = prepare(folder, key_bits, iterations, batch_size, feature_parties=feature_parties, protocol=protocol)
        config = load_config(prep["config"])
        s = config.training
        count = _NUMBERS.get(len(roster.everyone), str(len(roster.everyone)))
        holds = ", ".join(f"{name} holds {len(prep['columns'][name])} columns" for name in roster.features)
        where = (f"certificates in {folder / 'certs'}" if keep else
                 f"files in the temporary folder {folder}, removed at the end: --keep DIR keeps them")
        print(f"vfl demo: {count} parties as {count} processes on 127.0.0.1, talking mutual TLS 1.3 ({where})"
              f"\n  {holds}, B holds "
              f"{len(prep['columns']['B'])} columns and the diagnosis, C holds the Paillier private key "
              f"({s.key_bits} bits).\n  Logistic regression, {s.max_iter} epochs of "
              + (f"batches of {s.batch_size} rows" if s.batch_size else "full batches (all training rows)")
              + (" by conjugate gradient" if s.conjugate else f", learning rate {s.learning_rate}")
              + (", the shared protocol: no party learns a gradient" if s.shared else "")
              + ".\n  Kinds: ciphertext = Paillier-encrypted; masked = "
              f"decrypted by C but hidden by a random mask; public = harmless in clear.", flush=True)
        if board:
            start_boards(folder, [roster.label, *roster.features, roster.coordinator], boards)
        print("\n== training ==", flush=True)
        progress = EpochProgress(iterations)
        try:
            run_parties("party", prep, folder, quiet, progress)
        finally:
            progress.close()
        trained = time.perf_counter()
        print("\n== federated prediction on held-out rows ==", flush=True)
        run_parties("predict", prep, folder, quiet)
        result = _report(prep, folder, config, roc_auc_score, LogisticRegression)
        result["seconds"] = time.perf_counter() - start
        print(f"\ntime: {result['seconds']:.1f} s in all ({trained - start:.1f} s to train)")
        if keep:
            print(f"kept in {folder}: certs/, the CSVs, federation.toml, {' '.join(f'{n}/' for n in roster.everyone)} "
                  "(shards, scores, transcripts)")
        if board:
            _hold_boards(boards)
        return result
    finally:
        for proc in boards.values():
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if tmp is not None:
            tmp.cleanup()
            print(f"removed the temporary folder {folder} (--keep DIR keeps the certificates, CSVs, shards and "
                  "transcripts)", flush=True)


def start_boards(folder: Path, names, boards: dict) -> None:
    """``vfl board`` for each party's work directory, as processes on free ports (added to ``boards`` as each
    starts, so the caller can stop them whatever happens); prints their addresses."""
    lines = []
    for name in names:
        (folder / name / "runs").mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen([sys.executable, "-m", "vfl", "board", "--workdir", str(folder / name), "--port", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        boards[name] = proc
        line = proc.stdout.readline().strip()
        found = re.search(r"(http://\S+)", line)
        lines.append(f"  {name}: {found.group(1)}" if found else f"  {name}: no board ({line or 'it stopped'})")
        threading.Thread(target=proc.stdout.read, daemon=True).start()      # its later output: never a full pipe
    print("vfl demo: each party's board, in a browser (what that party knows, live as it trains):\n"
          + "\n".join(lines), flush=True)


def _hold_boards(boards: dict) -> None:
    """Keep the boards open until Ctrl-C or a SIGTERM, whatever standard input is (a terminal, a pipe, nothing:
    a demo started in the background, an IDE or CI keeps the addresses it printed alive), or until they exit."""
    print("vfl demo: the boards stay open: Ctrl-C (or SIGTERM) stops them", flush=True)

    def stop(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        while all(proc.poll() is None for proc in boards.values()):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def _report(prep: dict, folder: Path, config, roc_auc_score, LogisticRegression) -> dict:
    from vfl.centralized import fit_gradient_descent

    scores = pd.read_csv(folder / "B" / "scores.csv").set_index("id")
    test_ids = [f"patient-{i:04d}" for i in prep["test"]]
    malignant = (prep["target"] == 0).astype(int)  # B's positive class, classes[1] = "malignant"
    y_test = malignant[prep["test"]]
    auc = roc_auc_score(y_test, scores.loc[test_ids, "score"])

    # Centralized: the same columns pooled in one place, standardized as the parties did.
    # Rows in id order, as the parties hold them, so that the batches are the same rows.
    roster = prep["roster"]
    cols = [c for name in roster.data_parties for c in prep["columns"][name]]
    frame, train, test = prep["frame"], np.sort(prep["train"]), prep["test"]
    mean, std = frame.loc[train, cols].mean(), frame.loc[train, cols].std(ddof=0)
    x_train = ((frame.loc[train, cols] - mean) / std).round(6).to_numpy()
    x_test = ((frame.loc[test, cols] - mean) / std).round(6).to_numpy()
    y_train = malignant[train]
    # From the same start: each party's shard records the secret start it drew (the demo holds every shard),
    # feature parties in the roster's order, then B (whose shard also holds the intercept).
    shards = [read_json(folder / r / f"model_{r}.json", "model shard") for r in roster.data_parties]
    label = shards[-1]
    start = (np.array([w for shard in shards for w in shard["initial_coef"]]), label["initial_intercept"])
    gd = fit_gradient_descent(x_train, np.where(y_train == 1, 1.0, -1.0), config.training, start=start)
    auc_gd = roc_auc_score(y_test, x_test @ gd["coef"] + gd["intercept"])
    auc_sk = roc_auc_score(y_test, LogisticRegression(max_iter=1000).fit(x_train, y_train).decision_function(x_test))
    federated = np.array([w for shard in shards for w in shard["coef"]] + [label["intercept"]])
    weight_gap = float(np.max(np.abs(federated - np.append(gd["coef"], gd["intercept"]))))
    federation = f"federated ({', '.join(roster.everyone)} over TLS)"
    print(f"\nAUC on {len(test)} held-out rows:\n"
          f"  {federation:<49}{auc:.4f}\n"
          f"  centralized, same gradient descent and start     {auc_gd:.4f}\n"
          f"  centralized, scikit-learn LogisticRegression     {auc_sk:.4f}\n"
          f"largest difference between a federated and a centralized weight: {weight_gap:.1e} "
          f"(fixed-point precision)")

    links = []
    for phase in ("train", "predict"):
        for role in roster.everyone:
            t = pd.read_csv(folder / role / f"transcript_{phase}.csv")
            t["phase"] = phase
            links.append(t)
    transcript = pd.concat(links, ignore_index=True)
    per_link = transcript.groupby(["phase", "sender", "receiver"])["bytes"].agg(["count", "sum"])
    per_kind = transcript.groupby(["phase", "kind"])["bytes"].sum()
    print("\nbytes on each link (message payloads; TLS adds a little):")
    for (phase, sender, receiver), row in per_link.iterrows():
        count = int(row["count"])
        print(f"  {phase:8s} {sender} -> {receiver}  {count:5d} message{'s' if count != 1 else ' '}  "
              f"{int(row['sum']):>12,} bytes")
    print("by kind:  " + ", ".join(f"{phase} {kind} {int(v):,}" for (phase, kind), v in per_kind.items()))
    print("never sent: any feature value, any label, any party's weights, the private key.")
    return {"auc": auc, "auc_centralized": auc_gd, "auc_sklearn": auc_sk, "weight_gap": weight_gap,
            "bytes": {f"{p} {s}->{r}": int(v) for (p, s, r), v in per_link["sum"].items()}}
