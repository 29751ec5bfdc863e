"""Helpers for the network tests: free ports on 127.0.0.1, certificates, roles connected in threads."""

import socket
import threading

import pytest

from vfl.transport.network import NetworkSettings, NetworkTransport
from vfl.transport.tls import write_federation_certs


def _free_ports(count):
    """``count`` distinct free TCP ports on 127.0.0.1 (bound, then released)."""
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.fixture(scope="session")
def federation_certs(tmp_path_factory):
    """A CA with certificates for A, B, C; and a second, foreign CA with the same roles."""
    base = tmp_path_factory.mktemp("certs")
    return write_federation_certs(base / "ours", ["A", "B", "C"]), write_federation_certs(base / "theirs", ["A", "B", "C"])


def _connect_all(tls_by_role, roles=("A", "B", "C"), settings=None, addresses=None):
    """Connect ``roles`` concurrently (one thread each); return ``(transports, errors)`` by role."""
    settings = settings or NetworkSettings(connect_timeout=5.0, send_timeout=5.0)
    addresses = addresses or dict(zip(roles, (("127.0.0.1", p) for p in _free_ports(len(roles)))))
    transports, errors = {}, {}

    def run(role):
        try:
            transports[role] = NetworkTransport.connect(role, addresses, tls_by_role[role], settings)
        except Exception as exc:  # noqa: BLE001 - inspected by the test
            errors[role] = exc

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in tls_by_role if r in roles]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return transports, errors


@pytest.fixture
def free_ports():
    return _free_ports


@pytest.fixture
def connect_all():
    return _connect_all
