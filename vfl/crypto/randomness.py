"""Every random number the cryptography needs, from the operating system's CSPRNG.

numpy's generators are never used here: they are predictable from their state.
"""

from __future__ import annotations

import os
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


def uniform_floats(count: int) -> "np.ndarray":
    """``count`` doubles uniform on [0, 1), each from 53 bits of ``os.urandom``.

    For secret starting weights and differential-privacy noise: values that must
    not be predictable, drawn from the CSPRNG and shaped with numpy afterwards.
    """
    import numpy as np

    words = np.frombuffer(os.urandom(8 * int(count)), dtype=np.uint64)
    return (words >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def gaussian(count: int) -> "np.ndarray":
    """``count`` standard normal doubles from the CSPRNG (Box–Muller on :func:`uniform_floats`)."""
    import numpy as np

    half = (int(count) + 1) // 2
    u1 = 1.0 - uniform_floats(half)          # in (0, 1]: the logarithm is finite
    u2 = uniform_floats(half)
    radius = np.sqrt(-2.0 * np.log(u1))
    return np.concatenate([radius * np.cos(2 * np.pi * u2), radius * np.sin(2 * np.pi * u2)])[:count]
