"""Charts drawn on the server as SVG: no charting library, nothing fetched at run time.

Each chart is a string of SVG to put in a page.  Every series is one
``<polyline class="series" data-points="N">`` (so a test can count its points),
and every bar one ``<rect class="bar">``.  Trees are drawn as boxes and lines.
"""

from __future__ import annotations

import math
from html import escape

#: Colours of the series, in order (readable for the common colour blindnesses).
COLOURS = ("#1f77b4", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e")
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 16, 24, 42


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if not math.isfinite(low) or not math.isfinite(high):
        return []
    if high <= low:
        return [low]
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if m * step >= raw)
    first = math.ceil(low / step) * step
    return [round(first + k * step, 12) for k in range(int((high - first) / step + 1e-9) + 1)]


def _label(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e4 or abs(value) < 1e-3:
        return f"{value:.2g}"
    return f"{value:.4g}"


def _real(value) -> float | None:
    """``value`` as a finite float, or ``None`` (a record's damaged or missing number is left out)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def line_chart(series, title: str = "", x_label: str = "", y_label: str = "", width: int = 520, height: int = 300,
               x_range=None, y_range=None, diagonal: bool = False, markers: bool = False, chart_id: str = "") -> str:
    """Lines through points: ``series`` is a list of ``(name, xs, ys)``.

    ``x_range`` / ``y_range``: fixed ``(low, high)`` (default: the data's); ``diagonal``: the
    line ``y = x`` dashed (a ROC's chance line); ``markers``: a dot on every point.
    """
    series = [(name, [_real(x) for x in xs], [_real(y) for y in ys]) for name, xs, ys in series]
    points = [(x, y) for _, xs, ys in series for x, y in zip(xs, ys) if x is not None and y is not None]
    xs_all, ys_all = [p[0] for p in points] or [0.0, 1.0], [p[1] for p in points] or [0.0, 1.0]
    x0, x1 = x_range or (min(xs_all), max(xs_all))
    y0, y1 = y_range or (min(ys_all), max(ys_all))
    if x1 <= x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    if y1 <= y0:
        pad = abs(y0) * 0.05 or 0.5
        y0, y1 = y0 - pad, y1 + pad
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM

    def px(x):
        return _LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y):
        return _TOP + (1 - (y - y0) / (y1 - y0)) * plot_h

    out = [_open(width, height, title, chart_id), _axes(width, height, x0, x1, y0, y1, px, py, x_label, y_label)]
    if diagonal:
        out.append(f'<line class="chance" x1="{px(x0):.1f}" y1="{py(y0):.1f}" x2="{px(x1):.1f}" y2="{py(y1):.1f}" '
                   'stroke="#999" stroke-dasharray="4 4"/>')
    for k, (name, xs, ys) in enumerate(series):
        pts = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
        colour = COLOURS[k % len(COLOURS)]
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline class="series" data-series="{escape(str(name))}" data-points="{len(pts)}" '
                   f'fill="none" stroke="{colour}" stroke-width="2" points="{coords}"/>')
        if markers or len(pts) == 1:
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"><title>{_label(x)}: '
                    f'{_label(y)}</title></circle>' for x, y in pts]
    if len(series) > 1:
        for k, (name, _, _) in enumerate(series):
            y = _TOP + 14 * k + 8
            out.append(f'<rect x="{width - _RIGHT - 150}" y="{y - 8}" width="10" height="10" '
                       f'fill="{COLOURS[k % len(COLOURS)]}"/><text x="{width - _RIGHT - 135}" y="{y + 1}" '
                       f'class="legend">{escape(str(name))}</text>')
    out.append("</svg>")
    return "".join(out)


def bar_chart(labels, values, title: str = "", y_label: str = "", width: int = 520, height: int = 300,
              reference: float | None = None, chart_id: str = "") -> str:
    """One bar per label; ``reference``: a dashed horizontal line (e.g. a lift of 1)."""
    values = [_real(v) or 0.0 for v in values]
    y0, y1 = min(0.0, *values, reference or 0.0), max(0.0, *values, reference or 0.0)
    if y1 <= y0:
        y1 = y0 + 1.0
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    n = max(1, len(values))
    slot = plot_w / n

    def py(y):
        return _TOP + (1 - (y - y0) / (y1 - y0)) * plot_h

    out = [_open(width, height, title, chart_id), _axes(width, height, 0, n, y0, y1, None, py, "", y_label)]
    for k, (label, value) in enumerate(zip(labels, values)):
        x, top, base = _LEFT + k * slot + slot * 0.15, py(max(value, 0.0)), py(min(value, 0.0))
        out.append(f'<rect class="bar" x="{x:.1f}" y="{top:.1f}" width="{slot * 0.7:.1f}" '
                   f'height="{max(0.5, base - top):.1f}" fill="{COLOURS[0]}"><title>{escape(str(label))}: '
                   f'{_label(value)}</title></rect>')
        if n <= 24:
            out.append(f'<text x="{x + slot * 0.35:.1f}" y="{height - _BOTTOM + 14}" text-anchor="middle" '
                       f'class="tick">{escape(_short(str(label), 16 if n <= 6 else 10))}</text>')
    if reference is not None:
        out.append(f'<line x1="{_LEFT}" x2="{width - _RIGHT}" y1="{py(reference):.1f}" y2="{py(reference):.1f}" '
                   'stroke="#999" stroke-dasharray="4 4"/>')
    out.append("</svg>")
    return "".join(out)


def _short(text: str, length: int = 10) -> str:
    return text if len(text) <= length else text[:length - 1] + "…"


def _open(width: int, height: int, title: str, chart_id: str) -> str:
    ident = f' id="{escape(chart_id)}"' if chart_id else ""
    head = f'<text x="{_LEFT}" y="15" class="title">{escape(title)}</text>' if title else ""
    return (f'<svg class="chart"{ident} xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">{head}')


def _axes(width, height, x0, x1, y0, y1, px, py, x_label: str, y_label: str) -> str:
    bottom, right = height - _BOTTOM, width - _RIGHT
    out = [f'<line x1="{_LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#444"/>',
           f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{bottom}" stroke="#444"/>']
    for y in _ticks(y0, y1):
        out.append(f'<line x1="{_LEFT - 4}" x2="{right}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#eee"/>'
                   f'<text x="{_LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end" class="tick">{_label(y)}</text>')
    if px is not None:
        for x in _ticks(x0, x1):
            out.append(f'<text x="{px(x):.1f}" y="{bottom + 14}" text-anchor="middle" class="tick">{_label(x)}</text>')
    if x_label:
        out.append(f'<text x="{(_LEFT + right) / 2:.1f}" y="{height - 6}" text-anchor="middle" class="axis">'
                   f'{escape(x_label)}</text>')
    if y_label:
        out.append(f'<text x="12" y="{(_TOP + bottom) / 2:.1f}" text-anchor="middle" class="axis" '
                   f'transform="rotate(-90 12 {(_TOP + bottom) / 2:.1f})">{escape(y_label)}</text>')
    return "".join(out)


# -- trees ------------------------------------------------------------------------------------------------

def tree_chart(nodes: list[dict], title: str = "", chart_id: str = "") -> str:
    """A tree of ``nodes`` (index 0 the root; each ``{"text", "left", "right", "leaf"}``, children by index)."""
    depth_of, order, parent = {0: 0}, [], {}
    stack, seen = [0], {0}
    while stack:                                   # depth first, each node once: a malformed tree is refused
        i = stack.pop()
        node = nodes[i]
        if node.get("leaf"):
            continue
        for child in (node["right"], node["left"]):
            if not isinstance(child, int) or not 0 <= child < len(nodes) or child in seen:
                raise ValueError(f"node {i}: child {child!r} is not a node of the tree")
            seen.add(child)
            depth_of[child], parent[child] = depth_of[i] + 1, i
            stack.append(child)

    def leaves_in_order(i: int) -> None:       # left to right, without recursion
        pending = [i]
        while pending:
            j = pending.pop()
            if nodes[j].get("leaf"):
                order.append(j)
            else:
                pending += [nodes[j]["right"], nodes[j]["left"]]

    leaves_in_order(0)
    x_of: dict[int, float] = {i: float(k) for k, i in enumerate(order)}
    for i in sorted(depth_of, key=depth_of.get, reverse=True):      # a split: the middle of its children
        if not nodes[i].get("leaf"):
            x_of[i] = (x_of[nodes[i]["left"]] + x_of[nodes[i]["right"]]) / 2
    box_w, box_h, gap_x, gap_y = 118, 34, 10, 30
    width = max(1, len(order)) * (box_w + gap_x) + 20
    height = (max(depth_of.values()) + 1) * (box_h + gap_y) + 30
    out = [_open(width, height, title, chart_id)]

    def centre(i: int) -> tuple[float, float]:
        return 10 + x_of[i] * (box_w + gap_x) + box_w / 2, 26 + depth_of[i] * (box_h + gap_y)

    for i, node in enumerate(nodes):
        if i in depth_of and not node.get("leaf"):
            x, y = centre(i)
            for child in (node["left"], node["right"]):
                cx, cy = centre(child)
                out.append(f'<line x1="{x:.1f}" y1="{y + box_h:.1f}" x2="{cx:.1f}" y2="{cy:.1f}" stroke="#888"/>')
    for i in depth_of:
        node, (x, y) = nodes[i], centre(i)
        kind = "leaf" if node.get("leaf") else "own" if node.get("own") else "other"
        fill = {"leaf": "#eef6ee", "own": "#e8f0fb", "other": "#f3f3f3"}[kind]
        lines = str(node["text"]).split("\n")[:2]
        out.append(f'<g class="node {kind}"><rect x="{x - box_w / 2:.1f}" y="{y:.1f}" width="{box_w}" '
                   f'height="{box_h}" rx="4" fill="{fill}" stroke="#777"/>')
        for k, line in enumerate(lines):
            out.append(f'<text x="{x:.1f}" y="{y + 14 + 13 * k:.1f}" text-anchor="middle" class="nodetext">'
                       f'{escape(_short(line, 19))}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)
