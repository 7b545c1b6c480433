"""A process that serves its store: a daemon worker, or a `salon mcp` stdio server. One
object (Daemon) owns what such a process runs beside its requests:

* the push path of its streams, which the adapter that hosts them adds
  (mcpgate.streamhost.StreamHost: the claimer, the keep-alive ticker, the delivery
  records) and the doorbell hands the streams a send wrote to already (`written_here`);
* the doorbell: after a send committed here it rings this process's listeners of the
  woken seats (Bells) and, on SQLite, the other servers of the store over their line;
  its listener (bus.bell.Listener) hears what other processes committed (PostgreSQL's
  NOTIFY, the line, SQLite's data_version) and rings this process's listeners. Every
  process that hosts streams has such a listener, so no doorbell crosses the channel
  layer: with Redis and three workers, each ring was a group send per seat from every
  worker that heard the commit (the layer carries the streams' own messages: a
  takeover, a rebind, a session's end);
* the board of the operator's live view (`board`): the listener rings it for every new
  entry of the store, whoever wrote it, and each open live stream of this process reads
  the new entries from the store (salon.live);
* the local line (salond.line): commands and hooks of the same store send it their
  requests, answered by bus.management.ops on the database thread;
* in a daemon (`run_companions=True`), what other apps registered to run beside it with
  salond.companions (the relay's bridge), started with it and stopped with it.

Nothing starts at import or construction: `start()` does, once the event loop runs
(`salon serve` calls it when daphne listens; a first request calls it too).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import json
import logging
import os
import sys
import threading
import weakref
from collections import deque
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from bus import bell, strict
from bus.management import ops
from salond import companions, line

log = logging.getLogger("salon.host")


def own_store() -> str:
    """This process's store, spelled as salond.line spells a client's."""
    return settings.STORE


class Board:
    """Rings this process's live-view streams: each holds an asyncio.Event (`subscribe`),
    set whenever new entries may have been stored. In-process on purpose: every server
    process has a listener that hears every commit of the store, so a ring never needs
    to cross to another worker (through Redis it would reach each stream once per
    worker). Used in the event loop only."""

    def __init__(self) -> None:
        self._events: set[asyncio.Event] = set()

    def subscribe(self) -> asyncio.Event:
        event = asyncio.Event()
        self._events.add(event)
        return event

    def unsubscribe(self, event: asyncio.Event) -> None:
        self._events.discard(event)

    def ring(self) -> None:
        for event in self._events:
            event.set()


class Bells:
    """This process's doorbell listeners per seat (its HTTP streams and waits, a stdio
    server), rung by a direct call: a broadcast to 1,000 local streams was 1,000 group
    sends and 1,000 consumer wake-ups before the one claim. A listener that vanished
    without leaving is dropped with it (weak references)."""

    def __init__(self) -> None:
        self._by_seat: dict[int, weakref.WeakSet] = {}

    def add(self, seat_id: int, listener) -> None:
        self._by_seat.setdefault(seat_id, weakref.WeakSet()).add(listener)

    def discard(self, seat_id: int, listener) -> None:
        listeners = self._by_seat.get(seat_id)
        if listeners is not None:
            listeners.discard(listener)
            if not listeners:
                del self._by_seat[seat_id]

    def ring(self, seat_ids, pushed: Mapping[int, Any] = MappingProxyType({})) -> None:
        """`pushed`: {seat id: the stream this process wrote the push to already}; that
        stream is told so (it claims nothing), every other listener hears as usual."""
        for seat_id in seat_ids:
            written = pushed.get(seat_id)
            for listener in list(self._by_seat.get(seat_id, ())):
                listener.hear_bell(pushed=listener is written)


# One per process, as the in-process layer is: every host of the process rings them all.
process_bells = Bells()


class LoopCalls:
    """Calls made from another thread (the database thread, after a commit) to run on the
    event loop, in the order made, with one wake-up of the loop for all that are made
    before it runs them. Each call_soon_threadsafe wakes the loop through its self-pipe
    (a write, a wake-up and a GIL hand-over); a send's commit made three."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self._calls: list = []
        self._lock = threading.Lock()
        self._scheduled = False

    def soon(self, call, *args) -> None:
        with self._lock:
            self._calls.append((call, args))
            if self._scheduled:
                return
            self._scheduled = True
        # In a fresh context: this runs on the database thread, inside asgiref's
        # executor, and a task started in its context (the claimer's) would have its own
        # database calls refused as a deadlock.
        self.loop.call_soon_threadsafe(self._run, context=contextvars.Context())

    def _run(self) -> None:
        with self._lock:
            calls, self._calls = self._calls, []
            self._scheduled = False
        for call, args in calls:
            try:
                call(*args)
            except Exception:  # one failed call does not keep the others from running
                log.exception("a call handed to the event loop failed")


class RecentRings:
    """Entries this process rang itself, so its listener does not ring them again."""

    def __init__(self, size: int = 4096) -> None:
        self._order: deque[str] = deque(maxlen=size)
        self._keys: set[str] = set()

    @staticmethod
    def _key(entry_id) -> str:
        return str(entry_id).replace("-", "")

    def add(self, entry_id) -> None:
        key = self._key(entry_id)
        if len(self._order) == self._order.maxlen:
            self._keys.discard(self._order[0])
        self._order.append(key)
        self._keys.add(key)

    def __contains__(self, entry_id) -> bool:
        return self._key(entry_id) in self._keys


# ---------------------------------------------------------------- the local line


async def _read_to_end(reader: asyncio.StreamReader) -> bytes | None:
    """Everything the client sends before it shuts its side; None past the size limit."""
    chunks, size = [], 0
    while chunk := await reader.read(65536):
        size += len(chunk)
        if size > line.MAX_MESSAGE_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


class LineServer:
    """One server's end of the line, in its event loop.

    `answer(request)` is the server's: an async callable from a request to its answer
    dict; `hear(entry_id, seat_ids)` takes the rings. Both run in the loop.
    """

    def __init__(self, store: str, settings_key: str, answer, hear, kind: str = "stdio") -> None:
        self.store = store
        self.settings_key = settings_key
        self.kind = kind  # "daemon" (salon serve, runserver) or "stdio" (salon mcp)
        self.answer = answer
        self.hear = hear
        self.path: str | None = None
        self.problem = ""  # why start() found no socket to listen on, in the user's words
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> str | None:
        """Listen; the socket's path, or None (and `problem` says why) when the runtime
        directory is not private or the socket cannot be made there (commands then work
        on the store themselves, only more slowly)."""
        directory = line.runtime_dir()
        with contextlib.suppress(OSError):
            os.makedirs(directory, mode=0o700, exist_ok=True)
        if not line.private(directory):
            self.problem = f"{directory} is not a private directory of this user (mode 700)"
            return None
        path = line.socket_path(self.store)
        if len(os.fsencode(path)) > line.SOCKET_PATH_MAX:
            self.problem = (
                f"the socket path {path} is {len(os.fsencode(path))} bytes, longer than a "
                f"socket's {line.SOCKET_PATH_MAX}: set TMPDIR to a shorter directory"
            )
            return None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a file of an earlier process with our pid: stale
        previous = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=path)
        except OSError as error:
            self.problem = f"cannot listen on {path}: {error.strerror or error}"
            return None
        finally:
            os.umask(previous)
        self.path = path
        atexit.register(self._remove_file)  # a stopped server leaves no socket behind
        return path

    def _remove_file(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self.path = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(line.GREETING)  # the client sends its request only after this
            answer = await self._answer(reader, writer)
            if answer is not None:
                writer.write(json.dumps(answer).encode())
                await asyncio.wait_for(writer.drain(), line.ANSWER_SECONDS)
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()

    async def _answer(self, reader, writer) -> dict | None:
        sock = writer.get_extra_info("socket")
        if sock is not None and not line.same_user(sock):
            return {"ok": False, "error": "the caller is another user"}
        try:
            body = await asyncio.wait_for(_read_to_end(reader), line.ANSWER_SECONDS)
            if body is None:
                return {"ok": False, "error": "the request is too large"}
            request = strict.decode_json(body)
            if not isinstance(request, dict) or request.get("v") != line.WIRE_VERSION:
                return {"ok": False, "error": "not a request of this wire version"}
        except strict.NotJson as exc:
            log.warning("the local line refused a request: %s", exc)
            return {"ok": False, "error": f"unreadable request: {exc}"}
        except TimeoutError:
            return {"ok": False, "error": "unreadable request"}
        if request.get("store") != self.store:
            return {"ok": False, "error": "another store"}
        ring = request.get("ring")
        if isinstance(ring, dict):
            seats = [s for s in ring.get("seats") or [] if isinstance(s, int)]
            if seats:
                self.hear(str(ring.get("entry")), seats)
            return None  # a ring expects no answer
        if request.get("op") == "hello":  # `salon where`: which kind, and for whom
            answers = request.get("settings") == self.settings_key
            return {"ok": True, "result": {"kind": self.kind, "answers": answers}}
        if request.get("settings") != self.settings_key:
            return {"ok": False, "error": "other settings: run it in the caller's process"}
        return await self.answer(request)


# ---------------------------------------------------------------- the daemon


class Daemon:
    """What a process that serves its store runs beside its requests. An adapter that
    hosts streams extends it (mcpgate.streamhost: the MCP push path); `written_here` is
    its hook into the doorbell."""

    def __init__(self, *, serve_line: bool = True, run_companions: bool = False) -> None:
        self.calls = LoopCalls()  # from the database thread, after a commit
        self.board = Board()
        self.bells = process_bells
        self.listener = bell.Listener(self.heard, stored=self.board.ring)
        self.recent = RecentRings()
        self.store = own_store()
        self.peers = line.ServerList(self.store)  # the other servers a send rings
        self.line = LineServer(
            self.store,
            settings.SETTINGS_KEY,
            self.answer,
            self.listener.hear,
            kind="daemon" if run_companions else "stdio",
        )
        self.serve_line = serve_line
        self.run_companions = run_companions  # a daemon starts the registered companions
        self.running: list[Any] = []  # the companions started
        self.loop: asyncio.AbstractEventLoop | None = None
        self._started = False

    # -- life ---------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.loop = self.calls.loop = asyncio.get_running_loop()
        bell.add_ringer(self.ring_after_commit)
        self.listener.start()
        if self.serve_line and await self.line.start() is None:
            print(
                f"agent-salon: warning: {self.line.problem}: commands and hooks will not "
                "use this process (they still work, more slowly)",
                file=sys.stderr,
            )
        if self.run_companions:
            for start in list(companions.registered):
                try:
                    self.running.append(await start(self))
                except Exception:  # the daemon serves its streams without it
                    log.exception("a companion of the daemon did not start")

    async def stop(self) -> None:
        for companion in reversed(self.running):
            with contextlib.suppress(Exception):
                await companion.stop()
        self.running.clear()
        bell.remove_ringer(self.ring_after_commit)
        await self.listener.stop()
        await self.line.stop()

    # -- the doorbell ---------------------------------------------------------------

    def written_here(self, entry_id: str) -> Mapping[int, Any]:
        """{seat id: the stream this process already wrote the entry's push to}; none
        here (mcpgate.streamhost has streams)."""
        return MappingProxyType({})

    def ring_after_commit(self, entry_id: str, seat_ids: list[int]) -> None:
        """A send committed in this process (on whichever thread): ring this process's
        listeners of the seats, and on SQLite the other servers of the store over their
        line."""
        self.recent.add(entry_id)
        pushed = self.written_here(str(entry_id))
        if self.loop is None or self.loop.is_closed():
            return
        # With the pushes this commit put in the outbox: one wake-up of the loop for all.
        self.calls.soon(self._ring_here, seat_ids, pushed)
        self.calls.soon(self.board.ring)  # sooner than the listener's look
        if not settings.DATABASE_URL:
            self._ring_line(entry_id, seat_ids)

    def _ring_here(self, seat_ids: list[int], pushed: Mapping[int, Any]) -> None:
        self.bells.ring(seat_ids, pushed)

    def _ring_line(self, entry_id: str, seat_ids: list[int]) -> None:
        """Fire and forget: a connect and a write per server of the store, no waiting."""
        try:
            line.ring(
                self.store, entry_id, seat_ids, skip=self.line.path, paths=self.peers.current()
            )
        except OSError:
            log.warning("could not ring the other servers of the store", exc_info=True)

    def heard(self, entry_id: str | None, seat_ids: set[int]) -> None:
        """Another process committed waking rows for these seats."""
        if entry_id is not None:
            if entry_id in self.recent:
                return
            self.recent.add(entry_id)
        self.bells.ring(seat_ids)

    # -- the line -------------------------------------------------------------------

    async def answer(self, request: dict) -> dict:
        return await database_sync_to_async(ops.answer)(request)
