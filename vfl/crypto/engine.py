"""Batched Paillier arithmetic on integers: the one place that does modular exponentiation.

An *engine* turns lists of integers into lists of ciphertexts and back.  It knows
nothing of floats, parties or protocols: :class:`~vfl.crypto.vector.EncryptedVector`
encodes values and calls it.  Every operation takes and returns whole vectors,
so a faster engine (fixed-base tables, multi-exponentiation, several processes)
can replace this one without any change above it.

With generator ``g = n + 1`` a ciphertext of ``m`` is ``(1 + m n) r^n mod n^2``;
``r^n`` is the *obfuscator*.  Ciphertexts are ``gmpy2.mpz``; plaintext
arguments are signed integers (negative ``m`` means ``n - |m|``).
"""

from __future__ import annotations

import os
from typing import Protocol, Sequence

import gmpy2

from vfl.crypto.randomness import unit_below


class Engine(Protocol):
    """What :class:`~vfl.crypto.vector.EncryptedVector` needs from an engine."""

    name: str

    def encrypt(self, public_key, plaintexts: Sequence[int]) -> list: ...

    def rerandomize(self, public_key, ciphertexts: Sequence) -> list: ...

    def add(self, public_key, a: Sequence, b: Sequence) -> list: ...

    def add_plain(self, public_key, ciphertexts: Sequence, plaintexts: Sequence[int]) -> list: ...

    def mul_plain(self, public_key, ciphertexts: Sequence, scalars: Sequence[int]) -> list: ...

    def lincomb(self, public_key, ciphertexts: Sequence, columns: Sequence[Sequence[int]]) -> list: ...

    def decrypt(self, private_key, ciphertexts: Sequence) -> list: ...


class SimpleEngine:
    """One ``gmpy2`` call per value: the reference engine every faster one is checked against."""

    name = "simple"

    def obfuscators(self, public_key, count: int) -> list:
        """``count`` fresh values ``r^n mod n^2`` with ``r`` uniform in [1, n)."""
        n, n2 = public_key.n, public_key.nsquare
        return [gmpy2.powmod(r, n, n2) for r in unit_below(int(n), count)]

    def encrypt(self, public_key, plaintexts):
        n, n2 = public_key.n, public_key.nsquare
        nude = [(1 + (gmpy2.mpz(m) % n) * n) % n2 for m in plaintexts]
        return [c * o % n2 for c, o in zip(nude, self.obfuscators(public_key, len(nude)))]

    def encrypt_owned(self, private_key, plaintexts):
        """Encryption by the key owner: here the same as :meth:`encrypt`."""
        return self.encrypt(private_key.public_key, plaintexts)

    def rerandomize(self, public_key, ciphertexts):
        n2 = public_key.nsquare
        return [c * o % n2 for c, o in zip(ciphertexts, self.obfuscators(public_key, len(ciphertexts)))]

    def add(self, public_key, a, b):
        n2 = public_key.nsquare
        return [x * y % n2 for x, y in zip(a, b)]

    def add_plain(self, public_key, ciphertexts, plaintexts):
        n, n2 = public_key.n, public_key.nsquare
        return [c * (1 + (gmpy2.mpz(m) % n) * n) % n2 for c, m in zip(ciphertexts, plaintexts)]

    def mul_plain(self, public_key, ciphertexts, scalars):
        n2 = public_key.nsquare
        return [_signed_powmod(c, int(k), n2) for c, k in zip(ciphertexts, scalars)]

    def lincomb(self, public_key, ciphertexts, columns):
        """For each column ``e`` of exponents: the encryption of ``sum_i e_i * m_i``.

        Positive and negative exponents are collected apart, so each column costs
        one modular inverse instead of one per negative term.
        """
        n2 = public_key.nsquare
        if hasattr(columns, "tolist"):          # an (m, n) integer array
            columns = columns.tolist()
        out = []
        for column in columns:
            pos, neg = gmpy2.mpz(1), gmpy2.mpz(1)
            for c, e in zip(ciphertexts, column):
                if e > 0:
                    pos = pos * gmpy2.powmod(c, e, n2) % n2
                elif e < 0:
                    neg = neg * gmpy2.powmod(c, -e, n2) % n2
            out.append(pos * gmpy2.invert(neg, n2) % n2 if neg != 1 else pos)
        return out

    def decrypt(self, private_key, ciphertexts):
        return [gmpy2.mpz(private_key.raw_decrypt(c)) for c in ciphertexts]


def _signed_powmod(c, k, n2):
    if k >= 0:
        return gmpy2.powmod(c, k, n2)
    return gmpy2.powmod(gmpy2.invert(c, n2), -k, n2)


_ENGINES: dict[str, Engine] = {"simple": SimpleEngine()}
_DEFAULT = "simple"


def register_engine(engine: Engine, default: bool = False) -> None:
    """Make ``engine`` available by its ``name`` (and the default if asked)."""
    global _DEFAULT
    _ENGINES[engine.name] = engine
    if default:
        _DEFAULT = engine.name


def get_engine(name: str | None = None) -> Engine:
    """The engine called ``name``, or the default one.

    The default is the fast engine (:mod:`vfl.crypto.fast`); the environment
    variable ``VFL_ENGINE`` (for example ``VFL_ENGINE=simple``) overrides it.
    """
    key = (os.environ.get("VFL_ENGINE") or _DEFAULT) if name is None else name
    try:
        return _ENGINES[key]
    except KeyError:
        raise ValueError(f"unknown crypto engine {name!r}; known: {sorted(_ENGINES)}") from None
