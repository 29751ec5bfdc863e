"""``python -m benchmarks --psi --against secretflow``: SecretFlow's PSI beside vfl's, same ids, same machine.

SecretFlow (``spu`` 0.9.5) lives in a virtualenv of its own, named by ``--secretflow-python PATH`` or
``$VFL_SECRETFLOW_PYTHON``::

    python -m venv ~/sf-venv && ~/sf-venv/bin/pip install spu==0.9.5
    export VFL_SECRETFLOW_PYTHON=~/sf-venv/bin/python

For each size and each SecretFlow protocol (ECDH on curve 25519, RR22, KKRT), the two parties run as two
processes of that interpreter (``benchmarks/secretflow_side/sf_psi.py``), talking brpc with mutual TLS on
loopback with certificates of the same kind as vfl's bench.  The bytes each party sends are the kernel's
count for its TCP sockets (TLS records included; vfl's figure counts its messages' bytes).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIDE = Path(__file__).resolve().parent / "secretflow_side" / "sf_psi.py"
PROTOCOLS = ("ECDH", "RR22", "KKRT")
INSTALL = "python -m venv ~/sf-venv && ~/sf-venv/bin/pip install spu==0.9.5 (then --secretflow-python ~/sf-venv/bin/python)"
HUB, SPOKE = "B", "A"


class SecretFlowMissing(RuntimeError):
    """SecretFlow's interpreter is missing or cannot import spu; the message says how to install it."""


def default_secretflow_python() -> str | None:
    """``$VFL_SECRETFLOW_PYTHON`` where it is set, else ``None`` (no machine path is assumed)."""
    return os.environ.get("VFL_SECRETFLOW_PYTHON") or None


def check_secretflow_python(path: str | None) -> str:
    """spu's version under the interpreter ``path``; :class:`SecretFlowMissing` if it cannot import spu."""
    if not path:
        raise SecretFlowMissing(f"SecretFlow's interpreter was not given (no --secretflow-python, no "
                                f"VFL_SECRETFLOW_PYTHON): {INSTALL}")
    probe = "import spu, spu.psi; print(spu.__version__)"
    try:
        done = subprocess.run([path, "-c", probe], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as error:
        raise SecretFlowMissing(f"{path} could not be run ({error}): {INSTALL}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SecretFlowMissing(f"{path} cannot import spu ({last}): {INSTALL}")
    return done.stdout.strip().splitlines()[-1]


def run_size(n: int, overlap: float, protocol: str, secretflow_python: str, timeout: float = 1800) -> dict:
    """Both SecretFlow parties of one size and protocol as two processes; their reports by role."""
    from vfl.federation.demo import free_ports
    from vfl.transport.tls import write_federation_certs

    with tempfile.TemporaryDirectory(prefix="vfl-sf-bench-") as folder:
        write_federation_certs(folder, [SPOKE, HUB])
        ports = dict(zip((HUB, SPOKE), free_ports(2)))
        procs, logs = {}, {}
        for role in (HUB, SPOKE):
            hub, spoke = f"127.0.0.1:{ports[HUB]}", f"127.0.0.1:{ports[SPOKE]}"
            logs[role] = Path(folder) / f"log_{role}.txt"
            with open(logs[role], "w") as log:
                procs[role] = subprocess.Popen([secretflow_python, str(SIDE), role, str(n), str(overlap), protocol,
                                                hub, spoke, folder, folder], stdin=subprocess.PIPE, stdout=log,
                                               stderr=subprocess.STDOUT)
        try:
            _wait_reports(procs, logs, timeout)
        except TimeoutError:
            raise RuntimeError(f"SecretFlow PSI bench ({protocol}, {n:,}) did not finish in {timeout} s; "
                               f"its logs: {_tail(logs)}") from None
        finally:
            for proc in procs.values():            # both reported (or one failed): let them leave
                proc.stdin.close()
            for proc in procs.values():
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        reports = {}
        for role, proc in procs.items():
            output = logs[role].read_text("utf-8", "replace")
            _remove_traces(output)
            lines = [line for line in output.splitlines() if line.startswith("{")]
            if not lines:
                raise RuntimeError(f"SecretFlow PSI bench ({protocol}, {n:,}): party {role} failed with exit code "
                                   f"{proc.returncode}: {_tail({role: logs[role]})}")
            reports[role] = json.loads(lines[-1])
    return reports


def _wait_reports(procs: dict, logs: dict, timeout: float) -> None:
    """Until every party has printed its report or one has exited; TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all('\n{"role"' in logs[r].read_text("utf-8", "replace") for r in procs) \
                or any(p.poll() is not None for p in procs.values()):
            return
        time.sleep(0.1)
    raise TimeoutError


def _tail(logs: dict) -> str:
    return " | ".join(f"{role}: " + " / ".join(path.read_text("utf-8", "replace").strip().splitlines()[-3:])
                      for role, path in logs.items())


def _remove_traces(output: str) -> None:
    """spu writes a trace file under /tmp that no option turns off: remove the ones this run named."""
    for path in re.findall(r"Trace has been written to (/tmp/psi_[A-Za-z0-9_-]+\.trace)\.", output):
        Path(path).unlink(missing_ok=True)


def rows(results: list, vfl_results: list) -> list:
    """The side-by-side table's rows: per size, vfl then each SecretFlow protocol, hub then spoke."""
    from benchmarks.machine import _fmt_s

    body = []
    for n in dict.fromkeys(v["n"] for v in vfl_results):        # each size once: every vfl run, then SecretFlow's
        ours = [v for v in vfl_results if v["n"] == n]
        systems = [(_vfl_name(v), v["reports"]) for v in ours]
        systems += [(f"SecretFlow {r['protocol']}", r["reports"]) for r in results if r["n"] == n]
        expected = ours[0]["reports"][HUB]["intersection"]
        for name, reports in systems:
            for role in (HUB, SPOKE):
                r = reports[role]
                if r["intersection"] != expected:
                    raise AssertionError(f"{name} found {r['intersection']:,} shared ids at {role}, vfl {expected:,}")
                body.append([f"{n:,}", name, f"{role} ({'hub' if role == HUB else 'spoke'})", _fmt_s(r["seconds"]),
                             _fmt_s(r["cpu_seconds"]), f"{r['bytes_sent'] / 2 ** 20:.2f} MB", f"{r['intersection']:,}"])
    return body


def _vfl_name(result: dict) -> str:
    """A vfl run as the table names it: its protocol, and the X25519 engine of a DH run."""
    if result.get("protocol") == "kkrt":
        return "vfl KKRT (OT extension)"
    engine = (result["reports"][HUB].get("curve_engine") or {}).get("engine") or result.get("curve_engine", "")
    return f"vfl DH, X25519 ({engine})" if engine else "vfl DH, X25519"


def compare(sizes, overlap: float, secretflow_python: str, protocols=PROTOCOLS, vfl_results=None) -> list:
    """Every SecretFlow protocol at every size; prints progress on stderr."""
    version = check_secretflow_python(secretflow_python)
    print(f"SecretFlow: spu {version} under {secretflow_python}")
    results = []
    for n in sizes:
        for protocol in protocols:
            print(f"  SecretFlow {protocol}, {n:,} ids per party ...", file=sys.stderr, flush=True)
            results.append({"n": n, "protocol": protocol, "reports": run_size(n, overlap, protocol, secretflow_python)})
    return results
