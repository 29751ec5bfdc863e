"""What a finished run gave its party, as sections of a page: metrics, curves, losses, trees, the scorecard.

Every section is built from the run's own record only (its ``result.json`` and the
copies of its shard and statistics the record keeps), so a party's board shows
what that party holds: a feature party's trees with its own thresholds and the
others' splits as "party k, split j"; its own IV and points; no label party's metric.
"""

from __future__ import annotations

import csv
import json
import math
import os
from html import escape
from pathlib import Path

from vfl.board import charts
from vfl.deploy.record import VIEW, model_view
from vfl.families import FAMILIES


def sections(info: dict, result: dict | None, folder: Path, live=None, tree: int = 0) -> list[dict]:
    """The result sections of a run: ``{"title", "html", "id"}`` each, in reading order.

    A part of the record that cannot be read (damaged, or of another version) is one section saying so;
    the others are shown as usual.
    """
    if result is None and info.get("status") == "running":
        return []                               # under way: the live panel shows it
    result = result or {}
    if "damaged" in result:
        return [_section("Results", f'<p class="error">{escape(str(result["damaged"]))}</p>')]
    metrics = result.get("metrics") if isinstance(result.get("metrics"), dict) else {}
    model = _json(folder / "model.json")
    family, task = info.get("family"), info.get("task")
    parts = [("Alignment", lambda: [_alignment(result["alignment"])] if "alignment" in result else []),
             ("Metrics", lambda: [_section("Metrics", f"<p>{escape(str(metrics['note']))}</p>")]
              if "note" in metrics else [])]
    for what in ("training", "validation"):
        parts.append((f"Metrics, {what} rows", lambda what=what: _rows_sections(what, metrics[what])
                      if isinstance(metrics.get(what), dict) else []))
    parts += [("Metrics, prediction rows", lambda: _rows_sections("prediction", metrics)
               if "rows" in metrics and "metrics" in metrics else []),
              ("Loss", lambda: [_losses(result["loss_curve"])] if result.get("loss_curve") else []),
              ("Early stopping", lambda: [_early_stopping(model["validation_scores"], family)]
               if model and model.get("validation_scores") else []),
              ("Model", lambda: _views(_kept_view(folder, info, model, result), tree)),
              ("Table statistics", lambda: [_section("Table statistics (its own columns)", _table(rows), "statistics")
                                            for rows in [_csv(folder / "statistics.csv")] if rows]),
              ("Population stability", lambda: [_stability(rows) for rows in [_csv(folder / "psi.csv")] if rows]),
              ("Explanations", lambda: _explanations(_csv(folder / "explanations.csv"), result.get("explained")))]
    parts.append(("Export", lambda: [_export(result["export"])] if task == "export" and "export" in result else []))
    out: list[dict] = []
    if model is _DAMAGED:
        out.append(_section("Model", '<p class="error">its model.json is damaged</p>', "model"))
        model = None
    for title, build in parts:
        try:
            out += build()
        except Exception:  # noqa: BLE001 - a damaged or foreign record: say so, show the rest
            out.append(_section(title, '<p class="error">this part of the record could not be read (damaged, or '
                                       "written by another version of vfl)</p>"))
    if not out:                                 # nothing for this party to see: say so, not a blank page
        out.append(_section("Results", "<p>this run recorded no results for this party (it ended before any, or "
                                       "its result.json is empty; only the label party scores rows)</p>", "results"))
    return out


def _section(title: str, html: str, ident: str = "") -> dict:
    return {"title": title, "html": html, "id": ident or title.lower().replace(" ", "-")}


#: A file of the record that exists but cannot be read.
_DAMAGED = object()


def _open(path: Path, mode: str = "r"):
    """``path`` opened for reading, a link not followed (``OSError`` if it is one)."""
    return os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), mode, encoding="utf-8",
                     newline="" if mode == "r" else None)


def _json(path: Path):
    if not path.exists():
        return None
    try:
        with _open(path) as f:
            value = json.load(f)
    except (OSError, ValueError, RecursionError):
        return _DAMAGED
    return value if isinstance(value, dict) else _DAMAGED


def _csv(path: Path) -> list[dict]:
    try:
        with _open(path) as f:
            return list(csv.DictReader(f))[:10_000]
    except (OSError, ValueError, csv.Error):
        return []


def _number(value) -> str:
    if isinstance(value, float):
        return "–" if not math.isfinite(value) else f"{value:.4f}" if abs(value) < 1e5 else f"{value:.4g}"
    return escape(str(value))


def _table(rows: list[dict], columns=None) -> str:
    columns = columns or list(rows[0])
    head = "".join(f"<th>{escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_number(_float(r.get(c, '')))}</td>" for c in columns) + "</tr>"
                   for r in rows)
    return f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _float(value):
    if isinstance(value, str):
        try:
            return float(value) if value.strip() and not value.strip().isalpha() else value
        except ValueError:
            return value
    return value


def _alignment(report: dict) -> dict:
    rows = [{"party": name, "rows": n} for name, n in sorted(report.get("rows", {}).items())]
    rows.append({"party": "shared", "rows": report.get("shared", "")})
    engine = report.get("curve_engine") or {}
    note = ""
    if engine.get("engine"):
        why = f" ({engine['reason']})" if engine.get("reason") else ""
        note = f'<p class="caption">X25519 engine: {escape(str(engine["engine"]))}{escape(why)}</p>'
    return _section("Alignment", _table(rows) + note, "alignment")


def _rows_sections(what: str, report: dict) -> list[dict]:
    metrics = report.get("metrics") or {}
    table = _table([{"metric": k, "value": v} for k, v in metrics.items()]) if metrics else "<p>none</p>"
    out = [_section(f"Metrics, {what} rows ({report.get('rows', 0):,})", table, f"metrics-{what}")]
    curves = report.get("curves") or {}
    charts_html = []
    if "roc" in curves:
        auc = metrics.get("AUC")
        charts_html.append(charts.line_chart([("ROC", curves["roc"]["fpr"], curves["roc"]["tpr"])],
                                             "ROC" + (f" (AUC {auc:.4f})" if auc is not None else ""),
                                             "false positive rate", "true positive rate", x_range=(0, 1),
                                             y_range=(0, 1), diagonal=True, chart_id=f"roc-{what}"))
    if "pr" in curves:
        charts_html.append(charts.line_chart([("PR", curves["pr"]["recall"], curves["pr"]["precision"])],
                                             "precision and recall", "recall", "precision", x_range=(0, 1),
                                             y_range=(0, 1), chart_id=f"pr-{what}"))
    if "ks" in curves:
        ks = curves["ks"]
        title = "K-S" + (f" ({metrics['KS']:.4f})" if metrics.get("KS") is not None else "")
        charts_html.append(charts.line_chart([("positives", ks["population"], ks["positives"]),
                                              ("negatives", ks["population"], ks["negatives"])], title,
                                             "share of rows, highest scores first", "share of the class",
                                             x_range=(0, 1), y_range=(0, 1), chart_id=f"ks-{what}"))
    if "gains" in curves:
        tenths = [f"{10 * (k + 1)}%" for k in range(len(curves["gains"]))]
        charts_html.append(charts.line_chart([("gains", [0.0] + [(k + 1) / 10 for k in range(len(tenths))],
                                               [0.0] + list(curves["gains"]))], "cumulative gains",
                                             "share of rows, highest scores first", "share of positives",
                                             x_range=(0, 1), y_range=(0, 1), diagonal=True, markers=True,
                                             chart_id=f"gains-{what}"))
        charts_html.append(charts.bar_chart(tenths, curves["lift"], "lift per tenth of the rows", "lift",
                                            reference=1.0, chart_id=f"lift-{what}"))
    if "residuals" in curves:
        r = curves["residuals"]
        charts_html.append(charts.line_chart([("residuals", r["predicted"], r["residual"])], "residuals",
                                             "predicted", "label - predicted", markers=True,
                                             chart_id=f"residuals-{what}").replace('stroke-width="2"',
                                                                                   'stroke-width="0"'))
    if "confusion" in curves:
        charts_html.append(_confusion(curves["confusion"], curves.get("threshold")))
    if charts_html:
        out.append(_section(f"Curves, {what} rows", '<div class="charts">' + "".join(charts_html) + "</div>",
                            f"curves-{what}"))
    return out


def _confusion(matrix, threshold) -> str:
    n = len(matrix)
    head = "".join(f"<th>predicted {k}</th>" for k in range(n))
    body = "".join(f"<tr><th>actual {i}</th>" + "".join(f"<td>{v:,}</td>" for v in row) + "</tr>"
                   for i, row in enumerate(matrix))
    at = f" at score {threshold:g}" if threshold is not None else ""
    return (f'<div class="confusion"><p class="caption">confusion matrix{escape(at)}</p>'
            f'<table class="data" id="confusion"><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody>'
            "</table></div>")


def _losses(curve) -> dict:
    curves = curve if curve and isinstance(curve[0], list) else [curve]
    series = [(f"model {k + 1}" if len(curves) > 1 else "loss", list(range(1, len(c) + 1)), c)
              for k, c in enumerate(curves)]
    return _section("Loss", charts.line_chart(series, "loss per epoch", "epoch", "loss", markers=True,
                                              chart_id="loss-final"), "loss")


def _early_stopping(scores, family: str) -> dict:
    """The validation score after each iteration or epoch (the label party's: it decides when to stop)."""
    unit = unit_of(family)
    values = [float(v) for v in scores]
    best = max(range(len(values)), key=values.__getitem__)
    return _section("Early stopping", charts.line_chart([("validation score", list(range(1, len(values) + 1)),
                                                          values)], f"validation score per {unit}", unit,
                                                        "validation score (higher is better)", markers=True,
                                                        chart_id="early-stopping")
                    + f'<p class="caption">best after {unit} {best + 1}: {values[best]:.4f}</p>', "early-stopping")


def unit_of(family) -> str:
    """What one training step of the record's ``family`` is called ("epoch" for a family vfl does not know)."""
    return FAMILIES[family].unit if family in FAMILIES else "epoch"


# -- the family's views of its model ------------------------------------------------------------------------

def _kept_view(folder: Path, info: dict, model, result: dict):
    """The views of its model the record keeps (``view.json``); a finished training record from before records kept
    them has them made now from the ``model.json`` read above (nothing written: the board only reads)."""
    kept = _json(folder / VIEW)
    if kept is None and info.get("status") == "finished" and isinstance(model, dict):
        return model_view(info, lambda: model, result)
    return kept


def _views(kept, tree: int) -> list[dict]:
    """The sections of the views of its model the record keeps (``view.json``, made by its family's shard module:
    :mod:`vfl.deploy.shards`); ``tree``: the tree the reader picked."""
    if kept is None:
        return []
    if kept is _DAMAGED or "damaged" in kept:
        raise ValueError("a damaged view")      # shown as "this part of the record could not be read"
    return [_view(view, tree) for view in kept["views"]]


def _view(view: dict, tree: int) -> dict:
    """One view (plain data: a table, tables, bars or trees) drawn as a section."""
    kind, caption = view["kind"], view.get("caption")
    if kind == "table":
        html = _table(view["rows"])
    elif kind == "tables":
        html = (f"<p>{escape(view['note'])}</p>" if view.get("note") else "") + "".join(
            f"<h4>{escape(str(t['heading']))}</h4>" + _table(t["rows"]) for t in view["tables"])
    elif kind == "bars":
        html = charts.bar_chart(view["labels"], view["values"], view["chart"], view["axis"], chart_id=view["id"])
    elif kind == "trees":
        trees, chosen = view["trees"], min(max(0, tree), len(view["trees"]) - 1)
        links = " ".join(f'<a href="?tree={k}#{view["id"]}" class="{"chosen" if k == chosen else ""}">{k + 1}</a>'
                         for k in range(len(trees)))
        html = f'<p class="treepick">tree: {links}</p>' + charts.tree_chart(trees[chosen]["nodes"],
                                                                            trees[chosen]["name"], chart_id="tree")
    else:
        raise ValueError(f"a view of kind {kind!r}")     # shown as "this part of the record could not be read"
    return _section(view["title"], html + (f'<p class="caption">{escape(caption, quote=False)}</p>' if caption
                                           else ""), view["id"])


def _stability(rows: list[dict]) -> dict:
    name = next(iter(rows[0]))
    values = [_float(r.get("psi", "")) for r in rows]
    values = [v if isinstance(v, float) else 0.0 for v in values]
    html = charts.bar_chart([r[name] for r in rows], values, "population stability per column (PSI)", "PSI",
                            reference=0.1, chart_id="psi") + _table(rows)
    return _section("Population stability (its own columns)", html, "psi")


#: The rows of an explanation shown one by one (the record keeps them all, up to 10,000 read).
EXPLAINED_ROWS = 20


def _explanations(rows: list[dict], sent: dict | None) -> list[dict]:
    """A prediction's explanations as this party holds them: the label party's (how far each unit moved the
    scores, how often each reason was given, the first rows), or what a feature party sent (its rows, and how
    often it named each column it consents to be named)."""
    if rows:
        units = [c for c in rows[0] if c not in ("base_value",) and not c.startswith("reason_")][1:]
        weight = [sum(abs(v) for v in (_float(r.get(c, "")) for r in rows) if isinstance(v, float)) / len(rows)
                  for c in units]
        html = charts.bar_chart(units, weight, f"mean |contribution| over {len(rows):,} rows", "mean |contribution|",
                                chart_id="explained-units")
        given: dict = {}
        for r in rows:
            for c, v in r.items():
                if c.startswith("reason_") and v:
                    given[v] = given.get(v, 0) + 1
        if given:
            html += _table([{"reason": k, "rows": n} for k, n in sorted(given.items(), key=lambda kv: -kv[1])])
        html += (f'<p class="caption">the first {min(EXPLAINED_ROWS, len(rows))} rows (each sums, with '
                 "base_value, to its raw score)</p>" + _table(rows[:EXPLAINED_ROWS]))
        return [_section("Explanations", html, "explanations")]
    if isinstance(sent, dict):
        named = sent.get("named") or {}
        lines = f"<p>this party sent its part of the explanation of {int(sent.get('rows', 0)):,} rows (its total " \
                "per row, or its leaf masks); the contributions and reasons are the label party's.</p>"
        if named:
            lines += _table([{"column it named": k, "rows": n} for k, n in named.items()])
        return [_section("Explanations (what it sent)", lines, "explanations")]
    return []


def _export(export: dict) -> dict:
    """What ``vfl export`` wrote: the format, where, the files, and whose consent it was written under."""
    signed = export.get("signed") or {}
    rows = [{"": "format", "value": export.get("format", "")}, {"": "written to", "value": export.get("out", "")},
            {"": "files", "value": ", ".join(str(f) for f in export.get("files") or [])},
            {"": "consents", "value": ", ".join(f"{p} (signed {v.get('signed_at', '?')})" for p, v in signed.items())
             or "none needed (this party's own part)"}]
    return _section("Export", _table(rows), "export")
