"""``[compute]`` in federation.toml: checked strictly, local to each machine; a party process on a Dask cluster.

The cluster is a ``distributed.LocalCluster`` started in the test process; party B
(a separate process) reaches its scheduler on 127.0.0.1 through ``[compute.B]``.
"""

import json
import re

import pandas as pd
import pytest
from distributed import Client, get_task_stream

from vfl.errors import ConfigurationError
from vfl.deploy.compute import ComputeSettings
from vfl.deploy.config import load_config, write_config
from vfl_net_helpers import (_free_ports, assert_succeeded, federation_certs,  # noqa: F401 - fixture
                             run_parties, start_parties, write_federation_file, write_party_data)

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

PARTIES = {r: {"address": f"127.0.0.1:{7000 + i}", "certificate": f"certs/{r}.pem", "key": f"certs/{r}.key"}
           for i, r in enumerate("ABC")}
TRAINING = {"model": "logistic", "iterations": 5, "batch_size": 0, "tol": 0, "key_bits": 1024, "insecure": True}


def _config(tmp_path, compute: str, name="f.toml"):
    path = write_config(tmp_path / name, "certs/ca.pem", PARTIES, TRAINING)
    path.write_text(path.read_text() + "\n" + compute)
    return load_config(path)


def test_compute_settings_per_party_and_local(tmp_path):
    config = _config(tmp_path, '[compute]\nn_jobs = 2\n'
                               '[compute.B]\nbackend = "dask"\nscheduler = "tcp://10.0.0.5:8786"\nn_jobs = -1\n'
                               '[compute.C]\nbackend = "dask"\nscheduler = "tls://[::1]:8786"\nconnect_timeout = 3\n'
                               'send_private_key_to_cluster = true\n')
    assert config.compute["A"] == ComputeSettings(n_jobs=2)
    assert config.compute["B"] == ComputeSettings(backend="dask", scheduler="tcp://10.0.0.5:8786", n_jobs=-1)
    assert config.compute["C"].send_private_key_to_cluster and config.compute["C"].connect_timeout == 3
    plain = _config(tmp_path, "", "plain.toml")
    assert plain.compute["C"] == ComputeSettings() and not plain.compute["C"].send_private_key_to_cluster
    assert plain.fingerprint("train") == config.fingerprint("train")          # local, like [network]


@pytest.mark.parametrize("text, message", [
    ('[compute]\nbakend = "dask"', "[compute]: unknown key(s) ['bakend']"),
    ('[compute.B]\nfoo = 1', "[compute.B]: unknown key(s) ['foo']"),
    ('[compute.D]\nbackend = "local"', "[compute.D] names no party; the parties are ['A', 'B', 'C']"),
    ('[compute]\nbackend = "ray"', "backend must be one of ['local', 'dask'], got 'ray'"),
    ('[compute.B]\nbackend = "dask"', "[compute.B]: backend = 'dask' needs scheduler"),
    ('[compute]\nscheduler = "tcp://h:1"', "scheduler is only used with backend = 'dask'"),
    ('[compute.B]\nbackend = "dask"\nscheduler = "h:8786"', "scheduler must look like \"tcp://host:port\""),
    ('[compute.B]\nbackend = "dask"\nscheduler = "tcp://h:99999"', "scheduler must look like"),
    ('[compute]\nn_jobs = 0', "n_jobs must be None or a non-zero integer"),
    ('[compute]\nn_jobs = true', "n_jobs must be None or a non-zero integer"),
    ('[compute]\nn_jobs = 1.5', "n_jobs must be None or a non-zero integer"),
    ('[compute.B]\nbackend = "dask"\nscheduler = "tcp://h:1"\nconnect_timeout = 0',
     "connect_timeout must be a positive number of seconds"),
    ('[compute.B]\nbackend = "dask"\nscheduler = "tcp://h:1"\nsend_private_key_to_cluster = true',
     "send_private_key_to_cluster is for the coordinator only; party B holds no private key"),
    ('[compute]\nsend_private_key_to_cluster = true', "only be set in the coordinator's own table ([compute.C])"),
    ('[compute.C]\nsend_private_key_to_cluster = true', "needs backend = 'dask'"),
    ('[compute.C]\nbackend = "dask"\nscheduler = "tcp://h:1"\nsend_private_key_to_cluster = "yes"',
     "send_private_key_to_cluster must be true or false"),
])
def test_compute_errors_say_what_is_wrong(tmp_path, text, message):
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        _config(tmp_path, text)


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
