"""`salon watch [ROOM]`: the operator's live flow in a terminal, one line per new entry,
until Ctrl-C:

    14:02:11 team QUESTION web-app#3f9c1a20 → api-service (wakes api-service#c4e1aa01): "…"

The time is the terminal's local time; `→` names the addressees (none: a broadcast);
`(wakes …)` marks the seats it woke, as `send` named them when it was stored; `(waits for …:
gone)` the seats the rule woke that were gone then, which the entry waits for; `(quiet: …)`
the seats whose quiet held it back; `(decided there: …)` the seats of other machines it is
for, whose own machine decides whether it wakes them.

It reads the store itself, with the listener the daemon and `salon wait` use
(bus.bell.Listener: on SQLite PRAGMA data_version, on PostgreSQL LISTEN), so it works
with or without a daemon, and sees what every process stores. Read-only: it is nobody's
seat, moves no cursor, marks nothing told.
"""

from __future__ import annotations

import asyncio
import signal
from datetime import datetime

from asgiref.sync import sync_to_async
from django.db import DatabaseError, connection

from bus import bell, live, services, strict
from bus.management.base import BusCommand, one_line

PREVIEW_CHARS = 100
SAFETY_SECONDS = 5.0  # looks at the store this often even without a ring


def clip(text: str, limit: int = PREVIEW_CHARS) -> str:
    """One line of at most `limit` characters, control characters escaped."""
    flat = " ".join(text.split())
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in flat)
    return flat if len(flat) <= limit else flat[:limit] + "…"


def format_line(entry: dict) -> str:
    when = datetime.fromisoformat(entry["ts"].replace("Z", "+00:00")).astimezone()
    to = f" → {', '.join(strict.loggable(n, 200) for n in entry['to'])}" if entry["to"] else ""
    wakes = f" (wakes {', '.join(entry['wakes'])})" if entry["wakes"] else ""
    waits = f" (waits for {', '.join(entry['waiting'])}: gone)" if entry["waiting"] else ""
    quiet = f" (quiet: {', '.join(entry['quieted'])})" if entry["quieted"] else ""
    there = entry["decidedThere"]
    quiet += f" (decided there: {', '.join(there)})" if there else ""
    tampered = " TAMPERED (its signature does not match)" if entry["tampered"] else ""
    room, sender = strict.loggable(entry["room"], 200), strict.loggable(entry["from"], 200)
    return (
        f"{when:%H:%M:%S} {room} {strict.loggable(entry['type'], 16)} {sender}{to}{wakes}{waits}"
        f'{quiet}{tampered}: "{clip(entry["content"])}"'
    )


async def in_thread(function, *args, **kwargs):
    """The ORM from the event loop: on the one thread that holds this process's connection."""
    return await sync_to_async(function, thread_sensitive=True)(*args, **kwargs)


class Command(BusCommand):
    help = (
        "Print one line per new entry as it is stored (every room, or ROOM), with the "
        "seats it wakes, until Ctrl-C. Reads only; works with or without a running server."
    )

    def add_arguments(self, parser):
        parser.add_argument("room", nargs="?", metavar="ROOM", help="only this room")

    def handle(self, *, room, **options):
        # An unknown room is refused in one line, naming the rooms that exist.
        self.room = services.rooms.get_room(room) if room else None
        asyncio.run(self.watch())

    def emit(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    async def watch(self) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        rung = asyncio.Event()
        listener = bell.Listener(None, stored=rung.set)
        listener.start()  # listen first, then read where the rooms are: nothing in between
        at = await in_thread(live.positions, self.room)
        where = f"room {self.room.name!r}" if self.room else "every room"
        self.note(f"salon watch: watching {where}; Ctrl-C stops")  # stderr: stdout is the flow
        try:
            while not stop.is_set():
                if await self.print_new(at):
                    continue  # a room may have had more than one batch waiting
                waits = [asyncio.ensure_future(e.wait()) for e in (rung, stop)]
                await asyncio.wait(
                    waits, timeout=SAFETY_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
                for wait in waits:
                    wait.cancel()
                rung.clear()
        finally:
            await listener.stop()

    async def print_new(self, at: live.Positions) -> int:
        """Print the entries stored after `at` and move `at` past them; how many."""
        try:
            items = await in_thread(live.after, at, room=self.room)
        except DatabaseError as exc:  # a restarted database: reconnect, look again later
            self.note(f"salon watch: database error ({one_line(exc)}); retrying")
            await in_thread(connection.close)
            return 0
        for item in items:
            at[item.room_id] = item.seq
            self.emit(format_line(item.data))
        return len(items)
