"""The doorbell: tells whoever watches a seat that the database has something new for it.

The database is the mailbox; a ring only saves a listener a poll, so a lost ring costs
latency, never an entry (every listener looks at the ledger again now and then).

Ringing (after a send, `ring_on_commit`):
* on PostgreSQL, NOTIFY on PG_CHANNEL inside the sending transaction, for every entry
  (one that wakes nobody too: the operator's live flow shows it): PostgreSQL delivers it
  at commit, to every process that LISTENs, on any machine;
* then, once committed and if the entry woke a seat, every ringer this process
  registered (`add_ringer`). The adapters register them, the domain never reaches up: a
  daemon rings its own listeners of the seats (salond.host.Bells; never through
  the channel layer) and, on SQLite, the other running servers of the store over their
  local line (salond.line), as a command that works on the store itself does.

Pushing in the send (`Pusher`, registered by a process that hosts streams): the woken
seats whose stream is open in the sending process have their push claimed inside the
send's transaction and handed to the pusher right after the commit (`push_on_commit`,
before the rings), which writes it from memory.

Listening (`Listener`, one per process that watches: a daemon worker, a `salon mcp`
stdio server, a `salon wait`): it hears what other processes committed.
* SQLite: PRAGMA data_version on a read-only connection of its own, every POLL_SECONDS
  (answered from memory; the ledger is read only after another connection committed),
  plus the rings that arrive on the process's line (`hear`), which make it look at once;
* PostgreSQL: LISTEN on PG_CHANNEL, on a connection of its own in a daemon thread.
What it reports to `heard` is (entry id or None, the seat ids of new waking rows). A
listener given `stored` also calls it, with no arguments, whenever new entries were
committed, waking or not, by any process (this one included): on SQLite when a room's
last_seq moved, on PostgreSQL on every notification. It only says "look": the reader
reads the entries from the store by its own positions, so a missed call costs latency.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol
from urllib.parse import quote

from django.db import connection, transaction

log = logging.getLogger("salon.bell")

PG_CHANNEL = "salon_doorbell"
POLL_SECONDS = 0.1

Ringer = Callable[[str, list[int]], None]
_ringers: list[Ringer] = []


def add_ringer(ringer: Ringer) -> None:
    if ringer not in _ringers:
        _ringers.append(ringer)


def remove_ringer(ringer: Ringer) -> None:
    if ringer in _ringers:
        _ringers.remove(ringer)


def ring_on_commit(*, entry_id, seat_ids: Iterable[int]) -> None:
    """Ring the woken seats of a send; call it inside the sending transaction.

    On PostgreSQL an entry that wakes nobody is still notified (`<id>:`, no seats), for
    the listeners that watch every stored entry; the others ignore a ring with no seats."""
    seats = sorted(set(seat_ids))
    if connection.vendor == "postgresql":
        payload = f"{entry_id}:{','.join(map(str, seats))}"
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [PG_CHANNEL, payload[:7900]])
    if seats:
        transaction.on_commit(lambda: ring(str(entry_id), seats))


def ring(entry_id: str, seat_ids: list[int]) -> None:
    for ringer in list(_ringers):
        try:
            ringer(entry_id, seat_ids)
        except Exception:  # a committed send never fails for its doorbell
            log.exception("a ringer failed for entry %s; listeners will poll", entry_id)


# ---------------------------------------------------------------- pushing in the send


class Pusher(Protocol):
    """A process's open streams, as a send sees them (mcpgate.streamhost.StreamHost).

    A push is a hint, not a telling, so it may be claimed inside the send's own
    transaction for a seat whose stream lives in the sending process, and written from
    memory right after the commit: no second transaction, no read back of the entry, no
    hop to a claimer (a crash in between loses a hint, never an entry or a telling)."""

    def pushable(self, seat_ids: Iterable[int]) -> set[int]:
        """The seats among these whose stream this process can write to now; called on
        the sending thread, inside its transaction."""

    def pushed(self, entry, pushes: dict[int, tuple[int, str]]) -> None:
        """The send committed with these pushes claimed ({seat id: (push_seq, seat
        name)}): write them. Called on the sending thread, right after the commit and
        before the entry's rings (ring_on_commit), which then spare these seats' claims."""


_pushers: list[Pusher] = []


def add_pusher(pusher: Pusher) -> None:
    if pusher not in _pushers:
        _pushers.append(pusher)


def remove_pusher(pusher: Pusher) -> None:
    if pusher in _pushers:
        _pushers.remove(pusher)


def pushers_of(seat_ids: Iterable[int]) -> dict[int, Pusher]:
    """{seat id: the pusher of this process that holds its stream} for these seats."""
    found: dict[int, Pusher] = {}
    wanted = set(seat_ids)
    for pusher in list(_pushers):
        if not wanted:
            break
        for seat_id in pusher.pushable(wanted):
            found[seat_id] = pusher
        wanted -= found.keys()
    return found


def push_on_commit(entry, pushes: dict[int, tuple[Pusher, int, str]]) -> None:
    """Hand each claimed push ({seat id: (pusher, push_seq, seat name)}) to its pusher once
    the send has committed."""
    by_pusher: dict[Pusher, dict[int, tuple[int, str]]] = {}
    for seat_id, (pusher, push_seq, name) in pushes.items():
        by_pusher.setdefault(pusher, {})[seat_id] = (push_seq, name)

    def hand_over() -> None:
        for pusher, seqs in by_pusher.items():
            try:
                pusher.pushed(entry, seqs)
            except Exception:  # the entry is stored; its pushes are claimed, not written
                log.exception("writing the pushes of entry %s failed", entry.pk)

    transaction.on_commit(hand_over)


# ---------------------------------------------------------------- listening

Heard = Callable[[str | None, set[int]], Awaitable[None] | None]
Stored = Callable[[], None]


async def rung_within(event: asyncio.Event, seconds: float) -> bool:
    """Wait until `event` is set, at most `seconds`; True if it was.

    Every loop that waits on a bell with a timeout uses this, not asyncio.wait_for: on
    Python 3.11, a task cancelled just as the event is set gets wait_for's result and
    never sees the cancel, so its loop runs on and whoever awaits the task hangs (a
    `salon relay bridge` ignored Ctrl-C that way in a test run).
    """
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


class Listener:
    """Hears what other processes committed; calls `heard(entry id, seat ids)`, and
    `stored()` (if given) when new entries were committed by any process."""

    def __init__(
        self,
        heard: Heard | None,
        *,
        poll_seconds: float = POLL_SECONDS,
        stored: Stored | None = None,
    ) -> None:
        self.heard = heard
        self.stored = stored
        self.poll_seconds = poll_seconds
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._calls: set[asyncio.Task] = set()  # held until done (the loop keeps weak refs)

    def start(self) -> None:
        if self._task is None:
            watch = self._postgres if connection.vendor == "postgresql" else self._sqlite
            self._task = asyncio.ensure_future(watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def hear(self, entry_id: str, seat_ids: Iterable[int]) -> None:
        """A ring that arrived on the line: pass it on, and look at the store soon."""
        self._wake.set()
        self._call(entry_id, set(seat_ids))

    def _call(self, entry_id: str | None, seats: set[int]) -> None:
        if not seats or self.heard is None:
            return
        result = self.heard(entry_id, seats)
        if asyncio.iscoroutine(result):
            task = asyncio.ensure_future(result)
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)

    async def _sqlite(self) -> None:
        path = connection.settings_dict["NAME"]
        watch = await asyncio.to_thread(SqliteWatch, path, entries=self.stored is not None)
        while True:
            await rung_within(self._wake, self.poll_seconds)
            self._wake.clear()
            try:
                wakes, stored = await asyncio.to_thread(watch.look)
                for entry_id, seats in wakes:
                    self._call(entry_id, seats)
                if stored and self.stored is not None:
                    self.stored()
            except Exception:  # keep watching: a failed look costs latency, not entries
                log.exception("the store watch failed; trying again in a second")
                await asyncio.sleep(1)

    async def _postgres(self) -> None:
        queue: asyncio.Queue[str] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        params = _listen_params()
        threading.Thread(
            target=_notifications, args=(params, queue, loop), name="salon-listen", daemon=True
        ).start()
        while True:
            entry_id, _, seats = (await queue.get()).partition(":")
            self._call(entry_id, {int(s) for s in seats.split(",") if s.isdigit()})
            if self.stored is not None:
                self.stored()


class SqliteWatch:
    """Which seats got new waking rows since the last look (SQLite: one writer at a time,
    so row ids are commit-ordered), and, with `entries=True`, whether any room got new
    entries (its last_seq moved: the send's own transaction moves it).

    PRAGMA data_version changes when another connection committed, this process's own
    connections included, so the watch sees the sends of its own process too."""

    def __init__(self, path: str, *, entries: bool = False) -> None:
        self.connection = sqlite3.connect(
            f"file:{quote(str(path))}?mode=ro", uri=True, check_same_thread=False, timeout=5
        )
        self.connection.execute("PRAGMA query_only=1")
        self.version = self._version()
        row = self.connection.execute("SELECT MAX(id) FROM bus_wakedecision").fetchone()
        self.last = row[0] or 0
        self.rooms = self._rooms() if entries else None

    def _version(self) -> int:
        return self.connection.execute("PRAGMA data_version").fetchone()[0]

    def _rooms(self) -> dict[int, int]:
        # A handful of rows, read only after another connection committed.
        return dict(self.connection.execute("SELECT id, last_seq FROM bus_room").fetchall())

    def look(self) -> tuple[list[tuple[str, set[int]]], bool]:
        """(new waking rows by entry, whether new entries were stored) since the last look."""
        version = self._version()
        if version == self.version:
            return [], False
        self.version = version
        stored = False
        if self.rooms is not None:
            rooms = self._rooms()
            stored, self.rooms = rooms != self.rooms, rooms
        return self._wakes(), stored

    def _wakes(self) -> list[tuple[str, set[int]]]:
        rows = self.connection.execute(
            "SELECT id, seat_id, entry_id FROM bus_wakedecision WHERE id > ? AND woken "
            "ORDER BY id LIMIT 5000",
            (self.last,),
        ).fetchall()
        if not rows:
            return []
        self.last = rows[-1][0]
        by_entry: dict[str, set[int]] = {}
        for _, seat_id, entry_id in rows:
            if seat_id is not None:
                by_entry.setdefault(str(entry_id), set()).add(seat_id)
        return list(by_entry.items())

    def close(self) -> None:
        self.connection.close()


def _listen_params() -> dict:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return params


def _notifications(params: dict, queue: asyncio.Queue, loop: asyncio.AbstractEventLoop) -> None:
    """Blocking, in a daemon thread: LISTEN forever and hand each payload to the loop.
    Reconnects after a failure (a lost notification costs latency, never an entry)."""
    import psycopg

    while True:
        try:
            with psycopg.connect(autocommit=True, **params) as listener:
                listener.execute(f"LISTEN {PG_CHANNEL}")
                for notify in listener.notifies():
                    loop.call_soon_threadsafe(queue.put_nowait, notify.payload)
        except Exception:
            log.exception("LISTEN connection failed; reconnecting in 1 s")
            time.sleep(1)
