"""/healthz on the daemon's ASGI path: no Django request, no middleware chain, no thread
per request.

Through Django, /healthz cost the daemon ~7 ms of CPU per request (bench side_by_side,
2026-12-01): Django's ASGI handler runs a sync view in a thread of its own per request,
which opened a new database connection (with its PRAGMAs) every time, and the whole
middleware chain ran around a `SELECT 1`. Here the answer is built on the event loop:

* the Host/Origin rule is the same one (salon.lean.refusal, bus.strict);
* the database check (`SELECT 1` on a connection opened for it, then closed, so that a
  database that went away is seen as gone) runs on one thread of its own, **at most once
  a second**: a success is reused for up to MAX_AGE seconds, a failure never is (every
  request while the database is down checks again, so recovery shows at once);
* the request is timed into salon_request_duration_seconds{path="/healthz"} as before.

Django's view (salon.views.healthz) stays for the test client and any WSGI use; it
answers the same way, uncached.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings

from bus import strict
from salon import lean
from salon.store import STORE_HEADER

MAX_AGE = 1.0  # seconds a successful database check is reused

STORE_HEADER_BYTES = STORE_HEADER.lower().encode()


def database_problem() -> str | None:
    """None when the database answers `SELECT 1`, else what went wrong (one line)."""
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any database failure means "not healthy"
        text = str(exc).strip()
        return text.splitlines()[0][:200] if text else type(exc).__name__
    return None


def _probe() -> str | None:
    from django.db import connection

    try:
        return database_problem()
    finally:
        with contextlib.suppress(Exception):  # closing a connection that failed to open
            connection.close()


class Health:
    """The cached database check of one process (one thread, one check at a time)."""

    def __init__(self, max_age: float = MAX_AGE) -> None:
        self.max_age = max_age
        self._checked_at = float("-inf")
        self._executor: ThreadPoolExecutor | None = None
        self._running: asyncio.Future | None = None
        self._lock = threading.Lock()

    async def problem(self) -> str | None:
        if time.monotonic() - self._checked_at < self.max_age:
            return None
        if self._running is None or self._running.done():
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(1, thread_name_prefix="salon-healthz")
            loop = asyncio.get_running_loop()
            self._running = asyncio.ensure_future(loop.run_in_executor(self._executor, self._check))
        return await asyncio.shield(self._running)

    def _check(self) -> str | None:
        problem = _probe()
        if problem is None:
            self._checked_at = time.monotonic()
        return problem


health = Health()


async def asgi_healthz(scope, receive, send) -> None:
    """GET/HEAD /healthz: {"ok": true, "db": "ok"}, or 503 {"ok": false, "db": why}."""
    from salond.metrics import REQUEST_SECONDS

    started = time.perf_counter()
    headers = [(b"content-type", b"application/json")]
    refused = lean.refusal(strict.asgi_headers(scope))
    if refused is not None:
        status, body = refused[0], json.dumps({"error": refused[1]}).encode()
    elif scope.get("method") not in ("GET", "HEAD"):
        status, body = 405, b""
        headers = [(b"content-type", b"text/html; charset=utf-8"), (b"allow", b"GET, HEAD")]
    else:
        problem = await health.problem()
        if problem is None:
            status, body = 200, b'{"ok": true, "db": "ok"}'
            # which store this daemon serves (`salon install --http` checks it)
            headers.append((STORE_HEADER_BYTES, settings.STORE_FINGERPRINT.encode()))
        else:
            status, body = 503, json.dumps({"ok": False, "db": problem}).encode()
    headers += [(b"content-length", str(len(body)).encode()), *lean.COMMON_HEADERS]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    if scope.get("method") == "HEAD":
        body = b""
    await send({"type": "http.response.body", "body": body})
    if refused is None:
        REQUEST_SECONDS.labels(path="/healthz").observe(time.perf_counter() - started)
