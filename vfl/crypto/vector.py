"""Vectors of Paillier ciphertexts with fixed-point exponents, and the context that makes them.

Protocol code reads like numpy::

    d = ctx.encrypt(u_a) + (u_b - y)        # [[d]] = [[u_A]] + (u_B - y)
    g = x.T @ d                             # [[X^T d]], one multi-exponentiation per column
    masked, mask = ctx.mask(g)              # [[g + R]], R uniform over Z_n

and never loops over ciphertexts: every operation is one call into the engine.
Every vector knows whether it is *fresh* (its randomness was just drawn, so it can
leave the party as it is) or was computed from other ciphertexts (it must be
re-randomized first: see :meth:`EncryptedVector.rerandomize`).
"""

from __future__ import annotations

import numpy as np

from vfl.crypto.encoding import FixedPoint
from vfl.crypto.engine import Engine, get_engine
from vfl.crypto.keys import PrivateKey, PublicKey
from vfl.crypto.randomness import uniform_below
from vfl.errors import ConfigurationError, ProtocolError


class Context:
    """Everything a party needs to encrypt, compute on and (at C) decrypt vectors.

    Parameters
    ----------
    public_key : PublicKey
    precision : FixedPoint, optional
        The protocol's fixed-point precision (default 32 fractional bits).
    private_key : PrivateKey, optional
        Only the coordinator has one.
    engine : str or Engine, optional
        The batched arithmetic; the registered default when omitted.
    """

    def __init__(self, public_key: PublicKey, precision: FixedPoint | None = None,
                 private_key: PrivateKey | None = None, engine: str | Engine | None = None):
        self.public_key = public_key
        self.precision = precision or FixedPoint()
        self.private_key = private_key
        self.engine = engine if engine is not None and not isinstance(engine, str) else get_engine(engine)

    @property
    def frac_bits(self) -> int:
        return self.precision.frac_bits

    def encode(self, values, exponent: int | None = None, what: str = "value") -> list:
        return self.precision.encode(values, self.public_key.max_int, exponent, what)

    def encode_matrix(self, values, exponent: int | None = None, what: str = "value"):
        """Rows of a 2-D array encoded: an ``(m, n)`` int64 array when it fits, else lists of ``mpz``."""
        return self.precision.encode_matrix(values, self.public_key.max_int, exponent, what)

    def encrypt(self, values, what: str = "value") -> "EncryptedVector":
        """Encrypt a 1-D float array (or scalar) at ``frac_bits`` fractional bits."""
        values = np.atleast_1d(np.asarray(values, dtype=np.float64))
        if values.ndim != 1:
            raise ValueError(f"encrypt takes a 1-D array, got shape {values.shape}")
        ciphertexts = self.engine.encrypt(self.public_key, self.encode(values, what=what))
        return EncryptedVector(self, ciphertexts, self.frac_bits, fresh=True)

    def mask(self, vector: "EncryptedVector") -> tuple["EncryptedVector", list]:
        """``[[v + R]]`` with ``R`` fresh and uniform over Z_n; returns it and ``R``.

        ``R`` is added as a fresh encryption, so the result is re-randomized too.
        """
        mask = uniform_below(int(self.public_key.n), len(vector))
        masked = self.engine.add(self.public_key, vector.ciphertexts, self.engine.encrypt(self.public_key, mask))
        return EncryptedVector(self, masked, vector.exponent, fresh=True), mask

    def unmask(self, residues, mask, exponent: int, what: str = "value") -> np.ndarray:
        """Floats ``v`` from the decrypted ``v + R`` and the mask ``R``."""
        if len(residues) != len(mask):
            raise ProtocolError(f"{what}: got {len(residues)} masked values for {len(mask)} masks")
        n = self.public_key.n
        return self.precision.decode([(r - m) % n for r, m in zip(residues, mask)],
                                     n, self.public_key.max_int, exponent, what)

    def decrypt_residues(self, vector: "EncryptedVector") -> list:
        """Residues in ``[0, n)``: what the coordinator returns for masked values."""
        return self.engine.decrypt(self._private_key(), vector.ciphertexts)

    def decrypt(self, vector: "EncryptedVector", what: str = "value") -> np.ndarray:
        """Floats, for values the coordinator may see (the aggregate loss)."""
        pk = self.public_key
        return self.precision.decode(self.decrypt_residues(vector), pk.n, pk.max_int, vector.exponent, what)

    def from_bytes(self, data: bytes, exponent: int, fresh: bool = False) -> "EncryptedVector":
        """A vector from its fixed-width big-endian wire form."""
        width = self.public_key.ciphertext_bytes
        if len(data) % width:
            raise ProtocolError(f"ciphertext payload of {len(data)} bytes is not a multiple of {width}")
        n2 = self.public_key.nsquare
        ciphertexts = [int.from_bytes(data[i:i + width], "big") for i in range(0, len(data), width)]
        if any(not 0 < c < n2 for c in ciphertexts):
            raise ProtocolError("a received ciphertext is outside Z_{n^2}")
        import gmpy2
        return EncryptedVector(self, [gmpy2.mpz(c) for c in ciphertexts], exponent, fresh=fresh)

    def _private_key(self) -> PrivateKey:
        if self.private_key is None:
            raise ConfigurationError("this party holds no private key; only the coordinator decrypts")
        return self.private_key


class EncryptedVector:
    """A 1-D vector of ciphertexts sharing one fixed-point exponent.

    Supports ``+`` and ``-`` with another vector or a float array, ``*`` by a
    float scalar or array (element-wise), ``matrix @ vector`` (for each row ``j``,
    ``sum_i matrix[j, i] * v_i``), :meth:`sum`, slicing and :meth:`concat`.
    """

    __array_ufunc__ = None  # let numpy hand ``x.T @ v`` over to __rmatmul__

    def __init__(self, context: Context, ciphertexts: list, exponent: int, fresh: bool = False):
        self.context = context
        self.ciphertexts = list(ciphertexts)
        self.exponent = int(exponent)
        #: True when the randomness was just drawn; False after any homomorphic operation.
        self.fresh = fresh

    # -- helpers ---------------------------------------------------------------
    @property
    def _pk(self) -> PublicKey:
        return self.context.public_key

    @property
    def _engine(self) -> Engine:
        return self.context.engine

    def _new(self, ciphertexts, exponent=None) -> "EncryptedVector":
        return EncryptedVector(self.context, ciphertexts, self.exponent if exponent is None else exponent)

    def _lifted(self, exponent: int) -> "EncryptedVector":
        """The same values at a higher exponent (multiplied by an exact power of two)."""
        if exponent == self.exponent:
            return self
        shift = exponent - self.exponent
        return self._new(self._engine.mul_plain(self._pk, self.ciphertexts, [1 << shift] * len(self)), exponent)

    def _check_length(self, other_len: int, op: str) -> None:
        if other_len != len(self):
            raise ValueError(f"{op}: encrypted vector of length {len(self)} and operand of length {other_len}")

    # -- arithmetic ------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.ciphertexts)

    def __add__(self, other) -> "EncryptedVector":
        if isinstance(other, EncryptedVector):
            if other.context.public_key != self._pk:
                raise ValueError("cannot add vectors encrypted under different public keys")
            self._check_length(len(other), "add")
            exponent = max(self.exponent, other.exponent)
            a, b = self._lifted(exponent), other._lifted(exponent)
            return self._new(self._engine.add(self._pk, a.ciphertexts, b.ciphertexts), exponent)
        plain = np.broadcast_to(np.asarray(other, dtype=np.float64), (len(self),))
        encoded = self.context.encode(plain, self.exponent)
        return self._new(self._engine.add_plain(self._pk, self.ciphertexts, encoded))

    __radd__ = __add__

    def __sub__(self, other) -> "EncryptedVector":
        if isinstance(other, EncryptedVector):
            return self + other * -1.0
        return self + -np.asarray(other, dtype=np.float64)

    def __mul__(self, other) -> "EncryptedVector":
        if isinstance(other, EncryptedVector):
            raise TypeError("Paillier cannot multiply two ciphertexts")
        plain = np.broadcast_to(np.asarray(other, dtype=np.float64), (len(self),))
        encoded = self.context.encode(plain, what="multiplier")
        return self._new(self._engine.mul_plain(self._pk, self.ciphertexts, encoded),
                         self.exponent + self.context.frac_bits)

    __rmul__ = __mul__

    def __rmatmul__(self, matrix) -> "EncryptedVector":
        """``matrix @ self`` for a plaintext matrix (rows x len(self)) or vector (len(self))."""
        matrix = np.asarray(matrix, dtype=np.float64)
        rows = matrix[None, :] if matrix.ndim == 1 else matrix
        if rows.ndim != 2:
            raise ValueError(f"matmul takes a 1-D or 2-D plaintext, got shape {matrix.shape}")
        self._check_length(rows.shape[1], "matmul")
        columns = self.context.encode_matrix(rows, what="matrix entry")
        return self._new(self._engine.lincomb(self._pk, self.ciphertexts, columns),
                         self.exponent + self.context.frac_bits)

    def sum(self) -> "EncryptedVector":
        """The encrypted sum of all entries (a vector of length 1)."""
        engine_sum = getattr(self._engine, "sum", None)
        if engine_sum is not None:
            return self._new([engine_sum(self._pk, self.ciphertexts)])
        n2 = self._pk.nsquare
        total = 1
        for c in self.ciphertexts:
            total = total * c % n2
        return self._new([total])

    def __getitem__(self, index) -> "EncryptedVector":
        if isinstance(index, slice):
            picked = self.ciphertexts[index]
        else:
            picked = [self.ciphertexts[i] for i in np.atleast_1d(np.arange(len(self))[index])]
        out = EncryptedVector(self.context, picked, self.exponent, fresh=self.fresh)
        return out

    @staticmethod
    def concat(vectors) -> "EncryptedVector":
        """One vector from several under the same key, at the highest exponent among them."""
        vectors = list(vectors)
        exponent = max(v.exponent for v in vectors)
        lifted = [v._lifted(exponent) for v in vectors]
        out = EncryptedVector(vectors[0].context, [c for v in lifted for c in v.ciphertexts], exponent)
        out.fresh = all(v.fresh and v.exponent == exponent for v in vectors)
        return out

    def rerandomize(self) -> "EncryptedVector":
        """The same plaintexts under fresh randomness (multiplied by fresh ``r^n``)."""
        return EncryptedVector(self.context, self._engine.rerandomize(self._pk, self.ciphertexts),
                               self.exponent, fresh=True)

    # -- wire form -------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Fixed-width big-endian ciphertexts, ``len(self) * public_key.ciphertext_bytes`` bytes."""
        width = self._pk.ciphertext_bytes
        return b"".join(int(c).to_bytes(width, "big") for c in self.ciphertexts)

    def __repr__(self) -> str:
        state = "fresh" if self.fresh else "derived"
        return f"EncryptedVector(len={len(self)}, exponent={self.exponent}, {state})"
