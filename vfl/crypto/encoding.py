"""Fixed-point encoding of real numbers into the Paillier plaintext space Z_n.

A real ``v`` at exponent ``e`` is the integer ``round(v * 2**e)``; negatives
wrap to ``n - |x|``.  Encrypted values carry their exponent: adding two values
needs equal exponents, multiplying adds them.  The whole protocol uses one
precision, :attr:`FixedPoint.frac_bits`, for every plaintext it encodes.

Signed values must stay within ``(-n/3, n/3)``.  Encoding a larger value raises
:class:`~vfl.errors.FixedPointOverflowError`, and so does decoding a residue that
lands in the middle third of Z_n, the sign that a computation wrapped around.
"""

from __future__ import annotations

import math

import gmpy2
import numpy as np

from vfl.errors import FixedPointOverflowError

#: Default number of fractional bits: a resolution of 2**-32, about 2.3e-10.
DEFAULT_FRAC_BITS = 32
#: The largest magnitude a model parameter may have (a weight, an intercept, a leaf value, a point): as large
#: as the largest ``feature_bound`` and ``score_bound`` a federation may declare, so that a parameter times a
#: declared value, at twice the largest precision, stays far within ``n/3`` of a 2048-bit key.  A larger one
#: is no model vfl trains; a shard holding one is refused when it is read.
MAX_PARAMETER = 2.0 ** 256


class FixedPoint:
    """The protocol's single fixed-point precision.

    Parameters
    ----------
    frac_bits : int, default=32
        Fractional bits of every encoded plaintext.  Products of two encoded
        values carry ``2 * frac_bits``.
    """

    def __init__(self, frac_bits: int = DEFAULT_FRAC_BITS):
        if isinstance(frac_bits, bool) or not isinstance(frac_bits, int) or not 8 <= frac_bits <= 128:
            raise ValueError(f"frac_bits must be an integer in [8, 128], got {frac_bits!r}")
        self.frac_bits = frac_bits

    @property
    def resolution(self) -> float:
        """The smallest step one encoded value can resolve: ``2**-frac_bits``."""
        return 2.0 ** -self.frac_bits

    def encode(self, values, max_int: int, exponent: int | None = None, what: str = "value") -> list:
        """Signed integers ``round(v * 2**exponent)`` for a float array (any shape, flattened C-order).

        Raises
        ------
        FixedPointOverflowError
            If a value is not finite or its encoding exceeds ``max_int`` in magnitude.
        """
        exponent = self.frac_bits if exponent is None else exponent
        flat = np.asarray(values, dtype=np.float64).ravel()
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = np.rint(np.ldexp(flat, exponent))
        bad = ~np.isfinite(scaled)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise FixedPointOverflowError(
                f"{what} {float(flat[i])!r} at position {i} cannot be encoded with {exponent} fractional bits"
            )
        # Values below 2**53 convert through int64 at C speed; larger ones go one by one.
        if flat.size and float(np.max(np.abs(scaled))) < 2.0 ** 53:
            encoded = [gmpy2.mpz(x) for x in scaled.astype(np.int64).tolist()]
        else:
            encoded = [gmpy2.mpz(x) for x in scaled.tolist()]
        limit = gmpy2.mpz(max_int)
        for i, x in enumerate(encoded):
            if abs(x) > limit:
                raise FixedPointOverflowError(
                    f"{what} {float(flat[i]):.6g} at position {i} is outside the fixed-point range "
                    f"(|value| must stay below {float(limit) / 2.0 ** exponent:.3g})"
                )
        return encoded

    def encode_matrix(self, values, max_int: int, exponent: int | None = None, what: str = "value"):
        """A 2-D float array encoded row by row: an int64 array when every entry fits in 62 bits.

        Larger entries fall back to a list of lists of ``mpz`` (as :meth:`encode`).
        Same rounding and the same overflow checks as :meth:`encode`.
        """
        exponent = self.frac_bits if exponent is None else exponent
        matrix = np.asarray(values, dtype=np.float64)
        if matrix.ndim != 2:
            raise ValueError(f"encode_matrix takes a 2-D array, got shape {matrix.shape}")
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = np.rint(np.ldexp(matrix, exponent))
        if matrix.size and np.isfinite(scaled).all() and float(np.max(np.abs(scaled))) < 2.0 ** 62 \
                and 2 ** 62 <= max_int:
            return scaled.astype(np.int64)
        return [self.encode(row, max_int, exponent, what) for row in matrix] if matrix.size else \
            np.zeros(matrix.shape, dtype=np.int64)

    @staticmethod
    def decode(residues, n: int, max_int: int, exponent: int, what: str = "value") -> np.ndarray:
        """Floats from residues in ``[0, n)`` at ``exponent`` fractional bits.

        Raises
        ------
        FixedPointOverflowError
            If a residue lies in the middle third of Z_n (the computation wrapped).
        """
        n = gmpy2.mpz(n)
        out = np.empty(len(residues), dtype=np.float64)
        for i, r in enumerate(residues):
            r = gmpy2.mpz(r) % n
            if r > max_int:
                if r < n - max_int:
                    raise FixedPointOverflowError(
                        f"{what} at position {i} overflowed the fixed-point range of the "
                        f"{int(n.bit_length())}-bit plaintext space; scale the features down"
                    )
                r -= n
            out[i] = _mpz_ldexp(r, -exponent)
        return out


def _mpz_ldexp(x, exponent: int) -> float:
    """``x * 2**exponent`` as a float, correctly rounded even when ``x`` exceeds 2**1023."""
    if abs(x) < 2 ** 1000:
        return math.ldexp(float(x), exponent)
    return float(gmpy2.mpfr(x) * gmpy2.mpfr(2) ** exponent)
