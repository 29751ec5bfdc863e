"""A running ``vfl serve``'s ``/metrics``, scraped by the board and drawn as charts that grow.

The board scrapes the label party's service at the address its run record names,
each time the run page asks (about every second while it is open), and keeps the
last ten minutes of samples per run in memory.  From two samples it draws requests
per second, the p50 and p99 latency of the requests answered between them (from
the histogram's buckets), the ids not scored by party and code, the model version
and each peer's health.  The other parties' services have no HTTP endpoint: their
run page shows their record and lines only.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from html import escape

from vfl.board import charts

#: Samples kept per service (one a second: ten minutes).
HISTORY = 600


class Scraper:
    """Scrapes services' ``/metrics`` and keeps their history; ``token`` is sent as a bearer token if given."""

    def __init__(self, token: str | None = None, timeout: float = 2.0):
        self.token = token
        self.timeout = timeout
        self.history: dict[str, deque] = {}
        self._lock = threading.Lock()

    def scrape(self, url: str) -> dict:
        """One sample: ``{"t", "metrics": {(name, labels): value}}`` or ``{"t", "error"}``."""
        import httpx
        from prometheus_client.parser import text_string_to_metric_families

        headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
        t = time.time()
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            return {"t": t, "error": f"its record names no HTTP address: {url!r}"}
        try:
            response = httpx.get(url.rstrip("/") + "/metrics", headers=headers, timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - unreachable, refused, an address httpx cannot use
            return {"t": t, "error": f"cannot reach {url}: {type(exc).__name__}"}
        if response.status_code != 200:
            hint = " (give the board a token: vfl board --token-file)" if response.status_code == 401 else ""
            return {"t": t, "error": f"{url}/metrics answered {response.status_code}{hint}"}
        values = {}
        try:
            for family in text_string_to_metric_families(response.text):
                for sample in family.samples:
                    values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        except Exception as exc:  # noqa: BLE001 - whatever the parser makes of a page that is not Prometheus text
            return {"t": t, "error": f"{url}/metrics is not Prometheus text: {type(exc).__name__}"}
        return {"t": t, "metrics": values}

    def html(self, run_id: str, info: dict) -> str:
        """The serving panel of run ``run_id``: scrape now (if it runs), then draw its history."""
        url = info.get("http")
        if not url:
            return "<p>This party's service has no HTTP endpoint: only the label party's answers /metrics.</p>"
        with self._lock:
            history = self.history.setdefault(run_id, deque(maxlen=HISTORY))
        if info.get("status") == "running":
            sample = self.scrape(url)
            with self._lock:
                history.append(sample)
        return draw(list(history), url)


def _sum(metrics: dict, name: str, **match) -> float:
    total = sum(v for (n, labels), v in metrics.items()
                if n == name and all(dict(labels).get(k) == w for k, w in match.items()))
    return total if math.isfinite(total) else 0.0


def _labelled(metrics: dict, name: str, key: str) -> dict:
    out = {}
    for (n, labels), v in metrics.items():
        if n == name:
            out[dict(labels).get(key, "")] = out.get(dict(labels).get(key, ""), 0.0) + v
    return out


def quantile(before: dict, after: dict, q: float) -> float | None:
    """The ``q`` quantile of the request latency between two samples, in ms (linear within a bucket)."""
    def buckets(metrics):
        return sorted((float(dict(labels)["le"]), v) for (n, labels), v in metrics.items()
                      if n == "vfl_serve_request_seconds_bucket")

    now, then = buckets(after), dict(buckets(before))
    counts = [(le, v - then.get(le, 0.0)) for le, v in now]
    total = counts[-1][1] if counts else 0.0
    if total <= 0:
        return None
    target, low, below = q * total, 0.0, 0.0
    for le, cumulative in counts:
        if cumulative >= target:
            if le == float("inf"):
                return low * 1000
            share = (target - below) / max(cumulative - below, 1e-12)
            return (low + share * (le - low)) * 1000
        low, below = le, cumulative
    return low * 1000


def _count(value: float) -> str:
    return f"{int(value):,}" if math.isfinite(value) else "–"


def draw(history: list, url: str) -> str:
    good = [s for s in history if "metrics" in s]
    parts = []
    if history and "error" in history[-1]:
        parts.append(f'<p class="error" id="scrape-error">{escape(history[-1]["error"])}</p>')
    if not good:
        return "".join(parts) or f"<p>waiting for {escape(url)}/metrics…</p>"
    last = good[-1]["metrics"]
    t0 = good[0]["t"]
    times, rates, p50, p99 = [], [], [], []
    for before, after in zip(good, good[1:]):
        dt = after["t"] - before["t"]
        if dt <= 0:
            continue
        done = _sum(after["metrics"], "vfl_serve_requests_total") - _sum(before["metrics"], "vfl_serve_requests_total")
        times.append(round(after["t"] - t0, 1))
        rates.append(max(0.0, done) / dt)
        p50.append(quantile(before["metrics"], after["metrics"], 0.5))
        p99.append(quantile(before["metrics"], after["metrics"], 0.99))
    version = next((dict(labels).get("version") for (n, labels), v in last.items()
                    if n == "vfl_serve_model_version" and v == 1.0), "–")
    peers = _labelled(last, "vfl_serve_party_up", "party")
    parts.append(f'<p>model version in use: <b id="model-version">{escape(str(version))}</b>; '
                 f'{int(_sum(last, "vfl_serve_requests_total")):,} requests, '
                 f'{int(_sum(last, "vfl_serve_ids_total", outcome="scored")):,} ids scored; '
                 f'queue {int(_sum(last, "vfl_serve_queue_ids"))} ids</p>')
    peer_rows = "".join(f'<tr><td>{escape(p)}</td><td class="{"up" if v else "down"}">{"up" if v else "down"}</td>'
                        "</tr>" for p, v in sorted(peers.items()))
    parts.append(f'<table class="data" id="peers"><thead><tr><th>peer</th><th>health</th></tr></thead>'
                 f"<tbody>{peer_rows}</tbody></table>")
    if times:
        parts.append('<div class="charts">')
        parts.append(charts.line_chart([("requests/s", times, rates)], "requests per second", "seconds", "requests/s",
                                       y_range=(0.0, max(rates) * 1.1 or 1.0), chart_id="serving-rate"))
        lat = [(t, a, b) for t, a, b in zip(times, p50, p99) if a is not None and b is not None]
        if lat:
            parts.append(charts.line_chart([("p50", [t for t, _, _ in lat], [a for _, a, _ in lat]),
                                            ("p99", [t for t, _, _ in lat], [b for _, _, b in lat])],
                                           "latency of the requests answered", "seconds", "ms",
                                           y_range=(0.0, max(b for _, _, b in lat) * 1.1 or 1.0),
                                           chart_id="serving-latency"))
        parts.append("</div>")
    errors = {}
    for (n, labels), v in last.items():
        if n == "vfl_serve_id_errors_total" and v:
            errors[(dict(labels).get("party", "-"), dict(labels).get("code", ""))] = v
    statuses = {s: v for s, v in _labelled(last, "vfl_serve_requests_total", "status").items() if s != "200" and v}
    rows = "".join(f"<tr><td>{escape(p)}</td><td>{escape(c)}</td><td>{_count(v)}</td></tr>"
                   for (p, c), v in sorted(errors.items()))
    rows += "".join(f"<tr><td>(request)</td><td>HTTP {escape(s)}</td><td>{_count(v)}</td></tr>"
                    for s, v in sorted(statuses.items()))
    parts.append('<h4>errors by party</h4>' + (f'<table class="data" id="errors"><thead><tr><th>party</th>'
                                                f"<th>code</th><th>count</th></tr></thead><tbody>{rows}</tbody>"
                                                "</table>" if rows else "<p>none</p>"))
    return "".join(parts)
