"""Helpers for the network tests: free ports on 127.0.0.1, certificates, roles connected in threads."""

import socket
import threading

import pytest

from vfl.errors import PeerError
from vfl.transport.network import NetworkSettings, NetworkTransport
from vfl.transport.tls import write_federation_certs


def _free_ports(count):
    """``count`` distinct free TCP ports on 127.0.0.1 (bound, then released)."""
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.fixture(scope="session")
def federation_certs(tmp_path_factory):
    """A CA with certificates for A, B, C; and a second, foreign CA with the same roles."""
    base = tmp_path_factory.mktemp("certs")
    return (write_federation_certs(base / "ours", ["A", "B", "C"]),
            write_federation_certs(base / "theirs", ["A", "B", "C"]))


def _connect_all(tls_by_role, roles=("A", "B", "C"), settings=None, addresses=None):
    """Connect ``roles`` concurrently (one thread each); return ``(transports, errors)`` by role."""
    settings = settings or NetworkSettings(connect_timeout=5.0, send_timeout=5.0)
    addresses = addresses or dict(zip(roles, (("127.0.0.1", p) for p in _free_ports(len(roles)))))
    transports, errors = {}, {}

    def run(role):
        try:
            transports[role] = NetworkTransport.connect(role, addresses, tls_by_role[role], settings)
        except Exception as exc:  # noqa: BLE001 - inspected by the test
            errors[role] = exc

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in tls_by_role if r in roles]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return transports, errors


def listen_in_thread(role, addresses, tls, settings):
    """``NetworkTransport.connect(role, ...)`` in a thread, for a peer that never comes: ``(thread, outcome)``.

    ``outcome[role]`` is the :class:`PeerError` it ends with (the transport, should it connect, is closed).
    """
    outcome = {}

    def listen():
        try:
            NetworkTransport.connect(role, addresses, tls, settings).close(linger=0)
        except PeerError as exc:
            outcome[role] = exc

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    return thread, outcome


@pytest.fixture
def free_ports():
    return _free_ports


@pytest.fixture
def connect_all():
    return _connect_all


# --------------------------------------------------------------------------- party processes

import itertools  # noqa: E402
import multiprocessing  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import stat  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from vfl.deploy.config import write_config  # noqa: E402

FAST_TRAINING = {"model": "logistic", "learning_rate": 0.3, "iterations": 6, "batch_size": 20, "alpha": 0.01,
                 "standardize": False, "packing": False,
                 "tol": 0, "key_bits": 1024, "insecure": True, "random_state": 7}


def slack() -> float:
    """How much slower than an idle machine this one runs now: the load average per core, at least 1."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def scaled(seconds: float) -> int:
    """A timeout a test sets for its parties (not the one it tests), stretched by :func:`slack`: load makes a
    test slower, never red."""
    return int(round(seconds * slack()))


def write_party_data(folder, n_rows=60, seed=0):
    """CSVs for A (3 columns) and B (2 columns and a label), each in its own row order; train and test."""
    rng = np.random.default_rng(seed)
    paths = {}
    for split, n in (("train", n_rows), ("test", 25)):
        x = rng.normal(size=(n, 5))
        y = (x @ np.array([1.0, -1.0, 0.5, 2.0, -0.5]) + rng.normal(scale=0.5, size=n) > 0).astype(int)
        ids = [f"r{split}{i:03d}" for i in range(n)]
        a = pd.DataFrame(x[:, :3], columns=["a0", "a1", "a2"]).assign(id=ids)
        b = pd.DataFrame(x[:, 3:], columns=["b0", "b1"]).assign(id=ids)
        if split == "train":
            b["label"] = np.where(y == 1, "yes", "no")
        for role, frame in (("A", a), ("B", b)):
            path = folder / f"{role}_{split}.csv"
            frame.iloc[rng.permutation(n)].to_csv(path, index=False)
            paths[(role, split)] = path
    return paths


def write_k_party_data(folder, columns, label_party, n_rows=60, seed=0):
    """CSVs for any parties: ``columns`` maps a name to its column count; the label party's has the label too."""
    rng = np.random.default_rng(seed)
    total = sum(columns.values())
    weights = rng.choice([-1.5, -1.0, 1.0, 2.0], size=total)
    paths = {}
    for split, n in (("train", n_rows), ("test", 25)):
        x = rng.normal(size=(n, total))
        y = (x @ weights + rng.normal(scale=0.5, size=n) > 0).astype(int)
        ids = [f"r{split}{i:03d}" for i in range(n)]
        start = 0
        for name, count in columns.items():
            frame = pd.DataFrame(x[:, start:start + count], columns=[f"{name}_{j}" for j in range(count)])
            frame.insert(0, "id", ids)
            start += count
            if name == label_party and split == "train":
                frame["label"] = np.where(y == 1, "yes", "no")
            path = folder / f"{name}_{split}.csv"
            frame.iloc[rng.permutation(n)].to_csv(path, index=False)
            paths[(name, split)] = path
    return paths


def write_federation_file(path, tls_by_role, ports, training=None, network=None, roles=None, data=None,
                          party_options=None):
    """federation.toml for the parties of ``tls_by_role``; ``roles`` maps names to roles (default: A/B/C, none).

    ``data`` holds ``[data]`` keys (``write_config``'s keyword arguments); ``party_options`` more keys of
    a party's own table by name (``{"A": {"allow_score_span": True}}``).
    """
    parties = {role: {"address": f"127.0.0.1:{port}", "certificate": tls.certificate, "key": tls.key}
               for (role, tls), port in zip(sorted(tls_by_role.items()), ports)}
    for name, role in (roles or {}).items():
        parties[name]["role"] = role
    for name, options in (party_options or {}).items():
        parties[name].update(options)
    # Generous by default, and more so under load: three interpreters may take several seconds to start,
    # and a party whose peer shares two loaded cores waits longer for each message.
    net = {"connect_timeout": scaled(30), "timeout": scaled(20)}
    net.update(network or {})
    ca = next(iter(tls_by_role.values())).ca
    return write_config(path, ca, parties, dict(FAST_TRAINING, **(training or {})), net, **(data or {}))


def _run_vfl(args, out_path, err_path):
    """A party process: ``vfl ARGS`` with its standard output and error in files."""
    out, err = open(out_path, "w", buffering=1), open(err_path, "w", buffering=1)
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    sys.stdout, sys.stderr = out, err
    from vfl.cli import main

    code = main([str(a) for a in args])
    out.flush()
    err.flush()
    os._exit(code)


# Party processes are forked from a server that imported vfl once: real processes (they can be
# killed, stopped, and have their own sockets), without paying the imports for every one.
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["vfl.cli", "vfl.federation.cli", "vfl.federation.linear"])
_COUNTER = itertools.count()


class Party:
    """One party process running ``vfl ARGS``; its output lines are read from files."""

    def __init__(self, args, folder):
        folder.mkdir(parents=True, exist_ok=True)
        n = next(_COUNTER)
        self.out_path, self.err_path = folder / f"out-{n}.txt", folder / f"err-{n}.txt"
        self.proc = _CONTEXT.Process(target=_run_vfl, args=(list(map(str, args)), self.out_path, self.err_path),
                                     daemon=True)
        self.proc.start()
        self._seen = 0

    @property
    def pid(self):
        return self.proc.pid

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def _lines(self):
        return self.out_path.read_text().splitlines() if self.out_path.exists() else []

    def wait_for_line(self, text, timeout=60):
        """Block until a line containing ``text`` is printed; fail the test past ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self._lines()):
                return
            if not self.proc.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no line with {text!r}; stdout={self._read(self.out_path)} "
                             f"stderr={self._read(self.err_path)}")

    @staticmethod
    def _read(path):
        return path.read_text() if path.exists() else ""

    def finish(self, timeout=60):
        """Wait for the exit; return ``(code, stdout, stderr)``."""
        self.proc.join(timeout)
        if self.proc.is_alive():
            self.kill()
            raise AssertionError(f"process did not stop within {timeout} s: {self._read(self.err_path)}")
        return self.proc.exitcode, self._read(self.out_path), self._read(self.err_path)

    def kill(self):
        if self.proc.is_alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.join(5)


def start_parties(command, config, data, workdir, roles=("A", "B", "C"), extra=(), split=None, coordinator="C"):
    """Start ``vfl COMMAND`` for each role (all but ``coordinator`` with their data); returns ``{role: Party}``."""
    split = split or ("train" if command == "party" else "test")
    parties = {}
    for role in roles:
        args = [command, "--config", config, "--role", role, "--workdir", workdir / role, *extra]
        if role != coordinator:
            args += ["--data", data[(role, split)]]
        parties[role] = Party(args, workdir / "output")
    return parties


@pytest.fixture
def federation(tmp_path, federation_certs):
    """A federation of three parties on free ports, with data; a function makes its federation.toml."""
    ours, _ = federation_certs
    data = write_party_data(tmp_path)
    ports = _free_ports(3)

    def make(name="federation.toml", training=None, network=None, tls=None, fresh_ports=False):
        chosen = _free_ports(3) if fresh_ports else ports
        return write_federation_file(tmp_path / name, tls or ours, chosen, training, network)

    return {"make": make, "data": data, "dir": tmp_path, "certs": federation_certs}


def finish_all(parties, timeout=60):
    """Wait for every party process; ``{role: (code, stdout, stderr)}``."""
    return {role: p.finish(timeout) for role, p in parties.items()}


def kill_all(parties):
    for p in parties.values():
        p.kill()


def run_parties(command, config, data, workdir, timeout=60, **kwargs):
    """``vfl COMMAND`` for every role (see :func:`start_parties`), to the end: ``{role: (code, stdout, stderr)}``.

    Any process still running when the others are done is killed.
    """
    parties = start_parties(command, config, data, workdir, **kwargs)
    try:
        return finish_all(parties, timeout)
    finally:
        kill_all(parties)


def kill_one_midway(config, data, workdir, victim, after_line, *, roles, coordinator):
    """Start ``vfl party`` for ``roles``, SIGKILL ``victim`` once the coordinator prints ``after_line``;
    ``{role: (code, stdout, stderr)}`` of the others, every process gone."""
    parties = start_parties("party", config, data, workdir, roles=roles, extra=["--narrate"], coordinator=coordinator)
    try:
        parties[coordinator].wait_for_line(after_line)
        parties[victim].signal(signal.SIGKILL)
        return {name: p.finish(30) for name, p in parties.items() if name != victim}
    finally:
        kill_all(parties)


def assert_succeeded(results):
    """Every party exited 0 (else the assertion quotes its standard error); returns ``results``."""
    for role, (code, out, err) in results.items():
        assert code == 0, f"{role}: {err}"
    return results


def same_model(resumed: dict, uninterrupted: dict) -> bool:
    """Two shards of one model: equal but for the run's id in ``trained_with`` (each training run has its own;
    the settings' fingerprint before the ``/`` must agree)."""
    resumed, uninterrupted = dict(resumed), dict(uninterrupted)
    ours, theirs = resumed.pop("trained_with"), uninterrupted.pop("trained_with")
    return ours.split("/")[0] == theirs.split("/")[0] and resumed == uninterrupted


def loose_files(folder):
    """Files under ``folder`` that someone other than the owner may read."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and stat.S_IMODE(p.stat().st_mode) & 0o077)
