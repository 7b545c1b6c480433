"""Prometheus metrics: a small in-process registry and the text exposition (format 0.0.4).

Other code counts with::

    from salon import metrics
    metrics.inc("salon_pushes_total", amount=1, **labels)
    metrics.set_gauge("salon_live_streams", 3)
    metrics.observe("salon_request_duration_seconds", 0.012, path="notify")

Counters, gauges and histograms live in this process (one daphne worker); Prometheus
adds up the workers. `salon_entries_total` is read from the database at scrape time
(the sum of every room's sequence counter: one small query, whatever the table size),
so it counts the entries written by every process, CLI and hooks included.

A name that was not declared below is accepted (its type is taken from the call that
created it) so a new counter needs no edit here; declaring it adds its HELP line.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Iterable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"

DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# name -> (type, help)
DECLARED: dict[str, tuple[str, str]] = {
    "salon_entries_total": (COUNTER, "Entries stored, in every room (archived ones too)."),
    "salon_pushes_total": (COUNTER, "Entries pushed to a live MCP stream."),
    "salon_push_failures_total": (COUNTER, "Pushes that failed on the stream."),
    "salon_live_streams": (GAUGE, "MCP streams open in this process."),
    "salon_wake_decisions_total": (
        COUNTER,
        "Per-seat wake decisions made at send time, by reason (SPEC §5).",
    ),
    "salon_database_up": (GAUGE, "1 when the database answered this scrape, else 0."),
    "salon_request_duration_seconds": (
        HISTOGRAM,
        "Django request latency, by URL route.",
    ),
}

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")

LabelKey = tuple[tuple[str, str], ...]


class _Histogram:
    __slots__ = ("buckets", "count", "counts", "sum")

    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.count += 1
        self.sum += value
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1


class Registry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._types: dict[str, str] = {}
        self._values: dict[str, dict[LabelKey, float]] = {}
        self._histograms: dict[str, dict[LabelKey, _Histogram]] = {}

    def _check(self, name: str, kind: str, labels: dict[str, object]) -> LabelKey:
        if not _NAME.fullmatch(name):
            raise ValueError(f"metric name {name!r} is not a Prometheus name")
        declared = DECLARED.get(name, (None, ""))[0]
        known = self._types.setdefault(name, declared or kind)
        if known != kind:
            raise ValueError(f"metric {name} is a {known}, not a {kind}")
        for key in labels:
            if not _LABEL.fullmatch(key) or key == "le":
                raise ValueError(f"label name {key!r} is not usable on {name}")
        return tuple(sorted((k, str(v)) for k, v in labels.items()))

    def inc(self, name: str, amount: float = 1, **labels: object) -> None:
        if amount < 0:
            raise ValueError(f"counter {name} can only go up (amount {amount})")
        with self._lock:
            key = self._check(name, COUNTER, labels)
            series = self._values.setdefault(name, {})
            series[key] = series.get(key, 0) + amount

    def set_gauge(self, name: str, value: float, **labels: object) -> None:
        with self._lock:
            key = self._check(name, GAUGE, labels)
            self._values.setdefault(name, {})[key] = value

    def add_gauge(self, name: str, delta: float, **labels: object) -> None:
        with self._lock:
            key = self._check(name, GAUGE, labels)
            series = self._values.setdefault(name, {})
            series[key] = series.get(key, 0) + delta

    def observe(
        self, name: str, seconds: float, buckets: tuple[float, ...] | None = None, **labels: object
    ) -> None:
        with self._lock:
            key = self._check(name, HISTOGRAM, labels)
            series = self._histograms.setdefault(name, {})
            histogram = series.get(key)
            if histogram is None:
                histogram = series[key] = _Histogram(buckets or DEFAULT_BUCKETS)
            histogram.observe(seconds)

    def value(self, name: str, **labels: object) -> float:
        """The current value of a counter or gauge series (0 if never set): for tests."""
        key = tuple(sorted((k, str(v)) for k, v in labels.items()))
        with self._lock:
            return self._values.get(name, {}).get(key, 0)

    def reset(self) -> None:
        with self._lock:
            self._types.clear()
            self._values.clear()
            self._histograms.clear()

    def render(self, extra: Iterable[tuple[str, str, LabelKey, float]] = ()) -> str:
        """The text exposition; `extra` adds (name, type, labels, value) samples."""
        lines: list[str] = []
        with self._lock:
            samples: dict[str, list[tuple[LabelKey, float]]] = {
                name: sorted(series.items()) for name, series in self._values.items()
            }
            histograms = {
                name: sorted(
                    (key, (h.buckets, list(h.counts), h.count, h.sum)) for key, h in series.items()
                )
                for name, series in self._histograms.items()
            }
            types = dict(self._types)
        for name, kind, key, value in extra:
            types.setdefault(name, kind)
            samples.setdefault(name, []).append((key, value))
        # Declared metrics are always exposed, at zero until first touched.
        for name, (kind, _) in DECLARED.items():
            types.setdefault(name, kind)
            if kind != HISTOGRAM and not samples.get(name) and name not in _NO_ZERO:
                samples.setdefault(name, []).append(((), 0))
        for name in sorted(types):
            kind = types[name]
            help_text = DECLARED.get(name, (kind, name.replace("_", " ")))[1]
            lines.append(f"# HELP {name} {_escape_help(help_text)}")
            lines.append(f"# TYPE {name} {kind}")
            if kind == HISTOGRAM:
                for key, (bounds, counts, count, total) in histograms.get(name, []):
                    for bound, n in zip(bounds, counts, strict=True):
                        lines.append(_sample(f"{name}_bucket", (*key, ("le", _num(bound))), n))
                    lines.append(_sample(f"{name}_bucket", (*key, ("le", "+Inf")), count))
                    lines.append(_sample(f"{name}_sum", key, total))
                    lines.append(_sample(f"{name}_count", key, count))
            else:
                for key, value in samples.get(name, []):
                    lines.append(_sample(name, key, value))
        return "\n".join(lines) + "\n"


# Not zero-filled: labelled series appear once they have a value, and the database-backed
# counter is left out (not reset to 0) when the database does not answer.
_NO_ZERO = ("salon_wake_decisions_total", "salon_entries_total")


def _num(value: float) -> str:
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        if math.isnan(value):
            return "NaN"
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    return str(value)


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _sample(name: str, key: LabelKey, value: float) -> str:
    if key:
        labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in key)
        return f"{name}{{{labels}}} {_num(value)}"
    return f"{name} {_num(value)}"


REGISTRY = Registry()

inc = REGISTRY.inc
set_gauge = REGISTRY.set_gauge
add_gauge = REGISTRY.add_gauge
observe = REGISTRY.observe
value = REGISTRY.value


def entries_stored() -> int:
    """Every entry ever stored: the sum of the rooms' sequence counters (one row per room)."""
    from django.db.models import Sum

    from bus.models import Room

    return Room.objects.aggregate(total=Sum("last_seq"))["total"] or 0


def render() -> str:
    """The exposition, with the database-backed counters read now."""
    try:
        extra = [("salon_entries_total", COUNTER, (), entries_stored())]
    except Exception:  # the database is down: say so, keep the in-process metrics
        extra = [("salon_database_up", GAUGE, (), 0)]
    else:
        extra.append(("salon_database_up", GAUGE, (), 1))
    return REGISTRY.render(extra)


def count_decisions(reasons: Iterable[str]) -> None:
    """Count the wake decisions of one committed send (call it on commit)."""
    tally: dict[str, int] = {}
    for reason in reasons:
        tally[reason] = tally.get(reason, 0) + 1
    for reason, n in tally.items():
        inc("salon_wake_decisions_total", amount=n, reason=reason)


class RequestTimingMiddleware:
    """Feeds salon_request_duration_seconds{path=<URL route>} for every Django request.

    The label is the matched route pattern (`admin/bus/entry/<path:object_id>/change/`),
    never the raw path, so ids and query strings cannot grow the series without bound.

    Sync and async: under daphne the chain stays async, so a request takes no
    sync->async->sync thread hop here (an async view such as /notify runs on the event
    loop); Django's test client and any WSGI use get the sync path.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        started = time.perf_counter()
        response = self.get_response(request)
        _observe_request(request, started)
        return response

    async def _acall(self, request):
        started = time.perf_counter()
        response = await self.get_response(request)
        _observe_request(request, started)
        return response


def _observe_request(request, started: float) -> None:
    match = getattr(request, "resolver_match", None)
    route = ("/" + match.route) if match is not None and match.route else "unmatched"
    observe("salon_request_duration_seconds", time.perf_counter() - started, path=route)
