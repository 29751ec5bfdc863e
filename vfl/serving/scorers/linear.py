"""A linear model's round: each feature party's encrypted partial scores (or its private table's), summed under
encryption with the label party's own, masked, decrypted by the coordinator, unmasked by the label party.

With reasons (``[serving] reasons``, :mod:`vfl.serving.reasons`) each feature party's total is decrypted on its own
instead of their sum, in the same one masked ``decrypt`` request (:func:`party_totals`), as the credit pipeline's
round does."""

from __future__ import annotations

import numpy as np

from vfl.crypto import EncryptedVector
from vfl.serving import messages, private, reasons
from vfl.serving.answers import error, outcome, theirs
from vfl.deploy.shards.linear import read_shard
from vfl.serving.messages import OK, pack_ids
from vfl.serving.models import LinearShare
from vfl.serving.rounds import masked_total, partial_scores, summed, unmasked


def load_share(path, version: str, party: str, kind: str, features=()) -> LinearShare:
    """Party ``party``'s share of ``version`` of a linear model, from its shard at ``path`` (``kind``: its role),
    checked; ``features`` (the federation's feature parties) is not needed."""
    return LinearShare(read_shard(path, party, kind), version)


def score(service, share, ids, values, status, deadline, answers, finish=None, per_party: bool = False) -> None:
    """Score the round's ids (see :mod:`vfl.serving.scorers`).

    ``finish(service, share, ids, values, go, u_b, totals, their, round_id, deadline, answers, codes)`` ends the
    round instead of the sum's decryption; ``per_party``: ``totals`` holds each feature party's encrypted total on
    its own (keyed by party) rather than their sum (keyed by ``""``); ``codes``: each consenting feature party's
    reason codes of the round's ids (by id only).  A version served with reasons ends in :func:`_with_reasons`.
    """
    if finish is None and share.reason_sign:
        finish, per_party = _with_reasons, True
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
    codes = {}
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
        if share.reason_sign:
            codes = {k: reasons.round_codes(replies[k], k, len(go), share.feature_reasons[k][1])
                     for k in service.features}
    if finish is not None:
        return finish(service, share, ids, values, go, u_b, totals, their, round_id, deadline, answers, codes)
    request, secret = masked_total(layout, totals[""], u_b[go], service.role)
    answer = service.ask(round_id, {service.coordinator: ("decrypt", "ciphertext", request)}, deadline)
    z = unmasked(layout, answer[service.coordinator], secret, request["n_values"], service.role)
    z = z.reshape(len(go), share.width)
    for j, i in enumerate(go):
        answers[i] = theirs(ids[i], their, j) or {"id": ids[i], **outcome(share, z[j])}


def party_totals(service, totals: dict, n: int, round_id: int, deadline: float) -> dict:
    """Each feature party's total of the round's ``n`` ids (``totals``: its encrypted total, one model, keyed by
    party), decrypted in one ``decrypt`` request under the label party's fresh masks, as the sum is otherwise."""
    layout = service.layout
    block = layout.ciphertexts(n) * (len(layout.slots.widths) if layout.packed else 1)
    request, secret = masked_total(layout, EncryptedVector.concat(list(totals.values())),
                                   np.zeros(block * len(totals)), service.role)
    answer = service.ask(round_id, {service.coordinator: ("decrypt", "ciphertext", request)}, deadline)
    parts = unmasked(layout, answer[service.coordinator], secret, request["n_values"], service.role)
    return dict(zip(totals, parts.reshape(len(totals), block)[:, :n]))


def _with_reasons(service, share, ids, values, go, u_b, totals, their, round_id, deadline, answers, codes) -> None:
    """End a round with reasons: the score is the label party's own plus every feature party's total."""
    parts = party_totals(service, totals, len(go), round_id, deadline)
    z = u_b[go, 0] + sum(parts.values())
    scored = [j for j in range(len(go)) if theirs(ids[go[j]], their, j) is None]
    ranked = reasons.linear(share, values[go[scored]], {k: u[scored] for k, u in parts.items()},
                            {k: c[scored] for k, c in codes.items() if c is not None},
                            service.settings.reasons) if scored else []
    given = dict(zip(scored, ranked))
    for j, i in enumerate(go):
        answers[i] = theirs(ids[i], their, j) or {"id": ids[i], **outcome(share, z[j:j + 1]),
                                                   "reasons": given[j]}
