"""Worker processes for the fast engine: both cores, started safely, stopped cleanly.

Modular multiplication in ``gmpy2`` holds the GIL, so a second core needs a
second process.  (Work that runs in C with the GIL released, the fast curve
engine's, takes threads of the calling process instead: :func:`run_threads`.)  The workers are plain child interpreters started with
``subprocess`` (``python -c <bootstrap>``) and fed tasks over
their stdin/stdout pipes, one task at a time, in an explicit binary format
(:mod:`vfl.crypto._codec`: integers, ``mpz``, integer arrays, lists; no pickle).
The workers import ``vfl.crypto`` and nothing else of the package:

* no ``fork`` of a process that may be running threads (the estimators run the
  three parties as threads), and no re-import of the caller's ``__main__``, so
  scripts without an ``if __name__ == "__main__"`` guard keep working (the
  ``spawn`` and ``forkserver`` start methods of :mod:`multiprocessing` re-run
  the main script in every worker);
* a worker whose parent dies reads end-of-file and exits; at interpreter exit
  the pool closes the pipes and waits for the workers (killing any that hang);
* workers draw obfuscators from their own ``os.urandom``, multiply ciphertexts
  and raise them to public exponents; the one task that carries a private key is
  the key owner's encryption (:meth:`~vfl.crypto.fast.FastEngine.encrypt_owned`:
  ``p`` and ``q`` to its own child processes over their pipes, which then keep the
  half-size tables), never sent to a joblib backend unless its plan allows the key out.

``VFL_WORKERS`` sets the number of processes (``0`` or ``1``: no pool, all work in
the calling thread); by default one per usable core; an estimator's ``n_jobs``
asks for another number.  Tasks from several threads share a pool first come,
first served.  If a worker dies, its task is run again in the calling thread and
the worker is replaced on the next call.

:func:`run` is the one entry point for the engine's parallel work: it follows the
calling thread's plan (:mod:`vfl.crypto.compute`), which may instead send the
tasks to a joblib backend (a Dask cluster under
``joblib.parallel_config(backend="dask")``) or keep them in the calling thread.
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures as cf
import os
import queue
import struct
import subprocess
import sys
import threading

from vfl.crypto import _codec, compute
from vfl.crypto.compute import WorkerError

_HEADER = struct.Struct("!Q")


def worker_count() -> int:
    """Parallel lanes of this thread's plan: local worker processes or a joblib backend's workers (0: none)."""
    return compute.current().workers


# A worker imports ``vfl.crypto`` only, not the ``vfl`` package's ``__init__`` (estimators,
# scikit-learn...): the package is stubbed with just its path before anything is imported.
# A worker runs in a session of its own, so that a Ctrl-C in a terminal (which reaches the whole foreground
# process group) never reaches it, not even while its interpreter starts; it also ignores SIGINT (a Jupyter
# kernel's interrupt): the parent decides what stops, and a worker ends when its stdin closes.
_BOOTSTRAP = (
    "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "import sys, types\n"
    "pkg = types.ModuleType('vfl'); pkg.__path__ = [sys.argv[1]]; sys.modules['vfl'] = pkg\n"
    "from vfl.crypto._worker import main\n"
    "main()\n"
)


class WorkerDied(RuntimeError):
    """A worker process exited or broke the pipe protocol."""


def _write_frame(stream, payload) -> None:
    """One frame: the length, then the payload (bytes, or a list of byte strings written in turn)."""
    parts = [payload] if isinstance(payload, (bytes, bytearray)) else payload
    stream.write(_HEADER.pack(sum(len(p) for p in parts)))
    stream.writelines(parts)
    stream.flush()


def _read_frame(stream) -> bytes:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return data


class _Worker:
    """One child interpreter and the thread in this process that feeds it."""

    def __init__(self, jobs: "queue.Queue", on_death=None):
        self.on_death = on_death
        package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, VFL_IN_WORKER="1", VFL_WORKERS="0")
        self.process = subprocess.Popen([sys.executable, "-c", _BOOTSTRAP, package_dir],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                        close_fds=True, start_new_session=True)
        self.jobs = jobs
        self.alive = True
        self.thread = threading.Thread(target=self._feed, name="vfl-worker-feeder", daemon=True)
        self.thread.start()

    def _feed(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                break
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                _write_frame(self.process.stdin, _codec.encode_parts((fn.__module__, fn.__qualname__, list(args))))
                reply = _codec.decode(_read_frame(self.process.stdout))
            except (OSError, EOFError, ValueError, struct.error) as exc:
                self.alive = False
                future.set_exception(WorkerDied(f"vfl worker process {self.process.pid} died: {exc!r}"))
                if self.on_death is not None:
                    self.on_death()
                break
            if reply[0]:
                future.set_result(reply[1])
            else:
                future.set_exception(WorkerError(f"{reply[1]} in a vfl worker: {reply[2]}"))
        self.alive = False
        self.close()

    def stop(self) -> None:
        """Close the worker's stdin: an idle worker exits at once."""
        try:
            if self.process.stdin and not self.process.stdin.closed:
                self.process.stdin.close()
        except (OSError, ValueError):
            pass

    def close(self, timeout: float = 5.0) -> None:
        """Stop the worker, wait up to ``timeout`` seconds, then kill it (its work is pure: nothing is lost)."""
        self.stop()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        try:
            if self.process.stdout is not None:
                self.process.stdout.close()         # its pipe: no unclosed-file warning at exit
        except (OSError, ValueError):
            pass


class WorkerPool:
    """A fixed number of worker processes sharing one first-come, first-served job queue."""

    def __init__(self, size: int):
        self.size = size
        self.jobs: "queue.Queue" = queue.Queue()
        self.lock = threading.Lock()
        self.workers: list[_Worker] = []
        self.closed = False
        self.deaths = 0

    def _died(self) -> None:
        with self.lock:
            if self.closed:                 # killed by shutdown(), not a failure
                return
            self.deaths += 1
            if self.deaths >= 3:            # workers cannot run here: stop using them
                global _DISABLED
                _DISABLED = True
                self.closed = True

    def any_alive(self) -> bool:
        return any(w.alive for w in self.workers)

    def _ensure(self) -> None:
        global _DISABLED
        with self.lock:
            if self.closed:
                raise RuntimeError("worker pool is shut down")
            self.workers = [w for w in self.workers if w.alive]
            try:
                while len(self.workers) < self.size:
                    self.workers.append(_Worker(self.jobs, self._died))
            except OSError:                 # cannot start an interpreter here: work in-process
                _DISABLED = True
                self.closed = True
                raise

    def submit(self, fn, *args) -> cf.Future:
        self._ensure()
        future: cf.Future = cf.Future()
        self.jobs.put((future, fn, args))
        return future

    def shutdown(self, timeout: float = 2.0) -> None:
        """Cancel queued work, let idle workers exit, kill busy ones after ``timeout`` seconds.

        Never waits for a running task to finish: interpreter exit stays prompt.
        """
        with self.lock:
            self.closed = True
            workers, self.workers = self.workers, []
        while True:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job[0].cancel()
        for _ in workers:
            self.jobs.put(None)
        for w in workers:
            w.stop()
        for w in workers:
            w.close(timeout)
        for w in workers:
            w.thread.join(timeout)


_LOCK = threading.Lock()
#: The pools started so far, by size (the default size, and any other an ``n_jobs`` asked for).
_POOLS: dict[int, WorkerPool] = {}
_DISABLED = False
#: Calls and tasks that :func:`run` spread, by plan kind (``"local calls"``, ``"joblib tasks"``...): for benchmarks.
STATS: "collections.Counter[str]" = collections.Counter()


def get_pool(size: int | None = None, smallest: int = 2) -> WorkerPool | None:
    """The shared pool of ``size`` processes (default: this thread's plan), or ``None`` to work in-process
    (fewer than ``smallest``)."""
    if size is None:
        size = thread_lanes()           # this thread's plan's local lanes
    if size < max(1, smallest) or _DISABLED:
        return None
    with _LOCK:
        pool = _POOLS.get(size)
        if pool is None or pool.closed:
            pool = _POOLS[size] = WorkerPool(size)
        return pool


def started() -> bool:
    """Whether this thread's plan runs tasks elsewhere with no processes left to start: its local worker pool is
    running (every worker alive), or it is a joblib backend's.  Work too small to pay for starting interpreters
    (about 0.3 s of CPU each) runs in the calling thread when this is False."""
    plan = compute.current()
    if plan.kind != "local":
        return plan.kind == "joblib"
    with _LOCK:
        pool = _POOLS.get(plan.workers)
    return pool is not None and not pool.closed and len(pool.workers) >= pool.size and \
        all(w.alive for w in pool.workers)


def shutdown() -> None:
    """Stop the worker processes (also run at interpreter exit); a later call starts new ones."""
    with _LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.shutdown()


def run(fn, tasks: list) -> list:
    """``[fn(*args) for args in tasks]``, spread as this thread's plan says when there are several tasks.

    ``fn`` must be a module-level ``_task_`` function of ``vfl.crypto`` (the workers
    import it by name).  Under a joblib backend the tasks go to its workers
    (:func:`vfl.crypto.compute.run_joblib`); otherwise to vfl's local worker
    processes, or they run here.
    """
    if len(tasks) < 2:
        return [fn(*args) for args in tasks]
    plan = compute.current()
    with _LOCK:
        STATS[f"{plan.kind} calls"] += 1
        STATS[f"{plan.kind} tasks"] += len(tasks)
    if plan.kind == "joblib":
        return compute.run_joblib(fn, tasks, plan)
    pool = get_pool(plan.workers) if plan.kind == "local" else None
    if pool is None:
        return [fn(*args) for args in tasks]
    try:
        futures = [pool.submit(fn, *args) for args in tasks]
    except (RuntimeError, OSError):            # shut down meanwhile, or no interpreter to start
        return [fn(*args) for args in tasks]
    return _collected(pool, futures, fn, tasks)


def run_sharing(fn, tasks: list) -> list:
    """:func:`run`, the calling thread working as one of the plan's lanes: one worker process fewer to start.

    For work that has the calling thread wait anyway (the PSI's curve work): with the plan's ``W`` local lanes,
    ``W - 1`` worker processes (a pool of their own, started once) and this thread take the tasks from one
    queue, first come, first served.  Starting an interpreter with numpy costs about 0.3 s of CPU; this saves
    one, and the trip through the pipes of the tasks this thread takes.  Under another plan (a joblib backend,
    no workers), or with the plan's full pool already running, it is :func:`run`.
    """
    plan = compute.current()
    if len(tasks) < 2 or plan.kind != "local" or plan.workers < 2 or started():
        return run(fn, tasks)
    pool = get_pool(plan.workers - 1, smallest=1)
    if pool is None:
        return run(fn, tasks)
    with _LOCK:
        STATS["local calls"] += 1
        STATS["local tasks"] += len(tasks)
    try:
        futures = [pool.submit(fn, *args) for args in tasks]
    except (RuntimeError, OSError):
        return [fn(*args) for args in tasks]
    while True:                                      # take jobs from the queue as a worker would, until it is empty
        try:
            job = pool.jobs.get_nowait()
        except queue.Empty:
            break
        if job is None:                              # the pool is shutting down: leave its sentinel to a worker
            pool.jobs.put(None)
            break
        future, task, args = job
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(task(*args))
            except Exception as exc:                  # raised below, as a worker's error would be
                future.set_exception(exc)
    return _collected(pool, futures, fn, tasks)


def thread_lanes() -> int:
    """Lanes this thread's plan gives work that runs with the GIL released (:func:`run_threads`): its local lanes
    (``VFL_WORKERS``, else one per usable core; an estimator's ``n_jobs``), 0 under a joblib backend or inline."""
    plan = compute.current()
    return plan.workers if plan.kind == "local" else 0


def run_threads(fn, tasks: list, lanes: int) -> list:
    """``[fn(*args) for args in tasks]`` on ``lanes`` threads of this process, the calling thread one of them.

    For work whose heavy parts run in C with the GIL released (the fast curve engine's ladders and field
    arithmetic, called through :mod:`ctypes`): no interpreter to start (about 0.3 s of CPU each), nothing copied
    through a pipe, and the secret scalar never leaves this process.  The lanes take tasks in order from one
    counter, first come, first served; threads start with the call and end with it.  A task that raises stops the
    lanes from taking more, and the first failing task's exception (in task order) is raised here once every lane
    has stopped.
    """
    if len(tasks) < 2 or lanes < 2:
        return [fn(*args) for args in tasks]
    with _LOCK:
        STATS["thread calls"] += 1
        STATS["thread tasks"] += len(tasks)
    results: list = [None] * len(tasks)
    errors: dict[int, BaseException] = {}
    taken = iter(range(len(tasks)))
    take = threading.Lock()

    def lane() -> None:
        while not errors:
            with take:
                k = next(taken, None)
            if k is None:
                return
            try:
                results[k] = fn(*tasks[k])
            except BaseException as exc:                # raised in the calling thread below
                errors[k] = exc

    threads = [threading.Thread(target=lane, name="vfl-curve-lane", daemon=True)
               for _ in range(min(lanes, len(tasks)) - 1)]
    for thread in threads:
        thread.start()
    try:
        lane()
    finally:
        for thread in threads:
            thread.join()
    if errors:
        raise errors[min(errors)]
    return results


def _collected(pool, futures: list, fn, tasks: list) -> list:
    """The results of ``futures`` (``tasks`` submitted to ``pool``), in order; a task whose worker died, or every
    worker being gone, is run here."""
    results = []
    for future, args in zip(futures, tasks):
        while True:
            try:
                results.append(future.result(timeout=1.0))
                break
            except cf.TimeoutError:
                if pool.any_alive() or not future.cancel():
                    continue
                results.append(fn(*args))        # every worker is gone: do it here
                break
            except (WorkerDied, cf.CancelledError):
                results.append(fn(*args))
                break
    return results


atexit.register(shutdown)
