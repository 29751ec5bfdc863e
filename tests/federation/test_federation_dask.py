"""A party process on a Dask cluster (``[compute]`` in federation.toml: tests/deploy/test_compute.py).

The cluster is a ``distributed.LocalCluster`` started in the test process; party B
(a separate process) reaches its scheduler on 127.0.0.1 through ``[compute.B]``.
"""

import json

import pandas as pd
import pytest
from distributed import Client, get_task_stream

from vfl.deploy.compute import ComputeSettings
from vfl_net_helpers import (_free_ports, assert_succeeded, federation_certs,  # noqa: F401 - fixture
                             run_parties, start_parties, write_federation_file, write_party_data)

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels


def _shard(work, role):
    return json.loads((work / role / f"model_{role}.json").read_text())


def test_a_party_on_its_dask_cluster_trains_and_predicts_the_same(tmp_path, federation_certs, dask_cluster):
    certs = federation_certs[0]
    # 300 rows in one batch: B's re-randomisations and products are large enough to go to the cluster
    data = write_party_data(tmp_path, n_rows=300)
    training = {"batch_size": 0, "iterations": 3, "init": "zeros"}
    local = write_federation_file(tmp_path / "local.toml", certs, _free_ports(3), training)
    assert_succeeded(run_parties("party", local, data, tmp_path / "local"))
    assert_succeeded(run_parties("predict", local, data, tmp_path / "local"))

    on_dask = write_federation_file(tmp_path / "dask.toml", certs, _free_ports(3), training)
    on_dask.write_text(on_dask.read_text() + f'\n[compute.B]\nbackend = "dask"\n'
                                             f'scheduler = "{dask_cluster.scheduler_address}"\n')
    with Client(dask_cluster, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=60)
        with get_task_stream(client) as stream:
            assert_succeeded(run_parties("party", on_dask, data, tmp_path / "dask"))
            assert_succeeded(run_parties("predict", on_dask, data, tmp_path / "dask"))
    assert len(stream.data) > 0                                  # B's tasks reached the cluster
    for role in ("A", "B"):
        mine, theirs = _shard(tmp_path / "local", role), _shard(tmp_path / "dask", role)
        assert mine["coef"] == theirs["coef"] and mine.get("intercept") == theirs.get("intercept")
    scores = [pd.read_csv(tmp_path / run / "B" / "scores.csv") for run in ("local", "dask")]
    pd.testing.assert_frame_equal(*scores)


def test_an_unreachable_scheduler_is_one_clear_line(tmp_path, federation_certs):
    data = write_party_data(tmp_path)
    port = _free_ports(1)[0]                                     # nothing listens there
    config = write_federation_file(tmp_path / "f.toml", federation_certs[0], _free_ports(3))
    config.write_text(config.read_text() + f'\n[compute.B]\nbackend = "dask"\nscheduler = "tcp://127.0.0.1:{port}"\n'
                                           'connect_timeout = 2\n')
    party = start_parties("party", config, data, tmp_path / "run", roles=("B",))["B"]
    code, out, err = party.finish(60)
    assert code == 1 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert f"party B: cannot reach its Dask scheduler at tcp://127.0.0.1:{port} within 2 s" in err


@pytest.mark.parametrize("reply, reason", [(None, "accepted the connection but sent no Dask handshake within 2 s"),
                                           (b"HTTP/1.1 400 Bad Request\r\n\r\n", "answered with bytes that are not "
                                                                                  "a Dask handshake")])
def test_a_scheduler_address_that_does_not_speak_dask_is_one_clear_error(reply, reason):
    """An HTTP port or a silent socket: one line naming the party and address, within connect_timeout."""
    import socket
    import threading
    import time

    from vfl.errors import ComputeError
    from vfl.deploy.compute import ComputeSettings, party_compute

    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve():
        conn, _ = listener.accept()
        if reply:
            conn.sendall(reply)
        done.wait(10)
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    start = time.monotonic()
    try:
        with pytest.raises(ComputeError, match=rf"party A: its Dask scheduler at {address} {reason}"):
            with party_compute(ComputeSettings(backend="dask", scheduler=address, connect_timeout=2), "A"):
                pass
    finally:
        done.set()
        listener.close()
    assert time.monotonic() - start < 10
