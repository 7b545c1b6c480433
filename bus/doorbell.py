"""The doorbell: tells listening streams that the database has something new for them.

The database is the mailbox; a ring only saves the listener a poll. A lost ring costs
latency, never an entry (every listener re-reads its ledger on its keep-alive).

Who rings what after a send has committed. "Daemon" is a `salon serve` worker (it hosts
the HTTP streams, IN_DAEMON); "other" is any other process that writes: a CLI command, a
hook, a `salon mcp` stdio server. The watcher (mcpgate.watcher) runs in every process
that hosts streams (daemon workers and stdio servers) whenever `watched()` is true:

| store | Redis | sender | rings the layer | other signal | stream hosts' watcher |
|---|---|---|---|---|---|
| SQLite | no | daemon | in-process (its streams) | — | polls data_version |
| SQLite | no | other | — | local sockets | polls data_version |
| SQLite | yes | daemon | Redis (every worker) | — | polls data_version |
| SQLite | yes | other | — | local sockets | polls data_version |
| PostgreSQL | no | daemon | in-process (its streams) | pg_notify | LISTENs |
| PostgreSQL | no | other | — | pg_notify | LISTENs |
| PostgreSQL | yes | daemon | Redis (every worker) | — | none |
| PostgreSQL | yes | other | Redis | — | none |

Why:
* SQLite is one machine's file, so every process that hosts streams for it (daemon
  workers, stdio servers) listens on a local socket (bus.hookline, the hook line). A
  process without the layer — a CLI command, a stdio server's own send — connects to
  each and writes the entry id and seats: no import, a connect and a write per server.
  Their watcher hears the ring at once and rings its own layer; its poll of
  data_version (every POLL_SECONDS) is the safety net for a ring that never came.
  Ringing Redis from a CLI instead would import channels_redis and redis.asyncio first,
  180-300 ms AFTER the commit (bench/RESULTS.md "2. Cross-process").
* The daemon always rings its layer itself: its own streams (and, with Redis, those of
  every worker and of every stdio server) hear the entry at once. The watchers skip
  what their process already rang (`recently_rung`).
* PostgreSQL without Redis: each process has its own in-memory layer, so every sender
  NOTIFYs and every stream host LISTENs (costs a CLI one statement, no import).
* PostgreSQL with Redis: Redis already reaches every worker and every listener, on any
  machine, so no watcher runs and a CLI rings Redis (the commands' fork server has it
  imported already: salon/forkserver.py).

Known costs: with Redis on SQLite, an entry sent in one daemon worker is rung once by
that worker through Redis and may be rung again by another stream host's watcher; a
duplicate ring costs a stream one look at its ledger that finds nothing. With SQLite,
Redis and no stream host running, a `salon wait` hears a CLI send at its safety
re-check (5 s).
"""

from __future__ import annotations

import logging
from collections import deque

from django.conf import settings

log = logging.getLogger("salon.doorbell")

# Set by the ASGI application at start-up: this process hosts the streams.
IN_DAEMON = False

PG_CHANNEL = "salon_doorbell"

# Entries this process rang itself, so the watcher does not ring them a second time.
_recent: deque[str] = deque(maxlen=4096)
_recent_set: set[str] = set()


def watched() -> bool:
    """Whether processes that host streams run the database watcher (see the table).

    SQLite: always (the poll sees every commit). PostgreSQL: only without Redis (LISTEN
    on what senders NOTIFY); with Redis the senders ring Redis and nothing is watched.
    """
    return not settings.DATABASE_URL or not settings.REDIS_URL


def remember_rung(entry_id) -> None:
    key = str(entry_id).replace("-", "")
    if len(_recent) == _recent.maxlen:
        _recent_set.discard(_recent[0])
    _recent.append(key)
    _recent_set.add(key)


def recently_rung(entry_id) -> bool:
    return str(entry_id).replace("-", "") in _recent_set


def seat_group(seat_id: int) -> str:
    return f"seat.{seat_id}"


def ring(*, entry_id, seat_ids) -> None:
    """Tell the listeners of these seats that entry_id is waiting (after commit)."""
    if not seat_ids:
        return
    if settings.DATABASE_URL and not settings.REDIS_URL:
        _pg_notify(entry_id, seat_ids)
    if IN_DAEMON or not watched():
        _ring_layer(entry_id, seat_ids)
    elif not settings.DATABASE_URL:
        _ring_line(entry_id, seat_ids)


def _ring_line(entry_id, seat_ids) -> None:
    """SQLite, a process without the streams' layer: ring the running servers of the
    store over their local sockets (bus.hookline) instead of leaving it to their poll."""
    try:
        from bus import hookline

        hookline.ring_servers(hookline.own_store(), entry_id, seat_ids)
    except Exception:  # never fail a committed send; the watchers' poll still sees it
        log.exception("local doorbell for entry %s failed; listeners will poll", entry_id)


def _ring_layer(entry_id, seat_ids) -> None:
    try:
        # Imported here: a CLI on SQLite never rings, and must not pay for the layer.
        from asgiref.sync import async_to_sync
        from channels.layers import get_channel_layer

        remember_rung(entry_id)
        layer = get_channel_layer()
        message = {"type": "bus.entry", "id": str(entry_id)}

        async def ring_all():
            for seat_id in seat_ids:
                await layer.group_send(seat_group(seat_id), message)

        async_to_sync(ring_all)()
    except Exception:  # a doorbell failure must never fail a send that is committed
        log.exception("doorbell for entry %s failed; listeners will poll", entry_id)


def _pg_notify(entry_id, seat_ids) -> None:
    """PostgreSQL without Redis: every stream host LISTENs (mcpgate.watcher)."""
    from django.db import connection

    payload = f"{entry_id}:{','.join(str(s) for s in seat_ids)}"
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [PG_CHANNEL, payload[:7900]])
    except Exception:
        log.exception("pg_notify for entry %s failed; listeners will poll", entry_id)
