"""The scorecard's round: the linear model's round, with each feature party's total decrypted on its own (masked,
as the sum is) so the reasons can name it; the scorecard's points, the reasons, the served rows' bins counted."""

from __future__ import annotations

from vfl.deploy.shards.credit import read_shard
from vfl.serving.answers import outcome, theirs
from vfl.serving.models import PipelineShare
from vfl.serving.scorers import linear


def load_share(path, version: str, party: str, kind: str, features=()) -> PipelineShare:
    """Party ``party``'s share of ``version`` of the pipeline, from its shard at ``path`` (``kind``: its role),
    checked; ``features`` (the federation's feature parties) is not needed."""
    return PipelineShare(read_shard(path, party, kind), version)


def score(service, share, ids, values, status, deadline, answers) -> None:
    """Score the round's ids (see :mod:`vfl.serving.scorers`)."""
    linear.score(service, share, ids, values, status, deadline, answers, finish=_finish, per_party=True)


def _finish(service, share, ids, values, go, u_b, totals, their, round_id, deadline, answers, codes=None) -> None:
    parts = linear.party_totals(service, totals, len(go), round_id, deadline)
    z = u_b[go, 0] + sum(parts.values())
    bins = share.codes(values[go])
    share.count(bins)
    for j, i in enumerate(go):
        answers[i] = theirs(ids[i], their, j) or {
            "id": ids[i], **outcome(share, z[j:j + 1]),
            "reasons": share.reasons(bins[j], {k: float(u[j]) for k, u in parts.items()})}
