"""Coordinator C: holds the Paillier private key; decrypts only the loss and masked values."""

from __future__ import annotations

import math

import numpy as np

from vfl.crypto import Context, EncryptedVector, FixedPoint, generate_keypair, packing
from vfl.errors import FixedPointOverflowError


class Coordinator:
    """The key holder (FATE's *arbiter*).

    Parameters
    ----------
    key_bits : int, default=2048
    insecure : bool, default=False
        Allow keys below 2048 bits (teaching, tests).
    precision : FixedPoint, optional
    engine : str, optional
        The crypto engine to use.
    """

    role = "C"

    def __init__(self, key_bits: int = 2048, insecure: bool = False, precision: FixedPoint | None = None,
                 engine=None):
        self.key_bits = key_bits
        self.insecure = insecure
        self.precision = precision or FixedPoint()
        self.engine = engine
        self.context: Context | None = None
        #: decrypted mean loss per completed epoch
        self.loss_curve: list[float] = []
        #: conjugate gradient's scalars after the last step (:mod:`vfl.protocols.linear.conjugate`; empty before)
        self.cg_state: dict = {}
        #: its share of every data party's parameters (``protocol="shared"``: a
        #: :class:`~vfl.parties.linear.shareholders.CoordinatorShares`), or None
        self.shares = None

    @classmethod
    def for_settings(cls, settings, engine=None) -> "Coordinator":
        """The key holder a run's settings ask for: their ``key_bits``, ``insecure`` and ``frac_bits``."""
        return cls(settings.key_bits, settings.insecure, FixedPoint(settings.frac_bits), engine)

    def generate_keys(self) -> bytes:
        """Table 2, step 1: make the key pair; return the public key's wire form."""
        public_key, private_key = generate_keypair(self.key_bits, insecure=self.insecure)
        self.context = Context(public_key, self.precision, private_key=private_key, engine=self.engine)
        return public_key.to_bytes()

    def public_key_bytes(self) -> bytes:
        """The public key's wire form; the key pair is made at the first call and kept for this run."""
        return self.generate_keys() if self.context is None else self.context.public_key.to_bytes()

    def decrypt_total(self, value: EncryptedVector) -> float:
        """An aggregate C is allowed to see (the loss summed over the batch)."""
        return float(self.context.decrypt(value, what="loss")[0])

    def decrypt_masked(self, masked: EncryptedVector) -> list:
        """Residues of masked values: uniform over Z_n, so they tell C nothing."""
        return self.context.decrypt_residues(masked)

    def decrypt_packed_results(self, masked: EncryptedVector, layout) -> list:
        """Position ``s - 1`` of each masked product (still masked): the only position that goes back."""
        n = self.context.public_key.n
        return [packing.position_value(r, n, layout, layout.slots - 1)
                for r in self.context.decrypt_residues(masked)]

    def decrypt_packed_total(self, value: EncryptedVector, layout) -> float:
        """The batch loss from position ``s - 1`` of the packed loss (every other position is masked)."""
        n = self.context.public_key.n
        result = packing.position_value(self.context.decrypt_residues(value)[0], n, layout, layout.slots - 1,
                                        signed=True)
        if abs(result) >= layout.offset:
            raise FixedPointOverflowError("the packed loss overflowed its slot")
        return math.ldexp(float(result), -value.exponent)

    def record_epoch(self, batch_losses, batch_sizes) -> float:
        loss = float(np.average(batch_losses, weights=batch_sizes))
        self.loss_curve.append(loss)
        return loss

    def state(self) -> dict:
        return {"loss_curve": list(self.loss_curve), **({"cg": dict(self.cg_state)} if self.cg_state else {})}

    def load_state(self, state: dict) -> None:
        self.loss_curve = [float(v) for v in state["loss_curve"]]
        self.cg_state = {key: [float(v) for v in value] if isinstance(value, list) else float(value)
                         for key, value in (state.get("cg") or {}).items()}
