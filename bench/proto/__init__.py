"""Prototypes of proposed product fixes, applied by monkeypatching — for measurement only.

The product code (mcpgate/, bus/, relay/, salon/) belongs to the lead; these patches
never ship. They exist so that each proposed change in bench/RESULTS.md comes with a
measurement: a daemon started with DJANGO_SETTINGS_MODULE=bench.settings_proto runs the
product with the patches named in BENCH_PROTO (comma-separated; default all):

* normal     — SQLite synchronous=NORMAL instead of FULL (in bench/settings_proto.py)
* claim      — claim_pushes reads first, outside any transaction (WAL: no lock), and
               opens its write transaction only when there is something to claim;
               the message is built in the same database hop as the claim
* keepalive  — a stream's keep-alive refreshes seat and session in one transaction
* notify     — POST /notify runs its database work on the one database thread the
               consumers use (no per-request thread and connection, no write-lock
               contention between request threads and the push), and the timing
               middleware is async-capable (no sync/async hop per request)
* fanout     — the rings that arrive in one turn of the event loop are claimed together,
               in one database hop and one transaction with set-based reads (one
               message built per entry, not per seat); not in the default set
* layer      — the in-process channel layer cleans expired messages and group
               memberships at most once a second instead of on every send, group_send
               and receive (each a walk over every channel: O(streams)); not in the
               default set
* watchredis — with Redis (on SQLite), the daemon's watcher runs too and a CLI process
               does not ring through channels_redis; not in the default set
* poll20     — the embedded watcher polls SQLite every 20 ms instead of 100 ms (not in
               the default set)
"""

from __future__ import annotations

import os


def enabled(name: str) -> bool:
    wanted = os.environ.get("BENCH_PROTO", "normal,claim,keepalive,notify")
    return name in {w.strip() for w in wanted.split(",")}
