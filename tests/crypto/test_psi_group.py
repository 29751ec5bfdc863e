"""The prime-order group used by the PSI: hashing, blinding, and refusing every kind of bad point."""

import hashlib

import pytest
from nacl import bindings as sodium

from vfl.crypto import group

P = 2 ** 255 - 19
MESSAGES = [f"customer-{i}".encode() for i in range(300)]


def small_order_point() -> bytes:
    """A point of order 8 (from libsodium's list of small-order encodings), checked here by doubling."""
    t = bytes.fromhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a")
    q = t
    for _ in range(2):
        q = sodium.crypto_core_ed25519_add(q, q)
    assert q != group.IDENTITY and sodium.crypto_core_ed25519_add(q, q) == group.IDENTITY
    return t


def not_on_curve() -> bytes:
    """The smallest y whose encoding decodes to no curve point."""
    for y in range(2, 1000):
        candidate = y.to_bytes(32, "little")
        try:
            sodium.crypto_core_ed25519_add(candidate, candidate)
        except Exception:
            return candidate
    raise AssertionError("no off-curve encoding found")


def bad_points(valid: bytes) -> dict[str, bytes]:
    return {
        "identity": group.IDENTITY,
        "order 2": (P - 1).to_bytes(32, "little"),
        "order 4": bytes(32),
        "order 8": small_order_point(),
        "non-canonical": (P + 1).to_bytes(32, "little"),      # y = p + 1: a second encoding of y = 1
        "not on the curve": not_on_curve(),
        "outside the subgroup": sodium.crypto_core_ed25519_add(valid, small_order_point()),
        "short": valid[:31],
    }


def test_hash_to_group_lands_in_the_subgroup_deterministically_and_per_domain():
    points = group.hash_to_group(MESSAGES, b"run-1")
    assert group.count(points) == len(MESSAGES)
    group.validate(points)
    assert group.hash_to_group(MESSAGES, b"run-1") == points
    other = group.split(group.hash_to_group(MESSAGES, b"run-2"))
    assert not set(other) & set(group.split(points))
    assert len(set(group.split(points))) == len(MESSAGES)


def test_hash_is_two_elligator_maps_of_the_domain_separated_sha512():
    message, domain = b"id-42", b"tag"
    digest = hashlib.sha512(bytes([len(domain)]) + domain + message).digest()
    expected = sodium.crypto_core_ed25519_add(sodium.crypto_core_ed25519_from_uniform(digest[:32]),
                                              sodium.crypto_core_ed25519_from_uniform(digest[32:]))
    assert group.hash_to_group([message], domain) == expected


def test_blinding_commutes_and_matches_hash_and_blind():
    a, b = group.random_scalar(), group.random_scalar()
    points = group.hash_to_group(MESSAGES, b"d")
    ab = group.blind(group.blind(points, a), b)
    assert ab == group.blind(group.blind(points, b), a)
    assert group.hash_and_blind(MESSAGES, b"d", a) == group.blind(points, a)
    assert group.blind(points, a) != points


def test_random_scalars_are_fresh_and_in_range():
    scalars = {group.random_scalar() for _ in range(50)}
    assert len(scalars) == 50
    assert all(0 < int.from_bytes(s, "little") < group.ORDER for s in scalars)


@pytest.mark.parametrize("scalar", [bytes(32), group.ORDER.to_bytes(32, "little"), b"\x01" * 31])
def test_blind_refuses_bad_scalars(scalar):
    with pytest.raises(ValueError):
        group.blind(group.hash_to_group(MESSAGES[:2], b"d"), scalar)


@pytest.mark.parametrize("kind", ["identity", "order 2", "order 4", "order 8", "non-canonical", "not on the curve",
                                  "outside the subgroup"])
def test_every_bad_point_is_refused_with_its_position(kind):
    valid = group.split(group.hash_to_group(MESSAGES[:6], b"d"))
    bad = bad_points(valid[0])[kind]
    assert not sodium.crypto_core_ed25519_is_valid_point(bad)
    points = b"".join(valid[:4]) + bad + valid[5]
    for check in (group.validate, lambda pts: group.blind(pts, group.random_scalar())):
        with pytest.raises(group.InvalidPointError) as info:
            check(points)
        assert info.value.index == 4


def test_a_ragged_point_string_is_refused():
    with pytest.raises(group.InvalidPointError, match="whole 32-byte points"):
        group.blind(group.hash_to_group(MESSAGES[:2], b"d")[:-1], group.random_scalar())


def test_worker_processes_and_this_process_agree(monkeypatch):
    a = group.random_scalar()
    with_workers = group.hash_and_blind(MESSAGES, b"d", a)
    monkeypatch.setenv("VFL_WORKERS", "0")
    assert group.hash_and_blind(MESSAGES, b"d", a) == with_workers
    points = with_workers[:32 * 10] + group.IDENTITY + with_workers[32 * 11:]
    with pytest.raises(group.InvalidPointError) as info:
        group.blind(points, a)
    assert info.value.index == 10
