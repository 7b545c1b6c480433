"""What a process that hosts MCP streams counts (Prometheus, through prometheus-client):
pushes and open streams. salon.metrics exposes them at /metrics, with the request
latency (salond.metrics) and the store's own figures. Processes that serve nothing
(a command, a hook) never touch these."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, disable_created_metrics

# One series per metric (salond.metrics says why).
disable_created_metrics()

PUSHES = Counter("salon_pushes", "Entries pushed to a live MCP stream.")
PUSH_FAILURES = Counter("salon_push_failures", "Pushes that failed on the stream.")
LIVE_STREAMS = Gauge("salon_live_streams", "MCP streams open in this process.")
