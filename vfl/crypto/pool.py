"""Obfuscators computed ahead of need: a store that hands each one out once.

An obfuscator ``h_s^r`` does not depend on the plaintext, so it can be computed
before the value it will hide is known: while a party waits for its peers.
:class:`ObfuscatorPool` keeps them per public key and gives each out exactly
once (:meth:`take` removes what it returns under a lock); a reused obfuscator
would let anyone divide two ciphertexts and learn the difference of their
plaintexts' encodings, so there is no path that returns one twice.

Filling is explicit (:meth:`fill`, or :meth:`fill_async` in a background
thread); with ``refill=True`` every :meth:`take` schedules a background refill of
what it took, so a party that encrypts the same number of values every iteration
finds them ready the next time.  Whether that pays depends on idle cores: on one
2-core machine running all three parties it mostly moves work around (see
docs/benchmarks.md); with each party on its own machine it takes encryption off
the critical path.
"""

from __future__ import annotations

import threading
from collections import deque

from vfl.crypto import compute, workers


class ObfuscatorPool:
    """Per-key store of single-use obfuscators.

    Parameters
    ----------
    capacity : int
        Most obfuscators kept per key.
    max_keys : int
        Keys kept at most; filling for another key forgets the oldest one's store.
    refill : bool
        Refill in the background what each :meth:`take` removed.
    """

    def __init__(self, capacity: int = 200_000, refill: bool = False, max_keys: int = 2):
        self.capacity = capacity
        self.max_keys = max_keys
        self.refill = refill
        self._store: dict[int, deque] = {}
        self._lock = threading.Lock()
        self._pending: dict[int, int] = {}
        self._threads: list[threading.Thread] = []
        #: Obfuscators handed out so far (all keys); for tests and statistics.
        self.handed_out = 0

    def available(self, public_key) -> int:
        with self._lock:
            return len(self._store.get(int(public_key.n), ()))

    def take(self, public_key, count: int) -> list:
        """Up to ``count`` obfuscators, removed from the pool (fewer if it holds fewer)."""
        key = int(public_key.n)
        with self._lock:
            store = self._store.get(key)
            out = []
            while store and len(out) < count:
                out.append(store.popleft())
            self.handed_out += len(out)
        if self.refill and count:
            self.fill_async(public_key, count)
        return out

    def fill(self, public_key, count: int) -> int:
        """Compute ``count`` obfuscators now (in the worker processes) and keep them; returns how many were added."""
        from vfl.crypto.fast import LARGE_COMB_CALL, MAX_OBFUSCATORS_PER_TASK, _split, _task_obfuscators

        key = int(public_key.n)
        with self._lock:
            room = self.capacity - len(self._store.get(key, ())) - self._pending.get(key, 0)
            count = max(0, min(count, room))
            self._pending[key] = self._pending.get(key, 0) + count
        try:
            if not count:
                return 0
            parts = max(workers.worker_count(), -(-count // MAX_OBFUSCATORS_PER_TASK))
            made = []
            large = count >= LARGE_COMB_CALL
            for chunk in workers.run(_task_obfuscators, [(key, hi - lo, large) for lo, hi in _split(count, parts)]):
                made.extend(chunk)
            with self._lock:
                if key not in self._store:
                    while len(self._store) >= self.max_keys:
                        self._store.pop(next(iter(self._store)))
                self._store.setdefault(key, deque()).extend(made)
            return len(made)
        finally:
            with self._lock:
                self._pending[key] -= count

    def fill_async(self, public_key, count: int) -> threading.Thread:
        """:meth:`fill` in a daemon thread; returns the thread."""
        # the caller's compute plan (its n_jobs, its joblib backend) follows the fill into its thread
        thread = threading.Thread(target=compute.bind(self.fill), args=(public_key, count),
                                  name="vfl-obfuscator-fill", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        return thread

    def wait(self, timeout: float | None = None) -> None:
        """Wait for background fills to finish."""
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(timeout)

    def clear(self) -> None:
        """Forget every stored obfuscator (for example when a key is retired)."""
        with self._lock:
            self._store.clear()
