"""Notices entries written by other processes, for the streams of this process.

A cron `salon send` does not ring (bus.doorbell has the table of who rings what). One
task per process that hosts streams (a daemon worker, a stdio server), not one per
stream, watches the database instead and rings the seats' groups on this process's
channel layer:
* SQLite, with or without Redis: every POLL_SECONDS, ask whether another connection
  committed (PRAGMA data_version, answered from memory), and if so ring the seats of the
  new waking ledger rows (SQLite has one writer, so row ids are commit-ordered);
* PostgreSQL without Redis: LISTEN on the channel that bus.doorbell NOTIFYs after each
  send. With Redis on PostgreSQL every sender rings Redis and no watcher runs.
Entries this process rang itself are skipped (doorbell.recently_rung).

On SQLite, other processes ring this one over its local socket (bus.hookline) right
after their commit, and the watcher rings the seats at once (`hear_local_rings`); the
poll is the safety net for a ring that never came (a process of another installation,
a directory that is not private). So POLL_SECONDS stays 100 ms: a poll costs ~0.3 % of a
core per process while idle, and every `salon mcp` of every session runs one (at 20 ms
it was ~2 % each).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading

from channels.layers import get_channel_layer
from django.conf import settings

from bus import doorbell, hookline

log = logging.getLogger("salon.watcher")

POLL_SECONDS = 0.1
_task: asyncio.Task | None = None
_rings: set[asyncio.Task] = set()


def ensure_started() -> None:
    global _task
    if _task is not None or not doorbell.watched():
        return
    _task = asyncio.ensure_future(listen_postgres() if settings.DATABASE_URL else run())


async def _ring(layer, seat_ids) -> None:
    for seat_id in seat_ids:
        await layer.group_send(doorbell.seat_group(seat_id), {"type": "bus.entry"})


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


def hear_local_rings(layer, loop: asyncio.AbstractEventLoop) -> None:
    """Rings that arrive on this process's hook line socket (in the line's thread) ring
    the seats on this process's layer, in its event loop."""

    def ring_now(entry_id: str, seat_ids: list[int]) -> None:
        if doorbell.recently_rung(entry_id):
            return
        doorbell.remember_rung(entry_id)  # the poll will see the row: not again
        task = asyncio.ensure_future(_ring(layer, seat_ids))
        _rings.add(task)  # held until done (the loop keeps only weak references)
        task.add_done_callback(_rings.discard)

    hookline.on_ring(
        lambda entry_id, seat_ids: loop.call_soon_threadsafe(ring_now, entry_id, seat_ids)
    )


async def run() -> None:
    layer = get_channel_layer()
    hear_local_rings(layer, asyncio.get_running_loop())
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
            await _ring(
                layer,
                {seat_id for _, seat_id, entry_id in rows if not doorbell.recently_rung(entry_id)},
            )
        except Exception:  # keep watching: a failed poll costs latency, not entries
            log.exception("watcher poll failed")
            await asyncio.sleep(1)


def _postgres_notifies(queue: asyncio.Queue, loop: asyncio.AbstractEventLoop) -> None:
    """Blocking, in a daemon thread: LISTEN on a connection of its own, forever, and hand
    each payload to the loop. Reconnects after a failure (a lost notification costs
    latency: streams re-check the ledger on every keep-alive)."""
    import time

    import psycopg
    from django.db import connection as django_connection

    params = django_connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    while True:
        try:
            with psycopg.connect(autocommit=True, **params) as listener:
                listener.execute(f"LISTEN {doorbell.PG_CHANNEL}")
                for notify in listener.notifies():
                    loop.call_soon_threadsafe(queue.put_nowait, notify.payload)
        except Exception:
            log.exception("LISTEN connection failed; reconnecting in 1 s")
            time.sleep(1)


async def listen_postgres() -> None:
    layer = get_channel_layer()
    queue: asyncio.Queue[str] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    # A daemon thread, so that a stopping daemon never waits for the blocked LISTEN.
    threading.Thread(
        target=_postgres_notifies, args=(queue, loop), name="salon-listen", daemon=True
    ).start()
    while True:
        payload = await queue.get()
        entry_id, _, seats = payload.partition(":")
        if not doorbell.recently_rung(entry_id):
            await _ring(layer, {int(s) for s in seats.split(",") if s.isdigit()})
