"""The doorbell: tells listening streams that the database has something new for them.

The database is the mailbox; a ring only saves the listener a poll. A lost ring costs
latency, never an entry. Without Redis, a process other than the daemon has no way to
reach the daemon's in-process layer, so it does not ring: the daemon's watcher notices
new rows by itself (mcpgate.watcher).
"""

from __future__ import annotations

import logging
from collections import deque

from django.conf import settings

log = logging.getLogger("salon.doorbell")

# Set by the ASGI application at start-up: this process hosts the streams.
IN_DAEMON = False

# Entries this process rang itself, so the watcher does not ring them a second time.
_recent: deque[str] = deque(maxlen=4096)
_recent_set: set[str] = set()


def _remember(entry_id) -> None:
    key = str(entry_id).replace("-", "")
    if len(_recent) == _recent.maxlen:
        _recent_set.discard(_recent[0])
    _recent.append(key)
    _recent_set.add(key)


def recently_rung(entry_id) -> bool:
    return str(entry_id).replace("-", "") in _recent_set


def seat_group(seat_id: int) -> str:
    return f"seat.{seat_id}"


PG_CHANNEL = "salon_doorbell"


def ring(*, entry_id, seat_ids) -> None:
    """Tell the listeners of these seats that entry_id is waiting (after commit)."""
    if not seat_ids:
        return
    if settings.DATABASE_URL and not settings.REDIS_URL:
        _pg_notify(entry_id, seat_ids)
    if not (IN_DAEMON or settings.REDIS_URL):
        return
    try:
        from asgiref.sync import async_to_sync
        from channels.layers import get_channel_layer

        _remember(entry_id)
        layer = get_channel_layer()
        message = {"type": "bus.entry", "id": str(entry_id)}

        async def ring_all():
            for seat_id in seat_ids:
                await layer.group_send(seat_group(seat_id), message)

        async_to_sync(ring_all)()
    except Exception:  # a doorbell failure must never fail a send that is committed
        log.exception("doorbell for entry %s failed; listeners will poll", entry_id)


def _pg_notify(entry_id, seat_ids) -> None:
    """PostgreSQL without Redis: every daemon process LISTENs (mcpgate.watcher)."""
    from django.db import connection

    payload = f"{entry_id}:{','.join(str(s) for s in seat_ids)}"
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [PG_CHANNEL, payload[:7900]])
    except Exception:
        log.exception("pg_notify for entry %s failed; listeners will poll", entry_id)
