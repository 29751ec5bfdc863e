"""A party's [compute] settings in federation.toml (vfl.deploy.compute): per party, local, checked by name."""

import re

import pytest

from vfl.deploy.compute import ComputeSettings
from vfl.deploy.config import load_config, write_config
from vfl.errors import ConfigurationError

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
