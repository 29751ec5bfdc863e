"""Work spread over worker processes gives the same results, survives a dead worker and shuts down."""

import os
import signal
import threading

import numpy as np
import pytest

from vfl.crypto import FastEngine, SimpleEngine, workers

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

SIMPLE = SimpleEngine()


@pytest.fixture
def two_workers(monkeypatch):
    monkeypatch.setenv("VFL_WORKERS", "2")
    yield
    workers.shutdown()


def test_parallel_calls_are_correct_and_shut_down(two_workers, keypair_1024):
    pk, sk = keypair_1024
    engine = FastEngine()
    values = list(range(-60, 60))                  # 120 encryptions: above the parallel threshold
    cts = engine.encrypt(pk, values)
    pool = workers.get_pool()
    assert pool is not None and len(pool.workers) == 2 and pool.any_alive()
    assert [v - pk.n if v > pk.n // 2 else v for v in engine.decrypt(sk, cts)] == values
    matrix = np.random.default_rng(0).integers(-2 ** 36, 2 ** 36, size=(12, 120))
    assert engine.lincomb(pk, cts, matrix) == SIMPLE.lincomb(pk, cts, matrix.tolist())
    assert set(engine.decrypt(sk, engine.rerandomize(pk, cts))) == set(engine.decrypt(sk, cts))
    processes = [w.process for w in pool.workers]
    workers.shutdown()
    assert all(p.poll() is not None for p in processes)


def test_a_killed_worker_does_not_lose_work(two_workers, keypair_1024):
    pk, sk = keypair_1024
    engine = FastEngine()
    engine.encrypt(pk, [0] * 100)
    victim = workers.get_pool().workers[0].process
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    values = list(range(100))
    assert engine.decrypt(sk, engine.encrypt(pk, values)) == values
    assert engine.decrypt(sk, engine.encrypt(pk, values)) == values


def test_threads_share_the_pool(two_workers, keypair_1024):
    pk, sk = keypair_1024
    engine = FastEngine()
    results, errors = {}, []

    def party(k):
        try:
            results[k] = engine.decrypt(sk, engine.encrypt(pk, [k] * 80))
        except Exception as exc:               # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=party, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(results[k] == [k] * 80 for k in range(3))


def test_no_pool_when_disabled(monkeypatch):
    monkeypatch.setenv("VFL_WORKERS", "1")
    assert workers.get_pool() is None
    assert workers.run(pow, [(2, 5), (3, 2)]) == [32, 9]


def test_worker_codec_round_trip_and_refusals():
    import gmpy2

    from vfl.crypto import _codec

    value = (True, [gmpy2.mpz(0), gmpy2.mpz(-5), gmpy2.mpz(2) ** 4100], None,
             [1, -2 ** 200, "chunk", 0.5, False, (gmpy2.mpz(7), [])],
             np.arange(-6, 6, dtype=np.int64).reshape(3, 4)[:, ::2],
             np.array([2 ** 63 + 5], dtype=np.uint64))
    back = _codec.decode(_codec.encode(value))
    assert back[:4] == value[:4]
    assert np.array_equal(back[4], value[4]) and back[4].dtype == np.int64
    assert np.array_equal(back[5], value[5]) and back[5].dtype == np.uint64
    for bad in (object(), np.zeros(2), {"a": 1}):
        with pytest.raises(TypeError):
            _codec.encode(bad)
    with pytest.raises(ValueError):
        _codec.decode(b"X")


def test_column_split_schedule_gives_the_same_results(two_workers, keypair_1024, monkeypatch):
    pk, _ = keypair_1024
    engine = FastEngine()
    rng = np.random.default_rng(5)
    cts = SIMPLE.encrypt(pk, [int(v) for v in rng.integers(-2 ** 30, 2 ** 30, 90)])
    matrix = rng.integers(-2 ** 36, 2 ** 36, size=(7, 90))
    matrix[2] = 2 ** 32                              # a constant column: needs prod c_i from one task only
    # long columns are split between the workers by column, not by row
    long_schedule = engine._lincomb_schedule(10_000, [36] * 20, True)
    assert {(lo, hi) for lo, hi, *_ in long_schedule} == {(0, 10_000)}
    assert sum(task[5] for task in long_schedule) == 1
    # force that shape (and a row split under it) on a small problem
    forced = [(0, 50, [0, 1, 2], "buckets", 0, True), (0, 50, [3, 4, 5], "buckets", 0, False),
              (50, 90, [0, 1, 2], "subset", 4, True), (50, 90, [3, 4, 5], "buckets", 0, False)]
    monkeypatch.setattr(engine, "_lincomb_schedule", lambda rows, bits, needs_total: forced)
    assert engine.lincomb(pk, cts, matrix) == SIMPLE.lincomb(pk, cts, matrix.tolist())


def test_script_without_main_guard_exits_cleanly(tmp_path):
    """Workers must not re-run the caller's script, and must not keep the interpreter alive at exit."""
    import subprocess
    import sys
    import time

    script = tmp_path / "no_guard.py"
    script.write_text(
        "from vfl.crypto import FastEngine, generate_keypair, workers\n"
        "pk, sk = generate_keypair(1024, insecure=True)\n"
        "engine = FastEngine()\n"
        "cts = engine.encrypt(pk, list(range(150)))\n"
        "assert workers.get_pool() is not None and workers.get_pool().any_alive()\n"
        "assert engine.decrypt(sk, cts) == list(range(150))\n"
        "print('done')\n")
    env = dict(os.environ, VFL_WORKERS="2")
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("done") == 1            # the script ran once, not once per worker
    assert time.monotonic() - started < 60


def test_shutdown_does_not_wait_for_a_running_task(two_workers, keypair_1024):
    import time

    pk, _ = keypair_1024
    pool = workers.get_pool()
    from vfl.crypto.fast import _task_obfuscators

    future = pool.submit(_task_obfuscators, int(pk.n), 200_000)      # minutes of work
    time.sleep(0.5)
    started = time.monotonic()
    workers.shutdown()
    assert time.monotonic() - started < 10
    assert future.done()
    assert workers.get_pool() is not None                 # a later call starts a new pool


def test_workers_ignore_an_interrupt_sent_to_the_process_group(two_workers, keypair_1024):
    """Ctrl-C or a Jupyter kernel interrupt reaches every process of the group: the workers stay quiet and keep
    working; the parent decides what stops."""
    pk, sk = keypair_1024
    engine = FastEngine()
    values = list(range(-60, 60))
    engine.encrypt(pk, values)
    pool = workers.get_pool()
    processes = [w.process for w in pool.workers]
    for process in processes:
        os.kill(process.pid, signal.SIGINT)
    cts = engine.encrypt(pk, values)
    assert [v - pk.n if v > pk.n // 2 else v for v in engine.decrypt(sk, cts)] == values
    assert all(process.poll() is None for process in processes) and pool.deaths == 0


def test_workers_are_out_of_reach_of_a_terminal_s_ctrl_c_even_while_they_start(two_workers, keypair_1024):
    """A terminal's Ctrl-C goes to its foreground process group: a worker in a session of its own never gets
    it, not even before its interpreter has set SIGINT aside (which printed tracebacks)."""
    pk, _ = keypair_1024
    FastEngine().encrypt(pk, list(range(40)))
    for worker in workers.get_pool().workers:
        assert os.getsid(worker.process.pid) != os.getsid(0) and os.getpgid(worker.process.pid) != os.getpgid(0)


def test_shutdown_leaves_no_unclosed_file(tmp_path):
    """Each worker's two pipes are closed by shutdown: no ``ResourceWarning: unclosed file`` at exit."""
    import subprocess
    import sys

    script = tmp_path / "pool.py"
    script.write_text(
        "import gc\n"
        "from vfl.crypto import FastEngine, generate_keypair, workers\n"
        "if __name__ == '__main__':\n"
        "    pk, sk = generate_keypair(1024, insecure=True)\n"
        "    FastEngine().encrypt(pk, list(range(120)))\n"
        "    assert workers.get_pool() is not None\n"
        "    workers.shutdown()\n"
        "    gc.collect()\n")
    done = subprocess.run([sys.executable, "-W", "always::ResourceWarning", str(script)], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, VFL_WORKERS="2"))
    assert done.returncode == 0, done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr


def _curve_engine(monkeypatch, choice):
    """``VFL_CURVE_ENGINE=choice`` for this test, the engine chosen afresh."""
    from vfl.crypto import mb

    monkeypatch.setenv("VFL_CURVE_ENGINE", choice)
    monkeypatch.setattr(mb._state_now, "_state", None)
    return mb._state_now()


def _curve_work_on_lanes(monkeypatch, after_first=lambda: None) -> None:
    """Hash-and-blind 3,000 ids and blind their points on two lanes (``after_first()`` checked after the first
    call); the same bytes in this thread alone; a bad point in the second task named at its position."""
    from vfl.crypto import group

    scalar = group.random_scalar()
    messages = [b"id-%d" % i for i in range(3000)]
    shared = group.hash_and_blind(messages, b"d", scalar)
    after_first()
    digests = group.blind_digests(shared, scalar, b"k", 16)
    monkeypatch.setenv("VFL_WORKERS", "0")
    assert group.hash_and_blind(messages, b"d", scalar) == shared
    assert group.blind_digests(shared, scalar, b"k", 16) == digests
    monkeypatch.setenv("VFL_WORKERS", "2")
    bad = shared[:32 * 2000] + (2).to_bytes(32, "little") + shared[32 * 2001:]       # u = 2: on the twist
    with pytest.raises(group.InvalidPointError) as info:
        group.blind(bad, scalar)
    assert info.value.index == 2000


def test_the_psi_s_curve_work_shares_its_lanes_with_the_calling_thread(two_workers, monkeypatch):
    from vfl.crypto import group

    _curve_engine(monkeypatch, "libsodium")             # libsodium's ladder: worker processes
    workers.shutdown()
    monkeypatch.setattr(group, "MIN_POOL_ITEMS", 0)

    def one_process():
        assert workers.get_pool(1, smallest=1) is not None and len(workers._POOLS[1].workers) == 1
        assert 2 not in workers._POOLS or not workers._POOLS[2].workers                         # not two

    _curve_work_on_lanes(monkeypatch, one_process)


def test_the_fast_engine_s_curve_work_runs_on_threads_and_starts_no_process(two_workers, monkeypatch):
    from vfl.crypto import group, mb

    if not _curve_engine(monkeypatch, "auto")["fast"] or not mb.releases_gil():
        pytest.skip(f"the fast X25519 engine and its field arithmetic do not run here: {mb.engine()['reason']}")
    workers.shutdown()
    monkeypatch.setattr(group, "MIN_THREAD_ITEMS", 0)
    started = []
    monkeypatch.setattr(workers.WorkerPool, "_ensure", lambda self: started.append(1))
    before = workers.STATS["thread tasks"]

    def on_threads():
        assert not started and workers.STATS["thread tasks"] >= before + 2

    _curve_work_on_lanes(monkeypatch, on_threads)
    assert not started and workers.STATS["thread tasks"] >= before + 6


def test_thread_lanes_raise_the_first_failing_task_s_error():
    def task(k):
        if k in (3, 5):
            raise ValueError(f"task {k}")
        return k * k

    with pytest.raises(ValueError, match="task 3"):
        workers.run_threads(task, [(k,) for k in range(9)], 2)
    assert workers.run_threads(task, [(k,) for k in (0, 1, 2, 4)], 2) == [0, 1, 4, 16]
    assert workers.run_threads(task, [(7,)], 2) == [49]
