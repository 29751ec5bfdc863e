"""Inference: the score ``z = sum_k u_k + u_B`` of new rows, one program per role.

Two variants:

``"private"`` (default)
    Every feature party sends ``[[u_k]]`` to B; B adds them, ``u_B`` and a fresh
    uniform mask ``R`` and sends ``[[z + R]]`` to C; C decrypts and returns
    ``z + R``; B removes ``R``.  Only B learns the scores; the feature parties'
    plaintext partial scores never leave them, and C sees only masked values.  (B can of course subtract its own ``u_B`` from a score: learning
    the scores means learning ``u_A`` for those rows.  That is what prediction is.)
Packed (``packing=True``, with ``"private"``)
    The same, with ``s`` scores per ciphertext (signed slots sized from the declared
    ``score_bound``, :func:`vfl.parties.linear.packed.prediction_slots`): every feature
    party packs its ``[[u_k]]``; B encrypts its own packed scores plus a fresh mask
    ``R`` uniform over Z_n per ciphertext (while the feature parties encrypt theirs),
    adds theirs; C decrypts ``n / s`` ciphertexts and returns ``Z + R``; B removes
    ``R`` and reads the slots.  C sees only uniform values, as unpacked.  The scores
    are the same integers as unpacked, so the same floats bit for bit.
``"table3"``
    Yang et al. 2019, Table 3, for teaching: every party sends its plaintext partial
    scores to C, which adds them and returns ``z`` to B.  **It leaks**: C learns
    every row's partial scores and the final scores.
"""

from __future__ import annotations

import numpy as np

from vfl.crypto import FixedPoint
from vfl.errors import ConfigurationError, DataError, ProtocolError
from vfl.parties import Coordinator, pack_residues, pack_vector, unpack_residues, unpack_vector
from vfl.parties.linear import LinearFeatureParty, LinearLabelParty, prediction_bound
from vfl.parties.linear.packed import (DEFAULT_SCORE_BOUND, check_declared, encrypt_scores, mask_scores,
                                       prediction_slots, unmask_scores)
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


def predict_feature(ep: Endpoint, party: LinearFeatureParty, features, mode: str = "private", frac_bits: int = 32,
              engine=None, roster: Roster = TWO_PARTY, packing: bool = False,
              score_bound: float = DEFAULT_SCORE_BOUND, scores=None) -> None:
    """A feature party's program: its partial scores leave it encrypted (or, for ``table3``, in plaintext to C).

    ``scores``: what the party releases in place of its exact partial scores (with DP noise, say).
    """
    _check_mode(mode)
    x = _features(party, features)
    _receive_key(ep, party, frac_bits, engine, roster)
    n_rows = ep.recv(roster.label, "rows")["n_rows"]
    if n_rows != x.shape[0]:
        raise DataError(f"party {party.role} has {x.shape[0]} prediction rows but party {roster.label} has {n_rows}")
    u_a = party.scores(features=x) if scores is None else np.asarray(scores, dtype=np.float64)
    if mode == "private" and packing:
        check_declared(party.role, u_a, score_bound, "partial score", advice=_SCALE)
        group = prediction_slots(party.context, score_bound, party.n_parties)
        ep.send(roster.label, "packed_scores", "ciphertext", slots=len(group.widths),
                **pack_vector(encrypt_scores(party.context, u_a, group, what=f"party {party.role} score")))
    elif mode == "private":
        send_scores(ep, party, u_a, roster, "scores", "partial scores", advice=_SCALE)
    else:
        ep.send(roster.coordinator, "partial_scores", "plaintext", scores=u_a)


def predict_label(ep: Endpoint, party: LinearLabelParty, features, mode: str = "private", frac_bits: int = 32,
              engine=None, roster: Roster = TWO_PARTY, packing: bool = False,
              score_bound: float = DEFAULT_SCORE_BOUND) -> np.ndarray:
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
    if packing:
        return _predict_b_packed(ep, party, u_b, roster, score_bound)
    return masked_total(ep, party, u_b, roster, ("scores", "masked_scores", "scores"), "partial scores",
                        advice=_SCALE)


# -- one private scoring round, shared by prediction and by validation (early stopping) -------
def send_scores(ep: Endpoint, party: LinearFeatureParty, u, roster: Roster, name: str, what: str,
                advice: str | None = None) -> None:
    """A feature party: its partial scores ``u``, encrypted, to the label party as message ``name``."""
    party.check_range(u, prediction_bound(party.context, party.n_parties), what,
                      **({"advice": advice} if advice else {}))
    ep.send(roster.label, name, "ciphertext",
            **pack_vector(party.context.encrypt(u, what=f"party {party.role} score")))


def masked_total(ep: Endpoint, party: LinearLabelParty, u_b, roster: Roster, names: tuple[str, str, str], what: str,
                 advice: str | None = None) -> np.ndarray:
    """The label party: ``z = sum_k u_k + u_B`` through C, hidden from C by a fresh uniform mask.

    ``names`` are the messages: the feature parties' scores, the masked sum to C, C's answer.
    """
    scores_name, masked_name, reply_name = names
    party.check_range(u_b, prediction_bound(party.context, party.n_parties), what,
                      **({"advice": advice} if advice else {}))
    total = u_b
    for a in roster.features:
        total = unpack_vector(party.context, ep.recv(a, scores_name), len(u_b)) + total
    masked, mask = party.context.mask(total)
    ep.send(roster.coordinator, masked_name, "ciphertext", **pack_vector(masked))
    residues = unpack_residues(party.context, ep.recv(roster.coordinator, reply_name), len(u_b))
    return party.context.unmask(residues, mask, masked.exponent, what=f"party {party.role} score")


def decrypt_masked_total(ep: Endpoint, coordinator: Coordinator, roster: Roster, masked_name: str,
                         reply_name: str) -> int:
    """C: decrypt the label party's masked sum and send the (still masked) residues back; the row count."""
    masked = unpack_vector(coordinator.context, ep.recv(roster.label, masked_name))
    ep.send(roster.label, reply_name, "masked", **pack_residues(coordinator.decrypt_masked(masked),
                                                                coordinator.context))
    return len(masked)


def _predict_b_packed(ep: Endpoint, party: LinearLabelParty, u_b, roster: Roster, score_bound: float) -> np.ndarray:
    """B's packed private prediction: its own packed ``u_B`` under a mask uniform over Z_n, the packed ``[[u_k]]``
    added, C decrypts, B unmasks.

    B encrypts its own part before the feature parties' arrive, while they encrypt theirs.
    """
    check_declared(party.role, u_b, score_bound, "partial score", advice=_SCALE)
    group = prediction_slots(party.context, score_bound, party.n_parties)
    what = f"party {party.role} score"
    masked, masks = mask_scores(party.context, u_b, group, what=what)
    for a in roster.features:
        masked = masked + unpack_vector(party.context, ep.recv(a, "packed_scores"), len(masks))
    masked.fresh = True             # its own fresh encryption re-randomizes the sum
    ep.send(roster.coordinator, "masked_packed_scores", "ciphertext", **pack_vector(masked), n_values=len(u_b),
            slot_bits=group.widths[0], slots=len(group.widths))
    residues = unpack_residues(party.context, ep.recv(roster.coordinator, "packed_scores"), len(masks))
    return unmask_scores(party.context, residues, masks, group, len(u_b), what=what)


def _predict_c_packed(ep: Endpoint, coordinator: Coordinator, roster: Roster, score_bound: float) -> int:
    """C's packed prediction: check the slots are the public ones, decrypt ``n / s`` ciphertexts, return them."""
    message = ep.recv(roster.label, "masked_packed_scores")
    group = prediction_slots(coordinator.context, score_bound, len(roster.data_parties))
    expected = {"slot_bits": group.widths[0], "slots": len(group.widths)}
    if any(message[k] != v for k, v in expected.items()):
        raise ProtocolError(f"coordinator: {roster.label} packed the scores as "
                            f"{ {k: message[k] for k in expected} }, not as the settings say "
                            f"({expected}); the parties' score_bound or frac_bits differ")
    n_values = message["n_values"]
    if not isinstance(n_values, int) or n_values < 1:
        raise ProtocolError(f"coordinator: bad row count {n_values!r} from {roster.label}")
    masked = unpack_vector(coordinator.context, message, -(-n_values // len(group.widths)))
    ep.send(roster.label, "packed_scores", "masked", **pack_residues(coordinator.decrypt_masked(masked),
                                                                     coordinator.context))
    return n_values


def predict_coordinator(ep: Endpoint, coordinator: Coordinator, mode: str = "private", roster: Roster = TWO_PARTY,
              packing: bool = False, score_bound: float = DEFAULT_SCORE_BOUND) -> int:
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
    if packing:
        return _predict_c_packed(ep, coordinator, roster, score_bound)
    return decrypt_masked_total(ep, coordinator, roster, "masked_scores", "scores")


# Yang et al.'s party letters, kept for teaching and the notebooks (A: a feature party, B: the label party, C: the coordinator).
predict_a = predict_feature
predict_b = predict_label
predict_c = predict_coordinator
