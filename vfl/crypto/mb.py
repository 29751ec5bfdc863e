"""Intel's multi-buffer X25519 (``libcrypto_mb``, AVX-512 IFMA, 8 points at a time), optional, with libsodium behind it.

``pip install "vfl[fast-crypto]"`` brings Intel's ``ipp-crypto`` wheel (Apache-2.0), whose
``libcrypto_mb.so`` exports ``mbx_x25519_mb8``: eight X25519 ladders in the eight 64-bit lanes of
AVX-512 registers with the IFMA multiply-add (52-bit limbs).  The library needs the runtime libraries
of Intel's compiler (``libimf``, ``libsvml``, ``libirng``, ``libintlc``), which the
``intel-cmplr-lib-rt`` wheel ships under Intel's own (proprietary, redistributable) licence: that is
why the extra is optional, chosen by the user, and never a requirement of vfl.  Finding and loading
the library is :mod:`vfl.crypto.ipp`'s (shared with :mod:`vfl.crypto.mbexp`).

:func:`x25519_many` computes ``X25519(scalar, u)`` for many points with exactly the semantics of
libsodium's ``crypto_scalarmult`` (what vfl used alone before, and still uses when the fast engine is
not there):

* the scalar is clamped as RFC 7748 decodes it (bits 0–2 and 255 cleared, bit 254 set) — the
  library does this itself, as libsodium does;
* bit 255 of the u-coordinate is ignored, and a non-canonical ``u`` (``p <= u < 2^255``) is taken
  mod ``p`` — both libraries do;
* a point whose result is the all-zero point (a point of small order) is **refused**: libsodium
  returns -1 for it (its blacklist of small-order encodings, then its all-zero check on the result);
  the library flags that lane ``MBX_STATUS_LOW_ORDER_ERR`` (its all-zero check), and this module
  refuses exactly those lanes.  Every encoding on libsodium's blacklist gives the all-zero result
  under a clamped scalar (a multiple of 8), so the two refuse the same inputs (tested).

The fast engine runs only where it is sound and present: ``VFL_CURVE_ENGINE`` unset or ``auto``
(the default), the extra installed, the library and its runtime loaded, the CPU with AVX-512 IFMA
(``avx512ifma`` among ``/proc/cpuinfo``'s flags, and the library's own check), and a known-answer
self-test against libsodium passed at load.  Otherwise libsodium runs, and :func:`engine` says why.
``VFL_CURVE_ENGINE=libsodium`` forces libsodium; ``VFL_CURVE_ENGINE=ipp`` makes a missing fast engine
an error (for benchmarks that must not fall back silently).

Nothing here sees more than a scalar and points: the PSI's secret scalar stays in this process (or
the party's own worker processes, which load the library themselves).
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
from nacl import bindings as sodium

from vfl.crypto import ipp

#: The name :func:`engine` gives each engine.
FAST, SODIUM = "ipp-crypto-mb8", "libsodium"
#: The extra that brings the fast engine.
EXTRA = ipp.EXTRA
#: Lanes of one call of the multi-buffer function.
LANES = ipp.LANES
_LOW_ORDER = 4                       # MBX_STATUS_LOW_ORDER_ERR
_ENV = "VFL_CURVE_ENGINE"


class FastEngineUnavailable(RuntimeError):
    """``VFL_CURVE_ENGINE=ipp`` was asked for and the fast engine cannot run here (the reason is the message)."""


# -- loading the library (vfl.crypto.ipp) ------------------------------------------------------
_locate, _cpu_has_ifma = ipp.locate, ipp.cpu_has_ifma          # by these names, so a test can stand in for them


def _load() -> dict:
    """Find, load and check the fast engine once per process; what :func:`engine` reports."""
    return ipp.load_engine(_ENV, FAST, SODIUM, _bind, _self_test, "libsodium", FastEngineUnavailable,
                           locate=_locate, cpu_has_ifma=_cpu_has_ifma)


#: The engine's state (what :func:`engine` reports, and its bound functions), loaded again if ``_ENV`` changes.
_state_now = ipp.EngineState(_ENV, _load)


def _bind(lib) -> dict:
    """The 8-way ladder, and the field functions of the curve test (checked on their own, :func:`_field_functions`)."""
    fn = lib.mbx_x25519_mb8
    fn.restype, fn.argtypes = ctypes.c_uint32, [ctypes.c_void_p] * 3
    curve_check, field = _field_functions(lib)
    return {"_fn": fn, "curve_check": curve_check, "_field": field}


def _field_functions(lib) -> tuple[str, tuple | None]:
    """The library's 8-way arithmetic mod 2^255 - 19 (its Ed25519 code's), for the curve test; checked.

    These functions are the library's internals, not its documented interface: vfl uses them only
    after they have computed, on random and edge values, exactly the Legendre symbols GMP computes;
    otherwise (or if a release drops them) the curve test stays with GMP's Jacobi symbol.
    """
    # The power (about 8 µs for 8 lanes) is called as ctypes calls a CDLL's functions, releasing the GIL; the
    # others take tens of nanoseconds, less than releasing and taking back the GIL, and under a second thread's
    # contention each hand-over could wait for the scheduler: they are called through a PyDLL handle (the same
    # library, loaded once), which keeps the GIL.
    holding = ctypes.PyDLL(lib._name, handle=lib._handle)
    try:
        funcs = []
        for name, arity in (("fe52_mb_add_mod25519", 3), ("fe52_mb_mul_mod25519", 3), ("fe52_mb_sqr_mod25519", 2),
                            ("fe52_pow_2_252m3_mod25519", 2), ("fe52mb8_red_p25519", 2)):
            f = getattr(lib if name.startswith("fe52_pow") else holding, name)
            f.restype, f.argtypes = None, [ctypes.c_void_p] * arity
            funcs.append(f)
    except AttributeError:
        return "gmpy2 (libcrypto_mb.so has no field arithmetic vfl can use)", None
    field = tuple(funcs)
    values = [int.from_bytes(os.urandom(32), "little") % _PRIME for _ in range(600)]
    values += [0, 1, 2, 9, _PRIME - 1, _PRIME - 2, 2 ** 255 - 20, 2 ** 254, 2 ** 52 - 1, 2 ** 52, 2 ** 208 - 1,
               2 ** 208, (2 ** 255 - 19) // 2, 486662, _PRIME - 486662]
    words = np.frombuffer(b"".join(v.to_bytes(32, "little") for v in values), dtype="<u8").reshape(-1, 4)
    import gmpy2

    want = np.array([gmpy2.jacobi(v * (v * (v + 486662) + 1) % _PRIME, _PRIME) == 1 for v in values])
    if not np.array_equal(_legendre_fast(field, words), want):
        return "gmpy2 (libcrypto_mb.so's field arithmetic failed vfl's known-answer test)", None
    return f"{FAST} (8-way Euler criterion)", field


def _self_test(state: dict) -> str:
    """Random and edge points through both engines; '' if every result and every refusal agrees."""
    rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))
    points = bytearray(rng.integers(0, 256, size=(2 * LANES + 3) * 32, dtype=np.uint8).tobytes())
    points[32:64] = bytes(32)                                  # a point of small order: refused
    points[64:96] = (9).to_bytes(32, "little")                 # the base point (RFC 7748)
    points[96:128] = (_PRIME - 2).to_bytes(32, "little")        # near p: libsodium's lane (see _near_p)
    points[128:160] = (_PRIME - 1).to_bytes(32, "little")       # on libsodium's list of refused points
    scalar = bytes.fromhex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4")
    want, want_ok = _sodium(scalar, bytes(points))
    got, got_ok = _fast(state["_fn"], scalar, bytes(points))
    if not np.array_equal(want_ok, got_ok):
        return "a point refused by one and not the other"
    if want != got:
        return "results differ"
    return ""


def engine() -> dict:
    """Which X25519 engine runs in this process, and if not the fast one, why.

    ``{"engine": "ipp-crypto-mb8" | "libsodium", "fast": bool, "reason": str}``, plus ``library`` and
    ``version`` for the fast one.  ``reason`` is empty when the fast engine runs; otherwise it says
    what is missing: the extra, the CPU feature, the library (with its loader's error), or a choice
    made with ``VFL_CURVE_ENGINE``.
    """
    return {k: v for k, v in _state_now().items() if not k.startswith("_")}


def releases_gil() -> bool:
    """Whether this process's curve work runs in the fast engine's library, which :mod:`ctypes` calls with the GIL
    released: its ladder and its field arithmetic for the curve test (:func:`on_curve_many`).  Then threads of one
    process share the cores (:func:`vfl.crypto.workers.run_threads`); libsodium's ladder is called once per point
    and GMP's Jacobi symbol holds the GIL, so without them the work goes to worker processes."""
    state = _state_now()
    return bool(state["fast"]) and state.get("_field") is not None


def describe(report: dict | None = None) -> str:
    """One line for people: ``"ipp-crypto-mb8 (crypto_mb 1.3.0)"`` or ``"libsodium (reason)"``."""
    report = report if report is not None else engine()
    if report.get("fast"):
        return f"{report['engine']} ({report.get('version', '')}, AVX-512 IFMA, 8 ladders at a time)"
    return f"{report['engine']} ({report['reason']})" if report.get("reason") else report["engine"]


# -- the ladders ----------------------------------------------------------------------------------
def x25519_many(scalar: bytes, points: bytes) -> tuple[bytes, np.ndarray]:
    """``X25519(scalar, u)`` for every 32-byte point of ``points``, as libsodium's ``crypto_scalarmult``.

    Returns the results back to back (32 bytes each; all-zero where refused) and a boolean array,
    True where the point was accepted (False: its result is the all-zero point, which libsodium
    refuses).  Any number of points: the fast engine pads the last batch of 8.
    """
    scalar, points = bytes(scalar), bytes(points)
    if len(scalar) != 32 or len(points) % 32:
        raise ValueError("X25519 takes a 32-byte scalar and 32-byte points")
    state = _state_now()
    if state["fast"]:
        return _fast(state["_fn"], scalar, points)
    return _sodium(scalar, points)


def _sodium(scalar: bytes, points: bytes) -> tuple[bytes, np.ndarray]:
    mul = sodium.crypto_scalarmult
    n = len(points) // 32
    out, ok = bytearray(32 * n), np.ones(n, dtype=bool)
    for k in range(n):
        try:
            out[32 * k:32 * k + 32] = mul(scalar, points[32 * k:32 * k + 32])
        except Exception:       # libsodium returned -1 (PyNaCl raises RuntimeError): the all-zero result
            ok[k] = False
    return bytes(out), ok


_BASE = (9).to_bytes(32, "little")
_PRIME = 2 ** 255 - 19
_M52 = np.uint64((1 << 52) - 1)


def on_curve_many(words: np.ndarray) -> np.ndarray:
    """Whether each ``u`` (rows of four little-endian 64-bit words, each ``u < p``) is on the curve.

    True where ``u³ + 486662·u² + u`` is a non-zero square mod ``p`` (Euler's criterion, 8 at a time,
    on the fast engine; GMP's Jacobi symbol otherwise): the curve rather than its twist, and not
    ``u = 0``.  The caller checks ``u < p`` first.
    """
    words = np.ascontiguousarray(words, dtype=np.uint64).reshape(-1, 4)
    field = _state_now().get("_field")
    if field is not None:
        return _legendre_fast(field, words)
    import gmpy2

    p, out = gmpy2.mpz(_PRIME), np.zeros(len(words), dtype=bool)
    raw = words.astype("<u8").tobytes()
    for k in range(len(words)):
        u = gmpy2.mpz(int.from_bytes(raw[32 * k:32 * k + 32], "little"))
        out[k] = gmpy2.jacobi(u * (u * (u + 486662) + 1) % p, p) == 1
    return out


def _legendre_fast(field, words: np.ndarray) -> np.ndarray:
    """``f(u)^((p-1)/2) == 1`` with ``f(u) = u(u(u + A) + 1)``, 8 lanes a call.

    With ``g = f^(2^252-3)``, ``(g²·f)² = f^(2^254-10) = f^((p-1)/2)``, so ``f`` is a non-zero square exactly
    when ``g²·f`` is ``1`` or ``-1``: one squaring and one product after the power instead of four.
    """
    add, mul, sqr, pow_252, reduce = field
    n = len(words)
    if n == 0:
        return np.zeros(0, dtype=bool)
    batches = -(-n // LANES)
    lanes = np.zeros((5, batches * LANES), dtype=np.uint64)           # (digit, lane): radix 2^52
    w0, w1, w2, w3 = np.ascontiguousarray(words, dtype=np.uint64).T
    s12, s24, s36, s16 = np.uint64(12), np.uint64(24), np.uint64(36), np.uint64(16)
    lanes[0, :n] = w0 & _M52
    lanes[1, :n] = ((w0 >> np.uint64(52)) | (w1 << s12)) & _M52
    lanes[2, :n] = ((w1 >> np.uint64(40)) | (w2 << s24)) & _M52
    lanes[3, :n] = ((w2 >> np.uint64(28)) | (w3 << s36)) & _M52
    lanes[4, :n] = w3 >> s16
    x = np.ascontiguousarray(lanes.reshape(5, batches, LANES).transpose(1, 0, 2))     # (batch, digit, lane)
    out = np.zeros_like(x)
    consts = np.zeros((2, 5, LANES), dtype=np.uint64)
    consts[0, 0], consts[1, 0] = 486662, 1
    scratch = np.zeros((2, 5, LANES), dtype=np.uint64)
    vp = ctypes.c_void_p        # pointers made once: the loop's cost is the calls, not converting arguments
    ca, c1 = vp(consts.ctypes.data), vp(consts.ctypes.data + 320)
    t1, t2 = (vp(scratch.ctypes.data + 320 * k) for k in range(2))
    x0, o0 = x.ctypes.data, out.ctypes.data
    for b in range(batches):
        u = vp(x0 + 320 * b)
        add(t1, u, ca)
        mul(t1, t1, u)
        add(t1, t1, c1)
        mul(t1, t1, u)                      # f = u(u(u + A) + 1)
        pow_252(t2, t1)                     # g = f^(2^252 - 3)
        sqr(t2, t2)
        mul(t2, t2, t1)                     # g²·f, whose square is f^((p-1)/2)
        reduce(vp(o0 + 320 * b), t2)
    r = out.transpose(1, 0, 2).reshape(5, -1)[:, :n]
    rest_zero = (r[1] == 0) & (r[2] == 0) & (r[3] == 0) & (r[4] == 0)
    minus_one = ((r[0] == _PM1[0]) & (r[1] == _PM1[1]) & (r[2] == _PM1[2]) & (r[3] == _PM1[3])
                 & (r[4] == _PM1[4]))
    return ((r[0] == 1) & rest_zero) | minus_one


_PM1 = [np.uint64(((_PRIME - 1) >> (52 * k)) & ((1 << 52) - 1)) for k in range(5)]     # p - 1 in radix 2^52


#: Points whose u (bit 255 ignored) is at least this go to libsodium (see :func:`_near_p`).
NEAR_P = _PRIME - (1 << 16)
_ALL_ONES = np.uint64(2 ** 64 - 1)


def _near_p(words: np.ndarray) -> np.ndarray:
    """Where ``u mod 2^255 >= NEAR_P``: ``p - 2^16 <= u < 2^255``, the band the fast engine leaves to libsodium.

    crypto_mb 2.3.0 (ipp-crypto 2026.2.0) computes a wrong X25519 for some inputs just below ``p``
    (we found about 1,390 of the u in ``[p - 1393, p - 1]`` wrong, depending on the scalar, among them
    ``p - 2``; ``p - 1``, which libsodium refuses, it computes as a non-zero point; everywhere else we
    looked it agrees with libsodium and with RFC 7748's ladder written out in Python).  Hashed points
    never fall there (a 2^-239 chance); a peer could send one, so those lanes are computed by libsodium:
    the results stay libsodium's, bit for bit.
    """
    top = words[:, 3] & np.uint64(2 ** 63 - 1)
    return ((top == np.uint64(2 ** 63 - 1)) & (words[:, 2] == _ALL_ONES) & (words[:, 1] == _ALL_ONES)
            & (words[:, 0] >= np.uint64(NEAR_P % 2 ** 64)))


def _fast(fn, scalar: bytes, points: bytes) -> tuple[bytes, np.ndarray]:
    n = len(points) // 32
    if n == 0:
        return b"", np.ones(0, dtype=bool)
    batches = -(-n // LANES)
    padded = batches * LANES
    inp = np.empty(padded * 32, dtype=np.uint8)
    inp[:32 * n] = np.frombuffer(points, dtype=np.uint8)
    if padded > n:      # the padding lanes hold the base point: a valid input whose result is dropped
        inp[32 * n:] = np.tile(np.frombuffer(_BASE, dtype=np.uint8), padded - n)
    near = np.nonzero(_near_p(inp.view("<u8").reshape(-1, 4)[:n]))[0]
    if near.size:       # libsodium's lanes: the base point in the fast engine's, replaced below
        inp.reshape(-1, 32)[near] = np.frombuffer(_BASE, dtype=np.uint8)
    out = np.zeros(padded * 32, dtype=np.uint8)
    key = np.frombuffer(scalar, dtype=np.uint8).copy()
    offsets = np.arange(padded, dtype=np.uint64) * np.uint64(32)
    in_ptrs = offsets + np.uint64(inp.ctypes.data)
    out_ptrs = offsets + np.uint64(out.ctypes.data)
    key_ptrs = np.full(LANES, key.ctypes.data, dtype=np.uint64)     # one scalar in all eight lanes
    ip, op, kp = in_ptrs.ctypes.data, out_ptrs.ctypes.data, key_ptrs.ctypes.data
    statuses = np.zeros(batches, dtype=np.uint32)
    step = 8 * LANES
    for b in range(batches):
        statuses[b] = fn(op + step * b, kp, ip + step * b)
    ok = np.ones(padded, dtype=bool)
    if statuses.any():
        lanes = (statuses[:, None] >> (np.arange(LANES, dtype=np.uint32) * 4)) & 0xF
        if np.any(lanes & ~np.uint32(_LOW_ORDER)):
            raise RuntimeError(f"mbx_x25519_mb8 returned status {int(statuses[np.nonzero(statuses)[0][0]]):#x}")
        ok = (lanes == 0).reshape(-1)
        out.reshape(padded, 32)[~ok] = 0
    key[:] = 0
    if near.size:
        slow, slow_ok = _sodium(scalar, b"".join(points[32 * k:32 * k + 32] for k in near.tolist()))
        out.reshape(padded, 32)[near] = np.frombuffer(slow, dtype=np.uint8).reshape(-1, 32)
        ok[near] = slow_ok
    return out[:32 * n].tobytes(), ok[:n]
