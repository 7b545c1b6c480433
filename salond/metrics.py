"""What every serving process counts, whatever it serves (Prometheus, through
prometheus-client): request latency by route. The adapters count their own beside it
(mcpgate.metrics: pushes, open streams); salon.metrics exposes them all at /metrics."""

from __future__ import annotations

from prometheus_client import Counter, Histogram, disable_created_metrics

# One series per metric, as Prometheus' own text format has them; the *_created
# companions would double every counter for nothing a dashboard of this daemon reads.
disable_created_metrics()

REQUEST_SECONDS = Histogram(
    "salon_request_duration_seconds",
    "Request latency, by URL route.",
    ["path"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)

# Owners of loopback connections read from the kernel (salon.gate, once per connection),
# by what the door made of them: admitted, refused, unknown.
PEER_LOOKUPS = Counter(
    "salon_peer_lookups",
    "Loopback connections whose owner was looked up, by what the door made of them.",
    ["found"],
)
