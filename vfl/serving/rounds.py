"""One scoring round of a linear model, party by party: the private prediction of batch scoring, per id.

::

    Feature party k                      Label party B                          Coordinator C
    looks its rows up; u_k per id
    [[u_k]] (packed) -> B                 [[u_B + R]] + sum_k [[u_k]] -> C       decrypts z + R -> B
                                          removes R: z per id

The arithmetic is :mod:`vfl.protocols.linear.inference`'s (the same slots, masks and
range checks, :mod:`vfl.parties.linear.packed`): packed, ``s`` scores per plaintext as
signed digits (:func:`~vfl.parties.linear.packed.prediction_slots`, 43 at 2048 bits with
the default ``score_bound``) under one mask ``R`` uniform over Z_n per ciphertext, so
the coordinator decrypts uniform residues; unpacked, one score per ciphertext under
its own uniform mask.  Two differences a service needs:

* a row that cannot be scored (an unknown id, a missing value, a partial score
  beyond its bound) is *one id's* answer: its slot carries 0 and its status says
  why, and every other id of the round is scored;
* a round scores any number of models per id (one-vs-rest): ``width`` values per
  id, side by side.
"""

from __future__ import annotations

import numpy as np

from vfl.crypto import Context
from vfl.errors import ProtocolError
from vfl.parties.linear import prediction_bound
from vfl.parties.linear.packed import encrypt_scores, mask_scores, prediction_slots, unmask_scores
from vfl.parties.wire import pack_residues, pack_vector, unpack_residues, unpack_vector
from vfl.serving.messages import INCOMPLETE, OK, OUT_OF_RANGE, UNKNOWN, integer


def row_status(values: np.ndarray, found: np.ndarray, complete: bool) -> np.ndarray:
    """Per row: :data:`UNKNOWN` if not found, :data:`INCOMPLETE` if ``complete`` rows are needed and a value is NaN."""
    status = np.where(found, OK, UNKNOWN).astype(np.int64)
    if complete:
        status[found & ~np.isfinite(values).all(axis=1)] = INCOMPLETE
    return status


class Layout:
    """How a round's values travel: packed (``score_bound``-sized signed slots, as batch prediction) or one per
    ciphertext."""

    def __init__(self, context: Context, packed: bool, score_bound: float, n_parties: int):
        self.context, self.packed = context, packed
        if packed:
            self.slots = prediction_slots(context, score_bound, n_parties)
            self.bound = float(score_bound)
        else:
            self.slots = None
            self.bound = prediction_bound(context, n_parties)

    def ciphertexts(self, n_values: int) -> int:
        return -(-n_values // len(self.slots.widths)) if self.packed else n_values

    def fields(self) -> dict:
        """The public slot layout a ``decrypt`` request names (as batch prediction's ``masked_packed_scores``)."""
        return {"slot_bits": self.slots.widths[0], "slots": len(self.slots.widths)} if self.packed else {}


def partial_scores(share, values: np.ndarray, status: np.ndarray, bound: float) -> tuple[np.ndarray, np.ndarray]:
    """This party's scores ``(n, width)`` of the rows whose status is OK (0 elsewhere), and the updated status:
    a row with a score beyond ``bound`` (or not finite) becomes :data:`OUT_OF_RANGE`."""
    n = len(status)
    u = np.zeros((n, share.width))
    ok = status == OK
    if ok.any():
        u[ok] = share.scores(values[ok])
    beyond = ok & ~(np.isfinite(u).all(axis=1) & (np.abs(u) <= bound).all(axis=1))
    status = np.where(beyond, OUT_OF_RANGE, status)
    u[status != OK] = 0.0
    return u, status


def encrypted_scores(layout: Layout, u: np.ndarray, role: str) -> dict:
    """A feature party's answer fields: ``[[u]]``, fresh, every id's ``width`` values in a row."""
    flat = u.ravel()
    if layout.packed:
        vector = encrypt_scores(layout.context, flat, layout.slots, what=f"party {role} score")
    else:
        vector = layout.context.encrypt(flat, what=f"party {role} score")
    return pack_vector(vector)


def summed(layout: Layout, answers: dict, n_values: int):
    """The sum ``sum_k [[u_k]]`` of the feature parties' ``scores`` messages (checked here), or None if none."""
    count, total = layout.ciphertexts(n_values), None
    for peer, message in answers.items():
        try:
            part = unpack_vector(layout.context, message, count)
        except ProtocolError as exc:
            raise ProtocolError(f"{peer} sent a malformed 'scores' message: {exc}") from None
        total = part if total is None else total + part
    return total


def masked_total(layout: Layout, total, u_b: np.ndarray, role: str) -> tuple[dict, object]:
    """The label party: ``[[u_B + R]] + total`` as the ``decrypt`` fields, and what removes the mask.

    ``total`` is the feature parties' ``sum_k [[u_k]]`` in the round's layout
    (:func:`summed`; private queries: :func:`vfl.serving.scorers.linear.packed_sum`), or None.
    Packed, ``R`` is uniform over Z_n per ciphertext and its fresh encryption
    re-randomizes the sum (:func:`~vfl.parties.linear.packed.mask_scores`).
    """
    context, flat = layout.context, u_b.ravel()
    if layout.packed:
        masked, masks = mask_scores(context, flat, layout.slots, what=f"party {role} score")
        if total is not None:
            masked = masked + total
            masked.fresh = True         # its own fresh encryption re-randomizes the sum
        return dict(pack_vector(masked), n_values=len(flat), **layout.fields()), masks
    if total is None:
        total = context.encrypt(np.zeros(len(flat)))
    masked, mask = context.mask(total + flat)      # the mask is a fresh encryption: re-randomized too
    return dict(pack_vector(masked), n_values=len(flat)), (mask, masked.exponent)


def unmasked(layout: Layout, message, secret, n_values: int, role: str) -> np.ndarray:
    """The label party: the scores from the coordinator's ``decrypted`` answer and its own mask."""
    residues = unpack_residues(layout.context, message, layout.ciphertexts(n_values))
    if layout.packed:
        return unmask_scores(layout.context, residues, secret, layout.slots, n_values, what=f"party {role} score")
    mask, exponent = secret
    return layout.context.unmask(residues, mask, exponent, what=f"party {role} score")


def decrypted(layout: Layout, coordinator: Context, message, peer: str, most: int) -> dict:
    """The coordinator: check a ``decrypt`` request against the public layout, decrypt, the answer's fields."""
    n_values = integer(message, "n_values", peer, 1, most)
    if layout.packed and any(message.fields.get(k) != v for k, v in layout.fields().items()):
        raise ProtocolError(f"{peer} packed the scores as {[message.fields.get(k) for k in layout.fields()]}, not "
                            f"as the settings say ({layout.fields()}); the parties' score_bound or frac_bits differ")
    vector = unpack_vector(coordinator, message, layout.ciphertexts(n_values))
    return pack_residues(coordinator.decrypt_residues(vector), coordinator)
