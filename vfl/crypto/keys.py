"""Paillier key pairs, built on python-paillier (``phe``) keys.

The coordinator generates the pair; only the public key ever leaves it.  Keys
shorter than :data:`MIN_SECURE_BITS` are refused unless the caller passes
``insecure=True`` (for teaching and fast tests).  Keys convert to and from
``phe`` keys, so anything vfl encrypts can be checked with ``phe`` itself.
"""

from __future__ import annotations

import hashlib

import gmpy2
import numpy as np
from phe import paillier

from vfl.errors import ConfigurationError

#: Smallest modulus accepted without the insecure flag (NIST: 112-bit security).
MIN_SECURE_BITS = 2048
#: Smallest modulus accepted at all: the fixed-point encoding needs head-room.
MIN_TEACHING_BITS = 512


def check_key_bits(key_bits: int, insecure: bool = False) -> int:
    """Validate a modulus size; return it as an ``int``."""
    if isinstance(key_bits, bool) or not isinstance(key_bits, int):
        raise ConfigurationError(f"key_bits must be an integer, got {key_bits!r}")
    if not isinstance(insecure, (bool, np.bool_)):
        # a string such as "false" is truthy: taking it as a yes would hand out a short key
        raise ConfigurationError(f"insecure must be True or False, got {insecure!r}")
    if key_bits < MIN_TEACHING_BITS:
        raise ConfigurationError(
            f"key_bits={key_bits} is below {MIN_TEACHING_BITS}, too small to hold the fixed-point values"
        )
    if key_bits < MIN_SECURE_BITS and not insecure:
        raise ConfigurationError(
            f"key_bits={key_bits} is below the secure minimum of {MIN_SECURE_BITS} bits; "
            "pass insecure=True to use a short key for teaching or testing"
        )
    if key_bits % 2:
        raise ConfigurationError(f"key_bits must be even, got {key_bits}")
    return key_bits


class PublicKey:
    """A Paillier public key ``n`` with generator ``g = n + 1``.

    Parameters
    ----------
    n : int
        The modulus, a product of two primes of equal length.
    """

    def __init__(self, n: int):
        self.n = gmpy2.mpz(n)
        self.nsquare = self.n * self.n
        #: Largest magnitude a signed plaintext may have; residues in between are overflow.
        self.max_int = self.n // 3
        self.key_bits = int(self.n.bit_length())
        #: Bytes of one ciphertext (an element of Z_{n^2}) in fixed-width encoding.
        self.ciphertext_bytes = (int(self.nsquare.bit_length()) + 7) // 8
        #: Bytes of one plaintext (an element of Z_n) in fixed-width encoding.
        self.plaintext_bytes = (self.key_bits + 7) // 8

    @property
    def h_s(self):
        """The DJN obfuscation base ``h_s = (-x^2)^n mod n^2``, derived from ``n`` (see :mod:`vfl.crypto.djn`).

        Every party derives the same value from the modulus, so the wire form
        below needs nothing more than ``n``, and keys imported from ``phe`` work as they are.
        """
        hs = getattr(self, "_h_s", None)
        if hs is None:
            from vfl.crypto.djn import djn_tables
            hs = self._h_s = djn_tables(self.n)[0]
        return hs

    def to_bytes(self) -> bytes:
        """The modulus, big-endian (``h_s`` is a function of it)."""
        return int(self.n).to_bytes(self.plaintext_bytes, "big")

    @classmethod
    def from_bytes(cls, data: bytes) -> "PublicKey":
        n = int.from_bytes(data, "big")
        if n < 2 ** (MIN_TEACHING_BITS - 1) or n % 2 == 0:
            raise ConfigurationError("received a Paillier modulus that is too small or even")
        return cls(n)

    @property
    def fingerprint(self) -> str:
        """Short SHA-256 fingerprint of the modulus, to tell keys apart in logs."""
        return hashlib.sha256(self.to_bytes()).hexdigest()[:16]

    def to_phe(self) -> paillier.PaillierPublicKey:
        return paillier.PaillierPublicKey(int(self.n))

    @classmethod
    def from_phe(cls, key: paillier.PaillierPublicKey) -> "PublicKey":
        return cls(key.n)

    def __eq__(self, other) -> bool:
        return isinstance(other, PublicKey) and self.n == other.n

    def __hash__(self) -> int:
        return hash(int(self.n))

    def __repr__(self) -> str:
        return f"PublicKey({self.key_bits} bits, {self.fingerprint})"


class PrivateKey:
    """A Paillier private key: the factors ``p`` and ``q`` of the public modulus."""

    def __init__(self, public_key: PublicKey, p: int, q: int):
        if gmpy2.mpz(p) * gmpy2.mpz(q) != public_key.n:
            raise ConfigurationError("p * q does not equal the public modulus")
        self.public_key = public_key
        self._phe = paillier.PaillierPrivateKey(public_key.to_phe(), int(p), int(q))

    @property
    def p(self) -> int:
        return self._phe.p

    @property
    def q(self) -> int:
        return self._phe.q

    def raw_decrypt(self, ciphertext: int) -> int:
        """Decrypt one ciphertext to its residue in ``[0, n)`` (CRT, via ``phe``)."""
        return self._phe.raw_decrypt(int(ciphertext))

    def to_phe(self) -> paillier.PaillierPrivateKey:
        return self._phe

    @classmethod
    def from_phe(cls, key: paillier.PaillierPrivateKey) -> "PrivateKey":
        return cls(PublicKey.from_phe(key.public_key), key.p, key.q)

    def __repr__(self) -> str:
        return f"PrivateKey(for {self.public_key!r})"


def generate_keypair(key_bits: int = MIN_SECURE_BITS, insecure: bool = False) -> tuple[PublicKey, PrivateKey]:
    """Generate a Paillier key pair with a ``key_bits``-bit modulus.

    The primes come from ``phe``, which draws them from the operating system's
    CSPRNG (``random.SystemRandom``) and ``gmpy2.next_prime``.

    Raises
    ------
    ConfigurationError
        If ``key_bits`` is below 2048 and ``insecure`` is not set.
    """
    check_key_bits(key_bits, insecure)
    phe_public, phe_private = paillier.generate_paillier_keypair(n_length=key_bits)
    public_key = PublicKey.from_phe(phe_public)
    return public_key, PrivateKey(public_key, phe_private.p, phe_private.q)
