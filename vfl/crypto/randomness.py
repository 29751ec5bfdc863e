"""Every random number the cryptography needs, from the operating system's CSPRNG.

numpy's generators are never used here: they are predictable from their state.
"""

from __future__ import annotations

import secrets

import gmpy2


def uniform_below(n: int, count: int) -> list:
    """``count`` integers drawn uniformly from ``[0, n)``: masks over the plaintext space Z_n."""
    return [gmpy2.mpz(secrets.randbelow(n)) for _ in range(count)]


def unit_below(n: int, count: int) -> list:
    """``count`` integers drawn uniformly from ``[1, n)``: Paillier obfuscation randomness."""
    return [gmpy2.mpz(secrets.randbelow(n - 1) + 1) for _ in range(count)]


def random_bits(bits: int) -> int:
    """A uniformly random integer of at most ``bits`` bits."""
    return secrets.randbits(bits)
