"""Where the engine's parallel work runs: this thread, vfl's worker processes, or a joblib backend.

A *plan* (:class:`ComputePlan`) says how :func:`vfl.crypto.workers.run` spreads a
call's tasks:

* ``"inline"``: every task in the calling thread (``n_jobs=1``, ``VFL_WORKERS=0``
  or ``1``, one core);
* ``"local"``: vfl's own worker processes on this machine (the default; see
  :mod:`vfl.crypto.workers`), ``VFL_WORKERS`` of them, else one per usable core;
* ``"joblib"``: ``joblib.Parallel`` with the backend of the caller's
  ``joblib.parallel_config`` — Dask (``backend="dask"``: the cluster of the current
  ``dask.distributed.Client``), or loky, threading, Ray... when asked for.

The plan comes from the calling thread: the joblib configuration it is in
(joblib keeps it per thread) and ``n_jobs`` (scikit-learn's meaning: ``None`` the
default, ``-1`` every core or worker, ``1`` no workers).  Code that moves work to
other threads (the in-process estimators run each party in its own thread)
captures the plan in the caller's thread (:func:`capture`) and re-enters it in
each new thread (:func:`use`, :func:`bind`), joblib configuration included.

What crosses to a joblib backend's workers: the name of a ``_task_`` function of
``vfl.crypto`` and its arguments encoded as bytes by :mod:`vfl.crypto._codec`
(no ciphertext object is pickled); the answer comes back the same way.  Tasks
never carry a private key unless the plan was made with ``send_private_key=True``
(see :func:`capture`).  Randomness is drawn on the worker, from its own
``os.urandom``.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import threading
from dataclasses import dataclass, field

import numpy as np

from vfl.crypto import _codec
from vfl.crypto.engine import get_engine
from vfl.errors import ComputeError, ConfigurationError


class WorkerError(RuntimeError):
    """A task raised an exception inside a worker (a local process or a joblib backend's)."""


#: Local worker processes: below this many modular multiplications (~8 ms at 2048 bits) a call
#: stays in the calling thread; the pipes' round trip is well under a millisecond.
LOCAL_THRESHOLD = 1_500
#: A joblib backend on this machine (loky, threading...): each ``joblib.Parallel`` call costs
#: about 10 ms (measured; it polls its jobs every 10 ms), so calls under ~20 ms stay here.
JOBLIB_THRESHOLD = 4_000
#: A cluster (Dask...): about 20-40 ms per call (measured on a LocalCluster) and a few ms per
#: task, so calls under ~80 ms of work stay in the calling thread and tasks carry at least
#: ~60 ms of work each (task overhead under 5%).
REMOTE_THRESHOLD = 16_000
REMOTE_MIN_TASK = 12_000
#: joblib backends that run on this machine (their workers are threads or child processes).
LOCAL_BACKENDS = ("LokyBackend", "MultiprocessingBackend", "ThreadingBackend", "SequentialBackend")
#: Seconds a task may take on a joblib backend before the call fails (instead of waiting forever).
DEFAULT_TASK_TIMEOUT = 600.0


@dataclass(frozen=True)
class ComputePlan:
    """How the parallel work of one thread runs.

    Attributes
    ----------
    kind : {"inline", "local", "joblib"}
    workers : int
        Parallel lanes: local worker processes, or the joblib backend's workers
        (its cores for Dask); 0 inline.
    backend : joblib backend or None
        The caller's backend (kind "joblib"); each call runs on a fresh copy of it.
    joblib_config : dict
        The keys the caller set with ``joblib.parallel_config``, re-entered in other threads.
    n_jobs : int or None
        What ``joblib.Parallel`` is given.
    remote : bool
        Whether the backend's workers may be other machines (not loky, threading...).
    send_private_key : bool
        Whether tasks may carry a private key (decryption) to the backend's workers.
    task_timeout : float or None
        Seconds a joblib task may take.
    label : str
        What to call the backend in error messages.
    """

    kind: str = "local"
    workers: int = 0
    backend: object = None
    joblib_config: dict = field(default_factory=dict)
    n_jobs: int | None = None
    remote: bool = False
    send_private_key: bool = False
    task_timeout: float | None = DEFAULT_TASK_TIMEOUT
    label: str = "vfl's worker processes"

    @property
    def threshold(self) -> int:
        """Modular multiplications below which a call stays in the calling thread."""
        if self.kind == "joblib":
            return REMOTE_THRESHOLD if self.remote else JOBLIB_THRESHOLD
        return LOCAL_THRESHOLD

    @property
    def min_task(self) -> int:
        """Modular multiplications each task should carry at least (0: no minimum)."""
        return REMOTE_MIN_TASK if self.kind == "joblib" and self.remote else 0


INLINE = ComputePlan(kind="inline", workers=0, label="the calling thread")
_LOCAL = threading.local()


def _in_worker() -> bool:
    return os.environ.get("VFL_IN_WORKER") == "1"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def local_count() -> int:
    """vfl's local worker processes by default: ``VFL_WORKERS``, else one per usable core (0 inside a worker)."""
    if _in_worker():
        return 0
    env = os.environ.get("VFL_WORKERS")
    if env is not None and env.strip():
        try:
            return max(0, int(env))
        except ValueError:
            return 0
    return usable_cores()


def check_n_jobs(n_jobs, where: str = "n_jobs") -> None:
    """``None`` or a non-zero integer (not a bool, not a float); else a :class:`ConfigurationError`."""
    if n_jobs is None:
        return
    if isinstance(n_jobs, (bool, np.bool_)) or not isinstance(n_jobs, (int, np.integer)) or int(n_jobs) == 0:
        raise ConfigurationError(f"{where} must be None or a non-zero integer (-1: every core, 1: no worker "
                                 f"processes), got {n_jobs!r}")


def check_engine(engine, where: str = "engine") -> None:
    """``None`` or the name of a registered crypto engine; else a :class:`ConfigurationError`."""
    if engine is None:
        return
    try:
        if not isinstance(engine, str):
            raise ValueError
        get_engine(engine)
    except ValueError:
        raise ConfigurationError(f"{where} must be None or the name of a registered crypto engine (such as 'fast' "
                                 f"or 'simple'), got {engine!r}") from None


def _cores_for(n_jobs: int) -> int:
    """scikit-learn's ``n_jobs`` as a number of local processes: ``-1`` every core, ``-2`` all but one..."""
    n_jobs = int(n_jobs)
    return n_jobs if n_jobs > 0 else max(1, usable_cores() + 1 + n_jobs)


# -- joblib's configuration of this thread ---------------------------------------------------
def joblib_config() -> dict:
    """The keys this thread's ``joblib.parallel_config`` set explicitly (``{}`` outside any)."""
    try:
        from joblib import parallel as jp
    except ImportError:                       # joblib absent: nobody can have configured it
        return {}
    config = getattr(jp._backend, "config", None)      # joblib keeps it per thread
    if not config:
        return {}
    defaults = jp.default_parallel_config
    return {key: value for key, value in config.items() if value is not defaults.get(key)}


def fresh_backend(backend):
    """A new instance of a joblib backend, so that concurrent calls from several threads do not share one.

    joblib backends keep per-call state (the Dask backend its result collector);
    two parties' threads calling ``Parallel`` at once on one instance would mix it up.
    """
    cls = type(backend)
    if hasattr(backend, "client") and hasattr(backend, "submit_kwargs"):       # joblib's Dask backend
        fresh = cls(client=backend.client, wait_for_workers_timeout=backend.wait_for_workers_timeout,
                    **backend.submit_kwargs)
    else:
        try:
            fresh = cls()
        except TypeError:                     # a backend that needs arguments: used as it is
            return backend
    for attr in ("nesting_level", "inner_max_num_threads"):
        if hasattr(backend, attr):
            setattr(fresh, attr, getattr(backend, attr))
    return fresh


def _backend_label(backend) -> str:
    client = getattr(backend, "client", None)
    if client is not None:
        address = getattr(getattr(client, "scheduler", None), "address", None)
        return f"the Dask cluster at {address}" if address else "the Dask cluster"
    return f"joblib's {type(backend).__name__.replace('Backend', '').lower()} backend"


# -- plans -------------------------------------------------------------------------------------
def current() -> ComputePlan:
    """The plan of this thread: the one entered with :func:`use`, else resolved from its settings."""
    plan = getattr(_LOCAL, "plan", None)
    return plan if plan is not None else capture()


def capture(n_jobs=None, send_private_key: bool | None = None, task_timeout: float | None = None,
            label: str | None = None) -> ComputePlan:
    """The plan for work started from this thread, to re-enter in the threads it starts.

    Parameters
    ----------
    n_jobs : int or None
        scikit-learn's meaning.  ``None``: the plan entered in this thread if any,
        else the ``n_jobs`` of this thread's ``joblib.parallel_config``, else the
        default (vfl's local worker processes: ``VFL_WORKERS``, else one per core;
        under a joblib backend: all of its workers).  ``-1``: every core or
        worker; ``1``: none, all work in the calling thread.
    send_private_key : bool, optional
        Let decryption go to the joblib backend's workers (the private key then
        travels with the tasks).  Off unless asked for: a coordinator's private key
        stays in its own process.
    task_timeout : float, optional
        Seconds a task may take on a joblib backend before the call fails.
    label : str, optional
        What to call the backend in error messages (for example the party's cluster).

    Raises
    ------
    ComputeError
        The joblib backend cannot say how many workers it has (a Dask cluster
        without workers, or gone).
    """
    check_n_jobs(n_jobs)
    entered = getattr(_LOCAL, "plan", None)
    if entered is not None and n_jobs is None and send_private_key is None and task_timeout is None:
        return entered
    if _in_worker():
        return INLINE
    config = joblib_config()
    keep = bool(entered.send_private_key) if entered is not None and send_private_key is None else \
        bool(send_private_key)
    timeout = task_timeout if task_timeout is not None else (
        entered.task_timeout if entered is not None else DEFAULT_TASK_TIMEOUT)
    if n_jobs is None:
        n_jobs = config.get("n_jobs")
    backend = config.get("backend")
    if backend is None:
        count = local_count() if n_jobs is None else _cores_for(n_jobs)
        if count < 2:
            return ComputePlan(kind="inline", workers=0, joblib_config=config, label="the calling thread")
        return ComputePlan(kind="local", workers=count, joblib_config=config)
    if n_jobs is not None and int(n_jobs) == 1:
        return ComputePlan(kind="inline", workers=0, joblib_config=config, label="the calling thread")
    name = label or _backend_label(backend)
    jobs = -1 if n_jobs is None else int(n_jobs)
    try:
        slots = int(fresh_backend(backend).effective_n_jobs(jobs))
    except Exception as exc:                  # noqa: BLE001 - a cluster that cannot answer: say which
        raise ComputeError(f"{name}: cannot use it ({type(exc).__name__}: {_one_line(exc)})") from None
    if jobs > 0:
        slots = min(slots, jobs)
    remote = type(backend).__name__ not in LOCAL_BACKENDS
    if slots < 2 and not remote:
        return ComputePlan(kind="inline", workers=0, joblib_config=config, label="the calling thread")
    return ComputePlan(kind="joblib", workers=max(slots, 1), backend=backend, joblib_config=config, n_jobs=jobs,
                       remote=remote, send_private_key=keep, task_timeout=timeout, label=name)


@contextlib.contextmanager
def use(plan: ComputePlan):
    """Run the enclosed code under ``plan`` in this thread, joblib's configuration included."""
    previous = getattr(_LOCAL, "plan", None)
    _LOCAL.plan = plan
    try:
        if plan.joblib_config:
            import joblib

            accepted = inspect.signature(joblib.parallel_config).parameters
            with joblib.parallel_config(**{k: v for k, v in plan.joblib_config.items() if k in accepted}):
                yield plan
        else:
            yield plan
    finally:
        _LOCAL.plan = previous


def bind(fn, plan: ComputePlan | None = None):
    """``fn`` wrapped to run under ``plan`` (default: this thread's, captured now) in whatever thread calls it."""
    plan = capture() if plan is None else plan

    def bound(*args, **kwargs):
        with use(plan):
            return fn(*args, **kwargs)

    return bound


def threads() -> int:
    """Threads for work that releases the GIL (``powmod``): 1 when the plan is inline, else the local default."""
    return 1 if current().kind == "inline" else max(1, local_count())


# -- running tasks on a joblib backend --------------------------------------------------------
def run_joblib(fn, tasks: list, plan: ComputePlan) -> list:
    """``[fn(*args) for args in tasks]`` on the plan's joblib backend, arguments and results as codec bytes."""
    from joblib import Parallel, delayed

    if getattr(fn, "carries_private_key", False) and not plan.send_private_key:
        raise ConfigurationError(f"refusing to send a private key to {plan.label}: decryption stays in this "
                                 "process unless the setting send_private_key_to_cluster is on")
    module, name = fn.__module__, fn.__qualname__
    payloads = [_codec.encode(list(args)) for args in tasks]
    try:
        replies = Parallel(n_jobs=plan.n_jobs, backend=fresh_backend(plan.backend), batch_size=1,
                           pre_dispatch="all", max_nbytes=None, timeout=plan.task_timeout)(
            delayed(remote_task)(module, name, payload) for payload in payloads)
    except Exception as exc:                  # noqa: BLE001 - the backend failed, not a task: one clear error
        raise ComputeError(f"{plan.label} failed while running {len(tasks)} vfl tasks "
                           f"({type(exc).__name__}: {_one_line(exc)})") from None
    results = []
    for reply in replies:
        answer = _codec.decode(reply) if isinstance(reply, (bytes, bytearray)) else None
        if not isinstance(answer, tuple) or not answer:
            raise ComputeError(f"{plan.label} returned something other than a vfl task's answer")
        if not answer[0]:
            raise WorkerError(f"{answer[1]} in a vfl task on {plan.label}: {answer[2]}")
        results.append(answer[1])
    return results


def remote_task(module: str, name: str, payload: bytes) -> bytes:
    """Run one task where a joblib backend put it: decode, run a ``_task_`` function of ``vfl.crypto``, encode.

    Returns ``(True, result)`` or ``(False, error type, message)``, encoded.
    """
    try:
        if not module.startswith("vfl.crypto.") or not name.startswith("_task_"):
            raise ValueError(f"refusing task {module}.{name}")
        args = _codec.decode(payload)
        fn = getattr(importlib.import_module(module), name)
        with use(INLINE):
            result = fn(*args)
        return _codec.encode((True, result))
    except Exception as exc:                  # noqa: BLE001 - reported to the caller as a WorkerError
        return _codec.encode((False, type(exc).__name__, str(exc)))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or "no message"
