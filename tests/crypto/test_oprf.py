"""The oblivious PRF and sealed table entries of private-query scoring (vfl.crypto.oprf)."""

from __future__ import annotations

import pytest
from nacl import bindings as sodium

from vfl.crypto import oprf
from vfl.errors import ProtocolError

DOMAIN = b"vfl-test-oprf"


def _round(key, ids):
    points, blinds = oprf.blind(ids, DOMAIN)
    return [oprf.finalize(x, p, DOMAIN) for x, p in zip(ids, oprf.unblind(oprf.evaluate(key, points), blinds))]


def test_a_round_gives_the_holders_own_prf_of_each_id():
    key = oprf.new_key()
    ids = [b"c-1", b"c-2", "zoë".encode(), b""]
    assert _round(key, ids) == [oprf.prf(key, x, DOMAIN) for x in ids]
    assert len(set(_round(key, ids))) == 4


def test_another_key_or_domain_gives_other_outputs():
    key, other = oprf.new_key(), oprf.new_key()
    assert oprf.prf(key, b"c-1", DOMAIN) != oprf.prf(other, b"c-1", DOMAIN)
    assert oprf.prf(key, b"c-1", DOMAIN) != oprf.prf(key, b"c-1", DOMAIN + b"2")


def test_the_holder_sees_a_fresh_random_point_for_the_same_id_each_time():
    """What the holder receives does not repeat for a repeated id (a blind is fresh each query): it cannot tell
    two queries of one id from queries of two ids."""
    first, _ = oprf.blind([b"c-1", b"c-1"], DOMAIN)
    second, _ = oprf.blind([b"c-1"], DOMAIN)
    assert len({*first, *second}) == 3
    assert all(sodium.crypto_core_ed25519_is_valid_point(p) for p in first + second)


@pytest.mark.parametrize("bad, message", [
    (bytes(32), "not a point of the prime-order group"),                     # the identity's neighbour: invalid
    (bytes([1]) + bytes(31), "not a point of the prime-order group"),        # the identity
    (b"\xff" * 32, "not a point of the prime-order group"),                  # not canonical
    (b"short", "32 bytes expected"),
])
def test_the_holder_refuses_a_point_outside_the_group_by_position(bad, message):
    good, _ = oprf.blind([b"c-1"], DOMAIN)
    with pytest.raises(ProtocolError, match=f"blinded point 1.*{message}|blinded point 1: {message}"):
        oprf.evaluate(oprf.new_key(), [good[0], bad])


def test_a_sealed_entry_opens_only_with_its_output_and_context():
    key = oprf.new_key()
    output = oprf.prf(key, b"c-1", DOMAIN)
    tag, box = oprf.seal(output, b"payload of c-1", b"model v3, party telco")
    assert tag == oprf.tag(output) and len(tag) == oprf.TAG_BYTES
    assert oprf.open_sealed(output, box, b"model v3, party telco") == b"payload of c-1"
    with pytest.raises(ProtocolError, match="does not open"):
        oprf.open_sealed(oprf.prf(key, b"c-2", DOMAIN), box, b"model v3, party telco")
    with pytest.raises(ProtocolError, match="does not open"):
        oprf.open_sealed(output, box, b"model v4, party telco")
    tampered = bytes([box[0] ^ 1]) + box[1:]
    with pytest.raises(ProtocolError, match="does not open"):
        oprf.open_sealed(output, tampered, b"model v3, party telco")


def test_a_querier_finds_and_opens_exactly_the_entries_of_its_ids():
    """The labeled PSI end to end: the holder seals a table of its rows; the querier's round finds its own
    ids' entries (those the holder has) and no other."""
    key = oprf.new_key()
    held = {f"c-{i}".encode(): f"row {i}".encode() for i in range(50)}
    table = dict(oprf.seal(oprf.prf(key, x, DOMAIN), payload, b"v1") for x, payload in held.items())
    asked = [b"c-3", b"c-47", b"not-a-customer"]
    found = {}
    for x, output in zip(asked, _round(key, asked)):
        box = table.get(oprf.tag(output))
        if box is not None:
            found[x] = oprf.open_sealed(output, box, b"v1")
    assert found == {b"c-3": b"row 3", b"c-47": b"row 47"}


def test_unblinding_checks_counts_and_points():
    points, blinds = oprf.blind([b"c-1", b"c-2"], DOMAIN)
    with pytest.raises(ProtocolError, match="2 evaluated points for 1 queries"):
        oprf.unblind(points, blinds[:1])
    with pytest.raises(ProtocolError, match="evaluated point 0"):
        oprf.unblind([bytes(32), points[1]], blinds)


def test_keys_are_nonzero_scalars_and_differ():
    keys = {oprf.new_key() for _ in range(20)}
    assert len(keys) == 20 and all(len(k) == oprf.SCALAR_BYTES and any(k) for k in keys)


def test_a_sealed_table_answers_a_round_and_refuses_a_repeated_id():
    key = oprf.new_key()
    table = oprf.seal_table(key, [(b"c-1", b"one"), (b"c-2", b"two")], DOMAIN, b"v1")
    assert oprf.open_found(_round(key, [b"c-2", b"c-9", b"c-1"]), table, b"v1") == [b"two", None, b"one"]
    with pytest.raises(ProtocolError, match="same id"):
        oprf.seal_table(key, [(b"c-1", b"one"), (b"c-1", b"again")], DOMAIN, b"v1")
