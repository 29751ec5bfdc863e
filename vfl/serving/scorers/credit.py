"""The scorecard's round: the linear model's round, with each feature party's total decrypted on its own (masked,
as the sum is) so the reasons can name it; the scorecard's points, the reasons, the served rows' bins counted."""

from __future__ import annotations

import threading

import numpy as np

from vfl.deploy.shards.credit import read_shard
from vfl.errors import ProtocolError
from vfl.parties.binning import Binner
from vfl.parties.credit.scorecard import Coder, ScorecardScale, flat_codes
from vfl.parties.credit.statistics import population_stability
from vfl.parties.scaling import Standardizer
from vfl.runs.credit import PART, check_part
from vfl.runs.linear import raw_release
from vfl.serving.answers import outcome, theirs
from vfl.serving.scorers import linear


#: Its feature party answers the linear model's round request.
REQUEST, REFUSED = linear.REQUEST, linear.REFUSED


class PipelineShare:
    """One party's shard of the credit pipeline: raw columns -> bins -> model columns -> partial log-odds.

    ``scores(x)`` is its partial log-odds ``(n, 1)`` (the label party's with the
    intercept), a missing value taking its column's missing bin.  The label party's
    also gives each row's scorecard points per own column (:meth:`own_points`), the
    reasons a score fell short (:meth:`reasons`), and the population stability of
    the rows it served, per own column (:meth:`drift`).  Its rounds are the linear
    model's (:mod:`vfl.serving.scorers`: what every share has).
    """

    kind = "linear"
    complete = False
    keyed = True
    request = "score"
    inline_null = False
    noun = "linear model"
    objective = "logistic"
    width = 1
    #: its reasons are its own (:meth:`reasons`), whatever ``[serving] reasons`` says
    own_reasons = True
    reason_sign = 0.0
    reason_model = None
    #: reasons given per answer at most (adverse-action notices name up to four)
    REASONS = 4

    def __init__(self, shard: dict, version: str):
        self.version, self.role = version, shard["role"]
        self.columns = list(shard["columns"])
        self.trained_with = shard["trained_with"]
        self.binner = Binner.from_dict(shard["binning"])
        self.coder = Coder.from_dict(shard["coding"])
        model = shard["model"]
        self.released_columns = list(model["columns"])
        self.scaler = Standardizer.from_dict(model, len(self.released_columns), "model shard")
        self.coef = np.asarray([model["coef"]], dtype=np.float64)
        self.intercept = np.asarray([model.get("intercept") or 0.0]) if self.role == "label" else np.zeros(1)
        self.points = [np.asarray(p, dtype=np.float64) for p in shard["points"]]
        #: the most points its columns can give a row (a feature party tells the label party this, no more)
        self.best_points = float(sum(p.max() for p in self.points)) if self.points else 0.0
        self.bin_counts = [np.asarray(c, dtype=np.int64) for c in shard["bin_counts"]]
        self.classes = list(model["classes"]) if self.role == "label" else None
        if self.role == "label":
            card = shard["scorecard"]
            self.scale = ScorecardScale(card["base_score"], card["base_odds"], card["pdo"])
            self.base_points = float(self.scale.offset - self.scale.factor * self.intercept[0])
            #: best points of each feature party's columns, from its ``loaded`` answer
            self.feature_best: dict[str, float] = {}
            self.served = [np.zeros(len(c), dtype=np.int64) for c in self.bin_counts]
            self._lock = threading.Lock()

    def codes(self, x: np.ndarray) -> np.ndarray:
        """Each row's bin per column (missing: the column's last bin)."""
        return flat_codes(self.binner.transform(x, f"party {self.role}", self.columns), self.binner.n_bins_,
                          self.binner.missing_code)

    def scores(self, x: np.ndarray) -> np.ndarray:
        coded = self.scaler.apply(self.coder.transform(self.codes(x)))
        return coded @ self.coef.T + self.intercept

    def own_points(self, codes: np.ndarray) -> np.ndarray:
        """Points of each row's bin in each of its selected columns: ``(n, selected)``."""
        return np.column_stack([p[codes[:, j]] for j, p in zip(self.coder.selected, self.points)]) \
            if self.points else np.zeros((len(codes), 0))

    def reasons(self, codes_row: np.ndarray, parts: dict) -> list[dict]:
        """The label party: what cost a row the most points, worst first (at most :data:`REASONS`).

        Its own columns by name (the points their bins gave, and how far below their best);
        a feature party as one total (``parts``: its partial log-odds, whose points are
        ``-factor u``; below the best its columns can give, which it told).
        """
        found = []
        for j, p in zip(self.coder.selected, self.points):
            got = float(p[codes_row[j]])
            found.append({"column": self.columns[j], "points": round(got, 2), "short": round(p.max() - got, 2)})
        for peer, u in parts.items():
            got = float(-self.scale.factor * u)
            found.append({"party": peer, "points": round(got, 2),
                          "short": round(self.feature_best.get(peer, got) - got, 2)})
        found.sort(key=lambda r: -r["short"])
        return [r for r in found if r["short"] > 0.005][:self.REASONS]

    def count(self, codes: np.ndarray) -> None:
        """Count the served rows' bins (the label party's own columns), for :meth:`drift`."""
        with self._lock:
            for j, served in enumerate(self.served):
                served += np.bincount(codes[:, j], minlength=len(served))[:len(served)]

    def drift(self) -> dict[str, float]:
        """Population stability of the rows served so far against training's, per own column (none served: {})."""
        with self._lock:
            served = [c.copy() for c in self.served]
        if not served or served[0].sum() == 0:
            return {}
        return {c: float(population_stability(t, s)) for c, t, s in zip(self.columns, self.bin_counts, served)}

    def check_release(self, service, version: str, consent: dict, sign: float, tables: int) -> None:
        """At ``load``: the feature party's release check of its part of a score (one value per bin of its selected
        columns) over every row of its store, missing values included, against its raw columns and their bins
        (:func:`vfl.runs.credit.check_part`), recorded in its ledger; with DP, on the noisy parts."""
        ids, values = service.store.rows(self.columns)
        check_part(service.release, service.label, self.binner, self.coder, values,
                   raw_release(self.coef, self.scaler), what=f"{PART} in served version {version}", ids=list(ids),
                   values=self.scores(values), version=version)

    def answer(self, service, message) -> tuple:
        """Its answer to a ``score`` request: a linear model's (:func:`vfl.serving.scorers.linear.answer`)."""
        return linear.answer(service, self, message)

    def loaded_fields(self, role: str, sign: float) -> dict:
        """What its ``loaded`` answer adds: the best points of its columns, for the reasons' party totals."""
        return {"best_points": self.best_points}

    def payloads(self, values: np.ndarray, status: np.ndarray, layout, frac_bits: int, noise=None) -> np.ndarray:
        """Its private table's payloads: a linear model's (:func:`vfl.serving.scorers.linear.payloads`)."""
        return linear.payloads(self, layout, values, status, noise)

    def by_id_only(self, n_features: int) -> str:
        """Its rounds may always be private queries."""
        return ""

    def take_loaded(self, peer: str, answer, width: int, role: str) -> None:
        """A feature party's ``loaded`` answer: one model, and the best points of its columns."""
        linear.check_models(self, peer, width, role)
        best = answer.fields.get("best_points")
        if not isinstance(best, float) or not np.isfinite(best):
            raise ProtocolError(f"{peer} answered 'load' of a pipeline without the best points of its columns")
        self.feature_best[peer] = best

    def unexplained(self, n_features: int) -> str:
        """Its reasons are its own; never refused here."""
        return ""

    def check_explainable(self) -> None:
        """Its reasons are its own (:attr:`own_reasons`): ``[serving] reasons`` is not asked of it."""

    def outcome(self, z: np.ndarray) -> dict:
        """The scorecard's points, as ``vfl predict`` writes them."""
        p = float(1.0 / (1.0 + np.exp(-np.clip(z[0], -700, 700))))
        return {"score": float(self.scale.score(z[0])), "log_odds": float(z[0]), "probability": p,
                "prediction": self.classes[1] if p >= 0.5 else self.classes[0]}


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
