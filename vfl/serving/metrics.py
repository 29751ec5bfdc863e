"""The label party's ``GET /metrics``: Prometheus text format, from a registry of its own.

===============================  =========  ===========================================================
metric                           type       what
===============================  =========  ===========================================================
``vfl_serve_requests_total``     counter    HTTP requests to ``/score``, by ``status`` (200, 400, 503...)
``vfl_serve_request_seconds``    histogram  time from a ``/score`` request's arrival to its answer
``vfl_serve_ids_total``          counter    ids answered, by ``outcome`` (``scored`` or an error code)
``vfl_serve_round_seconds``      histogram  one round's time (the label party's view), by ``model``
``vfl_serve_round_ids``          histogram  ids per round: how full micro-batching makes them
``vfl_serve_queue_ids``          gauge      ids waiting for a round
``vfl_serve_party_up``           gauge      1 if a peer is linked and ready, by ``party``
``vfl_serve_model_version``      gauge      1, labelled with the ``version`` in use
``vfl_serve_reloads_total``      counter    model version switches, by ``result``
``vfl_serve_psi``                gauge      the credit pipeline: population stability of the rows served since
                                            the version was loaded against training's, per label-party ``column``
===============================  =========  ===========================================================
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily

#: Seconds: from a millisecond to the longest deadline.
_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5,
            5.0, 10.0, 30.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    """The collectors; ``service`` (set once it exists) gives the parties' and the version's state at each scrape."""

    def __init__(self):
        disable_created_metrics()           # no ``_created`` series beside every counter
        self.registry = CollectorRegistry()
        self.service = None
        r = self.registry
        self.requests = Counter("vfl_serve_requests", "HTTP requests to /score, by status", ["status"], registry=r)
        self.latency = Histogram("vfl_serve_request_seconds", "Time from a /score request to its answer",
                                 buckets=_BUCKETS, registry=r)
        self.ids = Counter("vfl_serve_ids", "Ids answered, by outcome", ["outcome"], registry=r)
        self.id_errors = Counter("vfl_serve_id_errors", "Ids not scored, by the party that could not and why",
                                 ["party", "code"], registry=r)
        self.round_seconds = Histogram("vfl_serve_round_seconds", "One round's time at the label party", ["model"],
                                       buckets=_BUCKETS, registry=r)
        self.round_ids = Histogram("vfl_serve_round_ids", "Ids per round",
                                   buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096), registry=r)
        self.queue = Gauge("vfl_serve_queue_ids", "Ids waiting for a round", registry=r)
        self.reloads = Counter("vfl_serve_reloads", "Model version switches, by result", ["result"], registry=r)
        r.register(_State(self))

    def round(self, model: str, n_ids: int, seconds: float) -> None:
        self.round_seconds.labels(model).observe(seconds)
        self.round_ids.observe(n_ids)

    def answered(self, status: int, seconds: float, answers=()) -> None:
        self.requests.labels(str(status)).inc()
        self.latency.observe(seconds)
        for answer in answers:
            error = answer.get("error")
            self.ids.labels("scored" if error is None else error["code"]).inc()
            if error is not None:
                self.id_errors.labels(str(error.get("party") or "-"), error["code"]).inc()

    def text(self) -> bytes:
        return generate_latest(self.registry)


class _State:
    """Read at each scrape: which peers are up, and the model version in use."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def collect(self):
        service = self.metrics.service
        up = GaugeMetricFamily("vfl_serve_party_up", "1 if a peer is linked and ready", labels=["party"])
        version = GaugeMetricFamily("vfl_serve_model_version", "The model version in use", labels=["version"])
        if service is not None:
            for party, entry in service.health()["parties"].items():
                up.add_metric([party], 1.0 if entry["state"] == "up" else 0.0)
            if service.current is not None:
                version.add_metric([service.current], 1.0)
        drift = GaugeMetricFamily("vfl_serve_psi", "Population stability of the served rows against training's, "
                                  "per column of the label party (the credit pipeline)", labels=["column"])
        measured = getattr(service.share, "drift", None) if service is not None else None
        if measured is not None:                # a share that measures its served rows (the scorecard's)
            for column, value in measured().items():
                drift.add_metric([column], value)
        yield up
        yield version
        yield drift
