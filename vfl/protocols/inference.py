"""Inference: the score ``z = sum_k u_k + u_B`` of new rows, one program per role.

Two variants:

``"private"`` (default)
    Every feature party sends ``[[u_k]]`` to B; B adds them, ``u_B`` and a fresh
    uniform mask ``R`` and sends ``[[z + R]]`` to C; C decrypts and returns
    ``z + R``; B removes ``R``.  Only B learns the scores; the feature parties'
    plaintext partial scores never leave them, and C sees only masked values.  (B can of course subtract its own ``u_B`` from a score: learning
    the scores means learning ``u_A`` for those rows.  That is what prediction is.)
``"table3"``
    Yang et al. 2019, Table 3, for teaching: every party sends its plaintext partial
    scores to C, which adds them and returns ``z`` to B.  **It leaks**: C learns
    every row's partial scores and the final scores.
"""

from __future__ import annotations

import numpy as np

from vfl.crypto import FixedPoint
from vfl.errors import ConfigurationError, DataError
from vfl.parties import (Coordinator, PartyA, PartyB, pack_residues, pack_vector, prediction_bound, unpack_residues,
                         unpack_vector)
from vfl.protocols.roster import TWO_PARTY, Roster
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


def _receive_key(ep: Endpoint, party, frac_bits: int, engine, roster: Roster) -> None:
    key = ep.recv(roster.coordinator, "public_key")["key"]
    party.receive_public_key(key, FixedPoint(frac_bits), engine, len(roster.data_parties))


def predict_a(ep: Endpoint, party: PartyA, features, mode: str = "private", frac_bits: int = 32,
              engine=None, roster: Roster = TWO_PARTY) -> None:
    """A feature party's program: its partial scores leave it encrypted (or, for ``table3``, in plaintext to C)."""
    _check_mode(mode)
    x = _features(party, features)
    _receive_key(ep, party, frac_bits, engine, roster)
    n_rows = ep.recv(roster.label, "rows")["n_rows"]
    if n_rows != x.shape[0]:
        raise DataError(f"party {party.role} has {x.shape[0]} prediction rows but party {roster.label} has {n_rows}")
    u_a = party.scores(features=x)
    if mode == "private":
        party.check_range(u_a, prediction_bound(party.context, party.n_parties), "partial scores", advice=_SCALE)
        ep.send(roster.label, "scores", "ciphertext",
                **pack_vector(party.context.encrypt(u_a, what=f"party {party.role} score")))
    else:
        ep.send(roster.coordinator, "partial_scores", "plaintext", scores=u_a)


def predict_b(ep: Endpoint, party: PartyB, features, mode: str = "private", frac_bits: int = 32,
              engine=None, roster: Roster = TWO_PARTY) -> np.ndarray:
    """The label party's program: returns the scores ``z`` of the rows."""
    _check_mode(mode)
    x = _features(party, features)
    _receive_key(ep, party, frac_bits, engine, roster)
    for a in roster.features:
        ep.send(a, "rows", "public", n_rows=x.shape[0])
    u_b = party.scores(features=x)
    if mode == "table3":
        ep.send(roster.coordinator, "partial_scores", "plaintext", scores=u_b)
        scores = ep.recv(roster.coordinator, "scores")["scores"]
        if scores.shape != u_b.shape:
            raise DataError(f"party {party.role}: {roster.coordinator} returned {scores.shape[0]} scores for "
                            f"{u_b.shape[0]} rows")
        return scores
    party.check_range(u_b, prediction_bound(party.context, party.n_parties), "partial scores", advice=_SCALE)
    total = u_b
    for a in roster.features:
        total = unpack_vector(party.context, ep.recv(a, "scores"), len(u_b)) + total
    masked, mask = party.context.mask(total)
    ep.send(roster.coordinator, "masked_scores", "ciphertext", **pack_vector(masked))
    residues = unpack_residues(party.context, ep.recv(roster.coordinator, "scores"), len(u_b))
    return party.context.unmask(residues, mask, masked.exponent, what=f"party {party.role} score")


def predict_c(ep: Endpoint, coordinator: Coordinator, mode: str = "private", roster: Roster = TWO_PARTY) -> int:
    """C's program: decrypts masked scores (or, for ``table3``, adds plaintext ones); returns the row count."""
    _check_mode(mode)
    key = coordinator.public_key_bytes()
    for peer in roster.data_parties:
        ep.send(peer, "public_key", "public", key=key)
    if mode == "table3":
        parts = {peer: ep.recv(peer, "partial_scores")["scores"] for peer in roster.data_parties}
        sizes = {peer: u.shape for peer, u in parts.items()}
        if len(set(sizes.values())) != 1:
            raise DataError(f"coordinator: the parties sent different numbers of partial scores: "
                            + ", ".join(f"{p} {s[0]}" for p, s in sizes.items()))
        ep.send(roster.label, "scores", "plaintext", scores=sum(parts.values()))
        return len(parts[roster.label])
    masked = unpack_vector(coordinator.context, ep.recv(roster.label, "masked_scores"))
    ep.send(roster.label, "scores", "masked", **pack_residues(coordinator.decrypt_masked(masked),
                                                              coordinator.context))
    return len(masked)
