"""The release check: what a label party could rebuild from a feature party's per-row outputs, checked first.

Whatever a feature party sends per row that reaches the label party in the clear
(its partial score at prediction, the side of each of its splits for a tree, the
interactive part of a split network, its part of a scorecard score) is a
*release*: a function ``r = f(x)`` of its row ``x``.  A label party that already
knows some of the party's rows (its own customers who are also the party's,
say) can fit the inverse of ``f`` on them and apply it to every other row.  A
count of dimensions says nothing about that: a generic projection of a finite
set (0/1 indicators, codes, bins) or of a curve (``income`` beside
``log(income)``) is injective, so one number per row can give a row away whole.

So before a release leaves it, a feature party runs the attacks itself, on its
own rows and its own outputs (it holds both; it learns nothing new), with the
attacker's best case: it knows half the rows assessed and rebuilds the other
half.

* :func:`linear_attack` — least squares from the release to each column (the
  known-row regression; exact whenever the release is a linear image of the
  row of full rank);
* :func:`neighbour_attack` — each row takes the column values of the known row
  whose release is nearest (discrete decoding: rows with equal releases share
  their values; and the monotone fit of a one-dimensional release, whose
  nearest known row lies next to it on the curve).

A cell counts as recovered when the estimate is the value exactly (a *discrete*
column, at most :data:`DISCRETE_LEVELS` distinct values: the estimate is
snapped to the nearest value the column takes) or within :data:`TOLERANCE`
standard deviations (a continuous one).  The *baseline* is what the best
constant guess recovers without any release; :func:`assess` reports, per column,
the attack that gains most over it, and :func:`check_release` refuses when any
gain exceeds :data:`THRESHOLD` unless the party opted in.  Rows beyond
:data:`SAMPLE` are assessed on a sample (statistical error about 1% of rows).

What a party released before adds to what the label party holds: the
:class:`ReleaseLedger` keeps, per label party, each release's *function* in the
party's own units (:func:`linear_release`, :func:`split_release`,
:func:`network_release`, :func:`table_release`), and every check replays them
on the rows at hand and assesses the union.  A release under differential
privacy (:mod:`vfl.protocols.release_dp`) is assessed with its noise; its
budget composes in the same ledger.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree

from vfl.errors import ConfigurationError, DataError

#: A continuous cell is recovered when the estimate lies within this many of the column's standard deviations.
TOLERANCE = 0.01
#: A column with at most this many distinct values (each taken by two rows on average) is discrete: recovered means
#: the exact value.
DISCRETE_LEVELS = 32
#: The largest gain over the constant guess (a share of the rows assessed) any attack may have on any column.
THRESHOLD = 0.05
#: Rows assessed at most (half known to the attacker, half rebuilt); more rows are sampled.
SAMPLE = 20_000
#: Fewer rows than this cannot be assessed on their own: the check then needs the model's check on its training rows.
MIN_ROWS = 20
#: The principal directions of a release the local fit works in (a release of more dimensions is reduced to them).
LOCAL_DIMENSIONS = 12
#: The ledger's file in a party's work directory, and its format.
LEDGER_FILE = "release_ledger.json"
FORMAT = "vfl-release-ledger/1"

ATTACKS = {
    "linear": "a least-squares fit from its outputs to the column (known-row linear regression)",
    "neighbour": "matching each row to the known row with the nearest outputs (discrete decoding, monotone fit)",
    "local": "a least-squares fit on the known rows with the nearest outputs (inverting a non-linear map piece by piece)",
}

class ReleaseWarning(UserWarning):
    """A model whose release the check would refuse, found on its training rows (before anything is released)."""


_MEMORY: dict[str, dict] = {}      # in-process ledgers, by scope
_LOCK = threading.RLock()          # a check and its record happen as one


def clear_process_ledgers() -> None:
    """Forget every in-process ledger of this process (the test suite does, between independent tests)."""
    with _LOCK:
        _MEMORY.clear()


# ------------------------------------------------------------------------------------------- the attacks

def linear_attack(known_release, known_values, release) -> np.ndarray:
    """Estimates of ``release``'s rows' values: the least-squares map from release (and 1) to values, fitted on the
    known rows.  ``known_values`` is ``(k, d)``; returns ``(n, d)``."""
    design = np.column_stack([known_release, np.ones(len(known_release))])
    coef, *_ = np.linalg.lstsq(design, known_values, rcond=None)
    return np.column_stack([release, np.ones(len(release))]) @ coef


def neighbour_attack(known_release, known_values, release) -> np.ndarray:
    """Estimates of ``release``'s rows' values: those of the known row whose release is nearest.

    Releases of more than three dimensions are first projected on three fixed generic
    directions (a projection of a finite set or of a curve to three dimensions stays
    one-to-one, generically), their columns scaled to unit spread.
    """
    known_release, release = _as_points(known_release, release)
    _, nearest = cKDTree(known_release).query(release, k=1)
    return known_values[nearest]


def local_linear_attack(known_release, known_values, release) -> np.ndarray:
    """Estimates of ``release``'s rows' values: a least-squares fit on the known rows nearest in release space.

    The release is first reduced to its principal directions (at most
    :data:`LOCAL_DIMENSIONS`); each row then takes the affine map fitted on its
    ``2 (p + 1)`` nearest known rows.  A piecewise-linear release (a ReLU network's
    outputs) is linear on each of its pieces, so where the release is one-to-one
    this inverts it piece by piece.
    """
    known_release = np.asarray(known_release, dtype=np.float64).reshape(len(known_values), -1)
    release = np.asarray(release, dtype=np.float64).reshape(len(release), -1)
    centre = known_release.mean(axis=0)
    _, s, vt = np.linalg.svd(known_release - centre, full_matrices=False)
    keep = int(min(LOCAL_DIMENSIONS, np.count_nonzero(s > 1e-9 * max(s[0], 1e-300)))) if len(s) else 0
    if keep == 0:
        return np.broadcast_to(known_values.mean(axis=0), (len(release), known_values.shape[1])).copy()
    basis = vt[:keep].T / s[:keep] * np.sqrt(len(known_release))
    known_p, query_p = (known_release - centre) @ basis, (release - centre) @ basis
    k = min(len(known_p), 2 * (keep + 1))
    _, nearest = cKDTree(known_p).query(query_p, k=k)
    design = np.concatenate([known_p[nearest], np.ones(nearest.shape + (1,))], axis=2)     # (q, k, p + 1)
    targets = known_values[nearest]                                                           # (q, k, d)
    gram = design.transpose(0, 2, 1) @ design + 1e-9 * np.eye(keep + 1)
    coef = np.linalg.solve(gram, design.transpose(0, 2, 1) @ targets)                         # (q, p + 1, d)
    return np.einsum("qp,qpd->qd", np.column_stack([query_p, np.ones(len(query_p))]), coef)


def _as_points(known, query):
    known, query = np.atleast_2d(np.asarray(known, float).T).T, np.atleast_2d(np.asarray(query, float).T).T
    spread = known.std(axis=0)
    spread[spread == 0] = 1.0
    known, query = known / spread, query / spread
    if known.shape[1] > 3:
        basis = np.random.default_rng(20240917).standard_normal((known.shape[1], 3))   # fixed: not a secret
        known, query = known @ basis, query @ basis
    return known, query


# ------------------------------------------------------------------------------------------- assessing

@dataclass(frozen=True)
class Finding:
    """What one attack rebuilds of one column: the share of ``rows`` rows recovered, and a constant guess's share."""

    attack: str
    column: str
    share: float
    baseline: float
    rows: int = 0

    @property
    def gain(self) -> float:
        return max(0.0, self.share - self.baseline)

    @property
    def sure_gain(self) -> float:
        """The gain at the lower end of a 99% confidence interval of the share (Wilson's): a few rows rebuilt by
        chance in a small sample do not count as a finding."""
        if self.rows <= 0:
            return self.gain
        z, n, p = 2.326, self.rows, self.share
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(0.0, centre - half - self.baseline)


@dataclass
class Assessment:
    """Every column's worst finding, over ``rows`` rows assessed (of ``total``)."""

    rows: int
    total: int
    findings: list = field(default_factory=list)
    rows_given_away: float = 0.0         # rows every column of which some attack recovered

    def worst(self) -> Finding | None:
        return max(self.findings, key=lambda f: (f.sure_gain, f.gain), default=None)

    def passes(self, threshold: float = THRESHOLD) -> bool:
        worst = self.worst()
        return worst is None or worst.sure_gain <= threshold

    def to_dict(self) -> dict:
        return {"rows": self.rows, "total": self.total, "rows_given_away": round(self.rows_given_away, 6),
                "findings": [{"attack": f.attack, "column": f.column, "share": round(f.share, 6),
                              "baseline": round(f.baseline, 6), "rows": f.rows} for f in self.findings]}

    @classmethod
    def from_dict(cls, data: dict) -> Assessment:
        return cls(int(data["rows"]), int(data["total"]),
                   [Finding(f["attack"], f["column"], float(f["share"]), float(f["baseline"]), int(f.get("rows", 0)))
                    for f in data["findings"]], float(data.get("rows_given_away", 0.0)))


def assess(features, release, columns, sample: int = SAMPLE) -> Assessment:
    """Run every attack against ``columns`` of ``features`` (the party's rows) from ``release`` (its outputs).

    Rows with a missing value or release are left out of a column's count.  The
    split into known and rebuilt rows (and the sample beyond ``sample`` rows) is
    drawn from a generator seeded by the data: the same data gives the same
    verdict.  Returns an empty assessment for fewer than :data:`MIN_ROWS` rows.
    """
    x = np.asarray(features, dtype=np.float64)
    r = np.asarray(release, dtype=np.float64).reshape(len(x), -1)
    total = len(x)
    finite_release = np.all(np.isfinite(r), axis=1)
    x, r = x[finite_release], r[finite_release]
    if len(x) < MIN_ROWS or r.shape[1] == 0:
        return Assessment(len(x), total)
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(r[:4096].tobytes()).digest()[:8], "big"))
    order = rng.permutation(len(x))[:sample] if len(x) > sample else rng.permutation(len(x))
    x, r = x[order], r[order]
    half = len(order) // 2
    known, query = np.arange(half), np.arange(half, len(order))
    filled = np.where(np.isfinite(x), x, 0.0)          # a column's missing cells are not counted below
    estimates = {"linear": linear_attack(r[known], filled[known], r[query]),
                 "neighbour": neighbour_attack(r[known], filled[known], r[query]),
                 "local": local_linear_attack(r[known], filled[known], r[query])}
    findings, all_recovered = [], np.ones(len(query), dtype=bool)
    for j, name in enumerate(columns):
        column = x[:, j]
        valid = np.isfinite(column[query])
        values = column[np.isfinite(column)]
        if valid.sum() < MIN_ROWS // 2 or np.ptp(values) == 0:
            continue
        levels = np.unique(values)
        if len(levels) > min(DISCRETE_LEVELS, len(values) // 2):
            levels = None                         # continuous (few rows with distinct values are no codes)
        best = None
        recovered_any = np.zeros(len(query), dtype=bool)
        for attack, guess in estimates.items():
            hit = _recovered(guess[:, j], column[query], levels, values.std())
            hit &= valid
            recovered_any |= hit
            finding = Finding(attack, str(name), float(hit[valid].mean()), _baseline(values, levels),
                              int(valid.sum()))
            if best is None or (finding.sure_gain, finding.gain) > (best.sure_gain, best.gain):
                best = finding
        all_recovered &= recovered_any | ~valid
        findings.append(best)
    given_away = float(all_recovered.mean()) if findings else 0.0
    return Assessment(len(order), total, findings, given_away)


def _recovered(estimate, truth, levels, spread) -> np.ndarray:
    if levels is not None:
        at = np.clip(np.searchsorted(levels, estimate), 1, len(levels) - 1)
        snapped = np.where(np.abs(estimate - levels[at - 1]) <= np.abs(levels[at] - estimate),
                           levels[at - 1], levels[at])
        return snapped == truth
    with np.errstate(invalid="ignore"):
        return np.abs(estimate - truth) <= TOLERANCE * spread


def _baseline(values, levels) -> float:
    """The share of rows the best constant guess recovers: the commonest value, or the densest window."""
    if levels is not None:
        return float(np.unique(values, return_counts=True)[1].max() / len(values))
    ordered = np.sort(values)
    ends = np.searchsorted(ordered, ordered + 2 * TOLERANCE * values.std(), side="right")
    return float((ends - np.arange(len(ordered))).max() / len(values))


# ------------------------------------------------------------------------------------------- release functions

def linear_release(weights, offset=None) -> dict:
    """A linear release ``x W^T + c`` (``W``: one row per output, in the columns' own units)."""
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    c = np.zeros(len(w)) if offset is None else np.broadcast_to(np.asarray(offset, dtype=np.float64), (len(w),))
    return {"kind": "linear", "weights": w.tolist(), "offset": [float(v) for v in c]}


def split_release(splits) -> dict:
    """The sides of a party's splits: ``splits`` lists ``(column index, threshold, missing_left)``; each output is
    1 where the row goes left (``x <= threshold``, or missing and ``missing_left``)."""
    return {"kind": "splits", "splits": [[int(c), float(t), bool(m)] for c, t, m in splits]}


def network_release(layers) -> dict:
    """A network's outputs: ``layers`` lists ``(weights (in x out), bias, activation)``, applied in turn."""
    return {"kind": "network", "layers": [{"weights": np.asarray(w, dtype=np.float64).tolist(),
                                           "bias": np.asarray(b, dtype=np.float64).ravel().tolist(),
                                           "activation": str(a)} for w, b, a in layers]}


def table_release(tables) -> dict:
    """A sum of per-column table lookups (a scorecard part): ``tables`` lists ``(column index, edges, values,
    missing value)``; a value ``v`` takes ``values[searchsorted(edges, v, 'right')]``."""
    return {"kind": "table", "tables": [[int(j), [float(e) for e in edges], [float(v) for v in values],
                                         float(missing)] for j, edges, values, missing in tables]}


def reason_release(parts, named, sign: float) -> dict:
    """A feature party's reason codes: ``parts`` lists one release of one output per unit (its columns'
    contributions, :func:`linear_release` or :func:`table_release`); each row's output is the indicator, over the
    units ``named`` (the ones the party consents to name), of the unit of the largest ``sign * contribution``
    when that is positive (all zero when the largest is not named, or nothing pushes toward the adverse side)."""
    return {"kind": "reasons", "parts": [dict(p) for p in parts], "named": [int(j) for j in named],
            "sign": float(sign)}


_ACTIVATIONS = {"identity": lambda z: z, "relu": lambda z: np.maximum(z, 0.0), "tanh": np.tanh,
                "logistic": lambda z: 1.0 / (1.0 + np.exp(-z))}


def evaluate(spec: dict, features) -> np.ndarray:
    """The outputs ``spec`` gives for ``features`` (the party's rows in its own units), one row per row."""
    x = np.asarray(features, dtype=np.float64)
    kind = spec["kind"]
    if kind == "linear":
        return np.nan_to_num(x) @ np.asarray(spec["weights"]).T + np.asarray(spec["offset"])
    if kind == "splits":
        if not spec["splits"]:
            return np.zeros((len(x), 0))
        out = np.empty((len(x), len(spec["splits"])))
        for k, (j, threshold, missing_left) in enumerate(spec["splits"]):
            v = x[:, j]
            with np.errstate(invalid="ignore"):
                out[:, k] = np.where(np.isnan(v), bool(missing_left), v <= threshold)
        return out
    if kind == "network":
        h = np.nan_to_num(x)
        for layer in spec["layers"]:
            with np.errstate(over="ignore"):
                h = _ACTIVATIONS[layer["activation"]](h @ np.asarray(layer["weights"]) + np.asarray(layer["bias"]))
        return h
    if kind == "table":
        total = np.zeros(len(x))
        for j, edges, values, missing in spec["tables"]:
            v = x[:, j]
            at = np.clip(np.searchsorted(np.asarray(edges), np.nan_to_num(v), side="right"), 0, len(values) - 1)
            total += np.where(np.isnan(v), missing, np.asarray(values)[at])
        return total[:, None]
    if kind == "reasons":
        named = spec["named"]
        if not spec["parts"] or not named:
            return np.zeros((len(x), len(named)))
        values = spec["sign"] * np.column_stack([evaluate(p, x)[:, 0] for p in spec["parts"]])
        top = np.argmax(values, axis=1)
        top = np.where(values[np.arange(len(x)), top] > 0, top, -1)
        return (top[:, None] == np.asarray(named)[None, :]).astype(np.float64)
    raise DataError(f"a release of unknown kind {kind!r}")


def release_name(spec: dict, columns) -> str:
    """A release's name in the ledger: a digest of its function and columns (the same model again is one entry)."""
    text = json.dumps({"spec": spec, "columns": list(columns)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# ------------------------------------------------------------------------------------------- the ledger

class ReleaseLedger:
    """A feature party's record of every release it made, per label party.

    Parameters
    ----------
    party : str
        The feature party keeping it.
    path : path-like, optional
        The JSON file (``WORKDIR/release_ledger.json``, :meth:`at`).  Without one the
        record lives in this process only, under ``scope`` (:meth:`in_memory`).
    scope : str, optional
        The in-process record's name.

    The file holds ``{"format", "party", "releases": [{"label_party", "name",
    "columns", "spec", "what", "checked", "dp"}]}``: ``spec`` the release's function
    in the party's own units; ``checked`` the assessment on the rows of its first
    check (its training rows where the party checked it then); ``dp`` the
    differential-privacy parameters it was released under, or null.
    """

    def __init__(self, party: str, path=None, scope: str | None = None):
        self.party, self.path, self.scope = party, Path(path) if path is not None else None, scope

    @classmethod
    def at(cls, workdir, party: str) -> ReleaseLedger:
        return cls(party, path=Path(workdir) / LEDGER_FILE)

    @classmethod
    def in_memory(cls, party: str, scope: str) -> ReleaseLedger:
        return cls(party, scope=f"{party}|{scope}")

    def where(self) -> str:
        return str(self.path) if self.path is not None else "this process's release ledger"

    def _read(self) -> dict:
        empty = {"format": FORMAT, "party": self.party, "releases": []}
        if self.path is None:
            return json.loads(json.dumps(_MEMORY.get(self.scope, empty)))
        if not self.path.exists():
            return empty
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataError(f"party {self.party}: its release ledger {self.path} cannot be read ({exc}); it records "
                            "what this party released: restore it from a backup rather than delete it") from None
        if not (isinstance(data, dict) and data.get("format") == FORMAT and isinstance(data.get("releases"), list)
                and all(_valid_entry(e) for e in data["releases"])):
            raise DataError(f"party {self.party}: {self.path} is not a release ledger of format {FORMAT} (or an "
                            "entry is damaged); restore it from a backup rather than delete it")
        return data

    def _write(self, data: dict) -> None:
        if self.path is None:
            _MEMORY[self.scope] = data
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=self.path.parent, prefix=".ledger-", suffix=".json")
        with os.fdopen(handle, "w", encoding="utf-8") as out:      # mkstemp: owner-only
            json.dump(data, out)
        os.replace(name, self.path)

    def releases(self, label_party: str) -> list[dict]:
        return [e for e in self._read()["releases"] if e["label_party"] == label_party]

    def find(self, label_party: str, name: str) -> dict | None:
        found = [e for e in self.releases(label_party) if e["name"] == name]
        return found[-1] if found else None

    def record(self, label_party: str, name: str, columns, spec: dict, what: str, checked: Assessment | None,
               dp: dict | None = None) -> None:
        """Keep a release (replacing an entry of the same name, whose first check is kept)."""
        with _LOCK:
            data = self._read()
            before = [e for e in data["releases"] if e["label_party"] == label_party and e["name"] == name]
            data["releases"] = [e for e in data["releases"] if e not in before]
            kept = before[-1]["checked"] if before and before[-1].get("checked") else None
            data["releases"].append({"label_party": label_party, "name": name, "columns": list(columns),
                                     "spec": spec, "what": what, "dp": dp, "released": True,
                                     "checked": kept or (checked.to_dict() if checked else None)})
            self._write(data)


def _valid_entry(entry) -> bool:
    return (isinstance(entry, dict) and isinstance(entry.get("label_party"), str) and isinstance(entry.get("name"), str)
            and isinstance(entry.get("columns"), list) and isinstance(entry.get("spec"), dict)
            and entry["spec"].get("kind") in ("linear", "splits", "network", "table", "reasons"))


# ------------------------------------------------------------------------------------------- the check

def check_release(ledger: ReleaseLedger, label_party: str, columns, features, spec: dict, *, what: str,
                  allowed: bool, how: str, release=None, dp: dict | None = None, record: bool = True
                  ) -> Assessment:
    """Before ``what`` leaves the party: assess it with every earlier release to ``label_party``; refuse or record.

    Parameters
    ----------
    ledger : ReleaseLedger
        The party's ledger.
    label_party : str
        Who receives the release.
    columns : list of str
        The party's columns, in the order of ``features``.
    features : array (n, len(columns))
        The rows released, in the party's own units.
    spec : dict
        The release's function (:func:`linear_release`...).
    what : str
        What is released, in words ("its partial scores at prediction").
    allowed : bool
        The party's opt-in: the release goes out whatever the attacks get (and is recorded).
    how : str
        How the party opts in, for the refusal.
    release : array, optional
        The outputs actually sent (with DP noise, say); default: ``spec`` evaluated.
    dp : dict, optional
        The DP parameters of a noisy release (kept in the ledger; earlier noisy
        releases are not replayed without their noise: their budget counts instead).
    record : bool
        Keep the release in the ledger once it passes.

    Returns
    -------
    Assessment
        What the attacks got (empty when the rows were too few and the model's
        check on its training rows was used).
    """
    x = np.asarray(features, dtype=np.float64)
    name = release_name(spec, columns)
    pick = _sample(len(x), name)                  # the rows assessed: every release is evaluated on them only
    xs = x[pick]
    with _LOCK:
        outputs = [np.asarray(evaluate(spec, xs) if release is None else np.asarray(release)[pick],
                              dtype=np.float64).reshape(len(xs), -1)]
        for entry in ledger.releases(label_party):
            if (entry["name"] == name or entry.get("dp") or not entry.get("released", True)
                    or not set(entry["columns"]) <= set(columns)):
                continue
            index = [list(columns).index(c) for c in entry["columns"]]
            outputs.append(evaluate(entry["spec"], xs[:, index]).reshape(len(xs), -1))
        assessment = assess(xs, np.hstack(outputs), columns)
        assessment.total = len(x)
        if not assessment.findings:
            earlier = ledger.find(label_party, name)
            if earlier is None or not earlier.get("checked"):
                if not allowed and len(x) >= 1:
                    raise DataError(
                        f"party {ledger.party}: {len(x)} row(s) are too few to check what releasing {what} would "
                        f"let the label party {label_party} rebuild (at least {MIN_ROWS} are needed), and "
                        f"{ledger.where()} holds no check of this model on its training rows; release at least "
                        f"{MIN_ROWS} rows at once, check the model on the party's training rows first, or let "
                        f"{ledger.party} accept the release unchecked: {how}")
            else:
                assessment = Assessment.from_dict(earlier["checked"])
        if not allowed:
            refuse(ledger.party, label_party, what, assessment, how)
        if record:
            ledger.record(label_party, name, columns, spec, what, assessment if assessment.findings else None, dp)
        return assessment


def _sample(n: int, name: str) -> np.ndarray:
    """At most :data:`SAMPLE` of ``n`` rows, the same for the same release and row count (not a secret)."""
    if n <= SAMPLE:
        return np.arange(n)
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(f"{name}|{n}".encode()).digest()[:8], "big"))
    return np.sort(rng.choice(n, SAMPLE, replace=False))


def check_model(ledger: ReleaseLedger, label_party: str, columns, features, spec: dict, *, what: str) -> Assessment:
    """After training: assess a model's release on the party's training rows and keep the verdict (refusing
    nothing: nothing is released yet).  A later release of too few rows to assess uses it."""
    x = np.asarray(features, dtype=np.float64)
    name = release_name(spec, columns)
    xs = x[_sample(len(x), name)]
    with _LOCK:
        assessment = assess(xs, evaluate(spec, xs), columns)
        assessment.total = len(x)
        earlier = ledger.find(label_party, name)
        if assessment.findings and earlier is None:
            data = ledger._read()
            data["releases"].append({"label_party": label_party, "name": name, "columns": list(columns),
                                     "spec": spec, "what": what, "dp": None, "checked": assessment.to_dict(),
                                     "released": False})
            ledger._write(data)
        return assessment


def refuse(party: str, label_party: str, what: str, assessment: Assessment, how: str,
           threshold: float = THRESHOLD) -> None:
    """Raise the refusal if an attack in ``assessment`` gains more than ``threshold`` of the rows on some column."""
    if assessment.passes(threshold):
        return
    worst = assessment.worst()
    others = sorted({f.column for f in assessment.findings if f.sure_gain > threshold} - {worst.column})
    more = f" (and {len(others)} more column(s): {', '.join(map(repr, others[:5]))})" if others else ""
    raise ConfigurationError(
        f"party {party}: releasing {what} would let the label party {label_party} rebuild column {worst.column!r} "
        f"for {worst.share:.0%} of rows (a constant guess gets {worst.baseline:.0%}){more} by {ATTACKS[worst.attack]}, "
        f"knowing some of {party}'s rows; let {party} accept this: {how} — or add differential-privacy noise "
        f"(release_epsilon), give {party} more columns or a non-linear model, or leave it out (measured on "
        f"{assessment.rows} of its rows; {assessment.rows_given_away:.0%} of rows given away whole)")


# ------------------------------------------------------------------------------------------- a party's policy

@dataclass
class ReleasePolicy:
    """A feature party's choices for its per-row releases, and where it keeps their record.

    Parameters
    ----------
    party : str
        The feature party.
    ledger : ReleaseLedger
        Its release ledger.
    allowed : bool
        Its opt-in: a release the check would refuse goes out (and is recorded).
    how : str
        How it opts in, for refusals ("allow_reconstruction = true in its own
        [parties.telco] table").
    epsilon : float or None
        Differential privacy on every release (:mod:`vfl.protocols.release_dp`);
        None: none.
    delta : float
        DP failure probability of a Gaussian release.
    clip : float
        L2 bound on a row's real-valued release, in the release's units.
    budget : float
        The total epsilon over every DP version one label party may receive.
    key : NoiseKey or None
        The secret the noise is drawn from (required with ``epsilon``).
    """

    party: str
    ledger: ReleaseLedger
    allowed: bool = False
    how: str = "allow_reconstruction"
    epsilon: float | None = None
    delta: float = 1e-6
    clip: float = 4.0
    budget: float = 10.0
    key: object = None

    @classmethod
    def in_process(cls, party: str, scope: str, allowed: bool = False, how: str = "allow_reconstruction",
                   epsilon: float | None = None, delta: float = 1e-6, clip: float = 4.0,
                   budget: float = 10.0) -> ReleasePolicy:
        """A policy whose ledger and noise key live in this process (the estimators: one scope per data set)."""
        from vfl.protocols.release_dp import NoiseKey, check_parameters

        if epsilon is not None:
            check_parameters(epsilon, delta, clip)
        return cls(party, ReleaseLedger.in_memory(party, scope), allowed, how, epsilon, delta, clip, budget,
                   NoiseKey.in_memory(f"{party}|{scope}") if epsilon is not None else None)

    @classmethod
    def for_party(cls, entry, workdir) -> ReleasePolicy:
        """A party's policy from its ``federation.toml`` entry (``name``, ``allow_reconstruction``, ``release_dp``),
        its ledger and noise key in its work directory ``workdir``."""
        from vfl.protocols.release_dp import NoiseKey

        dp = entry.release_dp or {}
        return cls(entry.name, ReleaseLedger.at(workdir, entry.name), allowed=entry.allow_reconstruction,
                   how=f"allow_reconstruction = true in its own [parties.{entry.name}] table",
                   epsilon=dp.get("epsilon"), delta=dp.get("delta", 1e-6), clip=dp.get("clip", 4.0),
                   budget=dp.get("budget", 10.0), key=NoiseKey.at(workdir, entry.name) if dp else None)

    def named(self, what: str) -> str:
        """What a release is called in this party's messages (a scorecard's policy names its part of a score)."""
        return what

    def check_model(self, label_party: str, columns, features, spec: dict, what: str) -> Assessment:
        """:func:`check_model` with this party's ledger (a policy that views its releases through other columns,
        a scorecard's, overrides it and :meth:`release` alike)."""
        return check_model(self.ledger, label_party, columns, features, spec, what=what)

    def noised(self, exact, ids, version: str, bits: bool = False, compositions: int = 1
               ) -> tuple[np.ndarray, dict | None]:
        """``exact`` with this party's noise for ``ids`` in ``version`` (the same every time), and the DP record;
        without ``epsilon``, ``exact`` itself and None."""
        from vfl.protocols import release_dp

        exact = np.asarray(exact, dtype=np.float64)
        if self.epsilon is None:
            return exact, None
        if self.key is None:
            raise ConfigurationError(f"party {self.party}: release_epsilon needs the party's noise key")
        ids = list(range(len(exact))) if ids is None else list(ids)
        if bits:
            noisy, dp = release_dp.randomized_response(exact, ids, self.key, version, self.epsilon, self.party)
            return noisy.astype(np.float64).reshape(exact.shape), dp
        noisy, dp = release_dp.gaussian_release(exact, ids, self.key, version, self.epsilon, self.delta,
                                                self.clip, self.party, compositions)
        return noisy.reshape(exact.shape), dp

    def release(self, label_party: str, columns, features, spec: dict, what: str, *, ids=None, values=None,
                bits: bool = False, version: str | None = None, record: bool = True) -> np.ndarray:
        """What the party may send for ``features`` under ``spec``: checked, recorded, with DP noise if chosen.

        ``values`` are the exact outputs (default: ``spec`` evaluated); ``bits``:
        they are 0/1 (randomized response under DP); ``ids``: the rows' ids (DP draws
        each row's noise from its id; default: the rows' positions); ``version``: the
        model version the noise belongs to (default: the release's name).
        Returns the outputs to send, shape ``(n, outputs)``.
        """
        from vfl.protocols import release_dp

        x = np.asarray(features, dtype=np.float64)
        exact = np.asarray(evaluate(spec, x) if values is None else values, dtype=np.float64).reshape(len(x), -1)
        if self.epsilon is None:
            check_release(self.ledger, label_party, columns, x, spec, what=what, allowed=self.allowed, how=self.how,
                          release=exact, record=record)
            return exact
        version = version or release_name(spec, columns)
        noisy, dp = self.noised(exact, ids, version, bits)
        with _LOCK:
            name = release_name(spec, columns)
            earlier = [e["dp"] for e in self.ledger.releases(label_party) if e.get("dp") and e["name"] != name]
            release_dp.check_budget(self.party, label_party, earlier, dp, self.budget, self.how)
            check_release(self.ledger, label_party, columns, x, spec, what=what + f" (with noise, epsilon "
                          f"{self.epsilon:g})", allowed=self.allowed, how=self.how, release=noisy, dp=dp, record=record)
        return noisy
