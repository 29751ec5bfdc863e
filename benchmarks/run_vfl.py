"""Time vfl's real protocol (the role programs, in-process) in a fresh process; print JSON.

``python -m benchmarks.run_vfl ROWS FEATURES KEY_BITS ITERATIONS [ENGINE [FEATURE_PARTIES [PACKING [COMPUTE]]]]``

Runs :func:`vfl.inprocess.train` (the parties and C in threads, messages
framed as bytes) for ``ITERATIONS`` full-batch epochs.  With one feature party
(the default) A holds 20 columns and B the rest; with ``FEATURE_PARTIES = K > 1``
each of the K feature parties and B hold ``FEATURES / (K + 1)`` columns.  It
reports, as one JSON line on stdout:

* ``first``: seconds from the start to the end of the first iteration, including
  key generation, the DJN tables and starting the worker processes;
* ``iterations``: seconds of each later iteration (steady state);
* ``bytes``: bytes sent by all parties in each iteration (from the transcript);
* ``rss_parties_mb``: peak RSS of this process, which runs all three parties;
* ``rss_worker_mb``: the largest peak RSS among the worker processes;
* ``params``: A's and B's weights after each step, to check the textbook
  baseline against (it starts from the weights after the first step);
* ``parties``: per party, seconds per steady iteration spent outside waiting for
  messages (``busy``: its own computation, on cores it shares with the others),
  bytes it sent per iteration, and ``cpu``: CPU seconds of its own thread per
  steady iteration (all of its work with ``COMPUTE=inline``);
* ``compute``: where the encrypted work ran (``COMPUTE``): ``local`` (vfl's worker
  processes, the default), ``inline`` (``n_jobs=1``: each party in its own thread,
  one core each), ``loky`` (``joblib.parallel_config(backend="loky")``) or ``dask``
  (a ``distributed.LocalCluster`` with one single-threaded worker process per core,
  through ``joblib.parallel_config(backend="dask")``), and ``tasks``: the calls and
  tasks that went to the workers per steady iteration.
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
import threading
import time



def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    rows, features, key_bits, iterations = (int(v) for v in argv[:4])
    engine = argv[4] if len(argv) > 4 and argv[4] != "default" else None
    k = int(argv[5]) if len(argv) > 5 else 1
    packing = len(argv) > 6 and argv[6] in ("1", "packed", "true")
    where = argv[7] if len(argv) > 7 else "local"

    from tqdm import tqdm

    from vfl import inprocess
    from benchmarks.data import feature_party_blocks
    from vfl.crypto import workers
    from vfl.parties import Coordinator
    from vfl.parties.linear import PartyA, PartyB
    from vfl.protocols.linear import TrainingSettings
    from vfl.transport import Endpoint, Transcript

    roster, blocks, x_b, y, _ = feature_party_blocks(rows, features, k)
    parties = {name: PartyA(block, role=name) for name, block in blocks.items()}
    party_a = parties[roster.features[0]]
    party_b = parties["B"] = PartyB(x_b, y, fit_intercept=True)
    insecure = key_bits < 2048
    coordinator = Coordinator(key_bits, insecure)
    settings = TrainingSettings(objective="logistic", learning_rate=0.1, max_iter=iterations, alpha=0.01,
                                batch_size=None, tol=None, fit_intercept=True, key_bits=key_bits,
                                insecure=True, frac_bits=32, random_state=0,   # acknowledges init="zeros"
                                init="zeros",   # the textbook run it is compared with starts at zero
                                solver="gd",    # Table 2's gradient step, as the textbook's
                                packing=packing)

    history = {"A": [], "B": []}
    for party in (party_a, party_b) if k == 1 else ():
        original = party.apply_update

        def recording(*args, _party=party, _original=original, **kwargs):
            out = _original(*args, **kwargs)
            history[_party.role].append(_party.params.tolist())
            return out

        party.apply_update = recording

    cpu = {name: {} for name in roster.everyone}      # party -> iteration -> its thread's CPU seconds so far
    lock = threading.Lock()
    # 4 set-up messages per data party (key, resume, start, schedule), then per iteration 6 per feature
    # party (scores, residual, loss part, masked gradient, answer, control) and 4 more (B's loss, gradient,
    # answer and control)
    bar = tqdm(total=4 * (k + 1) + (6 * k + 4) * iterations, desc=f"vfl {rows}x{features}", unit="msg", delay=2.0, leave=False,
               file=sys.stderr)

    def on_message(direction, peer, message, nbytes):
        if direction == "->":
            sender = threading.current_thread().name.removeprefix("vfl-")
            if sender in cpu:
                cpu[sender][message.iteration] = time.thread_time()
            with lock:
                bar.set_postfix_str(f"iteration {message.iteration}: {message.name} to {peer}", refresh=False)
                bar.update(1)

    # Time each role spends waiting for messages; the rest of its wall time is its own work.
    waiting = {name: 0.0 for name in roster.everyone}
    recv = Endpoint.recv

    def timed_recv(self, frm, name):
        began = time.perf_counter()
        try:
            return recv(self, frm, name)
        finally:
            waiting[self.role] += time.perf_counter() - began

    Endpoint.recv = timed_recv
    waited_at = []
    stamps = []
    calls = []
    transcript = Transcript()
    with compute_backend(where) as n_jobs:
        counted = dict(workers.STATS)
        start = time.perf_counter()
        inprocess.train(parties, coordinator, settings, transcript, roster=roster, engine=engine,
                        on_message=on_message, n_jobs=n_jobs,
                        on_epoch=lambda epoch, loss: (stamps.append((time.perf_counter(), loss)),
                                                      waited_at.append(dict(waiting)),
                                                      calls.append(dict(workers.STATS))))
    bar.close()
    workers.shutdown()

    frame = transcript.to_frame()
    per_iteration = frame[frame.iteration >= 0].groupby("iteration")["bytes"].sum()
    times = [t for t, _ in stamps]
    steady = max(len(times) - 1, 1)
    span = times[-1] - times[0] if len(times) > 1 else times[0] - start
    first = waited_at[0] if len(times) > 1 else {name: 0.0 for name in roster.everyone}
    sent = frame[frame.iteration >= 1].groupby("sender")["bytes"].sum() if len(times) > 1 else \
        frame[frame.iteration >= 0].groupby("sender")["bytes"].sum()
    iters = sorted(i for i in cpu[roster.coordinator] if i >= 0)
    party_figures = {name: {"busy": (span - (waited_at[-1][name] - first[name])) / steady,
                            "bytes": int(sent.get(name, 0)) / steady,
                            "cpu": _steady_cpu(cpu[name], iters)} for name in roster.everyone}
    base = calls[0] if len(calls) > 1 else counted
    tasks = {key: (calls[-1].get(key, 0) - base.get(key, 0)) / steady for key in calls[-1]} if calls else {}
    result = {
        "rows": rows, "features": features, "key_bits": key_bits, "engine": engine or "default",
        "first": times[0] - start,
        "iterations": [b - a for a, b in zip(times, times[1:])],
        "bytes": [int(v) for v in per_iteration.tolist()],
        "losses": [loss for _, loss in stamps],
        "rss_parties_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "params": history,
        "feature_parties": k,
        "packing": packing,
        "parties": party_figures,
        "compute": where,
        "tasks": tasks,
    }
    print(json.dumps(result))


def _steady_cpu(by_iteration: dict, iterations: list) -> float | None:
    """A party's thread CPU seconds per iteration after the first (from its last message of each)."""
    marks = [by_iteration[i] for i in iterations if i in by_iteration]
    if len(marks) < 2:
        return None
    return (marks[-1] - marks[0]) / (len(marks) - 1)


@contextlib.contextmanager
def compute_backend(where: str):
    """Enter the compute backend named ``where``; yields the ``n_jobs`` to train with."""
    from vfl.crypto.compute import usable_cores

    cores = usable_cores()
    if where == "local":
        yield None
    elif where == "inline":
        yield 1
    elif where == "loky":
        import joblib

        with joblib.parallel_config(backend="loky", n_jobs=cores):
            yield None
    elif where == "dask":
        import joblib
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=cores, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client, joblib.parallel_config(backend="dask", client=client):
            yield None
    else:
        raise SystemExit(f"unknown compute backend {where!r}: local, inline, loky or dask")


if __name__ == "__main__":
    main()
