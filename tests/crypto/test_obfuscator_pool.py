"""Obfuscators computed ahead of need are handed out once, never twice."""

import threading

import pytest

from vfl.crypto import FastEngine, ObfuscatorPool


@pytest.fixture
def pk(keypair_1024, monkeypatch):
    monkeypatch.setenv("VFL_WORKERS", "0")          # in-process: these tests are about bookkeeping
    return keypair_1024[0]


def test_take_removes_what_it_returns(pk):
    pool = ObfuscatorPool()
    assert pool.fill(pk, 50) == 50 and pool.available(pk) == 50
    first = pool.take(pk, 30)
    assert len(first) == 30 and pool.available(pk) == 20
    second = pool.take(pk, 30)                      # only 20 left: never recycled to make up the count
    assert len(second) == 20 and pool.available(pk) == 0
    assert len(set(first) | set(second)) == 50
    assert pool.take(pk, 5) == [] and pool.handed_out == 50


def test_concurrent_takes_are_disjoint(pk):
    pool = ObfuscatorPool()
    pool.fill(pk, 120)
    got = [[] for _ in range(4)]

    def worker(k):
        for _ in range(10):
            got[k].extend(pool.take(pk, 3))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [o for part in got for o in part]
    assert len(everything) == 120 and len(set(everything)) == 120


def test_engine_uses_each_pooled_obfuscator_once(pk):
    pool = ObfuscatorPool()
    engine = FastEngine(pool=pool)
    pool.fill(pk, 40)
    pooled = set(pool._store[int(pk.n)])
    # encryptions of 0 are their obfuscators: (1 + 0 n) o = o
    first = engine.encrypt(pk, [0] * 25)
    second = engine.rerandomize(pk, [1] * 25)       # rerandomizing 1 also exposes the obfuscator
    used = first + second
    assert len(set(used)) == 50                     # no obfuscator twice, pooled or fresh
    assert pooled <= set(used) and pool.available(pk) == 0
    assert len(set(used) - pooled) == 10            # the 10 the pool lacked were computed fresh


def test_capacity_and_background_refill(pk):
    pool = ObfuscatorPool(capacity=30, refill=True)
    assert pool.fill(pk, 100) == 30                 # never more than the capacity
    taken = pool.take(pk, 12)
    pool.wait()
    assert pool.available(pk) == 30                 # what was taken has been replaced...
    assert not set(taken) & set(pool._store[int(pk.n)])   # ...by new values
    pool.clear()
    assert pool.available(pk) == 0


def test_old_keys_are_forgotten(keypair_1024, monkeypatch):
    monkeypatch.setenv("VFL_WORKERS", "0")
    from vfl.crypto import generate_keypair, get_engine

    pk = keypair_1024[0]
    other = generate_keypair(512, insecure=True)[0]
    pool = ObfuscatorPool(max_keys=1)
    pool.fill(pk, 5)
    pool.fill(other, 5)
    assert pool.available(pk) == 0 and pool.available(other) == 5
    assert get_engine("fast+pool").pool is not None and get_engine("fast+pool").name == "fast+pool"
