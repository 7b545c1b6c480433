"""What a serving process counts (Prometheus, through prometheus-client): pushes, open
streams, request latency. salon.metrics exposes them at /metrics, with the store's own
figures. Processes that serve nothing (a command, a hook) never touch these."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

# One series per metric, as Prometheus' own text format has them; the *_created
# companions would double every counter for nothing a dashboard of this daemon reads.
disable_created_metrics()

PUSHES = Counter("salon_pushes", "Entries pushed to a live MCP stream.")
PUSH_FAILURES = Counter("salon_push_failures", "Pushes that failed on the stream.")
LIVE_STREAMS = Gauge("salon_live_streams", "MCP streams open in this process.")
REQUEST_SECONDS = Histogram(
    "salon_request_duration_seconds",
    "Request latency, by URL route.",
    ["path"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
