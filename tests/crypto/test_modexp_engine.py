"""The multi-buffer exponentiation (Intel's mbx_exp_mb8, vfl[fast-crypto]) against gmpy2, bit for bit.

The engine's tests skip, saying why, where the extra is not installed or the CPU lacks AVX-512 IFMA;
the tests of the fallback and of its reasons run everywhere.
"""

import os

import gmpy2
import pytest
from phe import paillier

from vfl.crypto import FastEngine, SimpleEngine, generate_keypair, mbexp
from vfl.crypto.fast import _crt_decrypt_many, _crt_parts


def _fresh(monkeypatch, choice=None):
    """Forget the engine chosen so far (this process), under ``VFL_MODEXP_ENGINE=choice``."""
    if choice is None:
        monkeypatch.delenv("VFL_MODEXP_ENGINE", raising=False)
    else:
        monkeypatch.setenv("VFL_MODEXP_ENGINE", choice)
    monkeypatch.setattr(mbexp._state_now, "_state", None)


@pytest.fixture
def fast(monkeypatch):
    _fresh(monkeypatch)
    state = mbexp._state_now()
    if not state["fast"]:
        pytest.skip(f"the multi-buffer exponentiation does not run here: {state['reason']}")
    return state


def rand(bits: int) -> int:
    return int.from_bytes(os.urandom((bits + 7) // 8), "little") % (1 << bits)


def edge_bases(m: int) -> list:
    return [0, 1, 2, m - 1, m, m + 1, 2 * m, -1, -m, (1 << m.bit_length()) - 1, m * m + 3]


@pytest.mark.parametrize("bits", [1024, 1023, 1000, 2048, 2047, 2030, 3072, 4096, 4095])
def test_random_moduli_and_edge_bases_give_gmpys_values(fast, bits):
    m = rand(bits) | (1 << (bits - 1)) | 1
    assert mbexp.supports(m)
    bases = [rand(bits) for _ in range(13)] + edge_bases(m)
    full = [m - 1] + ([(1 << bits) - 1] if bits <= 2048 else [])     # exponents as long as the modulus
    for e in [rand(bits // 2) | (1 << (bits // 2 - 1)), 1, 2, 3] + full:
        assert mbexp._fast(fast, bases, e, m) == [gmpy2.powmod(b, e, m) for b in bases]
        assert mbexp.powmod_many(bases, e, m) == [gmpy2.powmod(b, e, m) for b in bases]


@pytest.mark.parametrize("count", [0, 1, 2, 7, 8, 9, 15, 16, 17])
def test_batches_not_a_multiple_of_eight(fast, count):
    m = rand(2048) | (1 << 2047) | 1
    e = rand(1024)
    bases = [rand(2048) for _ in range(count)]
    got = mbexp.powmod_many(bases, e, m)
    assert got == [gmpy2.powmod(b, e, m) for b in bases] and all(isinstance(x, type(gmpy2.mpz(0))) for x in got)


def test_sizes_it_does_not_take_go_to_gmpy2(fast):
    for m in (rand(512) | (1 << 511) | 1,            # 10 digits: not one of mbx_exp_mb8's
              rand(2079) | (1 << 2078) | 1,          # 40 digits, but 2081 bits need 41
              (rand(2048) | (1 << 2047)) & ~1):      # even
        assert not mbexp.supports(m)
        bases = [rand(600) for _ in range(9)]
        assert mbexp.powmod_many(bases, 65537, m) == [gmpy2.powmod(b, 65537, m) for b in bases]
    m = rand(2048) | (1 << 2047) | 1
    assert mbexp.powmod_many([5, 7], 0, m) == [1, 1]
    assert mbexp.powmod_many([5, 7], m * 4, m) == [gmpy2.powmod(5, m * 4, m), gmpy2.powmod(7, m * 4, m)]


def _ciphertexts(pk, sk, count: int) -> tuple[list, list]:
    """Random ciphertexts with their plaintexts, and the edge cases phe decrypts too (non-units among them)."""
    p, q, n, n2 = int(sk.p), int(sk.q), int(pk.n), int(pk.nsquare)
    plain = [rand(pk.key_bits) % n for _ in range(count)] + [0, 1, n - 1]
    cts = [int(c) for c in SimpleEngine().encrypt(pk, plain)]
    cts += [0, 1, 2, n2 - 1, n, p, q, p * p, q * q, n + 1, n2 - n, (1 + n) % n2, rand(2 * pk.key_bits) % n2]
    return cts, [sk.to_phe().raw_decrypt(c) for c in cts]


@pytest.mark.parametrize("bits", [1024, 2048])
def test_crt_decryption_matches_phe_on_random_keys(fast, bits):
    for _ in range(2 if bits == 1024 else 1):
        pk, sk = generate_keypair(bits, insecure=True)
        cts, want = _ciphertexts(pk, sk, 21)
        key = _crt_parts(gmpy2.mpz(sk.p), gmpy2.mpz(sk.q))
        assert [int(x) for x in _crt_decrypt_many(key, cts)] == want
        assert [int(x) for x in FastEngine().decrypt(sk, cts)] == want
        assert FastEngine.decrypt_engine(sk)["engine"] == mbexp.FAST


def test_decryption_is_the_same_on_either_engine(monkeypatch, keypair_1024):
    pk, sk = keypair_1024
    cts, want = _ciphertexts(pk, sk, 40)
    for choice in ("auto", "gmpy2"):
        _fresh(monkeypatch, choice)
        assert [int(x) for x in FastEngine().decrypt(sk, cts)] == want
    assert FastEngine.decrypt_engine(sk) == {"engine": mbexp.GMP, "reason": "VFL_MODEXP_ENGINE=gmpy2 asks for gmpy2"}


def test_a_key_too_short_for_the_library_decrypts_with_gmpy2(fast):
    public, private = paillier.generate_paillier_keypair(n_length=512)
    from vfl.crypto.keys import PrivateKey
    sk = PrivateKey.from_phe(private)
    cts, want = _ciphertexts(sk.public_key, sk, 9)
    assert [int(x) for x in FastEngine().decrypt(sk, cts)] == want
    report = FastEngine.decrypt_engine(sk)
    assert report["engine"] == mbexp.GMP and "takes no" in report["reason"]


# -- the reasons, everywhere ----------------------------------------------------------------------
def test_gmpy2_on_request_says_so(monkeypatch):
    _fresh(monkeypatch, "gmpy2")
    report = mbexp.engine()
    assert report["engine"] == mbexp.GMP and not report["fast"] and "VFL_MODEXP_ENGINE=gmpy2" in report["reason"]
    m = rand(2048) | (1 << 2047) | 1
    assert mbexp.powmod_many([3, 4, 5], 17, m) == [gmpy2.powmod(b, 17, m) for b in (3, 4, 5)]


def test_an_unknown_choice_falls_back_and_says_so(monkeypatch):
    _fresh(monkeypatch, "fastest")
    assert mbexp.engine()["engine"] == mbexp.GMP and "not one of auto, ipp, gmpy2" in mbexp.engine()["reason"]


def test_a_cpu_without_ifma_is_named(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setattr(mbexp, "_cpu_has_ifma", lambda: (False, "this CPU lacks avx512ifma"))
    assert mbexp.engine()["reason"] == "this CPU lacks avx512ifma" and mbexp.engine()["engine"] == mbexp.GMP
    assert mbexp.describe() == "gmpy2 (this CPU lacks avx512ifma)"
    assert not mbexp.fast()


def test_a_missing_extra_is_named_with_the_install_command(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setattr(mbexp, "_cpu_has_ifma", lambda: (True, ""))
    monkeypatch.setattr(mbexp, "_locate", lambda name, dist: None)
    report = mbexp.engine()
    assert report["engine"] == mbexp.GMP and 'pip install "vfl[fast-crypto]"' in report["reason"]
    _fresh(monkeypatch, "ipp")                          # asked for by name: an error, not a silent fallback
    monkeypatch.setattr(mbexp, "_cpu_has_ifma", lambda: (True, ""))
    monkeypatch.setattr(mbexp, "_locate", lambda name, dist: None)
    with pytest.raises(mbexp.FastEngineUnavailable, match="extra is not installed"):
        mbexp.engine()


def test_a_failed_known_answer_test_is_named(monkeypatch, fast):
    _fresh(monkeypatch)
    monkeypatch.setattr(mbexp, "_self_test", lambda state: "a 2048-bit modulus, a 1024-bit exponent")
    report = mbexp.engine()
    assert report["engine"] == mbexp.GMP and "known-answer test" in report["reason"]
