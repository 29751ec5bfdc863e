"""One id's answer in a scoring round: its scores, or the error that kept it from being scored, by whom.

Shared by the label party's service (:mod:`vfl.serving.label`) and each family's round
(:mod:`vfl.serving.scorers`).
"""

from __future__ import annotations

import numpy as np

from vfl.errors import VFLError
from vfl.serving.messages import OK, STATUS_CODES, STATUS_TEXT


class RoundError(VFLError):
    """A round that could not be scored; every id in it gets this answer.

    ``status`` is the HTTP status the application gets (503: a party is
    unavailable or failed, 504: the deadline passed, 502: a peer broke the
    protocol), ``code`` a stable word for programs, ``party`` the party at fault.
    """

    def __init__(self, message: str, party: str | None, status: int = 503, code: str = "party_unavailable"):
        super().__init__(message)
        self.party, self.status, self.code = party, status, code


def theirs(key: str, their: dict, j: int) -> dict | None:
    """The first feature party's per-id reason not to score id ``j`` of the round, or None."""
    for peer, status in their.items():
        if status[j] != OK:
            return error(key, "peer", peer, status[j])
    return None


def error(key: str, whose: str, party: str, status: int) -> dict:
    """Id ``key``'s answer when ``party`` (``whose``: ``"own"``, the label party, or a ``"peer"``) could not give
    its part: the status's code and words."""
    if status == -1:
        return {"id": key, "error": {"code": "invalid_features", "party": party,
                                     "message": "the features given do not match the columns of the model version "
                                                "now in use"}}
    return {"id": key, "error": {"code": STATUS_CODES[int(status)], "party": party,
                                 "message": f"party {party} {STATUS_TEXT[int(status)]}"
                                 + (" (and no features were given inline)" if whose == "own" and status == 1 else "")}}


def outcome(share, z: np.ndarray) -> dict:
    """One id's answer from its raw scores, as ``share``'s family gives it (``share.outcome``): the score, and for
    classifiers the probabilities and class."""
    return share.outcome(np.asarray(z, dtype=np.float64))


def classified(z: np.ndarray, classes, regression: bool = False, one_vs_rest: bool = False) -> dict:
    """An answer from raw scores ``z`` (of one id): the score; of a classifier (``classes``), the probabilities and
    class: one score, its sigmoid; several, their softmax, or (``one_vs_rest``) each class's sigmoid, normalised;
    ``regression``: the score alone, whatever ``classes`` says."""
    if classes is None and len(z) > 1:          # a split network with several outputs
        return {"scores": {str(j): float(v) for j, v in enumerate(z)}}
    if classes is None or regression:
        return {"score": float(z[0])}
    if len(z) == 1:
        p = float(1.0 / (1.0 + np.exp(-np.clip(z[0], -700, 700))))
        return {"score": float(z[0]), "probability": p, "prediction": classes[1] if p >= 0.5 else classes[0]}
    if one_vs_rest:                             # each class's sigmoid, normalised
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -700, 700)))
    else:                                       # multinomial trees, split networks: softmax
        p = np.exp(z - z.max())
    p = p / p.sum()
    names = [str(c) for c in classes]
    return {"scores": dict(zip(names, map(float, z))), "probabilities": dict(zip(names, map(float, p))),
            "prediction": classes[int(np.argmax(z))]}
