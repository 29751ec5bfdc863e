"""Intel's multi-buffer modular exponentiation (``mbx_exp_mb8``, AVX-512 IFMA, 8 at a time), optional, with gmpy2 behind it.

The library of the ``vfl[fast-crypto]`` extra (:mod:`vfl.crypto.ipp`) exports ``mbx_exp_mb8``:
eight exponentiations ``base^exp mod m`` at once, one per 64-bit lane of the AVX-512 registers,
for moduli of about 1024, 2048, 3072 or 4096 bits (a modulus of ``b`` bits is taken when ``b`` and
``b + 2`` need the same number of 52-bit digits, 20, 40, 60 or 79).  Its interface, as Intel's
header ``crypto_mb/exp.h`` declares it::

    mbx_status mbx_exp_mb8(int64u* const out[8], const int64u* const base[8],
                           const int64u* const exp[8], int exp_bits,
                           const int64u* const mod[8], int mod_bits,
                           int8u* buffer, int buffer_len)

numbers as little-endian arrays of 64-bit words, ``exp_bits <= mod_bits``, a scratch buffer of
``mbx_exp_BufferSize(mod_bits)`` bytes, and a status of four bits per lane (0: done).  The modulus
must be odd (the library computes in Montgomery form).

:func:`powmod_many` computes ``[gmpy2.powmod(b, e, m) for b in bases]`` with it, and gives exactly
gmpy2's values: the bases are reduced mod ``m`` first, and the result is reduced once more (the
library's last Montgomery step may leave ``m`` for a result of 0).  Paillier's CRT decryption
(:mod:`vfl.crypto.fast`) uses it for its two exponentiations ``c^(p-1) mod p^2`` and
``c^(q-1) mod q^2``: at a 2048-bit key, moduli of 2048 bits and exponents of 1024.

It runs only where it is sound and present: ``VFL_MODEXP_ENGINE`` unset or ``auto`` (the
default), the library loaded as :mod:`vfl.crypto.ipp` says, ``mbx_exp_mb8`` exported, and a
known-answer test against gmpy2 passed at load (random and edge bases, odd moduli of each size,
and of fewer bits than the size's nominal one).  Otherwise, or for a modulus size the library does
not take, or an even modulus, gmpy2 runs, and :func:`engine` says why.
``VFL_MODEXP_ENGINE=gmpy2`` forces gmpy2; ``VFL_MODEXP_ENGINE=ipp`` makes a missing fast engine
an error (for benchmarks that must not fall back silently).  The worker processes of
:mod:`vfl.crypto.workers` choose the same way when they start.
"""

from __future__ import annotations

import ctypes
import os

import gmpy2
import numpy as np

from vfl.crypto import ipp

#: The name :func:`engine` gives each engine.
FAST, GMP = "ipp-crypto-mb8", "gmpy2"
#: Lanes of one call.
LANES = ipp.LANES
#: Numbers of 52-bit digits of the moduli ``mbx_exp_mb8`` takes, and the size it names them by.
DIGITS = {20: 1024, 40: 2048, 60: 3072, 79: 4096}
_ENV = "VFL_MODEXP_ENGINE"


class FastEngineUnavailable(RuntimeError):
    """``VFL_MODEXP_ENGINE=ipp`` was asked for and the fast engine cannot run here (the reason is the message)."""


def supports(modulus) -> bool:
    """Whether ``mbx_exp_mb8`` takes this modulus: odd, of a size it knows (see the module docstring)."""
    bits = int(gmpy2.mpz(modulus).bit_length())
    digits = -(-bits // 52)
    return bool(modulus % 2) and digits == -(-(bits + 2) // 52) and digits in DIGITS


# -- the engine and why not ----------------------------------------------------------------------
_locate, _cpu_has_ifma = ipp.locate, ipp.cpu_has_ifma          # by these names, so a test can stand in for them


def _load() -> dict:
    """Find, load and check the fast engine once per process; what :func:`engine` reports."""
    return ipp.load_engine(_ENV, FAST, GMP, _bind, _self_test, "gmpy2", FastEngineUnavailable,
                           locate=_locate, cpu_has_ifma=_cpu_has_ifma, tested="mbx_exp_mb8")


#: The engine's state (what :func:`engine` reports, and its bound functions), loaded again if ``_ENV`` changes.
_state_now = ipp.EngineState(_ENV, _load)


def _bind(lib) -> dict:
    """``mbx_exp_mb8`` and its buffer size."""
    fn = lib.mbx_exp_mb8
    fn.restype = ctypes.c_uint32
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                           ctypes.c_int]
    size = lib.mbx_exp_BufferSize
    size.restype, size.argtypes = ctypes.c_int, [ctypes.c_int]
    return {"_fn": fn, "_size": size}


def _self_test(state: dict) -> str:
    """Random and edge bases, odd moduli of each size and one bit short of it, against gmpy2; '' if all agree.

    Short exponents (a 64-bit one, 1 and 2) at every size, and at 2048 bits one of 1024 bits as well
    (CRT decryption's at a 2048-bit key): a few tens of milliseconds, once per process.
    """
    def rand(bits: int) -> int:
        return int.from_bytes(os.urandom((bits + 7) // 8), "little") % (1 << bits)

    for nominal in DIGITS.values():
        for bits in (nominal, nominal - 1):
            m = rand(bits) | (1 << (bits - 1)) | 1
            bases = [rand(bits) for _ in range(LANES)] + [0, 1, m - 1, m, m + 1, -7]
            exponents = [rand(64) | (1 << 63), 1, 2] + ([rand(1024) | (1 << 1023)] if nominal == 2048 else [])
            for e in exponents:
                if _fast(state, bases, e, m) != [gmpy2.powmod(b, e, m) for b in bases]:
                    return f"a {bits}-bit modulus, a {int(e).bit_length()}-bit exponent"
    return ""


def engine() -> dict:
    """Which modular exponentiation runs in this process, and if not the fast one, why.

    ``{"engine": "ipp-crypto-mb8" | "gmpy2", "fast": bool, "reason": str}``, plus ``library`` and
    ``version`` for the fast one.  ``reason`` is empty when the fast engine runs; otherwise it says
    what is missing: the extra, the CPU feature, the library (with its loader's error), the known-answer
    test, or a choice made with ``VFL_MODEXP_ENGINE``.
    """
    return {k: v for k, v in _state_now().items() if not k.startswith("_")}


def record() -> dict:
    """What a benchmark or run record keeps of it: :func:`engine` without the library's path."""
    report = engine()
    return {key: report[key] for key in ("engine", "reason", "version") if key in report}


def describe(report: dict | None = None) -> str:
    """One line for people: ``"ipp-crypto-mb8 (crypto_mb ..., AVX-512 IFMA, 8 at a time)"`` or ``"gmpy2 (reason)"``."""
    report = report if report is not None else engine()
    if report.get("fast"):
        return f"{report['engine']} ({report.get('version', '')}, AVX-512 IFMA, 8 exponentiations at a time)"
    return f"{report['engine']} ({report['reason']})" if report.get("reason") else report["engine"]


def fast() -> bool:
    """Whether :func:`powmod_many` runs on the fast engine in this process (for a modulus it :func:`supports`)."""
    return _state_now()["fast"]


# -- the exponentiations ----------------------------------------------------------------------------
def powmod_many(bases, exponent, modulus) -> list:
    """``[gmpy2.powmod(b, exponent, modulus) for b in bases]``, eight at a time where the fast engine runs.

    Exactly gmpy2's values (``mpz`` in ``[0, modulus)``), whichever engine computes them; gmpy2 does
    whenever the fast engine is off, the modulus is not one it :func:`supports`, the exponent is
    below 1 or longer than the modulus, or there are fewer than two bases.
    """
    bases = list(bases)
    exponent, modulus = gmpy2.mpz(exponent), gmpy2.mpz(modulus)
    state = _state_now()
    if (not state["fast"] or len(bases) < 2 or exponent < 1 or modulus < 3
            or exponent.bit_length() > modulus.bit_length() or not supports(modulus)):
        return [gmpy2.powmod(b, exponent, modulus) for b in bases]
    return _fast(state, bases, exponent, modulus)


def _fast(state: dict, bases: list, exponent, modulus) -> list:
    n = len(bases)
    if n == 0:
        return []
    modulus = gmpy2.mpz(modulus)
    mod_bits = int(modulus.bit_length())
    words = -(-mod_bits // 64)
    width = 8 * words
    batches = -(-n // LANES)
    padded = batches * LANES
    raw = b"".join(gmpy2.mpz(b % modulus).to_bytes(width, "little") for b in bases)
    inp = np.zeros((padded, words), dtype=np.uint64)          # padding lanes: base 0, result dropped
    inp[:n] = np.frombuffer(raw, dtype="<u8").reshape(n, words)
    out = np.zeros((padded, words), dtype=np.uint64)
    exp = np.frombuffer(gmpy2.mpz(exponent).to_bytes(width, "little"), dtype="<u8").copy()
    mod = np.frombuffer(modulus.to_bytes(width, "little"), dtype="<u8").copy()
    size = state["_size"](mod_bits)
    buffer = np.zeros(size + 64, dtype=np.uint8)
    offsets = np.arange(padded, dtype=np.uint64) * np.uint64(width)
    in_ptrs = offsets + np.uint64(inp.ctypes.data)
    out_ptrs = offsets + np.uint64(out.ctypes.data)
    exp_ptrs = np.full(LANES, exp.ctypes.data, dtype=np.uint64)      # one exponent and one modulus in all lanes
    mod_ptrs = np.full(LANES, mod.ctypes.data, dtype=np.uint64)
    ip, op, ep, mp, bp = (in_ptrs.ctypes.data, out_ptrs.ctypes.data, exp_ptrs.ctypes.data, mod_ptrs.ctypes.data,
                          buffer.ctypes.data)
    exp_bits, fn, step = int(gmpy2.mpz(exponent).bit_length()), state["_fn"], 8 * LANES
    for b in range(batches):            # ctypes lets go of the GIL during each call
        status = fn(op + step * b, ip + step * b, ep, exp_bits, mp, mod_bits, bp, size + 64)
        if status:
            raise RuntimeError(f"mbx_exp_mb8 returned status {status:#x} for a {mod_bits}-bit modulus")
    data = out[:n].astype("<u8", copy=False).tobytes()
    from_bytes = gmpy2.mpz.from_bytes
    # the library's last step leaves a result of 0 as the modulus itself: reduce once more
    return [from_bytes(data[width * k:width * (k + 1)], "little") % modulus for k in range(n)]
