"""Time vfl's real protocol (the three role programs, in-process) in a fresh process; print JSON.

``python -m vfl.bench.run_vfl ROWS FEATURES KEY_BITS ITERATIONS [ENGINE]``

Runs :func:`vfl.inprocess.train` (parties A, B and C in threads, messages
framed as bytes) for ``ITERATIONS`` full-batch epochs and reports, as one JSON
line on stdout:

* ``first``: seconds from the start to the end of the first iteration, including
  key generation, the DJN tables and starting the worker processes;
* ``iterations``: seconds of each later iteration (steady state);
* ``bytes``: bytes sent by all parties in each iteration (from the transcript);
* ``rss_parties_mb``: peak RSS of this process, which runs all three parties;
* ``rss_worker_mb``: the largest peak RSS among the worker processes;
* ``params``: A's and B's weights after each step, to check the textbook
  baseline against (it starts from the weights after the first step).
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import time


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    rows, features, key_bits, iterations = (int(v) for v in argv[:4])
    engine = argv[4] if len(argv) > 4 and argv[4] != "default" else None

    from tqdm import tqdm

    from vfl import inprocess
    from vfl.bench.data import make_data
    from vfl.crypto import workers
    from vfl.parties import Coordinator, PartyA, PartyB
    from vfl.protocols import TrainingSettings
    from vfl.transport import Transcript

    x_a, x_b, y, _ = make_data(rows, features)
    party_a, party_b = PartyA(x_a), PartyB(x_b, y, fit_intercept=True)
    insecure = key_bits < 2048
    coordinator = Coordinator(key_bits, insecure)
    settings = TrainingSettings(objective="logistic", learning_rate=0.1, max_iter=iterations, alpha=0.01,
                                batch_size=None, tol=None, fit_intercept=True, key_bits=key_bits,
                                insecure=insecure, frac_bits=32, random_state=0,
                                init="zeros")   # the textbook run it is compared with starts at zero

    history = {"A": [], "B": []}
    for party in (party_a, party_b):
        original = party.apply_update

        def recording(*args, _party=party, _original=original, **kwargs):
            out = _original(*args, **kwargs)
            history[_party.role].append(_party.params.tolist())
            return out

        party.apply_update = recording

    lock = threading.Lock()
    # 8 set-up messages, then 10 per iteration (scores, residual, loss part, loss, 2 gradients, 2 answers,
    # 2 controls)
    bar = tqdm(total=8 + 10 * iterations, desc=f"vfl {rows}x{features}", unit="msg", delay=2.0, leave=False,
               file=sys.stderr)

    def on_message(direction, peer, message, nbytes):
        if direction == "->":
            with lock:
                bar.set_postfix_str(f"iteration {message.iteration}: {message.name} to {peer}", refresh=False)
                bar.update(1)

    stamps = []
    transcript = Transcript()
    start = time.perf_counter()
    inprocess.train({"A": party_a, "B": party_b}, coordinator, settings, transcript, engine=engine, on_message=on_message,
                    on_epoch=lambda epoch, loss: stamps.append((time.perf_counter(), loss)))
    bar.close()
    workers.shutdown()

    frame = transcript.to_frame()
    per_iteration = frame[frame.iteration >= 0].groupby("iteration")["bytes"].sum()
    times = [t for t, _ in stamps]
    result = {
        "rows": rows, "features": features, "key_bits": key_bits, "engine": engine or "default",
        "first": times[0] - start,
        "iterations": [b - a for a, b in zip(times, times[1:])],
        "bytes": [int(v) for v in per_iteration.tolist()],
        "losses": [loss for _, loss in stamps],
        "rss_parties_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "params": history,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
