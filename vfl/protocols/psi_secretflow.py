"""Entity alignment through SecretFlow's PSI engine (``spu`` 0.9.5, protocol RR22), pair by pair.

An optional backend of :mod:`vfl.deploy.align` (``[data] psi_backend =
"secretflow-rr22"``; ``pip install vfl[secretflow]``).  vfl keeps what it
owns: the canonical ids and their checks (done before this module is called),
the row counts and the ``min_rows`` refusal at every party, the common order
and the last step; SecretFlow's engine only computes each hub–spoke pairwise
intersection, over its own network stack (brpc, mutual TLS with the parties'
federation certificates)::

    Step  Hub                                            Spoke j
    1     -                                              row count, engine version -> hub (vfl session)
          every row count, a fresh link id, or a refusal -> every spoke (vfl session)
    2     RR22 with spoke j (hub: receiver, rank 0), one engine process per pair, both parties receive
          the pairwise intersection (``broadcast_result``); ids cross as hex of their canonical bytes
    3     keeps its rows matched by every spoke, in the order of their ids' bytes; tells each spoke the
          positions of those rows in its pairwise list (vfl session)
          -> spoke j: positions in its pairwise list      maps them to its own rows

What each party learns (semi-honest, as spu's RR22 with ``broadcast_result =
true`` gives): both parties of a pair learn their pairwise intersection (the
ids they share); every party learns every party's row count and the final
intersection's size.  With K >= 2 spokes a spoke therefore learns which of its
rows the hub holds, more than vfl's own protocol tells it (see docs/psi.md).

The engine runs in a child process of the party (``python -m
vfl.protocols.psi_secretflow engine SPEC.json``): its logs (which it writes to
standard output) go to a file in a private temporary folder, a crash in its C++
code ends only that process, and the party reports it as a
:class:`~vfl.errors.ProtocolError` naming the peer.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from vfl.errors import ConfigurationError, DataError, ProtocolError
from vfl.protocols.psi import by_role, check_ids, final_positions, parse_sizes, spoke_accepts, too_small
from vfl.transport import Endpoint
from vfl.transport.tls import TLSFiles

#: ``[data] psi_backend`` naming this backend.
BACKEND = "secretflow-rr22"
VERSION = "vfl-sfpsi-1"
#: The ``spu`` release this backend was written and tested against.
SPU_VERSION = "0.9.5"
INSTALL_HINT = "pip install vfl[secretflow]"
_KEY = "k"
_TRACE = re.compile(r"Trace has been written to (\S+\.trace)\.")


#: What each message around SecretFlow's PSI engine carries, by sender (the hub is the label party), as
#: :mod:`vfl.protocols.messages` says; the engine's own traffic runs on its own links.
MESSAGES = {
    ("feature", "sfpsi_hello"): "the protocol's version and its row count",
    ("label", "sfpsi_setup"): "every party's row count and the id of the engine's link (or why the run stops)",
    ("feature", "sfpsi_done"): "its engine runs are over",
    ("label", "sfpsi_result"): "the size of the intersection and which of the spoke's rows are in it, in the common "
                               "order",
}


def spu_installed() -> bool:
    """Whether SecretFlow's ``spu`` package can be imported here (without importing it: it is large)."""
    return importlib.util.find_spec("spu") is not None


def require_spu(where: str) -> None:
    """Raise a :class:`ConfigurationError` naming ``where`` and the install command if spu is missing."""
    if not spu_installed():
        raise ConfigurationError(f"{where}: psi_backend = {BACKEND!r} runs SecretFlow's PSI engine, and its package "
                                 f"'spu' is not installed for {sys.executable}: {INSTALL_HINT} (spu {SPU_VERSION}), "
                                 "or leave psi_backend out for vfl's own PSI")


@dataclass(frozen=True)
class EngineLinks:
    """Where the engine of each hub–spoke pair listens, and the TLS files it uses.

    Parameters
    ----------
    ports : dict of str to (str, int)
        Each party's engine address (host, port).  The hub listens on ``port + j``
        for the ``j``-th spoke (0-based, in the order of ``spokes``).
    tls : TLSFiles
        This party's federation CA, certificate and key: brpc runs mutual TLS and
        verifies the peer's chain against the CA.
    connect_timeout, timeout : float
        Seconds to reach the peer's engine, and to wait for any one of its messages.
    """

    ports: dict[str, tuple[str, int]]
    tls: TLSFiles
    connect_timeout: float = 120.0
    timeout: float = 300.0

    def pair(self, hub: str, spoke: str, index: int) -> list[list]:
        """``[[hub, "host:port"], [spoke, "host:port"]]``: the engine's two parties, hub first (rank 0)."""
        hub_host, hub_port = self.ports[hub]
        spoke_host, spoke_port = self.ports[spoke]
        return [[hub, f"{hub_host}:{hub_port + index}"], [spoke, f"{spoke_host}:{spoke_port}"]]


# -- the engine, in a child process ---------------------------------------------------------------
def _write_ids(path: Path, ids: Sequence[bytes]) -> None:
    """One column of hex: the canonical ids' bytes, safe from any CSV quoting or separator."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="ascii") as f:
        f.write(_KEY + "\n")
        for value in ids:
            f.write(value.hex() + "\n")


def _read_ids(path: Path) -> list[bytes]:
    with open(path, encoding="ascii") as f:
        lines = [line.strip().strip('"') for line in f]
    if not lines or lines[0] != _KEY:
        raise ValueError(f"the engine's output {path.name} has no {_KEY!r} column")
    return [bytes.fromhex(line) for line in lines[1:] if line]


def _engine_spec(folder: Path, rank: int, parties: list, links: EngineLinks, link_id: str) -> Path:
    spec = {"rank": rank, "parties": parties, "link_id": link_id, "input": str(folder / "ids.csv"),
            "output": str(folder / "out.csv"), "report": str(folder / "report.json"),
            "tls": {"ca": str(links.tls.ca), "certificate": str(links.tls.certificate), "key": str(links.tls.key)},
            "connect_timeout": links.connect_timeout, "timeout": links.timeout}
    path = folder / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def run_engine(spec: dict) -> dict:
    """Run one party's side of RR22 as ``spec`` says; write its counts to ``spec["report"]``.  In the child process.

    The report is written as soon as the engine returns; the child then keeps its link open until the
    party closes its standard input (:meth:`_Pair.stop`), which it does once the peer's engine has returned
    too (the peer says so over vfl's session): an engine that left first could take with it a message its
    peer still waits for.
    """
    import spu.libspu.link as link
    import spu.psi as psi

    desc = link.Desc()
    desc.id = spec["link_id"]
    for name, address in spec["parties"]:
        desc.add_party(name, address)
    desc.connect_retry_interval_ms = 500
    desc.connect_retry_times = max(1, int(spec["connect_timeout"] * 2))
    desc.recv_timeout_ms = int(spec["timeout"] * 1000)
    desc.enable_ssl = True
    for options in (desc.client_ssl_opts, desc.server_ssl_opts):
        options.cert.certificate_path = spec["tls"]["certificate"]
        options.cert.private_key_path = spec["tls"]["key"]
        options.verify.ca_file_path = spec["tls"]["ca"]
        options.verify.verify_depth = 1          # the federation CA signs every party's certificate
    context = link.create_brpc(desc, spec["rank"])
    protocol = psi.PsiProtocolConfig(protocol=psi.PsiProtocol.PROTOCOL_RR22, receiver_rank=0,
                                     broadcast_result=True)
    config = psi.PsiExecuteConfig(
        protocol_conf=protocol,
        input_params=psi.InputParams(path=spec["input"], selected_keys=[_KEY], keys_unique=True),
        output_params=psi.OutputParams(path=spec["output"]))
    report = psi.psi_execute(config, context)
    counts = {"original": report.original_count, "intersection": report.intersection_count}
    Path(spec["report"]).write_text(json.dumps(counts))
    return counts


def _engine_main(argv) -> int:
    run_engine(json.loads(Path(argv[0]).read_text()))
    sys.stdout.flush()
    sys.stdin.read()             # until the party says both engines are done
    os._exit(0)                  # no link teardown: brpc's may fail once the peer has gone


class _Pair:
    """One engine child process: this party's side of RR22 with ``peer``, in a private folder."""

    def __init__(self, me: str, peer: str, ids: Sequence[bytes], rank: int, parties: list, links: EngineLinks,
                 link_id: str):
        self.me, self.peer, self.ids = me, peer, ids
        self.folder = Path(tempfile.mkdtemp(prefix="vfl-sfpsi-"))          # mode 0700: it holds the ids
        _write_ids(self.folder / "ids.csv", ids)
        spec = _engine_spec(self.folder, rank, parties, links, link_id)
        self.log = open(self.folder / "engine.log", "wb")
        self.deadline = links.connect_timeout + 4 * links.timeout
        self.process = subprocess.Popen([sys.executable, "-m", "vfl.protocols.psi_secretflow", "engine", str(spec)],
                                        stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT)

    def rows(self) -> np.ndarray:
        """This party's rows (positions in its ids) of the pairwise intersection, in the order of the ids' bytes.

        The engine process stays (its link open) until :meth:`stop`.
        """
        code = self._wait()
        if code is not None or not (self.folder / "report.json").exists():
            log = (self.folder / "engine.log").read_text("utf-8", "replace")
            _remove_traces(log)
            raise ProtocolError(f"{self.me}: SecretFlow's PSI engine with {self.peer} failed (exit code {code}): "
                                f"{_last_error(log)}")
        matched = _read_ids(self.folder / "out.csv")
        (self.folder / "out.csv").unlink()
        position = {value: row for row, value in enumerate(self.ids)}
        rows = [position.get(value, -1) for value in sorted(matched)]
        if len(set(rows)) != len(rows) or -1 in rows:
            raise ProtocolError(f"{self.me}: SecretFlow's PSI engine with {self.peer} returned ids {self.me} does "
                                "not hold, or one id twice; stopping")
        return np.asarray(rows, dtype=np.int64)

    def _wait(self) -> int | None:
        """None once the engine has written its report, else its exit code; a refused TLS handshake or the
        deadline end it with a ProtocolError."""
        waited = 0.0
        while True:
            if (self.folder / "report.json").exists():
                return None
            try:
                return self.process.wait(0.2)
            except subprocess.TimeoutExpired:
                waited += 0.2
            refused = _tls_refusal((self.folder / "engine.log").read_text("utf-8", "replace"))
            if refused or waited >= self.deadline:
                self.process.kill()
                self.process.wait()
                _remove_traces((self.folder / "engine.log").read_text("utf-8", "replace"))
                if refused:
                    raise ProtocolError(f"{self.me}: the TLS handshake between {self.me}'s and {self.peer}'s PSI "
                                        f"engines failed ({refused}): is each party's certificate signed by the "
                                        "federation's CA (federation.toml [federation] ca)?")
                raise ProtocolError(f"{self.me}: SecretFlow's PSI engine with {self.peer} did not finish in "
                                    f"{self.deadline:.0f} s; stopping")

    def stop(self) -> None:
        """End the engine process (closing its input: it leaves at once) and remove the private folder."""
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if not self.log.closed:
            self.log.close()
        _remove_traces((self.folder / "engine.log").read_text("utf-8", "replace"))
        shutil.rmtree(self.folder, ignore_errors=True)


def _remove_traces(log: str) -> None:
    """The engine writes a trace file under /tmp that no option turns off: remove the ones this run named."""
    for path in _TRACE.findall(log):
        if re.fullmatch(r"/tmp/psi_[A-Za-z0-9_-]+\.trace", path):
            Path(path).unlink(missing_ok=True)


def _tls_refusal(log: str) -> str | None:
    """brpc's reason for a refused TLS handshake (a foreign or unsigned certificate), if the log has one."""
    found = re.search(r"Fail to SSL_do_handshake: (?:error:[0-9A-F]+:)?(?:SSL routines::)?([^\n]+)", log)
    return found.group(1).strip() if found else None


def _last_error(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"error|exception|fail", line, re.I)]
    picked = (errors or lines or ["no output"])[-3:]
    return " | ".join(line[-300:] for line in picked)


# -- the hub and the spokes -----------------------------------------------------------------------
def run_hub(ep: Endpoint, ids: Sequence[bytes], spokes: Sequence[str], min_rows: int, links: EngineLinks,
            sizes_out: dict | None = None) -> np.ndarray:
    """The hub's program: one RR22 run per spoke, then each spoke's positions of the rows every spoke matched.

    Returns
    -------
    numpy.ndarray
        The hub's rows (positions in ``ids``) of the intersection, in the order of the ids' bytes.
    """
    spokes = list(spokes)
    if not spokes or len(set(spokes)) != len(spokes) or ep.role in spokes:
        raise ValueError("the hub needs one or more distinct spokes other than itself")
    ids = check_ids(ids, ep.role)
    sizes = {ep.role: len(ids)}
    for spoke in spokes:
        hello = ep.recv(spoke, "sfpsi_hello")
        if hello["version"] != VERSION:
            raise ProtocolError(f"{ep.role}: {spoke} runs PSI protocol {hello['version']!r}, not {VERSION!r}")
        if type(hello["rows"]) is not int or hello["rows"] < 0:
            raise ProtocolError(f"{ep.role}: {spoke} sent a malformed 'sfpsi_hello'")
        sizes[spoke] = hello["rows"]
    if sizes_out is not None:
        sizes_out.update(sizes)
    refusal = too_small(sizes, min_rows)
    link_ids = {spoke: os.urandom(16).hex() for spoke in spokes}
    for spoke in spokes:
        ep.send(spoke, "sfpsi_setup", "public", sizes=json.dumps(sizes), refusal=refusal or "",
                link_id=link_ids[spoke])
    if refusal:
        raise DataError(f"{ep.role}: {refusal}")

    pairs = [_Pair(ep.role, spoke, ids, 0, links.pair(ep.role, spoke, j), links, link_ids[spoke])
             for j, spoke in enumerate(spokes)]
    try:
        pairwise = _all_rows(pairs)
        for spoke in spokes:           # each spoke's engine has returned too: the engines may leave
            ep.recv(spoke, "sfpsi_done")
    finally:
        for pair in pairs:
            pair.stop()
    common = pairwise[0]
    for rows in pairwise[1:]:
        common = common[np.isin(common, rows)]               # keeps the first pair's order: the ids' bytes
    refusal = too_small(sizes, min_rows, len(common))
    for spoke, rows in zip(spokes, pairwise):
        order = np.argsort(rows, kind="stable")
        positions = order[np.searchsorted(rows, common, sorter=order)]
        ep.send(spoke, "sfpsi_result", "masked", refusal=refusal or "", size=len(common),
                positions=np.zeros(0, np.int64) if refusal else positions.astype(np.int64))
    if refusal:
        raise DataError(f"{ep.role}: {refusal}")
    return common


def _all_rows(pairs: list[_Pair]) -> list[np.ndarray]:
    """Every pair's rows, the engine processes running at once; the first failure is raised."""
    results: list = [None] * len(pairs)

    def wait(i: int) -> None:
        try:
            results[i] = pairs[i].rows()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            results[i] = exc

    threads = [threading.Thread(target=wait, args=(i,), daemon=True) for i in range(len(pairs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def run_spoke(ep: Endpoint, ids: Sequence[bytes], hub: str, index: int, min_rows: int, links: EngineLinks,
              sizes_out: dict | None = None) -> np.ndarray:
    """Spoke ``index``'s program (0-based among the spokes): RR22 with the hub, then the hub's positions.

    Returns
    -------
    numpy.ndarray
        The spoke's rows (positions in ``ids``) of the intersection, in the order of the ids' bytes.
    """
    ids = check_ids(ids, ep.role)
    ep.send(hub, "sfpsi_hello", "public", version=VERSION, rows=len(ids))
    setup = ep.recv(hub, "sfpsi_setup")
    sizes = parse_sizes(ep, hub, setup["sizes"], "sfpsi_setup")
    if sizes.get(ep.role) != len(ids) or hub not in sizes or not re.fullmatch(r"[0-9a-f]{32}", str(setup["link_id"])):
        raise ProtocolError(f"{ep.role}: {hub} sent a malformed 'sfpsi_setup'")
    spoke_accepts(ep, sizes, setup["refusal"], min_rows, sizes_out)
    pair = _Pair(ep.role, hub, ids, 1, links.pair(hub, ep.role, index), links, setup["link_id"])
    try:
        pairwise = pair.rows()
        ep.send(hub, "sfpsi_done", "public")
        result = ep.recv(hub, "sfpsi_result")     # sent once the hub's engines have returned
    finally:
        pair.stop()
    positions = final_positions(ep, hub, result, len(pairwise), sizes, min_rows, "sfpsi_result")
    return pairwise[positions]


def align_rows(ep: Endpoint, ids: Sequence[bytes], hub: str, spokes: Sequence[str], min_rows: int,
               links: EngineLinks, sizes_out: dict | None = None) -> np.ndarray:
    """This endpoint's role (hub if ``ep.role == hub``, else a spoke); its rows in the order common to all."""
    return by_role(ep, hub, spokes, lambda: run_hub(ep, ids, spokes, min_rows, links, sizes_out),
                   lambda: run_spoke(ep, ids, hub, list(spokes).index(ep.role), min_rows, links, sizes_out))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "engine":
        sys.exit(_engine_main(sys.argv[2:]))
    sys.exit("usage: python -m vfl.protocols.psi_secretflow engine SPEC.json (run by vfl party, not by hand)")
