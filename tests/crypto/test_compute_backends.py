"""The engine's parallel work under each plan: n_jobs, joblib backends carried into threads, a Dask cluster.

Small calls stay in the calling thread under a joblib backend (thresholds in
vfl.crypto.compute); these tests lower the thresholds so that the little data
of a test really goes to the backend.
"""

import os
import signal
import threading

import joblib
import numpy as np
import pytest
from distributed import get_task_stream
from distributed.diagnostics.plugin import SchedulerPlugin

from vertical_data import make_vertical
from vfl import VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression
from vfl.crypto import FastEngine, compute, workers
from vfl.crypto.fast import _task_decrypt, _task_encrypt
from vfl.errors import ComputeError, ConfigurationError

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

FAST = dict(key_bits=1024, insecure=True, max_iter=3, tol=None, init="zeros", random_state=0)


def _data(n_rows=120, seed=3):
    a, b, _, _ = make_vertical(n_rows=n_rows, seed=seed)
    return VerticalDataset({"A": a, "B": b}, label="y", id_column="id")


def _same_model(m1, m2):
    assert all(np.array_equal(m1.coef_[p], m2.coef_[p]) for p in m1.coef_)
    assert m1.intercept_ == m2.intercept_ and np.array_equal(m1.loss_curve_, m2.loss_curve_)


# -- plans ------------------------------------------------------------------------------------
def test_n_jobs_follows_scikit_learn(monkeypatch):
    monkeypatch.setenv("VFL_WORKERS", "3")
    assert compute.capture().kind == "local" and compute.capture().workers == 3       # None: VFL_WORKERS
    assert compute.capture(1).kind == "inline"
    assert compute.capture(2).workers == 2
    assert compute.capture(-1).workers == compute.usable_cores() or compute.capture(-1).kind == "inline"
    monkeypatch.setenv("VFL_WORKERS", "0")
    assert compute.capture().kind == "inline" and workers.worker_count() == 0
    with joblib.parallel_config(n_jobs=4):                 # joblib's n_jobs without a backend: local processes
        assert compute.capture().workers == 4
    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ConfigurationError, match="n_jobs must be None or a non-zero integer"):
            compute.capture(bad)
    assert compute.capture(np.int64(2)).workers == 2


@pytest.mark.parametrize("bad", [0, 2.0, True, "all"])
def test_estimators_check_n_jobs(bad):
    model = VerticalLinearRegression(n_jobs=bad, **FAST)
    with pytest.raises(ConfigurationError, match="n_jobs"):
        model.fit(_data(40))


def test_n_jobs_is_a_parameter():
    model = VerticalLogisticRegression(n_jobs=2)
    assert model.get_params()["n_jobs"] == 2
    assert model.set_params(n_jobs=-1).n_jobs == -1
    assert VerticalLogisticRegression().n_jobs is None


def test_the_joblib_config_reaches_threads_only_when_carried():
    seen = {}

    def look(key):
        seen[key] = compute.current()

    with joblib.parallel_config(backend="threading", n_jobs=2):
        here = compute.capture()
        plain = threading.Thread(target=look, args=("plain",))
        carried = threading.Thread(target=compute.bind(look), args=("carried",))
        for t in (plain, carried):
            t.start()
            t.join()
    assert here.kind == "joblib" and here.workers == 2 and not here.remote
    assert seen["carried"].kind == "joblib" and seen["carried"].backend is here.backend
    assert seen["plain"].kind != "joblib"                  # joblib keeps its configuration per thread


def test_threading_backend_trains_the_same_model(low_thresholds, spy):
    data = _data()
    reference = VerticalLogisticRegression(n_jobs=1, **FAST).fit(data)
    before = workers.STATS["joblib tasks"]
    with joblib.parallel_config(backend="threading", n_jobs=2):
        model = VerticalLogisticRegression(**FAST).fit(data)
        scores = model.decision_function(data)
    _same_model(reference, model)
    np.testing.assert_array_equal(scores, reference.decision_function(data))
    assert workers.STATS["joblib tasks"] > before and "_task_lincomb" in spy
    assert "_task_decrypt" not in spy                      # C's decryption stayed in its thread


def test_private_key_stays_unless_allowed(keypair_1024, low_thresholds, spy):
    pk, sk = keypair_1024
    engine = FastEngine()
    values = list(range(40))
    with joblib.parallel_config(backend="threading", n_jobs=2):
        cts = engine.encrypt(pk, values)
        assert engine.decrypt(sk, cts) == values and "_task_decrypt" not in spy
        with pytest.raises(ConfigurationError, match="refusing to send a private key"):
            compute.run_joblib(_task_decrypt, [(int(sk.p), int(sk.q), cts[:2])] * 2, compute.current())
        with compute.use(compute.capture(send_private_key=True)):
            assert engine.decrypt(sk, cts) == values
    assert "_task_decrypt" in spy
    with joblib.parallel_config(backend="threading", n_jobs=2):   # the owner's encryption: its key stays too
        spy.clear()
        assert engine.decrypt(sk, engine.encrypt_owned(sk, values)) == values
        assert "_task_encrypt_owned" not in spy and "_task_encrypt" in spy
        with compute.use(compute.capture(send_private_key=True)):
            assert engine.decrypt(sk, engine.encrypt_owned(sk, values)) == values
    assert "_task_encrypt_owned" in spy


def test_a_worker_runs_only_vfl_crypto_tasks():
    from vfl.crypto import _codec

    refused = _codec.decode(compute.remote_task("os", "system", _codec.encode(["true"])))
    assert refused[0] is False and "refusing task os.system" in refused[2]
    assert _codec.decode(compute.remote_task("vfl.crypto.fast", "_task_product", _codec.encode([7, [2, 3]]))) \
        == (True, 6)


# -- a Dask cluster ---------------------------------------------------------------------------
def test_dask_cluster_trains_and_predicts_the_same_model(dask_client, low_thresholds, spy):
    data = _data()
    reference = VerticalLogisticRegression(**FAST).fit(data)          # vfl's local worker processes
    with get_task_stream(dask_client) as stream:
        with joblib.parallel_config(backend="dask"):
            model = VerticalLogisticRegression(**FAST).fit(data)
            proba = model.predict_proba(data)
    _same_model(reference, model)
    np.testing.assert_array_equal(proba, reference.predict_proba(data))
    assert len(stream.data) > 0                                       # the cluster ran the tasks
    assert {"_task_encrypt", "_task_rerandomize", "_task_lincomb"} <= set(spy)
    assert "_task_decrypt" not in spy


def test_dask_decryption_only_when_the_key_may_go(dask_client, keypair_1024, low_thresholds, spy):
    pk, sk = keypair_1024
    engine = FastEngine()
    values = list(range(-20, 20))
    with joblib.parallel_config(backend="dask"):
        cts = engine.encrypt(pk, values)
        signed = lambda xs: [x - pk.n if x > pk.n // 2 else x for x in xs]
        assert signed(engine.decrypt(sk, cts)) == values and "_task_decrypt" not in spy
        with compute.use(compute.capture(send_private_key=True)):
            with get_task_stream(dask_client) as stream:
                assert signed(engine.decrypt(sk, cts)) == values
    assert "_task_decrypt" in spy and len(stream.data) > 0


class _KillOnProcessing(SchedulerPlugin):
    """Kill (SIGKILL) the worker that the ``nth`` task is sent to, the moment the scheduler sends it."""

    def __init__(self, scheduler, pids: dict, nth: int):
        self.scheduler, self.pids, self.left, self.killed = scheduler, pids, nth, []

    def transition(self, key, start, finish, *args, **kwargs):
        if finish != "processing" or self.killed:
            return
        self.left -= 1
        task = self.scheduler.tasks.get(key)
        if self.left <= 0 and task is not None and task.processing_on is not None:
            address = task.processing_on.address
            os.kill(self.pids[address], signal.SIGKILL)
            self.killed.append(address)


def test_a_worker_killed_mid_fit_is_retried(dask_cluster, dask_client, low_thresholds):
    data = _data(200, seed=5)
    reference = VerticalLinearRegression(**FAST).fit(data)
    killer = _KillOnProcessing(dask_cluster.scheduler, dask_client.run(os.getpid), nth=12)
    dask_cluster.scheduler.add_plugin(killer, name="vfl-test-killer")
    try:
        with joblib.parallel_config(backend="dask"):
            model = VerticalLinearRegression(**FAST).fit(data)
    except ComputeError as exc:                  # allowed: a clear error naming the cluster, never a wrong model
        assert "Dask cluster" in str(exc)
    else:
        _same_model(reference, model)            # the lost tasks ran again elsewhere
    finally:
        dask_cluster.scheduler.remove_plugin(name="vfl-test-killer")
    assert killer.killed, "no worker was killed mid-fit"
    dask_client.wait_for_workers(2, timeout=60)             # its nanny restarts the killed worker


def test_a_lost_cluster_is_one_clear_error(dask_cluster, keypair_1024, low_thresholds):
    from distributed import Client

    pk, _ = keypair_1024
    client = Client(dask_cluster, set_as_default=False)
    with joblib.parallel_config(backend="dask", client=client):
        plan = compute.capture()
    client.close()
    with compute.use(plan), pytest.raises(ComputeError, match="Dask cluster at tcp://127.0.0.1"):
        workers.run(_task_encrypt, [(int(pk.n), [1, 2], False)] * 2)

