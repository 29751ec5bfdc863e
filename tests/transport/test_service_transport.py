"""The long-lived transport of ``vfl serve``: peers relinked whenever they come back, from either side."""

import time

import pytest

from vfl.errors import PeerError
from vfl.transport.network import NetworkSettings
from vfl.transport.service import ServiceTransport
from vfl_net_helpers import _free_ports

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

SETTINGS = NetworkSettings(connect_timeout=5.0, send_timeout=5.0)


def wait_until(condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
def pair(federation_certs_serving):
    tls = federation_certs_serving
    ports = _free_ports(2)
    addresses = {"A": ("127.0.0.1", ports[0]), "B": ("127.0.0.1", ports[1])}
    events, made = [], []

    def make(role):
        transport = ServiceTransport(role, addresses, tls[role], SETTINGS, redial=(0.05, 0.2),
                                     on_change=lambda peer, link: events.append((role, peer, link is not None)))
        made.append(transport)
        return transport.start()

    yield make, events
    for transport in made:
        transport.close()


@pytest.fixture(scope="module")
def federation_certs_serving(tmp_path_factory):
    from vfl.transport.tls import write_federation_certs

    return write_federation_certs(tmp_path_factory.mktemp("certs"), ["A", "B"])


@pytest.mark.parametrize("restarted", ["B", "A"])
def test_a_peer_that_restarts_is_linked_again(pair, restarted):
    make, events = pair
    a = make("A")                                   # A dials B, which is not up yet: it keeps trying
    time.sleep(0.3)
    assert a.linked("B") is None and "B" in a.errors
    b = make("B")
    wait_until(lambda: a.linked("B") is not None and b.linked("A") is not None)
    a.send("B", b"one")
    assert b.linked("A").recv(5) == b"one"
    gone, stays = (b, a) if restarted == "B" else (a, b)
    other = "A" if restarted == "B" else "B"
    gone.close()
    # the link fails first, then its failure is recorded: wait for both
    wait_until(lambda: stays.linked(restarted) is None and restarted in stays.errors)
    assert "closed the connection" in stays.errors[restarted]
    with pytest.raises(PeerError):
        stays.send(restarted, b"lost")
    back = make(restarted)
    wait_until(lambda: stays.linked(restarted) is not None and back.linked(other) is not None)
    stays.send(restarted, b"two")
    assert back.linked(other).recv(5) == b"two"
    assert (other, restarted, False) in events and events.count((other, restarted, True)) == 2
