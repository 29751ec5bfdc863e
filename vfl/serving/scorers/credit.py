"""The scorecard's round: the linear model's round, with each feature party's total decrypted on its own (masked,
as the sum is) so the reasons can name it; the scorecard's points, the reasons, the served rows' bins counted."""

from __future__ import annotations

import numpy as np

from vfl.crypto import EncryptedVector
from vfl.serving.answers import outcome, theirs
from vfl.serving.rounds import masked_total, unmasked
from vfl.serving.scorers import linear


def score(service, share, ids, values, status, deadline, answers) -> None:
    """Score the round's ids (see :mod:`vfl.serving.scorers`)."""
    linear.score(service, share, ids, values, status, deadline, answers, finish=_finish, per_party=True)


def _finish(service, share, ids, values, go, u_b, totals, their, round_id, deadline, answers) -> None:
    layout, n = service.layout, len(go)
    block = layout.ciphertexts(n) * (len(layout.slots.widths) if layout.packed else 1)
    request, secret = masked_total(layout, EncryptedVector.concat(list(totals.values())),
                                   np.zeros(block * len(totals)), service.role)
    answer = service.ask(round_id, {service.coordinator: ("decrypt", "ciphertext", request)}, deadline)
    parts = unmasked(layout, answer[service.coordinator], secret, request["n_values"], service.role)
    parts = dict(zip(totals, parts.reshape(len(totals), block)[:, :n]))
    z = u_b[go, 0] + sum(parts.values())
    codes = share.codes(values[go])
    share.count(codes)
    for j, i in enumerate(go):
        answers[i] = theirs(ids[i], their, j) or {
            "id": ids[i], **outcome(share, z[j:j + 1]),
            "reasons": share.reasons(codes[j], {k: float(u[j]) for k, u in parts.items()})}
