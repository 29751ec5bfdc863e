"""Inference: the score ``z = u_A + u_B`` of new rows, one program per role.

Two variants:

``"private"`` (default)
    A sends ``[[u_A]]`` to B; B adds ``u_B`` and a fresh uniform mask ``R`` and sends
    ``[[z + R]]`` to C; C decrypts and returns ``z + R``; B removes ``R``.  Only B
    learns the scores; A's plaintext partial scores never leave A, and C sees only
    masked values.  (B can of course subtract its own ``u_B`` from a score: learning
    the scores means learning ``u_A`` for those rows.  That is what prediction is.)
``"table3"``
    Yang et al. 2019, Table 3, for teaching: A and B send their plaintext partial
    scores to C, which adds them and returns ``z`` to B.  **It leaks**: C learns
    every row's partial scores and the final scores.
"""

from __future__ import annotations

import numpy as np

from vfl.crypto import FixedPoint
from vfl.errors import ConfigurationError, DataError
from vfl.parties import (Coordinator, PartyA, PartyB, pack_residues, pack_vector, prediction_bound, unpack_residues,
                         unpack_vector)
from vfl.transport import Endpoint

MODES = ("private", "table3")
_SCALE = "scale the prediction data as the training data was scaled"


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ConfigurationError(f"inference mode must be one of {MODES}, got {mode!r}")


def _features(party, features) -> np.ndarray:
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != party.n_features:
        raise DataError(f"party {party.role}: prediction data has shape {x.shape}, "
                        f"the model was trained on {party.n_features} columns")
    if not np.isfinite(x).all():
        row, col = map(int, np.argwhere(~np.isfinite(x))[0])
        raise DataError(f"party {party.role}: non-finite value at row {row}, column {col} of the prediction data")
    return x


def predict_a(ep: Endpoint, party: PartyA, features, mode: str = "private", frac_bits: int = 32,
              engine=None) -> None:
    """A's program: its partial scores leave A encrypted (or, for ``table3``, in plaintext to C)."""
    _check_mode(mode)
    x = _features(party, features)
    party.receive_public_key(ep.recv("C", "public_key")["key"], FixedPoint(frac_bits), engine)
    n_rows = ep.recv("B", "rows")["n_rows"]
    if n_rows != x.shape[0]:
        raise DataError(f"party A has {x.shape[0]} prediction rows but party B has {n_rows}")
    u_a = party.scores(features=x)
    if mode == "private":
        party.check_range(u_a, prediction_bound(party.context), "partial scores", advice=_SCALE)
        ep.send("B", "scores", "ciphertext", **pack_vector(party.context.encrypt(u_a, what="party A score")))
    else:
        ep.send("C", "partial_scores", "plaintext", scores=u_a)


def predict_b(ep: Endpoint, party: PartyB, features, mode: str = "private", frac_bits: int = 32,
              engine=None) -> np.ndarray:
    """B's program: returns the scores ``z`` of the rows."""
    _check_mode(mode)
    x = _features(party, features)
    party.receive_public_key(ep.recv("C", "public_key")["key"], FixedPoint(frac_bits), engine)
    ep.send("A", "rows", "public", n_rows=x.shape[0])
    u_b = party.scores(features=x)
    if mode == "table3":
        ep.send("C", "partial_scores", "plaintext", scores=u_b)
        scores = ep.recv("C", "scores")["scores"]
        if scores.shape != u_b.shape:
            raise DataError(f"party B: C returned {scores.shape[0]} scores for {u_b.shape[0]} rows")
        return scores
    party.check_range(u_b, prediction_bound(party.context), "partial scores", advice=_SCALE)
    u_a = unpack_vector(party.context, ep.recv("A", "scores"), len(u_b))
    masked, mask = party.context.mask(u_a + u_b)
    ep.send("C", "masked_scores", "ciphertext", **pack_vector(masked))
    residues = unpack_residues(party.context, ep.recv("C", "scores"), len(u_b))
    return party.context.unmask(residues, mask, masked.exponent, what="party B score")


def predict_c(ep: Endpoint, coordinator: Coordinator, mode: str = "private") -> int:
    """C's program: decrypts masked scores (or, for ``table3``, adds plaintext ones); returns the row count."""
    _check_mode(mode)
    key = coordinator.generate_keys() if coordinator.context is None else coordinator.context.public_key.to_bytes()
    for peer in ("A", "B"):
        ep.send(peer, "public_key", "public", key=key)
    if mode == "table3":
        u_a = ep.recv("A", "partial_scores")["scores"]
        u_b = ep.recv("B", "partial_scores")["scores"]
        if u_a.shape != u_b.shape:
            raise DataError(f"coordinator: A sent {u_a.shape[0]} partial scores, B sent {u_b.shape[0]}")
        ep.send("B", "scores", "plaintext", scores=u_a + u_b)
        return len(u_a)
    masked = unpack_vector(coordinator.context, ep.recv("B", "masked_scores"))
    ep.send("B", "scores", "masked", **pack_residues(coordinator.decrypt_masked(masked), coordinator.context))
    return len(masked)
