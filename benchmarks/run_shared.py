"""One training run of Yang's protocol or the shared one, in a fresh process, with its work counted; prints JSON.

``python -m benchmarks.run_shared PROTOCOL ROWS FEATURES KEY_BITS EPOCHS [BATCH_SIZE [FEATURE_PARTIES]]``

``PROTOCOL`` is ``yang`` (unpacked), ``yang-packed``, ``shared`` (unpacked) or ``shared-packed``.  The parties
run in threads (:func:`vfl.inprocess.train`) on the benchmark's data
(:mod:`benchmarks.data`: breast cancer at 569 x 30, else generated), logistic
regression by gradient steps (SGD, learning rate 0.1, L2 0.01) from zero weights
(so that every protocol follows the same trajectory and the weights can be
compared), ``BATCH_SIZE`` 0 for full batches.  Every call into the crypto engine
is counted per party (:class:`CountingEngine`), and the JSON line reports:

* ``epochs``: the seconds of each epoch, as the coordinator completes it (the
  first includes key generation, the DJN tables and starting the worker processes);
  ``cpu_epochs``: the CPU seconds of each, this process's and its worker processes';
* ``counts``: per party, per steady epoch (after the first): ``encryptions``
  (fresh encryptions, masks included), ``rerandomizations``, ``multiexp_terms``
  (ciphertext-to-plaintext-power terms of the multi-exponentiations ``X^T [[d]]``,
  ``X [[c]]``...), ``long_exponent_terms`` (those with exponents of more than 62
  bits, done by ``powmod``: the shares' cross terms of the loss), ``scalar_products``
  (one ciphertext to one plaintext power), ``additions`` and ``decryptions``;
* ``bytes``: bytes sent per steady epoch, per party and in all;
* ``seconds``: per message a party sends, the seconds it worked on it per steady
  epoch (:meth:`vfl.transport.Transcript.timings`): where the time goes;
* ``params``: every party's final weights; ``loss_curve``; ``rss_mb``: peak RSS of
  this process (the parties) and of the worker processes.
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import time
from collections import Counter, defaultdict

import numpy as np

COUNTED = ("encryptions", "rerandomizations", "multiexp_terms", "long_exponent_terms", "scalar_products",
           "additions", "decryptions")


def _counted(method: str, what: str):
    """An engine method that counts its first vector's length as ``what``, then calls the inner engine's."""
    def call(self, key, values, *rest):
        values = list(values)
        self._add(what, len(values))
        return getattr(self.inner, method)(key, values, *rest)

    call.__name__ = method
    return call


class CountingEngine:
    """Another engine's arithmetic, with every call counted for the party whose thread made it."""

    def __init__(self, inner):
        self.inner = inner
        self.name = f"counting {inner.name}"
        self.counts: dict[str, Counter] = defaultdict(Counter)
        self._lock = threading.Lock()

    def _add(self, what: str, count: int) -> None:
        role = threading.current_thread().name.removeprefix("vfl-")
        with self._lock:
            self.counts[role][what] += int(count)

    def snapshot(self) -> dict:
        with self._lock:
            return {role: dict(c) for role, c in self.counts.items()}

    encrypt = _counted("encrypt", "encryptions")
    rerandomize = _counted("rerandomize", "rerandomizations")
    add = _counted("add", "additions")
    add_plain = _counted("add_plain", "additions")
    mul_plain = _counted("mul_plain", "scalar_products")
    sum = _counted("sum", "additions")
    decrypt = _counted("decrypt", "decryptions")

    def lincomb(self, public_key, ciphertexts, columns):
        ciphertexts = list(ciphertexts)
        if isinstance(columns, np.ndarray):
            terms, long = int(np.count_nonzero(columns)), 0
        else:
            entries = [int(e) for column in columns for e in column]
            terms = sum(1 for e in entries if e)
            long = sum(1 for e in entries if abs(e) >= 1 << 62)
        self._add("multiexp_terms", terms - long)
        self._add("long_exponent_terms", long)
        return self.inner.lincomb(public_key, ciphertexts, columns)


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    protocol = argv[0]
    rows, features, key_bits, epochs = (int(v) for v in argv[1:5])
    batch_size = int(argv[5]) if len(argv) > 5 and int(argv[5]) > 0 else None
    k = int(argv[6]) if len(argv) > 6 else 1
    if protocol not in ("yang", "yang-packed", "shared", "shared-packed"):
        raise SystemExit(f"unknown protocol {protocol!r}: yang, yang-packed, shared or shared-packed")

    from vfl import inprocess
    from benchmarks.data import feature_party_blocks
    from benchmarks.trees import cpu_seconds
    from vfl.crypto import get_engine, workers
    from vfl.parties import Coordinator
    from vfl.parties.linear import PartyA, PartyB
    from vfl.protocols.linear import TrainingSettings
    from vfl.transport import Transcript

    roster, blocks, x_b, y, name = feature_party_blocks(rows, features, k)
    engine = CountingEngine(get_engine())
    parties = {f: PartyA(block, role=f) for f, block in blocks.items()}
    parties["B"] = PartyB(x_b, y, fit_intercept=True)
    coordinator = Coordinator(key_bits, key_bits < 2048, engine=engine)
    settings = TrainingSettings(objective="logistic", solver="gd", learning_rate=0.1, alpha=0.01, max_iter=epochs,
                                batch_size=batch_size, tol=None, key_bits=key_bits, insecure=True,  # for init zeros
                                init="zeros", random_state=0, packing=protocol.endswith("-packed"),
                                protocol="shared" if protocol.startswith("shared") else "yang")
    transcript = Transcript()
    stamps, counts, cpu = [], [], []
    start, cpu_start = time.perf_counter(), cpu_seconds()
    result = inprocess.train(parties, coordinator, settings, transcript, engine=engine, roster=roster,
                             on_epoch=lambda epoch, loss: (stamps.append(time.perf_counter()), cpu.append(cpu_seconds()),
                                                           counts.append(engine.snapshot())))
    workers.shutdown()

    steady = max(1, len(stamps) - 1)
    first = counts[0] if len(counts) > 1 else {}
    per_epoch = {role: {what: (counts[-1].get(role, {}).get(what, 0) - first.get(role, {}).get(what, 0)) / steady
                        for what in COUNTED} for role in roster.everyone}
    frame = transcript.timings()
    later = frame[frame.iteration >= (1 if len(stamps) > 1 else 0)]
    seconds = {f"{sender} {message}": float(v) / steady
               for (sender, message), v in later.groupby(["sender", "name"])["seconds"].sum().items()}
    sent = later.groupby("sender")["bytes"].sum()
    print(json.dumps({
        "protocol": protocol, "rows": rows, "features": features, "data": name, "key_bits": key_bits,
        "batch_size": batch_size, "feature_parties": k, "epochs": [b - a for a, b in zip([start] + stamps, stamps)],
        "cpu_epochs": [b - a for a, b in zip([cpu_start] + cpu, cpu)],
        "counts": per_epoch, "seconds": seconds,
        "bytes": {role: int(sent.get(role, 0)) / steady for role in roster.everyone} | {"all": int(sent.sum()) / steady},
        "params": {role: party.params.tolist() for role, party in parties.items()},
        "loss_curve": [float(v) for v in result["loss_curve"]],
        "rss_mb": {"parties": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                   "workers": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024},
    }))


if __name__ == "__main__":
    main()
