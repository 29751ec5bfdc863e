"""The score-span rule: what a feature party's scores reveal to the label party, counted in total.

The label party learns, per predicted row, every model's score; minus its own part
that is ``x W^T + c`` for a feature party's row ``x`` (``W`` its weights, one row per
score, in the units of its columns; ``c`` a constant).  Knowing a few of the party's
rows it solves for ``W`` and ``c``, and the scores then give the projection of every
other row onto the span of ``W``'s rows.  Once that span covers every direction in
which the party's rows vary (the numerical rank of its centred columns, not their
count: a duplicated column, a derived one or one quantity in two units adds none),
the label party recovers every row exactly.  Every model and every served version
adds its directions to what that label party holds, so the rule counts them all:

* :func:`column_rank`: the numerical rank of a party's columns (tolerance
  :data:`RANK_TOLERANCE`, in standard deviations);
* :class:`SpanLedger`: each feature party's own record, per label party, of the
  weight directions of every model whose scores it released to it (a small JSON file
  in its work directory, :data:`LEDGER_FILE`; in-process, a per-process record per
  party data set);
* :func:`check_training`, before training: the model's ``K`` scores plus what the
  ledger already holds must stay below the rank (a new model's directions are
  generically new ones);
* :func:`check_release`, before any score leaves the party (at every prediction, at
  every ``load`` of a served version), on the exact weights: the span of the
  ledger's directions and this model's must stay below the rank; the model is then
  recorded (a model trained and never used reveals nothing, and is not counted).

A party opts out of all of it (``allow_score_span``), as before.  The dimension of
a span of weight directions is an upper bound on what the scores reveal (a
direction along which the rows do not vary reveals nothing), so the rule errs
towards refusing.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path

import numpy as np

from vfl.errors import ConfigurationError, DataError

#: A direction along which a party's standardized rows spread (RMS) by less than this many standard
#: deviations is not counted in its rank: knowing the others, the label party knows every row to within it.
RANK_TOLERANCE = 1e-6
#: Weight directions (each scaled to unit length, columns equilibrated) whose singular values fall below this
#: fraction of the largest add no dimension to the span: the same direction served again, or a rescaled one.
SPAN_TOLERANCE = 1e-6
#: The ledger's file in a party's work directory, and its format.
LEDGER_FILE = "score_span_ledger.json"
FORMAT = "vfl-score-span-ledger/1"

_MEMORY: dict[str, dict] = {}        # the per-process ledgers of in-process runs, by scope
_LOCK = threading.RLock()       # a check and its record happen as one (concurrent loads of versions)


def clear_process_ledgers() -> None:
    """Forget every in-process ledger of this process (the test suite does, between independent tests).

    In-process every party runs in one process, under one user: the process ledger
    applies the rule to what one session does, it does not guard a party against
    that user.  ``vfl party`` and ``vfl serve`` keep theirs on disk.
    """
    with _LOCK:
        _MEMORY.clear()


def column_rank(features) -> int:
    """The numerical rank of a party's centred columns (rows with a missing value left out).

    The columns are centred and scaled to unit variance (constant ones dropped), and
    the singular values of ``Z / sqrt(n)`` above :data:`RANK_TOLERANCE` are counted:
    each is the RMS spread of the rows, in standard deviations, along one direction.
    """
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] == 0:
        return 0
    x = x[np.all(np.isfinite(x), axis=1)]
    if len(x) < 2:
        return 0
    with np.errstate(over="ignore", invalid="ignore"):     # a value too large to square: refused by the range check
        centred = x - x.mean(axis=0)
        spread = centred.std(axis=0)
    keep = (spread > 0) & np.isfinite(spread)
    if not keep.any():
        return 0
    z = centred[:, keep] / spread[keep] / np.sqrt(len(x))
    if len(z) > z.shape[1]:
        z = np.linalg.qr(z, mode="r")
    return int(np.count_nonzero(np.linalg.svd(z, compute_uv=False) > RANK_TOLERANCE))


def span_dimension(directions) -> int:
    """The dimension of the span of the rows of ``directions`` (tolerance :data:`SPAN_TOLERANCE`)."""
    w = np.asarray(directions, dtype=np.float64)
    if w.size == 0:
        return 0
    w = np.nan_to_num(w, nan=0.0, posinf=0.0, neginf=0.0)
    size = np.abs(w).max(axis=0)
    w = w / np.where(size > 0, size, 1.0)                       # columns in comparable units
    norms = np.linalg.norm(w, axis=1)
    w = w[norms > 0] / norms[norms > 0, None]
    if not len(w):
        return 0
    s = np.linalg.svd(w, compute_uv=False)
    return int(np.count_nonzero(s > SPAN_TOLERANCE * s[0]))


def raw_directions(coef, scale=None) -> np.ndarray:
    """A model's weights in the units of the party's own columns (one row per score): ``coef / scale``."""
    w = np.atleast_2d(np.asarray(coef, dtype=np.float64))
    return w if scale is None else w / np.asarray(scale, dtype=np.float64)


def model_name(directions, fallback: str) -> str:
    """A model's name in the ledger: a digest of its directions (the same model served again is the same entry),
    or ``fallback`` when the party does not know them."""
    if directions is None:
        return fallback
    return hashlib.sha256(np.ascontiguousarray(directions, dtype=np.float64).tobytes()).hexdigest()[:32]


class SpanLedger:
    """A feature party's record of the weight directions it has revealed, per label party.

    Parameters
    ----------
    path : path-like, optional
        The JSON file (``WORKDIR/score_span_ledger.json``, :meth:`at`).  Without one,
        the record lives in this process only, under ``scope`` (:meth:`in_memory`).
    scope : str, optional
        The in-process record's name.
    party : str
        The feature party keeping it.

    The file holds ``{"format", "party", "ranks": [{"columns", "rank"}], "models":
    [{"label_party", "model", "columns", "scores", "directions"}]}``: ``directions``
    one list of weights per score (in the columns' own units), or ``null`` when the
    party does not know its weights (a model that stays shared: counted as ``scores``
    new dimensions).
    """

    def __init__(self, party: str, path=None, scope: str | None = None):
        self.party, self.path, self.scope = party, Path(path) if path is not None else None, scope

    @classmethod
    def at(cls, workdir, party: str) -> SpanLedger:
        """The ledger in ``workdir`` (the party's own work directory)."""
        return cls(party, path=Path(workdir) / LEDGER_FILE)

    @classmethod
    def in_memory(cls, party: str, scope: str) -> SpanLedger:
        """This process's record for ``scope`` (in-process runs: one per feature party data set)."""
        return cls(party, scope=f"{party}|{scope}")

    # -- storage --------------------------------------------------------------------------------
    def _read(self) -> dict:
        empty = {"format": FORMAT, "party": self.party, "ranks": [], "models": []}
        if self.path is None:
            return json.loads(json.dumps(_MEMORY.get(self.scope, empty)))
        if not self.path.exists():
            return empty
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataError(f"party {self.party}: its score-span ledger {self.path} cannot be read ({exc}); "
                            "it records what this party revealed: restore it rather than delete it") from None
        if not (isinstance(data, dict) and data.get("format") == FORMAT and isinstance(data.get("ranks"), list)
                and isinstance(data.get("models"), list)):
            raise DataError(f"party {self.party}: {self.path} is not a score-span ledger (format {FORMAT})")
        return data

    def _write(self, data: dict) -> None:
        if self.path is None:
            _MEMORY[self.scope] = data
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=self.path.parent, prefix=".ledger-", suffix=".json")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=1)
        os.replace(name, self.path)

    # -- what it holds --------------------------------------------------------------------------
    def rank(self, columns) -> int | None:
        """The rank recorded for exactly these columns (at training), or None."""
        found = [r["rank"] for r in self._read()["ranks"] if r.get("columns") == list(columns)]
        return int(found[-1]) if found else None

    def set_rank(self, columns, rank: int) -> None:
        with _LOCK:
            data = self._read()
            data["ranks"] = [r for r in data["ranks"] if r.get("columns") != list(columns)]
            data["ranks"].append({"columns": list(columns), "rank": int(rank)})
            self._write(data)

    def revealed(self, label_party: str, columns, directions=None, n_scores: int = 0,
                 exclude: str | None = None) -> tuple[int, list]:
        """The dimension revealed to ``label_party`` with one more model, and the union of the columns.

        ``directions`` (``K x len(columns)``) are that model's; ``None`` with
        ``n_scores`` counts ``n_scores`` new dimensions.  The entry ``exclude`` (the
        same model, recorded before) is left out.
        """
        models = [m for m in self._read()["models"]
                  if m.get("label_party") == label_party and m.get("model") != exclude]
        union = list(columns) + sorted({c for m in models for c in m["columns"]} - set(columns))
        rows, unknown = [], 0
        for cols, dirs, k in [(m["columns"], m["directions"], m["scores"]) for m in models] + \
                [(list(columns), None if directions is None else np.atleast_2d(directions).tolist(), n_scores)]:
            if dirs is None:
                unknown += int(k)
                continue
            embedded = np.zeros((len(dirs), len(union)))
            embedded[:, [union.index(c) for c in cols]] = np.asarray(dirs, dtype=np.float64)
            rows.append(embedded)
        known = span_dimension(np.vstack(rows)) if rows else 0
        return min(known + unknown, len(union)), union

    def record(self, label_party: str, model: str, columns, directions=None, n_scores: int = 1) -> None:
        """Keep ``model``'s directions (``None``: its ``n_scores`` scores, weights unknown), replacing its entry."""
        with _LOCK:
            data = self._read()
            data["models"] = [m for m in data["models"]
                              if not (m.get("label_party") == label_party and m.get("model") == model)]
            dirs = None if directions is None else [[float(v) for v in row] for row in np.atleast_2d(directions)]
            data["models"].append({"label_party": label_party, "model": model, "columns": list(columns),
                                   "scores": int(n_scores), "directions": dirs})
            self._write(data)


def check_training(ledger: SpanLedger, label_party: str, columns, rank: int, n_scores: int, model: str,
                   allowed: bool, how: str) -> None:
    """Before training: refuse a model whose ``n_scores`` scores, with what ``ledger`` holds, reach ``rank``.

    Records ``rank`` for ``columns``.  A new model's directions are counted as new
    ones (they generically are); :func:`check_release` counts them exactly.
    """
    with _LOCK:
        ledger.set_rank(columns, rank)
        if allowed:
            return
        total, union = ledger.revealed(label_party, columns, None, n_scores, exclude=model)
        _refuse(ledger.party, label_party, columns, union, rank, n_scores, total, how)


def check_release(ledger: SpanLedger, label_party: str, columns, directions, n_scores: int, model: str,
                  allowed: bool, how: str, rank: int | None = None) -> None:
    """Before scores leave the party: refuse if the span of every model's directions reaches the rank; else record.

    ``directions`` (``n_scores x len(columns)``, the columns' own units), or ``None``
    when the party does not know its weights.  ``rank`` defaults to the one recorded
    for ``columns`` at training, else their count.
    """
    with _LOCK:
        rank = rank if rank is not None else ledger.rank(columns)
        rank = len(columns) if rank is None else rank
        if not allowed:
            total, union = ledger.revealed(label_party, columns, directions, n_scores, exclude=model)
            _refuse(ledger.party, label_party, columns, union, rank, n_scores, total, how)
        ledger.record(label_party, model, columns, directions, n_scores)


def check_scorecard_part(party: str, label_party: str, selected, allowed: bool, how: str) -> None:
    """Refuse a scorecard in which feature party ``party``'s part of the score is a function of one column.

    That part takes one value per bin of the column, so the label party groups the
    scored rows by that column's bin, and the WOE step gave it each bin's event rate:
    it learns every scored row's bin (decile, with ten quantile bins) of the column
    (measured in tests/credit/test_credit_pipeline.py and docs/credit_scoring.md).
    The floor is two selected columns (or the party's opt-in, ``how``).
    """
    if allowed or len(selected) != 1:
        return
    raise ConfigurationError(
        f"party {party}: its only selected column {selected[0]!r} makes its part of every scorecard score one value "
        f"per bin of that column, so the label party {label_party} would learn each scored row's bin of "
        f"{selected[0]!r} (and, from the WOE step, that bin's event rate). Select at least two of {party}'s columns "
        f"(lower the selection bounds), leave {party} out, or let {party} accept this: {how}")


def _refuse(party: str, label_party: str, columns, union, rank: int, n_scores: int, total: int, how: str) -> None:
    """The refusal, if ``total`` revealed dimensions reach the rank of ``party``'s columns (the union's, bounded)."""
    bound = rank + len(union) - len(columns)            # each column beyond this model's adds one at most
    if bound == 0 or total < bound:
        return
    what = f"{n_scores} one-vs-rest scores" if n_scores > 1 else "one score"
    earlier = total - min(total, n_scores)
    history = f" and {party}'s earlier models with {label_party} {earlier} more (its score-span ledger)" if earlier else ""
    raise ConfigurationError(
        f"party {party}: the model gives the label party {label_party} {what} per predicted row{history}, not "
        f"fewer than the rank {bound} of {party}'s {len(union)} column(s), so {label_party} could recover "
        f"{party}'s rows from the scores (knowing {bound + 1} of them). Let {party} accept this: {how}")
