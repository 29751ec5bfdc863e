"""``[compute]`` in ``federation.toml``: where each party runs its encrypted work (local, not fingerprinted).

Like ``[network]``, the section is local: it may differ between machines and is
not part of the settings fingerprint.  Keys set in ``[compute]`` apply to every
party that reads the file; a ``[compute.NAME]`` table sets them for party NAME
(and wins)::

    [compute]                           # every party: vfl's worker processes, one per core
    backend = "local"
    [compute.bank]                      # the bank's encrypted work goes to its own Dask cluster
    backend = "dask"
    scheduler = "tcp://10.1.0.5:8786"   # the bank's scheduler (its data centre)
    n_jobs = -1                         # all of the cluster's workers (default)
    connect_timeout = 10                # seconds to reach the scheduler (default 10)
    task_timeout = 600                  # seconds any one task may take (default 600)

Keys: ``backend`` (``"local"``: vfl's worker processes, the default; ``"dask"``:
the Dask cluster whose scheduler is at ``scheduler``), ``scheduler``
(``tcp://host:port`` or ``tls://host:port``; with ``"dask"`` only, and required
there), ``n_jobs`` (scikit-learn's meaning: ``-1`` every core or worker, ``1`` no
workers; locally the default is ``VFL_WORKERS`` or one per core),
``connect_timeout``, ``task_timeout``, and for the coordinator only
``send_private_key_to_cluster``.

The coordinator's decryption stays in its own process (two threads): its
private key goes nowhere.  Only ``send_private_key_to_cluster = true`` in the
coordinator's own ``[compute.NAME]`` table, with ``backend = "dask"``, sends its
decryptions, and with them the primes ``p`` and ``q``, to its cluster's workers.
Whatever the backend, a party's tasks (its plaintexts, masks, ciphertexts) go
only to its own cluster, which is inside its own trust domain: joblib and Dask
pickle between a party and its cluster, never between parties.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import socket
from dataclasses import dataclass

from vfl.crypto import compute
from vfl.errors import ComputeError, ConfigurationError
from vfl.transport.network import parse_address

#: Where a party's encrypted work can run.
BACKENDS = ("local", "dask")
KEYS = ("backend", "scheduler", "n_jobs", "connect_timeout", "task_timeout", "send_private_key_to_cluster")
_SCHEDULER = re.compile(r"^(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})\Z")


@dataclass(frozen=True)
class ComputeSettings:
    """One party's ``[compute]`` settings."""

    backend: str = "local"
    scheduler: str | None = None
    n_jobs: int | None = None
    connect_timeout: float = 10.0
    task_timeout: float = compute.DEFAULT_TASK_TIMEOUT
    send_private_key_to_cluster: bool = False


def parse_compute(where: str, table: dict, roles: dict[str, str]) -> dict[str, ComputeSettings]:
    """Every party's settings from the ``[compute]`` table (``roles``: party name -> role).

    Raises
    ------
    ConfigurationError
        An unknown key or party, a backend other than "local" or "dask", a Dask
        backend without a scheduler (or a scheduler without it), a malformed
        address, an ``n_jobs`` that is not a non-zero integer, a timeout that is
        not a positive number, or ``send_private_key_to_cluster`` anywhere but in the
        coordinator's own table with ``backend = "dask"``.
    """
    common = {k: v for k, v in table.items() if not isinstance(v, dict)}
    own = {k: v for k, v in table.items() if isinstance(v, dict)}
    _unknown(f"{where} [compute]", common, KEYS, "or a [compute.NAME] table for party NAME")
    for name in own:
        if name not in roles:
            raise ConfigurationError(f"{where}: [compute.{name}] names no party; the parties are {sorted(roles)}")
    if "send_private_key_to_cluster" in common:
        raise ConfigurationError(f"{where} [compute]: send_private_key_to_cluster may only be set in the "
                                 f"coordinator's own table ([compute.{_coordinator(roles)}])")
    settings = {}
    for name, role in roles.items():
        here = f"{where} [compute.{name}]" if name in own else f"{where} [compute]"
        _unknown(here, own.get(name, {}), KEYS)
        values = dict(common, **own.get(name, {}))
        if name not in own:
            here = f"{where} [compute] (for party {name})"
        settings[name] = _settings(here, name, role, values)
    return settings


def _settings(where: str, name: str, role: str, values: dict) -> ComputeSettings:
    backend = values.get("backend", "local")
    if backend not in BACKENDS:
        raise ConfigurationError(f"{where}: backend must be one of {list(BACKENDS)}, got {backend!r}")
    scheduler = values.get("scheduler")
    if backend == "dask":
        if scheduler is None:
            raise ConfigurationError(f"{where}: backend = 'dask' needs scheduler = \"tcp://host:port\", the address "
                                     f"of party {name}'s Dask scheduler")
        if not isinstance(scheduler, str) or not _valid_address(scheduler):
            raise ConfigurationError(f"{where}: scheduler must look like \"tcp://host:port\" (or tls://), got "
                                     f"{scheduler!r}")
    elif scheduler is not None:
        raise ConfigurationError(f"{where}: scheduler is only used with backend = 'dask' (backend is {backend!r})")
    n_jobs = values.get("n_jobs")
    compute.check_n_jobs(n_jobs, f"{where}: n_jobs")
    timeouts = {key: _seconds(where, values, key, default)
                for key, default in (("connect_timeout", 10.0), ("task_timeout", compute.DEFAULT_TASK_TIMEOUT))}
    send_key = values.get("send_private_key_to_cluster", False)
    if not isinstance(send_key, bool):
        raise ConfigurationError(f"{where}: send_private_key_to_cluster must be true or false, got {send_key!r}")
    if send_key and role != "coordinator":
        raise ConfigurationError(f"{where}: send_private_key_to_cluster is for the coordinator only; party {name} "
                                 "holds no private key")
    if send_key and backend != "dask":
        raise ConfigurationError(f"{where}: send_private_key_to_cluster = true needs backend = 'dask' (the "
                                 "local backend never sends the private key anywhere)")
    return ComputeSettings(backend, scheduler, None if n_jobs is None else int(n_jobs),
                           send_private_key_to_cluster=send_key, **timeouts)


def _valid_address(address: str) -> bool:
    match = _SCHEDULER.match(address)
    return bool(match) and 0 < int(match.group(3)) < 65536


def _seconds(where: str, values: dict, key: str, default: float) -> float:
    value = values.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigurationError(f"{where}: {key} must be a positive number of seconds, got {value!r}")
    return float(value)


def _unknown(where: str, table: dict, allowed, hint: str = "") -> None:
    extra = sorted(set(table) - set(allowed))
    if extra:
        raise ConfigurationError(f"{where}: unknown key(s) {extra}; expected some of {sorted(allowed)}"
                                 + (f" {hint}" if hint else ""))


def _coordinator(roles: dict[str, str]) -> str:
    return next((n for n, r in roles.items() if r == "coordinator"), "NAME")


# --------------------------------------------------------------------------- running under the settings

@contextlib.contextmanager
def party_compute(settings: ComputeSettings, name: str):
    """Run the enclosed code with party ``name``'s encrypted work where ``settings`` say.

    With ``backend = "dask"``: connects to the scheduler (within
    ``connect_timeout`` seconds), sends the work there through joblib's Dask
    backend, and closes the connection at the end.

    Raises
    ------
    ConfigurationError
        The Dask extra is not installed.
    ComputeError
        The scheduler cannot be reached in time, or has no workers.
    """
    if settings.backend == "local":
        with compute.use(compute.capture(settings.n_jobs)):
            yield
        return
    try:
        import joblib
        from distributed import Client
    except ImportError:
        raise ConfigurationError(f"party {name}: backend = 'dask' needs Dask: pip install 'vfl[dask]'") from None
    address = settings.scheduler
    _probe_scheduler(address, settings.connect_timeout, name)
    try:
        client = Client(address, timeout=settings.connect_timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ComputeError(f"party {name}: cannot reach its Dask scheduler at {address} within "
                           f"{settings.connect_timeout:g} s ({' '.join(str(exc).split()) or type(exc).__name__})") \
            from None
    try:
        with joblib.parallel_config(backend="dask", client=client,
                                    wait_for_workers_timeout=settings.connect_timeout):
            plan = compute.capture(settings.n_jobs, send_private_key=settings.send_private_key_to_cluster,
                                   task_timeout=settings.task_timeout,
                                   label=f"party {name}'s Dask cluster at {address}")
            with compute.use(plan):
                yield
    finally:
        client.close()


#: A Dask scheduler greets a new connection with a small handshake frame: at most this many bytes.
_DASK_GREETING_MAX = 1 << 20


def _probe_scheduler(address: str, timeout: float, name: str) -> None:
    """Check that a ``tcp://`` scheduler speaks Dask before handing it to ``Client``; else one clear error.

    A Dask scheduler writes its handshake at once on a new connection: an 8-byte
    little-endian length, then a frame of that size.  Something that accepts the
    connection and says nothing (an HTTP server, a stalled socket) would keep
    ``Client`` waiting well past ``connect_timeout``; one that sends other bytes
    would have it allocate whatever length they spell.  Other schemes (``tls://``,
    ``inproc://``) are left to ``Client``.
    """
    scheme, _, rest = address.partition("://")
    if scheme != "tcp":
        return
    where = f"party {name}: its Dask scheduler at {address}"
    try:
        host, port = parse_address(rest)
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            greeting = b""
            while len(greeting) < 8:
                chunk = sock.recv(8 - len(greeting))
                if not chunk:
                    raise ComputeError(f"{where} closed the connection without a Dask handshake: is it a Dask "
                                       "scheduler?")
                greeting += chunk
    except socket.timeout:
        raise ComputeError(f"{where} accepted the connection but sent no Dask handshake within {timeout:g} s: is "
                           "it a Dask scheduler (an HTTP dashboard port, say)?") from None
    except (OSError, ValueError) as exc:
        raise ComputeError(f"party {name}: cannot reach its Dask scheduler at {address} within {timeout:g} s "
                           f"({exc.strerror or exc})") from None
    size = int.from_bytes(greeting, "little")
    if not 0 < size <= _DASK_GREETING_MAX:
        raise ComputeError(f"{where} answered with bytes that are not a Dask handshake ({greeting!r}): is it a "
                           "Dask scheduler?")


def uses_compute(run):
    """Decorate ``run(config, role, ...)`` to run under party ``role``'s ``[compute]`` settings."""
    @functools.wraps(run)
    def wrapper(config, role, *args, **kwargs):
        settings = getattr(config, "compute", {}).get(role, ComputeSettings())
        with party_compute(settings, role):
            return run(config, role, *args, **kwargs)

    return wrapper
