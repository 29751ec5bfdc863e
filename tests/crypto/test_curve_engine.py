"""The fast X25519 engine (Intel's multi-buffer ladder, vfl[fast-crypto]) against libsodium, bit for bit.

The engine's tests skip, saying why, where the extra is not installed or the CPU lacks AVX-512 IFMA;
the tests of the fallback and of its reasons run everywhere.
"""

import os

import gmpy2
import numpy as np
import pandas as pd
import pytest
from nacl import bindings as sodium

import vfl.psi
from vfl.crypto import group, mb, workers

from crypto.test_psi_group import ORDER_8, P, is_square, mixed_order_point

A = 486662


def _fresh(monkeypatch, choice=None):
    """Forget the engine chosen so far (this process), under ``VFL_CURVE_ENGINE=choice``."""
    if choice is None:
        monkeypatch.delenv("VFL_CURVE_ENGINE", raising=False)
    else:
        monkeypatch.setenv("VFL_CURVE_ENGINE", choice)
    monkeypatch.setattr(mb._state_now, "_state", None)


def _fast_state():
    state = mb._state_now()
    if not state["fast"]:
        pytest.skip(f"the fast X25519 engine does not run here: {state['reason']}")
    return state


@pytest.fixture
def fast(monkeypatch):
    _fresh(monkeypatch)
    return _fast_state()


def u_bytes(u: int) -> bytes:
    return (u % 2 ** 256).to_bytes(32, "little")


def both(state, scalar: bytes, points: bytes):
    """(fast results, fast accepted), (libsodium results, libsodium accepted)."""
    return mb._fast(state["_fn"], scalar, points), mb._sodium(scalar, points)


def edge_points() -> list[bytes]:
    """Small-order points in every encoding libsodium knows, non-canonical and high-bit encodings, the base point."""
    small = [0, 1, ORDER_8[0], ORDER_8[1], P - 1, P, P + 1]
    out = [u_bytes(u) for u in small] + [u_bytes(u + 2 ** 255) for u in small if u + 2 ** 255 < 2 ** 256]
    out += [u_bytes(9), u_bytes(9 + 2 ** 255), u_bytes(P + 9), u_bytes(2 ** 255 - 1), u_bytes(2 ** 256 - 1),
            u_bytes(P - 2), u_bytes(2), bytes(range(32)), mixed_order_point()[0], mixed_order_point()[1],
            u_bytes(next(u for u in range(3, 1000) if not is_square(u)))]      # a twist point: computed, not refused
    return out


# -- the ladder, bit for bit -------------------------------------------------------------------
def test_random_points_and_unclamped_scalars_give_libsodiums_bytes(fast):
    rng = np.random.default_rng(46)
    for _ in range(12):
        scalar = rng.integers(0, 256, 32, dtype=np.uint8).tobytes()      # high bits and low bits set at random
        points = rng.integers(0, 256, 32 * 333, dtype=np.uint8).tobytes()  # bit 255 set on half of them
        (got, got_ok), (want, want_ok) = both(fast, scalar, points)
        assert got == want and np.array_equal(got_ok, want_ok) and got_ok.all()


def test_edge_points_give_libsodiums_bytes_and_refusals(fast):
    points = b"".join(edge_points())
    for scalar in (group.random_scalar(), bytes(32), b"\xff" * 32, bytes([7] + [0] * 30 + [0x80])):
        (got, got_ok), (want, want_ok) = both(fast, scalar, points)
        assert np.array_equal(got_ok, want_ok), "the two engines refuse different points"
        assert got == want
        # what libsodium refuses is exactly the all-zero result (and PyNaCl raises for it)
        for k, point in enumerate(edge_points()):
            try:
                sodium.crypto_scalarmult(scalar, point)
                assert want_ok[k]
            except Exception:
                assert not want_ok[k] and got[32 * k:32 * k + 32] == bytes(32)
    assert not got_ok[:7].any()                          # the seven small-order encodings are all refused


def test_clamping_is_libsodiums(fast):
    point = u_bytes(9)
    scalar = bytearray(os.urandom(32))
    clamped = bytearray(scalar)
    clamped[0] &= 248
    clamped[31] = (clamped[31] & 127) | 64
    for k in (bytes(scalar), bytes(clamped)):
        assert mb._fast(fast["_fn"], k, point)[0] == sodium.crypto_scalarmult(bytes(clamped), point)


def test_points_just_below_p_give_libsodiums_bytes(fast):
    """crypto_mb 2.3.0 gets some u in [p - 1393, p - 1] wrong: those lanes must still be libsodium's."""
    scalar = group.random_scalar()
    near = b"".join(u_bytes(P - i) for i in range(1, 3000)) + b"".join(u_bytes(P + i) for i in range(19))
    near += b"".join(u_bytes(P - i + 2 ** 255) for i in range(1, 40))
    (got, got_ok), (want, want_ok) = both(fast, scalar, near)
    assert got == want and np.array_equal(got_ok, want_ok)
    # and the band handed to libsodium is no wider than needed: right below it the fast engine agrees by itself
    below = b"".join(u_bytes(mb.NEAR_P - i) for i in range(1, 4001))
    assert not mb._near_p(np.frombuffer(below, dtype="<u8").reshape(-1, 4)).any()
    assert mb._near_p(np.frombuffer(u_bytes(mb.NEAR_P) + u_bytes(2 ** 256 - 1), dtype="<u8").reshape(-1, 4)).all()
    (got, _), (want, _) = both(fast, scalar, below)
    assert got == want


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 15, 16, 17, 100])
def test_batches_not_a_multiple_of_eight(fast, n):
    points = os.urandom(32 * n)
    if n > 3:
        points = points[:64] + bytes(32) + points[96:]        # a refused point inside a batch
    scalar = group.random_scalar()
    (got, got_ok), (want, want_ok) = both(fast, scalar, points)
    assert len(got) == 32 * n and got == want and np.array_equal(got_ok, want_ok)


def test_the_field_arithmetic_gives_gmps_legendre_symbols(fast):
    if fast.get("_field") is None:
        pytest.skip(f"the curve test runs on GMP here: {fast['curve_check']}")
    values = [int.from_bytes(os.urandom(32), "little") % P for _ in range(3000)]
    values += [0, 1, 2, P - 1, P - 2, 2 ** 255 - 20, 2 ** 254, 2 ** 52, 2 ** 104 - 1, ORDER_8[0], ORDER_8[1], A]
    words = np.frombuffer(b"".join(u_bytes(v) for v in values), dtype="<u8").reshape(-1, 4)
    want = [gmpy2.jacobi(v * (v * (v + A) + 1) % P, P) == 1 for v in values]
    assert mb.on_curve_many(words).tolist() == want


# -- the group, both engines ------------------------------------------------------------------
def _group_outputs(monkeypatch, choice):
    _fresh(monkeypatch, choice)
    monkeypatch.setenv("VFL_WORKERS", "0")
    scalar = bytes.fromhex("48" * 31 + "58")
    ids = [b"customer-%d" % i for i in range(203)]
    points = group.hash_to_group(ids, b"domain")
    return (points, group.hash_and_blind(ids, b"domain", scalar), group.blind(points, scalar),
            group.blind_digests(points, scalar, b"key", 16), group.engine())


def test_the_group_gives_the_same_bytes_on_either_engine(monkeypatch):
    _fresh(monkeypatch)
    _fast_state()
    *fast_out, fast_engine = _group_outputs(monkeypatch, "auto")
    *slow_out, slow_engine = _group_outputs(monkeypatch, "libsodium")
    assert fast_engine["engine"] == mb.FAST and slow_engine["engine"] == mb.SODIUM
    assert fast_out == slow_out
    # the map onto the curve, try by try for all seeds at once, is the one-seed-at-a-time map
    seeds = group._seeds([b"customer-%d" % i for i in range(203)], b"domain")
    assert fast_out[0] == b"".join(group._map_to_curve(seeds[i:i + 32]) for i in range(0, len(seeds), 32))


def test_refused_points_are_named_alike_on_either_engine(monkeypatch):
    valid = group.hash_to_group([b"x"] * 20, b"d")
    for bad in (bytes(32), u_bytes(ORDER_8[1]), u_bytes(P), u_bytes(P + 1),
                u_bytes(next(u for u in range(3, 1000) if not is_square(u)))):
        points = valid[:32 * 11] + bad + valid[32 * 12:]
        for choice in ("auto", "libsodium"):
            _fresh(monkeypatch, choice)
            with pytest.raises(group.InvalidPointError) as info:
                group.blind(points, group.random_scalar())
            assert info.value.index == 11


def test_psi_end_to_end_finds_the_same_rows_on_either_engine(monkeypatch):
    _fresh(monkeypatch)
    _fast_state()
    a = pd.DataFrame({"id": [f"c{i}" for i in range(0, 300)], "x": np.arange(300.0)})
    b = pd.DataFrame({"id": [f"c{i}" for i in range(150, 500)], "y": np.arange(350) % 2})
    found = {}
    for choice in ("auto", "libsodium"):
        _fresh(monkeypatch, choice)
        workers.shutdown()                   # the worker processes choose their engine when they start
        try:
            aligned = vfl.psi.intersect({"A": a, "B": b}, id_column="id", label="y")
        finally:
            workers.shutdown()
        assert list(aligned["A"]["id"]) == list(aligned["B"]["id"])
        record = aligned["B"].attrs["psi"]["curve_engine"]
        assert record["engine"] == (mb.FAST if choice == "auto" else mb.SODIUM)
        found[choice] = sorted(aligned["A"]["id"])
    assert found["auto"] == found["libsodium"] == sorted(f"c{i}" for i in range(150, 300))


# -- the reasons, everywhere ----------------------------------------------------------------------
def test_libsodium_on_request_says_so(monkeypatch):
    _fresh(monkeypatch, "libsodium")
    report = mb.engine()
    assert report["engine"] == mb.SODIUM and not report["fast"] and "VFL_CURVE_ENGINE=libsodium" in report["reason"]
    out, ok = mb.x25519_many(group.random_scalar(), u_bytes(9) + bytes(32))
    assert ok.tolist() == [True, False]


def test_a_cpu_without_ifma_is_named(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setattr(mb, "_cpu_has_ifma", lambda: (False, "this CPU lacks avx512ifma"))
    assert mb.engine()["reason"] == "this CPU lacks avx512ifma" and mb.engine()["engine"] == mb.SODIUM
    assert "libsodium (this CPU lacks avx512ifma)" == mb.describe()


def test_a_missing_extra_is_named_with_the_install_command(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setattr(mb, "_cpu_has_ifma", lambda: (True, ""))
    monkeypatch.setattr(mb, "_locate", lambda name, dist: None)
    report = mb.engine()
    assert report["engine"] == mb.SODIUM and 'pip install "vfl[fast-crypto]"' in report["reason"]
    _fresh(monkeypatch, "ipp")                          # asked for by name: an error, not a silent fallback
    monkeypatch.setattr(mb, "_cpu_has_ifma", lambda: (True, ""))
    monkeypatch.setattr(mb, "_locate", lambda name, dist: None)
    with pytest.raises(mb.FastEngineUnavailable, match="extra is not installed"):
        mb.engine()


def test_a_library_that_fails_to_load_is_named_with_the_error(monkeypatch, tmp_path):
    broken = tmp_path / "libcrypto_mb.so"
    broken.write_bytes(b"not a shared library")
    _fresh(monkeypatch)
    monkeypatch.setattr(mb, "_cpu_has_ifma", lambda: (True, ""))
    monkeypatch.setattr(mb, "_locate", lambda name, dist: broken)
    report = mb.engine()
    assert report["engine"] == mb.SODIUM
    if "intel-cmplr-lib-rt" in report["reason"]:         # the compiler runtime is missing too: named first
        assert "not found" in report["reason"]
    else:
        assert report["reason"].startswith("libcrypto_mb.so failed to load: ") and str(broken) in report["reason"]
