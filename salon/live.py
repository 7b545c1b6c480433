"""/admin/live/stream: the operator's live flow as server-sent events, for staff.

The page (bus.admin.live) opens it with an EventSource. What it sends:

* `event: entry`, data = the entry as bus.wire.live_entry shows it (who it wakes, whose
  quiet held it back, the gone seats it waits for), id = the positions after it
  (bus.live.encode). A first connection gets the newest bus.live.BACKLOG entries first
  (no id: they are the past).
* A reconnect with `Last-Event-ID` resumes after those positions: everything stored
  meanwhile, unless it is more than bus.live.REPLAY_LIMIT entries — then one
  `event: gap` counts them (the history page has them) and the flow goes on from now.
* `event: ready` (with the positions as its id) once the stream has caught up; then
  each new entry as it is stored.
* `event: panes`, data = `{"rooms": html, "seats": html}`: the rooms pane and the seats
  pane of the room in the URL (`?room=`; the busiest one without), drawn by
  bus.admin.live.pane_html, first after `ready` and again whenever they differ from the
  last ones sent. They are drawn again after entries are stored (at most every
  PANES_GAP_SECONDS) and every PANES_SECONDS: check-ins, joins, focus, quiet, reading
  and liveness that passes with time ring nothing.
* `: keep-alive` after KEEPALIVE_SECONDS with nothing else sent.

Entries of every process reach it the same way: the daemon's listener (bus.bell) hears
every commit of the store and rings this process's board (salond.host.Board); each
stream then reads the entries after its positions from the store. The store is also
looked at every PANES_SECONDS, so a lost ring costs latency, never an entry.

Read-only by construction: it reads the session and the user (Channels' session and auth
middleware, which save nothing a request did not change), the rooms, seats and
memberships, the entries and their wake decisions.
"""

from __future__ import annotations

import asyncio
import json
import logging
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.conf import settings

from bus import bell, live, strict
from bus.admin.base import VIEW_PERMISSION
from bus.admin.live import pane_html
from salond.host import Daemon
from salond.streaming import KEEPALIVE_SECONDS, StreamingHttpConsumer

log = logging.getLogger("salon.live")

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
TEXT = (b"content-type", b"text/plain; charset=utf-8")
# The panes are drawn again this often at the latest, and after a ring at most this often.
PANES_SECONDS = 2.0
PANES_GAP_SECONDS = 0.5


def sse(event: str, data: dict, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    # safe_text: a row changed outside the bus may hold a lone surrogate (not UTF-8).
    text = strict.safe_text(json.dumps(data, ensure_ascii=False))
    return f"{head}event: {event}\ndata: {text}\n\n".encode()


class LiveStream(StreamingHttpConsumer):
    def __init__(self, *args, host: Daemon, **kwargs):
        super().__init__(*args, **kwargs)
        self.host = host
        self.rung: asyncio.Event | None = None

    async def handle(self, body: bytes, *, too_large: bool) -> None:
        await self.host.start()
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in self.scope["headers"]
        }
        if self.scope["method"] != "GET":
            await self.send_response(405, b"", headers=[(b"allow", b"GET")])
            return
        problem = self.host_problem(headers)
        if problem:
            await self.send_response(403, problem.encode(), headers=[TEXT])
            return
        user = self.scope.get("user")
        if not (user is not None and user.is_active and user.is_staff):
            await self.send_response(
                403, b"staff only: log in at /admin/login/ first", headers=[TEXT]
            )
            return
        # The flow shows every entry: the same permission as the history of entries.
        if not await database_sync_to_async(user.has_perm)(VIEW_PERMISSION):
            await self.send_response(
                403, b"viewing the live flow needs the permission to view entries", headers=[TEXT]
            )
            return
        await self.start_response(200, SSE_HEADERS)
        # Subscribe first, then read where the store is: nothing falls in between.
        self.rung = self.host.board.subscribe()
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        room = query.get("room", [""])[0] or None
        self.spawn(self.run(headers.get("last-event-id", ""), room))

    @staticmethod
    def host_problem(headers: dict[str, str]) -> str | None:
        """Host and Origin against AGENT_SALON_ALLOWED_HOSTS: the one rule (bus.strict)."""
        return strict.host_origin_problem(
            headers.get("host"), headers.get("origin"), settings.MCP_ALLOWED_HOSTS
        )

    async def run(self, last_event_id: str, room: str | None) -> None:
        try:
            await self.flow(last_event_id, room)
        except asyncio.CancelledError:
            raise
        except Exception:
            # End the response: the browser reconnects with its Last-Event-ID and resumes.
            log.exception("the live stream failed; closing it")
            await self.end_response()

    async def flow(self, last_event_id: str, room: str | None) -> None:
        clock = asyncio.get_running_loop().time
        sent_at = clock()

        async def send(chunk: bytes) -> None:
            nonlocal sent_at
            await self.send_chunk(chunk)
            sent_at = clock()

        at = live.decode(last_event_id) if last_event_id else None
        if at is None:
            at = await database_sync_to_async(live.positions)()
            for item in await database_sync_to_async(live.recent)(at):
                await send(sse("entry", item.data))
        else:
            missed = await database_sync_to_async(live.waiting)(at)
            if missed > live.REPLAY_LIMIT:
                at = await database_sync_to_async(live.positions)()
                await send(sse("gap", {"entries": missed}))
        ready = False
        panes, panes_at = None, None
        while True:
            items = await database_sync_to_async(live.after)(at)
            for item in items:
                at[item.room_id] = item.seq
                await send(sse("entry", item.data, live.encode(at)))
            if items:
                continue  # a room may have had more than one batch waiting
            if not ready:  # caught up: from here on, entries come as they are stored
                await send(sse("ready", {}, live.encode(at)))
                ready = True
            if panes_at is None or clock() - panes_at >= PANES_GAP_SECONDS:
                drawn = await database_sync_to_async(self.draw_panes)(room)
                panes_at = clock()
                if drawn != panes:
                    await send(sse("panes", drawn))
                    panes = drawn
            quiet_for = clock() - sent_at
            await bell.rung_within(self.rung, min(PANES_SECONDS, KEEPALIVE_SECONDS - quiet_for))
            if clock() - sent_at >= KEEPALIVE_SECONDS:
                await send(b": keep-alive\n\n")
            self.rung.clear()

    @staticmethod
    def draw_panes(room: str | None) -> dict[str, str]:
        return pane_html(live.panes(room))

    async def closed(self) -> None:
        if self.rung is not None:
            self.host.board.unsubscribe(self.rung)
            self.rung = None
