"""Notices entries written by other processes on the embedded default (SQLite, no Redis).

A cron `salon send` cannot ring this daemon's in-process channel layer. One task per
daemon process (not per stream) asks SQLite every POLL_SECONDS whether another
connection committed (PRAGMA data_version, answered from memory), and if so rings the
seats of the new waking ledger rows. With Redis, writers ring the groups themselves.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3

from channels.layers import get_channel_layer
from django.conf import settings

from bus import doorbell

log = logging.getLogger("salon.watcher")

POLL_SECONDS = 0.1
_task: asyncio.Task | None = None


def needed() -> bool:
    return not settings.REDIS_URL and not settings.DATABASE_URL


def ensure_started() -> None:
    global _task
    if _task is None and needed():
        _task = asyncio.ensure_future(run())


def _open() -> sqlite3.Connection:
    uri = f"file:{settings.DB_PATH}?mode=ro"
    connection = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=5)
    connection.execute("PRAGMA query_only=1")
    return connection


def _last_id(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT MAX(id) FROM bus_wakedecision").fetchone()
    return row[0] or 0


def _new_rows(connection: sqlite3.Connection, after: int) -> list[tuple[int, int, str]]:
    return connection.execute(
        "SELECT id, seat_id, entry_id FROM bus_wakedecision WHERE id > ? AND woken "
        "ORDER BY id LIMIT 5000",
        (after,),
    ).fetchall()


def _data_version(connection: sqlite3.Connection) -> int:
    return connection.execute("PRAGMA data_version").fetchone()[0]


async def run() -> None:
    layer = get_channel_layer()
    connection = await asyncio.to_thread(_open)
    last = await asyncio.to_thread(_last_id, connection)
    version = await asyncio.to_thread(_data_version, connection)
    while True:
        await asyncio.sleep(POLL_SECONDS)
        try:
            current = await asyncio.to_thread(_data_version, connection)
            if current == version:
                continue
            version = current
            rows = await asyncio.to_thread(_new_rows, connection, last)
            if not rows:
                continue
            last = rows[-1][0]
            seats = {
                seat_id for _, seat_id, entry_id in rows if not doorbell.recently_rung(entry_id)
            }
            for seat_id in seats:
                await layer.group_send(doorbell.seat_group(seat_id), {"type": "bus.entry"})
        except Exception:  # keep watching: a failed poll costs latency, not entries
            log.exception("watcher poll failed")
            await asyncio.sleep(1)
