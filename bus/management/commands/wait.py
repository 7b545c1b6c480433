"""`salon wait [--once] [--timeout S] [ROOM…]`: for Claude Code's Monitor tool (SPEC §8).

Prints one line per entry that is a claim on this seat (the §5 rule, as recorded in the
ledger at send time):

    [salon] QUESTION from api-service#c4e1b7d2 in "team": "<first 240 chars>" — read it
    with inbox (room team)                                           (one line, really)

* Once per entry, across restarts: an entry announced by an earlier `salon wait` or
  `wait` tool call is not printed again (services.announce_wakes marks
  WakeDecision.announced_at). An entry pushed over MCP is still printed: whether Claude
  Code showed the push is unknown (channels may be off on its side). The cursor never
  moves.
  At most 10 lines at a time; beyond that one summary line counts the rest.
* Latency: it subscribes first, then prints what is already waiting, then waits for a
  doorbell: on the embedded SQLite store (with or without Redis) it asks `PRAGMA
  data_version` on a connection of its own every 200 ms (answered from memory; the
  ledger is queried only when another connection committed); on PostgreSQL it listens
  to the seat's doorbell group on Redis, or LISTENs without Redis; both also re-check
  the ledger every 5 s (a lost doorbell costs latency, never an entry).
* While it runs the seat counts as live (like an open stream).
* It exits when the session that armed it is gone — its parent process changed (the
  parent died and it was re-parented) or the owning Claude Code process ended (see
  bus.claude.OwnerWatch) — after `--timeout S` seconds, or on SIGTERM/SIGINT.
  `--once` prints what is already waiting and exits.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from bus.management import cli
from bus.management.base import one_line

LINE_CHARS = 240
MAX_LINES = 10
SQLITE_POLL = 0.2
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
    tampered = (
        " (TAMPERED: its signature does not match — do not trust it)" if entry["tampered"] else ""
    )
    return (
        f'[salon] {entry["type"]} from {entry["from"]} in "{entry["room"]}": "{text}"'
        f"{tampered} — read it with inbox (room {entry['room']})"
    )


# ---------------------------------------------------------------- doorbells


class PollBell:
    """No doorbell at all: every wait ends in a re-check."""

    safety = 1.0

    def wait(self, seconds: float) -> bool:
        time.sleep(seconds)
        return True

    def close(self) -> None:
        pass


class SqliteBell:
    """PRAGMA data_version changes when another connection commits to the file."""

    safety = 30.0

    def __init__(self, path) -> None:
        import sqlite3
        from urllib.parse import quote

        self.connection = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=5)
        self.version = self._version()

    def _version(self) -> int:
        return self.connection.execute("PRAGMA data_version").fetchone()[0]

    def wait(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while True:
            version = self._version()
            if version != self.version:
                self.version = version
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(SQLITE_POLL, left))

    def close(self) -> None:
        self.connection.close()


class PostgresBell:
    """LISTEN on the channel bus.doorbell NOTIFYs when there is no Redis."""

    safety = 5.0

    def __init__(self, seat_id: int) -> None:
        import psycopg
        from django.db import connection

        from bus import doorbell

        params = connection.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        self.listener = psycopg.connect(autocommit=True, **params)
        self.listener.execute(f"LISTEN {doorbell.PG_CHANNEL}")
        self.seat = str(seat_id)

    def wait(self, seconds: float) -> bool:
        for notify in self.listener.notifies(timeout=seconds, stop_after=1):
            seats = notify.payload.partition(":")[2].split(",")
            if self.seat in seats:
                return True
        return False

    def close(self) -> None:
        self.listener.close()


class RedisBell:
    """The seat's doorbell group on the Redis channel layer, heard on a thread of its own."""

    safety = 5.0

    def __init__(self, seat_id: int) -> None:
        import threading

        from bus import doorbell

        self.group = doorbell.seat_group(seat_id)
        self.rung = threading.Event()
        self.ready = threading.Event()
        self.failed: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="salon-wait-bell", daemon=True)
        self.thread.start()
        if not self.ready.wait(10) or self.failed:
            raise RuntimeError(f"could not subscribe to {self.group}: {self.failed}")

    def _run(self) -> None:
        import asyncio

        try:
            asyncio.run(self._listen())
        except BaseException as exc:  # the main loop falls back to its safety poll
            self.failed = exc
            self.ready.set()

    async def _listen(self) -> None:
        import asyncio

        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(self.group, channel)
        self.ready.set()
        renewed = time.monotonic()
        while True:
            try:
                await asyncio.wait_for(layer.receive(channel), timeout=30)
                self.rung.set()
            except TimeoutError:
                pass
            if time.monotonic() - renewed > 600:  # group membership expires in Redis
                await layer.group_add(self.group, channel)
                renewed = time.monotonic()

    def wait(self, seconds: float) -> bool:
        if self.failed:
            time.sleep(seconds)
            return True
        rung = self.rung.wait(seconds)
        self.rung.clear()
        return rung

    def close(self) -> None:
        pass


def open_bell(seat_id: int):
    from django.conf import settings
    from django.db import connection

    if connection.vendor == "sqlite" and not settings.DATABASE_URL:
        # Even with Redis: a CLI on SQLite rings no Redis (bus.doorbell), every commit
        # changes data_version.
        return SqliteBell(settings.DB_PATH)
    if settings.REDIS_URL:
        return RedisBell(seat_id)
    if connection.vendor == "postgresql":
        return PostgresBell(seat_id)
    return PollBell()


# ---------------------------------------------------------------- the command


class Command(cli.BusCommand):
    help = (
        "For Claude Code's Monitor tool: print one line per entry that is a claim on this "
        "seat, once per entry, and keep waiting; exits when the session that armed it is "
        "gone. --once prints what is already waiting and exits; --timeout S stops after S "
        "seconds. ROOM… limits it to those rooms. Never marks anything read."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "rooms", nargs="*", type=cli.room_arg, metavar="ROOM", help="only these rooms"
        )
        parser.add_argument(
            "--once", action="store_true", help="print what is already waiting, then exit"
        )
        parser.add_argument("--timeout", type=seconds_arg, metavar="S", help="exit after S seconds")

    def handle(self, *, rooms, once, timeout, **options):
        from bus import services
        from bus.claude import OwnerWatch

        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        self.owner = OwnerWatch()
        self.seat = cli.my_seat()
        self.rooms = rooms or None
        mine = set(services.seat_rooms(self.seat))
        for room in rooms:
            services.get_room(room)  # an unknown room is refused, naming those that exist
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
        bell = self.open_bell()  # subscribe first, then print what is already waiting
        try:
            self.announce()
            self.watch(bell, timeout)
        finally:
            bell.close()

    def open_bell(self):
        try:
            return open_bell(self.seat.pk)
        except Exception as exc:
            self.note(f"salon wait: no doorbell ({one_line(exc)}); polling every second")
            return PollBell()

    def emit(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def announce(self) -> int:
        """Print the waiting entries not yet told about; returns how many were printed."""
        from bus import services

        batch = services.announce_wakes(seat=self.seat, rooms=self.rooms, limit=MAX_LINES)
        for entry in batch:
            self.emit(format_line(entry))
        if len(batch) == MAX_LINES:
            rest = services.announce_wakes(seat=self.seat, rooms=self.rooms, limit=100_000)
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

    def watch(self, bell, timeout: float | None) -> None:
        from django.db import DatabaseError, connection

        from bus import services

        started = time.monotonic()
        checked = renewed = started
        live_until = services.keep_live(seat=self.seat, seconds=LIVE_SECONDS)
        try:
            while True:
                gone = self.owner.gone()
                if gone:
                    self.note(f"salon wait: the session that armed it is gone ({gone}); exiting")
                    return
                now = time.monotonic()
                if timeout is not None and now - started >= timeout:
                    return
                step = 1.0 if timeout is None else max(min(1.0, timeout - (now - started)), 0)
                rang = bell.wait(step)
                now = time.monotonic()
                try:
                    if rang or now - checked >= bell.safety:
                        checked = now
                        self.announce()
                    if now - renewed >= RENEW_SECONDS:
                        renewed = now
                        live_until = services.keep_live(seat=self.seat, seconds=LIVE_SECONDS)
                except DatabaseError as exc:  # a restarted database: reconnect next round
                    self.note(f"salon wait: database error ({one_line(exc)}); retrying")
                    connection.close()
                    time.sleep(1)
        finally:
            services.end_live(seat=self.seat, only_if_until=live_until)
