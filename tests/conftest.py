"""Shared fixtures: key generation is slow, so each session makes one short teaching key."""

import os

import pytest

from vertical_data import make_vertical
from vfl import VerticalDataset
from vfl.crypto import generate_keypair


@pytest.fixture(autouse=True)
def _fresh_release_ledgers():
    """Each test is a session of its own: the in-process release ledgers start empty."""
    from vfl.protocols.release import clear_process_ledgers

    clear_process_ledgers()
    yield
    clear_process_ledgers()


@pytest.fixture(autouse=True)
def _repeatable_starts(request, monkeypatch):
    """The secret random starts of the in-process fits, repeatable per test.

    vfl draws every start from the CSPRNG (:func:`vfl.crypto.randomness.uniform_floats`), so a model trained for a
    few steps differs run to run, and so does what a feature party's release check makes of it: a test of a few
    steps on two or three columns would pass or be refused depending on the draw (three full runs in a row each
    lost one such test).  Here the modules that draw starts draw them from a generator seeded by the test's name:
    each test sees the same starts on every run (two fits in one test still start apart).  Only the tests: the
    library keeps the CSPRNG, and DP noise, masks and keys are untouched; ``vfl party`` processes draw their own.
    """
    import hashlib

    import numpy as np

    seed = int.from_bytes(hashlib.sha256(request.node.nodeid.encode()).digest()[:8], "big")
    generator = np.random.default_rng(seed)

    def uniform_floats(count: int) -> np.ndarray:
        return generator.random(int(count))

    from vfl.centralized import linear as centralized_linear
    from vfl.parties.linear import data_party
    from vfl.parties.mlp import starts

    for module in (data_party, starts, centralized_linear):
        monkeypatch.setattr(module, "uniform_floats", uniform_floats)


@pytest.fixture(scope="session")
def keypair_1024():
    return generate_keypair(1024, insecure=True)


@pytest.fixture
def vertical_frames():
    return make_vertical()


@pytest.fixture
def vertical_data(vertical_frames):
    frame_a, frame_b, _, _ = vertical_frames
    return VerticalDataset({"A": frame_a, "B": frame_b}, label="y", id_column="id")


@pytest.fixture(scope="session")
def dask_cluster():
    """A Dask cluster on this machine: two single-threaded worker processes (and their nannies)."""
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None)
    yield cluster
    cluster.close()


@pytest.fixture
def dask_client(dask_cluster):
    """The current ``dask.distributed.Client`` of ``dask_cluster``, both workers up."""
    from distributed import Client

    with Client(dask_cluster) as client:
        client.wait_for_workers(2, timeout=60)
        yield client


@pytest.fixture
def low_thresholds(monkeypatch):
    """Send even a test's small calls to the compute backend, in tasks of any size."""
    from vfl.crypto import compute

    for name in ("JOBLIB_THRESHOLD", "REMOTE_THRESHOLD", "LOCAL_THRESHOLD"):
        monkeypatch.setattr(compute, name, 100)
    monkeypatch.setattr(compute, "REMOTE_MIN_TASK", 50)


@pytest.fixture
def spy(monkeypatch):
    """The names of the task functions that went to a joblib backend, in order."""
    from vfl.crypto import compute

    sent = []
    original = compute.run_joblib

    def recording(fn, tasks, plan):
        sent.append(fn.__name__)
        return original(fn, tasks, plan)

    monkeypatch.setattr(compute, "run_joblib", recording)
    return sent


@pytest.fixture
def umask_022():
    """A umask of 022 (files readable by all unless their writer restricts them) for the test's duration."""
    old = os.umask(0o022)
    yield
    os.umask(old)
