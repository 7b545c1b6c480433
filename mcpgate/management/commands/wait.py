"""`salon wait [--once] [--timeout S] [ROOM…]`: for Claude Code's Monitor tool.

Prints one line per entry that is a claim on this seat (the wake rule, as recorded in the
ledger at send time):

    [salon] QUESTION from api-service#c4e1b7d2 in "team": "<first 240 chars>" — read it
    with inbox (room team)                                           (one line, really)

* Once per entry, across restarts, and once across every way of telling: an entry
  already told to the seat (by an earlier `salon wait`, the `wait` tool, a Stop block,
  the SessionStart context or an inbox read) is not printed; one printed here is told
  (services.telling.announce_wakes). An entry pushed to a stream of the seat is printed
  all the same — a push is only a hint, Claude Code may have dropped it — and its line
  says it was pushed. The cursor never moves.
  At most 10 lines at a time; beyond that one summary line counts the rest.
* Latency: it subscribes first, then prints what is already waiting, then waits for the
  doorbell (bus.bell.Listener: on SQLite `PRAGMA data_version` every 200 ms, answered
  from memory; on PostgreSQL LISTEN), and re-checks the ledger every SAFETY_SECONDS
  anyway (a lost doorbell costs latency, never an entry).
* While it runs the seat counts as live (like an open stream).
* It exits when the session that armed it is gone — its parent process changed (the
  parent died and it was re-parented) or the owning Claude Code process ended (see
  mcpgate.claude.processes.OwnerWatch) — after `--timeout S` seconds, or on SIGTERM/SIGINT.
  `--once` prints what is already waiting and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time

from asgiref.sync import sync_to_async

from bus import bell, services, strict, wire
from bus.management.base import BusCommand, caller_from_settings, one_line
from bus.management.ops import Call
from bus.management.verbs import types
from mcpgate.claude.processes import OwnerWatch

LINE_CHARS = 240
MAX_LINES = 10
# Looks in one announce: an entry stored while the judge ran is judged by the next one,
# then told (services.triage); past these, the next ring or safety check takes the rest.
JUDGED_LOOKS = 4
SQLITE_POLL = 0.2
SAFETY_SECONDS = 5.0
LIVE_SECONDS = 45
RENEW_SECONDS = 30


def seconds_arg(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"{value[:64]!r} is not a number of seconds above 0")
    return seconds


def format_line(entry: dict) -> str:
    text = " ".join(entry["content"].split())
    if len(text) > LINE_CHARS:
        text = text[:LINE_CHARS] + "…"
    text = strict.terminal_safe(text)  # the Monitor shows it: no escape reaches a terminal
    tampered = (
        " (TAMPERED: its signature does not match — do not trust it)" if entry["tampered"] else ""
    )
    sender, room = strict.loggable(entry["from"], 200), strict.loggable(entry["room"], 200)
    return (
        f'[salon] {strict.loggable(entry["type"], 16)} from {sender} in "{room}": "{text}"'
        f"{tampered} — read it with inbox (room {room}){wire.pushed_note(entry)}"
    )


# ---------------------------------------------------------------- the command


async def in_thread(function, **kwargs):
    """The ORM from the event loop: on the one thread that holds this process's connection."""
    return await sync_to_async(function, thread_sensitive=True)(**kwargs)


class Command(BusCommand):
    help = (
        "For Claude Code's Monitor tool: print one line per entry that is a claim on this "
        "seat, once per entry, and keep waiting; exits when the session that armed it is "
        "gone. --once prints what is already waiting and exits; --timeout S stops after S "
        "seconds. ROOM… limits it to those rooms. Never marks anything read."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "rooms", nargs="*", type=types.room_arg, metavar="ROOM", help="only these rooms"
        )
        parser.add_argument(
            "--once", action="store_true", help="print what is already waiting, then exit"
        )
        parser.add_argument("--timeout", type=seconds_arg, metavar="S", help="exit after S seconds")

    def handle(self, *, rooms, once, timeout, **options):
        self.owner = OwnerWatch()
        self.seat = Call(args={}, caller=caller_from_settings()).seat()
        self.rooms = rooms or None
        mine = set(services.rooms.seat_rooms(self.seat))
        for room in rooms:
            services.rooms.get_room(room)  # an unknown room is refused, naming those that exist
            if room not in mine:
                self.note(
                    f"salon wait: {self.seat.name} is not in room {room!r}, so nothing there "
                    f"is a claim on it (join it: salon join {room})"
                )
        if not self.seat.session_id:
            self.note(
                f"salon wait: no CLAUDE_CODE_SESSION_ID: waiting as the bare agent name "
                f"{self.seat.name!r}"
            )
        if once:
            self.announce()
            return
        asyncio.run(self.watch(timeout))

    def emit(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def announce(self) -> int:
        """Print the waiting entries not yet told about; returns how many were printed.
        The letterbox and the safety net judge first (services.triage), here in this
        process: what they hold back is not printed, what the net lets through is. An
        entry stored while the judge ran is not told unjudged: it is judged, then told, by
        the next look."""
        batch: list[dict] = []
        for look in range(JUDGED_LOOKS):
            judged = services.triage.judge(seat=self.seat, room_names=self.rooms)
            if look and not judged:
                break  # nothing was stored while the judge ran: all is told
            batch += services.telling.announce_wakes(
                seat=self.seat, rooms=self.rooms, limit=MAX_LINES - len(batch)
            )
            if len(batch) >= MAX_LINES:
                break
        for entry in batch:
            self.emit(format_line(entry))
        if len(batch) >= MAX_LINES:
            rest = services.telling.announce_wakes(seat=self.seat, rooms=self.rooms, limit=100_000)
            if rest:
                counts: dict[str, int] = {}
                for entry in rest:
                    counts[entry["room"]] = counts.get(entry["room"], 0) + 1
                where = ", ".join(f"{room} {n}" for room, n in sorted(counts.items()))
                self.emit(
                    f"[salon] and {len(rest)} more entries that are a claim on you ({where}) "
                    "— read them with inbox"
                )
        return len(batch)

    async def watch(self, timeout: float | None) -> None:
        from django.db import DatabaseError, connection

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        rung = asyncio.Event()

        def heard(entry_id, seat_ids) -> None:
            if self.seat.pk in seat_ids:
                rung.set()

        listener = bell.Listener(heard, poll_seconds=SQLITE_POLL)
        listener.start()  # subscribe first, then print what is already waiting
        await in_thread(self.announce)
        started = checked = renewed = time.monotonic()
        live_until = await in_thread(services.seats.keep_live, seat=self.seat, seconds=LIVE_SECONDS)
        try:
            while not stop.is_set():
                gone = self.owner.gone()
                if gone:
                    self.note(f"salon wait: the session that armed it is gone ({gone}); exiting")
                    return
                now = time.monotonic()
                if timeout is not None and now - started >= timeout:
                    return
                step = 1.0 if timeout is None else max(min(1.0, timeout - (now - started)), 0)
                await bell.rung_within(rung, step)
                now = time.monotonic()
                try:
                    if rung.is_set() or now - checked >= SAFETY_SECONDS:
                        rung.clear()
                        checked = now
                        await in_thread(self.announce)
                    if now - renewed >= RENEW_SECONDS:
                        renewed = now
                        live_until = await in_thread(
                            services.seats.keep_live, seat=self.seat, seconds=LIVE_SECONDS
                        )
                except DatabaseError as exc:  # a restarted database: reconnect next round
                    self.note(f"salon wait: database error ({one_line(exc)}); retrying")
                    await in_thread(connection.close)
                    await asyncio.sleep(1)
        finally:
            await listener.stop()
            await in_thread(services.seats.end_live, seat=self.seat, only_if_until=live_until)
