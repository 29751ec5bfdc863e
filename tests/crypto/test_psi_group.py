"""The group used by the PSI (X25519): hashing onto the curve, blinding, and refusing every kind of bad point."""

import hashlib

import gmpy2
import pytest
from nacl import bindings as sodium

from vfl.crypto import group

P = 2 ** 255 - 19
A = 486662
MESSAGES = [f"customer-{i}".encode() for i in range(300)]
#: the two u-coordinates of the points of order 8 on Curve25519 (RFC 7748's small-order list)
ORDER_8 = (325606250916557431795983626356110631294008115727848805560023387167927233504,
           39382357235489614581723060781553021112529911719440698176882885853963445705823)


def u_bytes(u: int) -> bytes:
    return u.to_bytes(32, "little")


def is_square(u: int) -> bool:
    return gmpy2.jacobi((u * (u * (u + A) + 1)) % P, P) == 1


def twist_point() -> bytes:
    """The smallest u > 2 whose point lies on the twist, not the curve."""
    return u_bytes(next(u for u in range(3, 1000) if not is_square(u)))


def edwards_to_u(point: bytes) -> int:
    """The Montgomery u-coordinate (1 + y) / (1 - y) of an Edwards25519 point's encoding."""
    y = int.from_bytes(point, "little") & ((1 << 255) - 1)
    return (1 + y) * pow(1 - y, P - 2, P) % P


def mixed_order_point() -> bytes:
    """A curve point of order 8·L: a prime-order point plus a point of order 8 (built on Edwards25519)."""
    prime_order = sodium.crypto_core_ed25519_from_uniform(bytes(range(32)))
    order_8 = bytes.fromhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a")
    return u_bytes(edwards_to_u(sodium.crypto_core_ed25519_add(prime_order, order_8))), \
        u_bytes(edwards_to_u(prime_order))


def bad_points(valid: bytes) -> dict[str, bytes]:
    u = int.from_bytes(valid, "little")
    return {
        "zero (order 2)": bytes(32),
        "one": u_bytes(1),
        "minus one": u_bytes(P - 1),
        "order 8": u_bytes(ORDER_8[0]),
        "order 8, the other": u_bytes(ORDER_8[1]),
        "non-canonical": u_bytes(u + P),                       # the same point, u + p (>= 2^255: bit 255 set)
        "p itself": u_bytes(P),                                 # a second encoding of zero
        "on the twist": twist_point(),
        "short": valid[:31],
    }


REFUSED = ["zero (order 2)", "one", "minus one", "order 8", "order 8, the other", "non-canonical", "p itself",
           "on the twist"]


def test_hash_to_group_lands_on_the_curve_deterministically_and_per_domain():
    points = group.split(group.hash_to_group(MESSAGES, b"run-1"))
    assert len(points) == len(MESSAGES) == len(set(points))
    assert all(int.from_bytes(p, "little") < P and is_square(int.from_bytes(p, "little")) for p in points)
    assert group.hash_to_group(MESSAGES, b"run-1") == b"".join(points)
    assert not set(group.split(group.hash_to_group(MESSAGES, b"run-2"))) & set(points)


def test_hash_is_the_first_try_on_the_curve_of_the_domain_separated_sha512():
    message, domain = b"id-42", b"tag"
    seed = hashlib.sha512(bytes([len(domain)]) + domain + message).digest()[:32]
    tries = [int.from_bytes(hashlib.sha512(b"vfl-x25519/map" + seed + bytes([t])).digest(), "little") % P
             for t in range(40)]
    expected = next(u for u in tries if is_square(u))
    assert group.hash_to_group([message], domain) == u_bytes(expected)


def test_about_half_the_raw_tries_are_on_the_twist_and_none_of_the_hashed_points():
    seeds = [hashlib.sha512(m).digest()[:32] for m in MESSAGES]
    first = [int.from_bytes(hashlib.sha512(b"vfl-x25519/map" + s + b"\x00").digest(), "little") % P for s in seeds]
    on_curve = sum(map(is_square, first))
    assert 100 < on_curve < 200            # the test the hash makes is not vacuous: half the first tries fail it
    assert all(is_square(int.from_bytes(p, "little")) for p in group.split(group.hash_to_group(MESSAGES, b"")))


def test_blinding_commutes_matches_hash_and_blind_and_libsodium_x25519():
    a, b = group.random_scalar(), group.random_scalar()
    points = group.hash_to_group(MESSAGES, b"d")
    ab = group.blind(group.blind(points, a), b)
    assert ab == group.blind(group.blind(points, b), a)
    assert group.hash_and_blind(MESSAGES, b"d", a) == group.blind(points, a)
    assert group.blind(points, a) != points
    first = group.split(points)[0]
    assert group.blind(first, a) == sodium.crypto_scalarmult(a, first)


def test_blind_digests_are_keyed_truncated_sha256_of_the_blinded_points():
    a = group.random_scalar()
    points = group.hash_to_group(MESSAGES[:5], b"d")
    digests = group.blind_digests(points, a, b"key", 16)
    blinded = group.split(group.blind(points, a))
    assert digests == b"".join(hashlib.sha256(b"key" + p).digest()[:16] for p in blinded)
    with pytest.raises(ValueError):
        group.blind_digests(points, a, b"key", 12)


def test_a_point_of_mixed_order_is_brought_into_the_prime_order_subgroup_by_the_clamped_scalar():
    mixed, prime_order = mixed_order_point()
    assert mixed != prime_order and is_square(int.from_bytes(mixed, "little"))
    a = group.random_scalar()
    assert group.blind(mixed, a) == group.blind(prime_order, a)   # the order-8 part is gone: no bit of a leaks


def test_random_scalars_are_fresh_and_clamped():
    scalars = {group.random_scalar() for _ in range(50)}
    assert len(scalars) == 50
    for s in scalars:
        k = int.from_bytes(s, "little")
        assert k % 8 == 0 and 2 ** 254 <= k < 2 ** 255


@pytest.mark.parametrize("scalar", [bytes(32), b"\x01" * 32, b"\x08" * 31])
def test_blind_refuses_scalars_that_are_not_clamped(scalar):
    with pytest.raises(ValueError):
        group.blind(group.hash_to_group(MESSAGES[:2], b"d"), scalar)


@pytest.mark.parametrize("kind", REFUSED)
def test_every_bad_point_is_refused_with_its_position(kind):
    valid = group.split(group.hash_to_group(MESSAGES[:6], b"d"))
    points = b"".join(valid[:4]) + bad_points(valid[0])[kind] + valid[5]
    a = group.random_scalar()
    for check in (lambda pts: group.blind(pts, a), lambda pts: group.blind_digests(pts, a, b"k", 16)):
        with pytest.raises(group.InvalidPointError) as info:
            check(points)
        assert info.value.index == 4


def test_a_ragged_point_string_is_refused():
    with pytest.raises(group.InvalidPointError, match="whole 32-byte points"):
        group.blind(group.hash_to_group(MESSAGES[:2], b"d")[:-1], group.random_scalar())


def test_the_lanes_and_this_thread_agree(monkeypatch):
    monkeypatch.setattr(group, "MIN_POOL_ITEMS", 0)                 # to the lanes (worker processes or, on the
    monkeypatch.setattr(group, "MIN_THREAD_ITEMS", 0)               # fast engine, threads), however few the points
    a = group.random_scalar()
    with_workers = group.hash_and_blind(MESSAGES, b"d", a)
    monkeypatch.setenv("VFL_WORKERS", "0")
    assert group.hash_and_blind(MESSAGES, b"d", a) == with_workers
    points = with_workers[:32 * 10] + u_bytes(ORDER_8[1]) + with_workers[32 * 11:]
    with pytest.raises(group.InvalidPointError) as info:
        group.blind(points, a)
    assert info.value.index == 10


def test_a_few_points_do_not_start_the_worker_processes(monkeypatch):
    from vfl.crypto import workers

    workers.shutdown()
    started = []
    monkeypatch.setattr(workers.WorkerPool, "_ensure", lambda self: started.append(1))
    a = group.random_scalar()
    points = group.hash_and_blind(MESSAGES, b"d", a)
    group.blind_digests(points, a, b"k", 16)
    assert not started and len(MESSAGES) < group.MIN_POOL_ITEMS
