"""Trees' round: each feature party that owns splits sends, per id, the leaves its splits allow (or its private
table's sealed masks); the label party intersects them with its own splits and sums the leaves; with reasons, the
parties' Shapley values from the same masks (:func:`vfl.serving.reasons.trees`)."""

from __future__ import annotations

import numpy as np

from vfl.protocols.trees.training import unbits
from vfl.serving import messages, private, reasons
from vfl.serving.answers import outcome, theirs
from vfl.deploy.shards.trees import read_shard
from vfl.serving.messages import OK, pack_ids
from vfl.serving.models import TreeShare


def load_share(path, version: str, party: str, kind: str, features=()) -> TreeShare:
    """Party ``party``'s share of ``version`` of a tree ensemble, from its shard at ``path`` (``kind``: its role),
    checked; ``features``: the federation's feature parties, which the label party's trees must name."""
    return TreeShare(read_shard(path, party, kind), version, features)


def score(service, share, ids, values, status, deadline, answers) -> None:
    """Score the round's ids (see :mod:`vfl.serving.scorers`)."""
    go = np.flatnonzero(status == OK)
    if not len(go):
        return
    chosen, asked = [ids[i] for i in go], [k for k in service.features if share.owners[k]]
    round_id = service.next_round()
    masks = {k: np.ones((len(go), share.widths[k]), dtype=bool) for k in share.feature_parties}
    if service.private(share):
        opened = service.query_tables(share, asked, chosen, deadline, round_id)
        their = {k: status for k, (status, _) in opened.items()}
        for k, (status, bodies) in opened.items():
            masks[k] = private.leaf_masks(status, bodies, share.widths[k])
    else:
        replies = service.ask(round_id, {k: ("leaves", "public", {
            "version": share.version, "ids": pack_ids(chosen),
            "trees": np.asarray(share.owners[k], dtype=np.int64)}) for k in asked}, deadline)
        their = {k: messages.statuses(replies[k], k, len(go)) for k in asked}
        for k in asked:
            masks[k] = unbits(replies[k], len(go) * share.widths[k]).reshape(len(go), share.widths[k])
    scored = np.flatnonzero(np.all([s == OK for s in their.values()], axis=0)) if their else np.arange(len(go))
    masks = {k: m[scored] for k, m in masks.items()}
    raw = share.raw(values[go][scored], masks) if len(scored) else None
    given = {}
    if share.reason_sign and len(scored):         # the same masks: the parties' Shapley values, no message more
        given = dict(zip(scored.tolist(), reasons.trees(share, share.codes(values[go][scored]), masks,
                                                        service.settings.reasons)))
    at = {int(j): r for r, j in enumerate(scored)}
    for j, i in enumerate(go):
        answers[i] = theirs(ids[i], their, j) or {"id": ids[i], **outcome(share, raw[at[j]]),
                                                   **({"reasons": given[j]} if share.reason_sign else {})}
