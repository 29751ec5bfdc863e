"""The fast engine: DJN obfuscators from fixed-base tables, multi-exponentiation, both cores.

Same interface and same plaintexts as :class:`~vfl.crypto.engine.SimpleEngine`;
what changes is how the work is done:

* **encrypt / rerandomize** multiply by ``h_s^r`` (:mod:`vfl.crypto.djn`): about 96
  modular multiplications from a precomputed table instead of a 2048-bit ``powmod``
  (about 0.5 ms instead of 9 ms at 2048 bits); obfuscators may come from a pool
  computed ahead of need (:mod:`vfl.crypto.pool`), each used once.  The key owner
  encrypts with :meth:`FastEngine.encrypt_owned`: the same ``h_s^r`` from half-size
  tables modulo ``p^2`` and ``q^2`` (about 0.3 ms).
* **lincomb** (``X^T [[d]]``) is one simultaneous multi-exponentiation over all
  columns (:mod:`vfl.crypto.multiexp`); its results are the same group elements as
  the term-by-term product of the simple engine.
* **decrypt** is CRT decryption, in two threads: its two half-size exponentiations
  ``c^(p-1) mod p^2`` and ``c^(q-1) mod q^2`` eight ciphertexts at a time on Intel's
  multi-buffer ``mbx_exp_mb8`` (:mod:`vfl.crypto.mbexp`, the ``vfl[fast-crypto]`` extra on a
  CPU with AVX-512 IFMA: about 4x less CPU at 2048 bits), else one at a time in ``gmpy2``;
  the same plaintexts either way (``powmod`` and the library's calls both release the
  GIL).  Encryption keeps its fixed-base tables, which cost less than the
  multi-buffer exponentiation would (measured in docs/benchmarks.md).
* Large calls are cut into chunks and run in worker processes
  (:mod:`vfl.crypto.workers`), or on the joblib backend the caller configured (a
  Dask cluster: :mod:`vfl.crypto.compute`); small ones stay in the calling thread.
  Decryption stays in this process unless the plan allows the private key out.

The engine keeps no per-call state and guards its caches with locks, so the
three parties of an estimator can share it from their threads.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading

import gmpy2
import numpy as np

from vfl.crypto import compute, mbexp, multiexp, workers
from vfl.crypto.djn import djn_tables, owner_tables
from vfl.crypto.engine import SimpleEngine, get_engine

#: Below this many modular multiplications (~8 ms at 2048 bits) a call runs in the calling
#: thread; above it the local workers' round trip (well under a millisecond) is worth paying.
#: (A joblib backend costs more per call: see :mod:`vfl.crypto.compute` for its thresholds.)
PARALLEL_THRESHOLD = compute.LOCAL_THRESHOLD
#: Modular multiplications (n^2-sized) per CRT decryption, roughly: two half-size ``powmod``.
DECRYPT_COST = 500
#: Decryptions per task at most, when decryption may go to a cluster.
MAX_DECRYPTIONS_PER_TASK = 1_024
#: Obfuscators per worker task at most (keeps each message and each worker's memory small).
MAX_OBFUSCATORS_PER_TASK = 4_096
#: Comb tables ``(rows h, blocks v)``: the small one (32,768 entries, ~18 MB at 2048 bits,
#: 86 multiplications + 10 squarings) for everyday calls; the large one (131,072 entries,
#: ~73 MB, 74 + 9, about 13% faster) for calls of at least LARGE_COMB_CALL values.
SMALL_COMB = (12, 8)
LARGE_COMB = (14, 8)
LARGE_COMB_CALL = 8_192
#: Rows per bucket-method task at most.
MAX_BUCKET_ROWS = 131_072


# -- work done in worker processes (module-level "_task_" functions, run by name) -----

def _comb(n, large: bool):
    return djn_tables(n, *(LARGE_COMB if large else SMALL_COMB))[1]


def _task_obfuscators(n: int, count: int, large: bool = False) -> list:
    return _comb(n, large).random_powers(count)


def _task_encrypt(n: int, plaintexts: list, large: bool = False) -> list:
    obfuscators = _comb(n, large).random_powers(len(plaintexts))
    return _combine(gmpy2.mpz(n), plaintexts, obfuscators)


def _task_encrypt_owned(p: int, q: int, plaintexts: list, large: bool = False) -> list:
    """Encryption by the key owner (the task carries ``p`` and ``q``): obfuscators by the CRT."""
    obfuscators = owner_tables(p, q, *(LARGE_COMB if large else SMALL_COMB)).random_powers(len(plaintexts))
    return _combine(gmpy2.mpz(p) * gmpy2.mpz(q), plaintexts, obfuscators)


#: :func:`vfl.crypto.compute.run_joblib` refuses to send this task to a joblib backend unless allowed.
_task_encrypt_owned.carries_private_key = True


def _task_rerandomize(n: int, ciphertexts: list, large: bool = False) -> list:
    n = gmpy2.mpz(n)
    n2 = n * n
    obfuscators = _comb(n, large).random_powers(len(ciphertexts))
    return [c * o % n2 for c, o in zip(ciphertexts, obfuscators)]


def _task_lincomb(n2: int, bases: list, lifted: np.ndarray, bits: list, method: str, t: int,
                  with_total: bool) -> tuple:
    return multiexp.chunk_products(bases, lifted, bits, gmpy2.mpz(n2), method, t, with_total)


def _task_product(n2: int, values: list):
    return multiexp.product(values, gmpy2.mpz(n2))


def _task_decrypt(p: int, q: int, ciphertexts: list) -> list:
    """CRT decryption of a chunk: the task carries the private key (only with ``send_private_key``)."""
    return _crt_decrypt_many(_crt_parts(gmpy2.mpz(p), gmpy2.mpz(q)), ciphertexts)


#: :func:`vfl.crypto.compute.run_joblib` refuses to send this task to a joblib backend unless allowed.
_task_decrypt.carries_private_key = True


def _combine(n, plaintexts, obfuscators) -> list:
    """``(1 + m n) o mod n^2``, computed as ``o + n ((m o) mod n)``: no full-size product."""
    n2 = n * n
    return [(o + n * (gmpy2.mpz(m) % n * o % n)) % n2 for m, o in zip(plaintexts, obfuscators)]


def _split(count: int, parts: int, unit: int = 1) -> list:
    """``parts`` contiguous ``(lo, hi)`` ranges covering ``range(count)``, sizes within one (within one ``unit``:
    every range but the last a multiple of ``unit`` items)."""
    if unit > 1:
        units = -(-count // unit)
        return [(lo * unit, min(hi * unit, count)) for lo, hi in _split(units, parts)]
    parts = max(1, min(parts, count))
    q, r = divmod(count, parts)
    bounds, lo = [], 0
    for k in range(parts):
        hi = lo + q + (1 if k < r else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def lanes(plan, cost: float) -> int:
    """Workers worth using for a call of ``cost`` multiplications: each task at least the plan's minimum."""
    count = max(1, plan.workers)
    if plan.min_task:
        count = min(count, max(1, int(cost // plan.min_task)))
    return count


def task_ranges(count: int, unit_cost: float, max_per_task: int) -> list:
    """Ranges to cut ``count`` items into under this thread's plan: one if the call is small, else at least one
    per worker (each at most ``max_per_task`` items); ``unit_cost`` is an item's modular multiplications."""
    plan = compute.current()
    cost = count * unit_cost
    ways = lanes(plan, cost) if cost >= plan.threshold else 1
    if ways < 2:
        parts = -(-count // max_per_task) if count else 1
    else:
        per_worker = -(-count // ways)
        parts = ways * max(1, -(-per_worker // max_per_task))
    return _split(count, parts)


def _in_tasks(task, head: tuple, items: list, unit_cost: float) -> list:
    """``task`` over ``items`` in worker tasks (:func:`task_ranges`, at most ``MAX_OBFUSCATORS_PER_TASK`` items
    each), one element of the result per item, in order.

    Each task gets ``(*head, its items, large)``, ``large``: whether the whole call is of at least
    ``LARGE_COMB_CALL`` items (the tasks then use the larger comb tables).
    """
    large = len(items) >= LARGE_COMB_CALL
    out = []
    ranges = task_ranges(len(items), unit_cost, MAX_OBFUSCATORS_PER_TASK)
    for chunk in workers.run(task, [(*head, items[lo:hi], large) for lo, hi in ranges]):
        out.extend(chunk)
    return out


class FastEngine:
    """Batched Paillier arithmetic at speed; see the module docstring.

    Parameters
    ----------
    pool : ObfuscatorPool, optional
        Where obfuscators computed ahead of need are kept; ``None`` computes them
        on demand.
    name : str, default="fast"
        The name to register the engine under.
    """

    name = "fast"

    def __init__(self, pool=None, name: str | None = None):
        self.pool = pool
        if name is not None:
            self.name = name
        self._simple = SimpleEngine()
        self._threads: cf.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._crt: dict = {}

    def __reduce__(self):
        # by its registered name (its threads, lock and caches are this process's): a fitted model that holds
        # a context pickles, and is unpickled with the engine of that name in the process that loads it
        return get_engine, (self.name,)

    # -- helpers -----------------------------------------------------------------
    def _thread_map(self, fn, items: list, min_items: int = 4) -> list:
        """``[fn(x) for x in items]`` on two threads that release the GIL inside ``powmod``."""
        return self._thread_chunks(lambda part: [fn(x) for x in part], items, min_items)

    def _thread_chunks(self, fn, items: list, min_items: int = 4, unit: int = 1) -> list:
        """``fn(items)`` computed as ``fn`` of contiguous parts (each but the last a multiple of ``unit`` items)
        on two threads that release the GIL; ``fn`` maps a list to a list of the same length."""
        count = compute.threads()
        if len(items) < min_items or count < 2:
            return fn(items)
        with self._lock:
            if self._threads is None:
                self._threads = cf.ThreadPoolExecutor(max_workers=count, thread_name_prefix="vfl-powmod",
                                                      initializer=_release_gil)
        parts = _split(len(items), count, unit)
        futures = [self._threads.submit(lambda lo=lo, hi=hi: fn(items[lo:hi])) for lo, hi in parts]
        return [y for f in futures for y in f.result()]

    # -- obfuscators and encryption ---------------------------------------------------
    def obfuscators(self, public_key, count: int) -> list:
        """``count`` fresh obfuscators ``h_s^r``: from the pool if it has them, the rest computed now."""
        taken = self.pool.take(public_key, count) if self.pool is not None and count else []
        missing = count - len(taken)
        if missing:
            n = int(public_key.n)
            ranges = task_ranges(missing, 100, MAX_OBFUSCATORS_PER_TASK)
            large = missing >= LARGE_COMB_CALL
            for chunk in workers.run(_task_obfuscators, [(n, hi - lo, large) for lo, hi in ranges]):
                taken.extend(chunk)
        return taken

    def encrypt(self, public_key, plaintexts):
        return self._encrypt(public_key, list(plaintexts))

    def _encrypt(self, public_key, plaintexts: list) -> list:
        if self.pool is not None and self.pool.available(public_key):
            return _combine(public_key.n, plaintexts, self.obfuscators(public_key, len(plaintexts)))
        return _in_tasks(_task_encrypt, (int(public_key.n),), plaintexts, 100)

    def encrypt_owned(self, private_key, plaintexts):
        """What :meth:`encrypt` gives, computed by the key owner with half-size tables (the CRT).

        The same ciphertext distribution; about 30% less CPU (0.33 against 0.48 ms
        at 2048 bits).  The tasks carry ``p`` and ``q``, so they run here or in vfl's
        local worker processes, on a joblib backend only under a plan made with
        ``send_private_key=True``; otherwise this is :meth:`encrypt`.
        """
        plaintexts = list(plaintexts)
        plan = compute.current()
        if plan.kind == "joblib" and not plan.send_private_key:
            return self._encrypt(private_key.public_key, plaintexts)
        return _in_tasks(_task_encrypt_owned, (int(private_key.p), int(private_key.q)), plaintexts, 60)

    def rerandomize(self, public_key, ciphertexts):
        ciphertexts = list(ciphertexts)
        if self.pool is not None and self.pool.available(public_key):
            n2 = public_key.nsquare
            return [c * o % n2 for c, o in zip(ciphertexts, self.obfuscators(public_key, len(ciphertexts)))]
        return _in_tasks(_task_rerandomize, (int(public_key.n),), ciphertexts, 100)

    # -- cheap element-wise operations -------------------------------------------------
    def add(self, public_key, a, b):
        n2 = public_key.nsquare
        return [x * y % n2 for x, y in zip(a, b)]

    def add_plain(self, public_key, ciphertexts, plaintexts):
        """``c (1 + m n) = c + n ((c m) mod n)  (mod n^2)``."""
        n, n2 = public_key.n, public_key.nsquare
        return [(c + n * (c * (gmpy2.mpz(m) % n) % n)) % n2 for c, m in zip(ciphertexts, plaintexts)]

    def mul_plain(self, public_key, ciphertexts, scalars):
        n2 = public_key.nsquare
        return self._thread_map(lambda ck: _signed_powmod(ck[0], int(ck[1]), n2),
                                list(zip(ciphertexts, scalars)), 16)

    def sum(self, public_key, ciphertexts):
        """``prod c_i mod n^2``: the encryption of the sum (one ciphertext)."""
        ciphertexts = list(ciphertexts)
        n2 = public_key.nsquare
        ranges = task_ranges(len(ciphertexts), 1, 1 << 20)
        parts = workers.run(_task_product, [(int(n2), ciphertexts[lo:hi]) for lo, hi in ranges])
        return multiexp.product(parts, n2)

    # -- multi-exponentiation ---------------------------------------------------------
    def lincomb(self, public_key, ciphertexts, columns):
        matrix = multiexp.as_exponent_matrix(columns)
        if matrix is None:                         # exponents beyond 62 bits: the reference path
            return self._simple.lincomb(public_key, ciphertexts, columns)
        ciphertexts = list(ciphertexts)
        rows = len(ciphertexts)
        if matrix.shape[1] != rows:
            raise ValueError(f"lincomb: {rows} ciphertexts and columns of length {matrix.shape[1]}")
        n2 = public_key.nsquare
        plan = multiexp.Plan(matrix)
        partials, total = [gmpy2.mpz(1)] * len(plan.varying), gmpy2.mpz(1)
        if plan.varying or plan.needs_total:
            schedule = self._lincomb_schedule(rows, plan.bits, plan.needs_total)
            tasks = [(int(n2), ciphertexts[lo:hi], plan.lifted[cols][:, lo:hi], [plan.bits[c] for c in cols],
                      method, t, with_total) for lo, hi, cols, method, t, with_total in schedule]
            for (_, _, cols, _, _, _), (part, sub_total) in zip(schedule, workers.run(_task_lincomb, tasks)):
                for c, p in zip(cols, part):
                    partials[c] = partials[c] * p % n2
                if sub_total is not None:
                    total = total * sub_total % n2
        return plan.finish(partials, total, n2)

    def _lincomb_schedule(self, rows: int, bits: list, needs_total: bool) -> list:
        """Tasks ``(lo, hi, columns, method, t, with_total)`` with the least estimated wall time.

        Three shapes are costed: subset tables on row chunks (tables bounded in
        size), buckets on row chunks, and buckets on whole columns split among the
        workers (the bucket method gets cheaper per term as chunks get longer).
        """
        plan = compute.current()
        m = len(bits)
        w = lanes(plan, 5.0 * rows * m)           # about 5 multiplications per term
        everything = list(range(m))
        t, _ = multiexp.best_subset(max(1, -(-rows // max(1, w))), bits)
        small = multiexp.subset_cost(rows, bits, t) < plan.threshold or w < 2
        used = 1 if small else w

        def row_chunks(limit: int) -> list:
            parts = max(used, -(-rows // limit)) if rows else 1
            if not small:
                parts = -(-parts // w) * w
            return _split(rows, parts) if rows else [(0, 0)]

        def estimate(tasks, cost) -> tuple:
            costs = [cost(lo, hi, cols) for lo, hi, cols in tasks]
            return max(sum(costs) / min(used, len(tasks)), max(costs)), sum(costs)

        options = []
        chunks = row_chunks(multiexp.subset_chunk_rows(t))
        tasks = [(lo, hi, everything) for lo, hi in chunks]
        options.append((estimate(tasks, lambda lo, hi, cols: 1.12 * multiexp.subset_cost(hi - lo, bits, t)),
                        "subset", t, tasks))
        chunks = row_chunks(MAX_BUCKET_ROWS)
        tasks = [(lo, hi, everything) for lo, hi in chunks]
        bucket = lambda lo, hi, cols: multiexp.bucket_cost(hi - lo, [bits[c] for c in cols])
        options.append((estimate(tasks, bucket), "buckets", 0, tasks))
        if not small and m >= 2:
            groups = [list(range(a, b)) for a, b in _split(m, min(w, m))]
            chunks = _split(rows, max(1, -(-rows // MAX_BUCKET_ROWS))) if rows else [(0, 0)]
            tasks = [(lo, hi, cols) for lo, hi in chunks for cols in groups]
            options.append((estimate(tasks, bucket), "buckets", 0, tasks))
            # few rows and many columns (X [[c]]: a row's few weights, one column per data row): one table
            # of every row, the columns split among the workers, each squaring only its own columns
            whole, _ = multiexp.best_subset(rows, bits)
            if rows <= multiexp.subset_chunk_rows(whole):
                tasks = [(0, rows, cols) for cols in groups]
                options.append((estimate(tasks, lambda lo, hi, cols: 1.12 * multiexp.subset_cost(
                    hi - lo, [bits[c] for c in cols], whole)), "subset", whole, tasks))
        _, method, t, tasks = min(options, key=lambda o: o[0])
        # one task per row range computes prod c_i (for the offsets and constant columns)
        seen, out = set(), []
        for lo, hi, cols in tasks:
            out.append((lo, hi, cols, method, t, needs_total and (lo, hi) not in seen))
            seen.add((lo, hi))
        return out

    # -- decryption (coordinator only) -----------------------------------------------
    def decrypt(self, private_key, ciphertexts):
        """CRT decryption, in this process's threads.

        Only under a joblib plan made with ``send_private_key=True`` (the CLI's
        ``send_private_key_to_cluster``) do large calls go to the backend's workers,
        each task carrying ``p`` and ``q``.
        """
        ciphertexts = list(ciphertexts)
        plan = compute.current()
        if plan.kind == "joblib" and plan.send_private_key:
            ranges = task_ranges(len(ciphertexts), DECRYPT_COST, MAX_DECRYPTIONS_PER_TASK)
            if len(ranges) > 1:
                p, q = int(private_key.p), int(private_key.q)
                out = []
                for chunk in workers.run(_task_decrypt, [(p, q, ciphertexts[lo:hi]) for lo, hi in ranges]):
                    out.extend(chunk)
                return out
        key = self._crt_key(private_key)
        if _multi_buffer(key):         # eight at a time: split among the threads in whole batches of eight
            return self._thread_chunks(lambda part: _crt_decrypt_many(key, part), ciphertexts,
                                       2 * mbexp.LANES, mbexp.LANES)
        return self._thread_map(lambda c: _crt_decrypt(key, c), ciphertexts)

    @staticmethod
    def decrypt_engine(private_key=None) -> dict:
        """What :meth:`decrypt`'s exponentiations run on in this process (:func:`vfl.crypto.mbexp.record`).

        ``{"engine": "ipp-crypto-mb8" | "gmpy2", "reason": ..., "version": ...}``; with ``private_key``,
        for that key (gmpy2, with the reason, for a modulus size the multi-buffer library does not take).
        """
        report = mbexp.record()
        if private_key is not None and report["engine"] == mbexp.FAST:
            p, q = gmpy2.mpz(private_key.p), gmpy2.mpz(private_key.q)
            if not (mbexp.supports(p * p) and mbexp.supports(q * q)):
                bits = int((p * p).bit_length())
                return {"engine": mbexp.GMP, "reason": f"mbx_exp_mb8 takes no {bits}-bit modulus (p^2 of this key)"}
        return report

    def _crt_key(self, private_key) -> tuple:
        ident = id(private_key)
        with self._lock:
            hit = self._crt.get(ident)
            if hit is not None and hit[0] is private_key:
                return hit[1]
        key = _crt_parts(gmpy2.mpz(private_key.p), gmpy2.mpz(private_key.q))
        with self._lock:
            if len(self._crt) > 8:
                self._crt.clear()
            self._crt[ident] = (private_key, key)
        return key


def _crt_parts(p, q) -> tuple:
    """What CRT decryption needs from the primes ``p`` and ``q``."""
    n = p * q
    p2, q2 = p * p, q * q
    hp = gmpy2.invert((gmpy2.powmod(n + 1, p - 1, p2) - 1) // p, p)
    hq = gmpy2.invert((gmpy2.powmod(n + 1, q - 1, q2) - 1) // q, q)
    return (p, q, p2, q2, hp, hq, gmpy2.invert(p, q))


def _crt_decrypt(key: tuple, c):
    """Paillier decryption with the CRT (the same arithmetic as ``phe``'s ``raw_decrypt``)."""
    p, q, p2, q2 = key[:4]
    return _crt_finish(key, gmpy2.powmod(c, p - 1, p2), gmpy2.powmod(c, q - 1, q2))


def _crt_finish(key: tuple, xp, xq):
    """The plaintext from ``xp = c^(p-1) mod p^2`` and ``xq = c^(q-1) mod q^2``: Paillier's L, then the CRT."""
    p, q, p2, q2, hp, hq, p_inv = key
    mp = (xp - 1) // p * hp % p
    mq = (xq - 1) // q * hq % q
    return mp + ((mq - mp) * p_inv % q) * p


def _multi_buffer(key: tuple) -> bool:
    """Whether this key's exponentiations run eight at a time (:mod:`vfl.crypto.mbexp`) in this process."""
    return mbexp.fast() and mbexp.supports(key[2]) and mbexp.supports(key[3])


def _crt_decrypt_many(key: tuple, ciphertexts: list) -> list:
    """:func:`_crt_decrypt` of each ciphertext: the exponentiations eight at a time where the fast engine runs."""
    if len(ciphertexts) < 2 or not _multi_buffer(key):
        return [_crt_decrypt(key, c) for c in ciphertexts]
    p, q, p2, q2 = key[:4]
    xps = mbexp.powmod_many(ciphertexts, p - 1, p2)
    xqs = mbexp.powmod_many(ciphertexts, q - 1, q2)
    return [_crt_finish(key, xp, xq) for xp, xq in zip(xps, xqs)]


def _signed_powmod(c, k: int, n2):
    if k >= 0:
        return gmpy2.powmod(c, k, n2)
    return gmpy2.powmod(gmpy2.invert(c, n2), -k, n2)


def _release_gil() -> None:
    gmpy2.get_context().allow_release_gil = True
