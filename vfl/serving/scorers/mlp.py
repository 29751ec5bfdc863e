"""A split network's round: each feature party's part of the interactive layer, masked (the coordinator deals
masks that cancel in the sum, with two feature parties or more) or from its private table (one feature party);
the label party sums them, decodes, and runs its own bottom and the top; with reasons (one feature party only), the
parties' Shapley values from the same part (:func:`vfl.serving.reasons.network`)."""

from __future__ import annotations

import secrets
import time

import numpy as np

from vfl.crypto import ring
from vfl.errors import ProtocolError
from vfl.serving import messages, private, reasons
from vfl.serving.answers import error, outcome, theirs
from vfl.deploy.shards.mlp import read_shard
from vfl.serving.messages import OK, TOKEN_BYTES, pack_ids
from vfl.serving.models import MLPShare


def load_share(path, version: str, party: str, kind: str, features=()) -> MLPShare:
    """Party ``party``'s share of ``version`` of a split network, from its shard at ``path`` (``kind``: its role),
    checked; ``features``: the federation's feature parties, which the label party's network must name."""
    return MLPShare(read_shard(path, party, kind), version, features)


def score(service, share, ids, values, status, deadline, answers) -> None:
    """Score the round's ids (see :mod:`vfl.serving.scorers`)."""
    masked = service.coordinator is not None
    if masked:
        service.require(service.coordinator)
    go = np.flatnonzero(status == OK)
    if not len(go):
        return
    frac_bits = service.config.training.frac_bits
    if service.private(share):                     # one feature party (two or more are served by id)
        opened = service.query_tables(share, service.features, [ids[i] for i in go], deadline, service.next_round())
        their = {k: status for k, (status, _) in opened.items()}
        parts = private.summed_parts(opened, len(go), share.units, frac_bits)
        return _answers(service, share, ids, values, go, their, parts, answers)
    fields = {"version": share.version, "ids": pack_ids([ids[i] for i in go]),
              "wait_ms": max(1, int((deadline - time.monotonic()) * 1000))}
    requests = {k: ("part", "public", fields) for k in service.features}
    if masked:                                  # the coordinator learns the count of ids, nothing else
        fields["token"] = secrets.token_bytes(TOKEN_BYTES)
        requests[service.coordinator] = ("deal", "public", {"rows": len(go), "units": share.units,
                                                            "token": fields["token"]})
    replies = service.ask(service.next_round(), requests, deadline)
    their = {k: messages.statuses(replies[k], k, len(go)) for k in service.features}
    parts = summed_parts(replies, service.features, (len(go), share.units), frac_bits)
    _answers(service, share, ids, values, go, their, parts, answers)


def _answers(service, share, ids, values, go, their, parts, answers) -> None:
    scored = np.flatnonzero(np.all([s == OK for s in their.values()], axis=0))
    raw = share.raw(values[go][scored], parts[scored])
    given = {}
    if share.reason_sign and len(scored):       # one feature party: its part, as received (reasons.check)
        given = dict(zip(scored.tolist(), reasons.network(share, values[go][scored], parts[scored],
                                                          service.settings.reasons)))
    at = {int(j): r for r, j in enumerate(scored)}
    for j, i in enumerate(go):
        failed = theirs(ids[i], their, j)
        if failed is None and not np.isfinite(raw[at[j]]).all():
            failed = error(ids[i], "own", service.role, messages.OUT_OF_RANGE)
        answers[i] = failed or {"id": ids[i], **outcome(share, raw[at[j]]),
                                **({"reasons": given[j]} if share.reason_sign else {})}


def summed_parts(replies: dict, features: list, shape: tuple, frac_bits: int) -> np.ndarray:
    """The sum of the feature parties' ``part`` answers (their masks cancel), decoded: all the label party sees."""
    total = np.zeros(shape, dtype=object)
    for k in features:
        values = replies[k].fields.get("values")
        try:
            total = total + ring.from_bytes(values if isinstance(values, bytes) else b"", shape)
        except ProtocolError as exc:
            error = ProtocolError(f"{k} sent a malformed 'part' message: {exc}")
            error.party = k
            raise error from None
    return ring.decode(ring.reduce(total), frac_bits)
