"""/metrics: Prometheus text (format 0.0.4) from prometheus-client's registry.

In it: what this process counted (mcpgate.metrics: pushes, push failures, live streams;
salond.metrics: request latency; the wake decisions of the sends it made, heard on
bus.signals), and two figures read from the store at scrape time: `salon_entries_total`
(the sum of every room's sequence counter: one small query, whatever the table size,
counting the entries of every process, commands and hooks included) and
`salon_database_up`. Prometheus adds up the workers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from prometheus_client import REGISTRY, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from salon.middleware import BothWaysMiddleware
from salond.metrics import REQUEST_SECONDS

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

WAKE_DECISIONS = Counter(
    "salon_wake_decisions", "Per-seat wake decisions made at send time, by reason.", ["reason"]
)


class StoreFigures:
    """The collector of the figures read from the store at scrape time."""

    def describe(self):
        # Named here so that registering reads nothing from the store.
        yield GaugeMetricFamily("salon_database_up", "1 when the database answered this scrape.")
        yield CounterMetricFamily("salon_entries", "Entries stored, in every room.")

    def collect(self):
        from django.db.models import Sum

        from bus.models import Room

        up = GaugeMetricFamily("salon_database_up", "1 when the database answered this scrape.")
        try:
            total = Room.objects.aggregate(total=Sum("last_seq"))["total"] or 0
        except Exception:  # the database is down: say so, keep the in-process metrics
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        entries = CounterMetricFamily("salon_entries", "Entries stored, in every room.")
        entries.add_metric([], total)
        yield entries


_store_figures = StoreFigures()


def expose_store_figures() -> None:
    """Register the store's figures once (salon.apps.SalonConfig.ready)."""
    if _store_figures not in getattr(REGISTRY, "_collector_to_names", {}):
        REGISTRY.register(_store_figures)


def render() -> bytes:
    return generate_latest(REGISTRY)


def count_wake_decisions(sender=None, *, reasons: Mapping[str, int], **kwargs) -> None:
    """Count the wake decisions of one committed send (bus.signals.wake_decided)."""
    for reason, n in reasons.items():
        WAKE_DECISIONS.labels(reason=reason).inc(n)


class RequestTimingMiddleware(BothWaysMiddleware):
    """Feeds salon_request_duration_seconds{path=<URL route>} for every Django request.

    The label is the matched route pattern (`admin/bus/entry/<path:object_id>/change/`),
    never the raw path, so ids and query strings cannot grow the series without bound.
    """

    def handle(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        _observe_request(request, started)
        return response

    async def ahandle(self, request):
        started = time.perf_counter()
        response = await self.get_response(request)
        _observe_request(request, started)
        return response


def _observe_request(request, started: float) -> None:
    match = getattr(request, "resolver_match", None)
    route = ("/" + match.route) if match is not None and match.route else "unmatched"
    REQUEST_SECONDS.labels(path=route).observe(time.perf_counter() - started)
