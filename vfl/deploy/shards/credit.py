"""One party's share of a fitted credit-scoring pipeline, as JSON: only its own bins, WOE values and points.

Format ``vfl-pipeline-shard/1`` (written by the estimators' ``shards()`` and by
``vfl party``, read by ``vfl predict``)::

    format, party, role ("feature" or "label"), columns (every input column), trained_with
    binning       its thresholds per column (:meth:`Binner.to_dict`)
    bin_counts    its training rows per bin of every column (missing last): the baseline of the PSI
    selected      indices of its selected columns
    iv            what it knows of IVs: the label party every party's ({party: [IV per column]}),
                  a feature party its own only with share_woe (else absent)
    coding        its model columns from its bins (:class:`~vfl.parties.credit.scorecard.Coder`)
    model         its model columns' names, weights (for standardized columns) and standardization;
                  the label party also the intercept, label, classes
    points        per selected column, the points of every bin (missing last)
    scorecard     the label party only: the anchors and the base points

No shard holds another party's thresholds, WOE values, weights or points.
"""

from __future__ import annotations

import numpy as np

from vfl.crypto.encoding import MAX_PARAMETER
from vfl.deploy.jsonfile import read_json
from vfl.errors import DataError
from vfl.parties.binning import Binner
from vfl.parties.credit.scorecard import Coder, ScorecardScale

FORMAT = "vfl-pipeline-shard/1"


def build(party: str, role: str, columns, binner: Binner, bin_counts, coder: Coder, model: dict, points,
          fingerprint: str = "", iv=None, scorecard: dict | None = None) -> dict:
    """The JSON-ready shard (see the module docstring)."""
    shard = {"format": FORMAT, "party": party, "role": role, "columns": [str(c) for c in columns],
             "trained_with": fingerprint, "binning": binner.to_dict(),
             "bin_counts": [[int(v) for v in c] for c in bin_counts], "selected": list(coder.selected),
             "coding": coder.to_dict(), "model": model, "points": [[float(v) for v in p] for p in points]}
    if iv is not None:
        shard["iv"] = iv
    if scorecard is not None:
        shard["scorecard"] = scorecard
    return shard


def read_shard(path, party: str, role: str) -> dict:
    """Read and check party ``party``'s pipeline shard; a :class:`DataError` naming the file and the field."""
    shard = read_json(path, "model shard")
    try:
        return check(shard, party, role, str(path))
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path}: not a valid pipeline shard: {exc}") from None


def check(shard: dict, party: str, role: str, where: str = "the shard") -> dict:
    """Raise ``ValueError`` naming the first field that does not hold together; return the shard."""
    if shard.get("format") != FORMAT or shard.get("party") != party:
        raise ValueError(f"{where} is not party {party}'s pipeline shard (format {shard.get('format')!r}, party "
                         f"{shard.get('party')!r})")
    if shard.get("role") != role:
        raise ValueError(f"{where} is a {shard.get('role')!r} party's shard; party {party} is the {role} party")
    columns = shard["columns"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise ValueError("'columns' must be a list of names")
    binner = Binner.from_dict(shard["binning"])
    if len(binner.thresholds_) != len(columns) or any(not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0)
                                                      for t in binner.thresholds_):
        raise ValueError("'binning' must hold ascending finite thresholds, one list per column")
    sizes = (binner.n_bins_ + 1).tolist()
    counts = shard["bin_counts"]
    if len(counts) != len(columns) or any(len(c) != s for c, s in zip(counts, sizes)):
        raise ValueError("'bin_counts' must hold the rows of every bin of every column")
    coder = Coder.from_dict(shard["coding"])
    if coder.sizes != sizes or coder.selected != shard["selected"]:
        raise ValueError("'coding' does not fit the binning and the selected columns")
    model = shard["model"]
    names = coder.names
    coef, mean, scale = (np.asarray(model.get(k, []), dtype=np.float64) for k in ("coef", "mean", "scale"))
    if model.get("columns") != names or not (len(coef) == len(mean) == len(scale) == len(names)) \
            or not _parameters(coef) or not np.all(np.isfinite(mean)) or not np.all(np.isfinite(scale)) \
            or not np.all(scale > 0):
        raise ValueError("'model' must hold a finite weight (within 2**256), mean and positive finite scale per "
                         "model column")
    points = shard["points"]
    if len(points) != len(coder.selected) or any(len(p) != sizes[j] or not _parameters(p)
                                                  for p, j in zip(points, coder.selected)):
        raise ValueError("'points' must hold finite points (within 2**256) for every bin of every selected column")
    if role == "label":
        card = shard["scorecard"]
        ScorecardScale(card["base_score"], card["base_odds"], card["pdo"])
        if not _parameters(card["base_points"]) or not _parameters(model["intercept"]):
            raise ValueError("the base points and the intercept must be finite (within 2**256)")
        if len(model.get("classes", [])) != 2:
            raise ValueError("'model' must name the label's two classes")
    return shard


def _parameters(values) -> bool:
    """Whether ``values`` are finite numbers within :data:`~vfl.crypto.encoding.MAX_PARAMETER`."""
    values = np.asarray(values, dtype=np.float64)
    return bool(np.all(np.abs(values) <= MAX_PARAMETER))


def board_view(model: dict, result: dict) -> list[dict]:
    """What the board shows of a recorded shard (``model.json`` of a training run) and its ``result.json``: plain
    data, drawn by the board (the views' kinds are those of :mod:`vfl.deploy.shards`).

    The information value and selection of the party's own columns; at the label party, every party's IVs
    ranked; the scorecard of its selected columns: each bin's range, training rows, WOE and points.
    """
    columns = model.get("columns", [])
    order = list(model.get("selected", []))        # the order of the WOE values and points
    selected = set(order)
    thresholds = (model.get("binning") or {}).get("thresholds", [])
    counts = model.get("bin_counts", [])
    ivs = result.get("iv") if result.get("iv") is not None else model.get("iv")
    party = model.get("party")
    own_iv = ivs.get(party) if isinstance(ivs, dict) else ivs if isinstance(ivs, list) else None
    plan = (result.get("plan") or {}).get(party) if isinstance(result.get("plan"), dict) else None
    rows = []
    for j, name in enumerate(columns):
        row = {"column": name, "bins": len(counts[j]) if j < len(counts) else "",
               "IV": own_iv[j] if own_iv is not None and j < len(own_iv) else "–",
               "selected": "yes" if j in selected else "no"}
        if plan is not None and j < len(plan) and not plan[j] and j not in selected:
            row["selected"] = "no (IV or correlation rules)"
        rows.append(row)
    views = [{"kind": "table", "title": "Information value and selection (its own columns)", "id": "iv",
              "rows": rows}]
    if isinstance(ivs, dict) and len(ivs) > 1:
        ranked = sorted(((iv, p, j) for p, values in ivs.items() for j, iv in enumerate(values)), reverse=True)
        names = {party: columns}
        views.append({"kind": "table", "title": "Information value of every party's columns", "id": "iv-all",
                      "rows": [{"party": p, "column": names[p][j] if p in names else f"column {j + 1}", "IV": iv,
                                "selected": "yes" if (result.get("plan") or {}).get(p, [True] * (j + 1))[j]
                                else "no"} for iv, p, j in ranked]})
    tables = [{"heading": columns[j], "rows": _bins(model, k, j, thresholds, counts)} for k, j in enumerate(order)]
    if tables:
        base = (model.get("scorecard") or {}).get("base_points")
        views.append({"kind": "tables", "title": "Scorecard: its bins, WOE and points", "id": "scorecard",
                      "note": f"base points {base:.2f}" if isinstance(base, (int, float)) else None,
                      "tables": tables})
    return views


def _bins(model: dict, k: int, j: int, thresholds, counts) -> list[dict]:
    """The scorecard's rows of column ``j`` (the ``k``-th selected): each bin's range, rows, WOE and points."""
    woe = (model.get("coding") or {}).get("woe")
    points = model.get("points", [])
    cuts = thresholds[j] if j < len(thresholds) else []
    ranges = [f"≤ {cuts[0]:.4g}"] if cuts else ["all"]
    ranges += [f"({a:.4g}, {b:.4g}]" for a, b in zip(cuts, cuts[1:])]
    ranges += [f"> {cuts[-1]:.4g}"] if cuts else []
    ranges.append("missing")
    table = []
    for b, rng in enumerate(ranges):
        entry = {"bin": rng, "training rows": counts[j][b] if j < len(counts) and b < len(counts[j]) else ""}
        if woe is not None and k < len(woe) and b < len(woe[k]):
            entry["WOE"] = woe[k][b]
        if k < len(points) and b < len(points[k]):
            entry["points"] = points[k][b]
        table.append(entry)
    return table
