"""A linear model's round: each feature party's encrypted partial scores (or its private table's), summed under
encryption with the label party's own, masked, decrypted by the coordinator, unmasked by the label party."""

from __future__ import annotations

import numpy as np

from vfl.crypto import EncryptedVector
from vfl.serving import messages, private
from vfl.serving.answers import error, outcome, theirs
from vfl.serving.messages import OK, pack_ids
from vfl.serving.rounds import masked_total, partial_scores, summed, unmasked


def score(service, share, ids, values, status, deadline, answers, finish=None, per_party: bool = False) -> None:
    """Score the round's ids (see :mod:`vfl.serving.scorers`).

    ``finish(service, share, ids, values, go, u_b, totals, their, round_id, deadline, answers)`` ends the round
    instead of the sum's decryption; ``per_party``: ``totals`` holds each feature party's encrypted total on its
    own (keyed by party) rather than their sum (keyed by ``""``).
    """
    layout = service.layout
    service.require(service.coordinator, layout is not None)
    u_b, status = partial_scores(share, values, status, layout.bound)
    go = np.flatnonzero(status == OK)
    for i in np.flatnonzero(status == messages.OUT_OF_RANGE):
        answers[i] = error(ids[i], "own", service.role, status[i])
    if not len(go):
        return
    chosen = [ids[i] for i in go]
    round_id = service.next_round()
    groups = {k: [k] for k in service.features} if per_party else {"": service.features}
    if service.private(share):
        opened = service.query_tables(share, service.features, chosen, deadline, round_id)
        their = {k: status for k, (status, _) in opened.items()}
        totals = {g: EncryptedVector(layout.context, private.packed_sum(layout, {k: opened[k] for k in ks},
                                                                        len(go), share.width),
                                     layout.context.frac_bits) for g, ks in groups.items()}
    else:
        fields = {"version": share.version, "key": layout.context.public_key.fingerprint,
                  "ids": pack_ids(chosen)}
        replies = service.ask(round_id, {k: ("score", "public", fields) for k in service.features}, deadline)
        their = {k: messages.statuses(replies[k], k, len(go)) for k in service.features}
        totals = {g: summed(layout, {k: replies[k] for k in ks}, len(go) * share.width)
                  for g, ks in groups.items()}
    if finish is not None:
        return finish(service, share, ids, values, go, u_b, totals, their, round_id, deadline, answers)
    request, secret = masked_total(layout, totals[""], u_b[go], service.role)
    answer = service.ask(round_id, {service.coordinator: ("decrypt", "ciphertext", request)}, deadline)
    z = unmasked(layout, answer[service.coordinator], secret, request["n_values"], service.role)
    z = z.reshape(len(go), share.width)
    for j, i in enumerate(go):
        answers[i] = theirs(ids[i], their, j) or {"id": ids[i], **outcome(share, z[j])}
