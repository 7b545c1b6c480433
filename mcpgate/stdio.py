"""`salon mcp`: the same MCP tools over stdio, for Claude Code's stdio server setup.

Identity: the agent is AGENT_SALON_NAME or the working directory's name; the seat comes
from CLAUDE_CODE_SESSION_ID (Claude Code puts it in a stdio server's environment), else
from the session a client names in each tool call (Codex CLI: `_meta.sessionId`, the id
its hooks get too; OpenCode: the `_salon_session` argument its plugin adds to each call,
taken out before the call is checked), taken at the first call; Gemini CLI names none,
and the server takes the one its hooks recorded for their gemini process
(mcpgate.gemini.sessions). A call that names another session than the server's is
refused: one server serves one session's seat, and never writes in another's name. The
server makes no seat of its own: a seat appears when the session's hook checks it in or
a tool is called (`claude mcp list` starts the server too, and must leave nothing
behind).
Until then the server looks for it every SEAT_LOOK_SECONDS. Once it has its seat, the seat
is `live` while the process runs and waking entries are pushed to it as
notifications/claude/channel, by the same claimer and ticker an HTTP stream has
(mcpgate.streamhost.StreamHost); the process also serves its store's local line, so hooks and
commands of every session find a server.

One JSON-RPC message per line on stdin and stdout; logs go to stderr only. `initialize`
may have been answered already (mcpgate.greeting, before Django was loaded). The server
ends when stdin closes, and on SIGINT or SIGTERM (Claude Code stops it with SIGINT, then
SIGTERM 100 ms later), signing its seat off at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading

from channels.db import database_sync_to_async
from django.conf import settings

from bus import rules, services
from bus.models import Seat
from mcpgate import protocol, tools
from mcpgate.arguments import validate_arguments
from mcpgate.protocol import ProtocolError
from mcpgate.streamhost import StreamHost

log = logging.getLogger("salon.mcp")

# One message per line, as large as a POST body may be. A longer line is read
# and dropped in pieces of SKIP_BYTES, never held whole, and answered with an error.
MAX_LINE_BYTES = protocol.MAX_BODY_BYTES
SKIP_BYTES = 1 << 16
# How often a server without a seat looks whether its session's hook made one.
SEAT_LOOK_SECONDS = 1.0


class OverlongLine:
    """Stands in the line queue for a line that was skipped: how long it was."""

    def __init__(self, size: int) -> None:
        self.size = size


# OpenCode gives its MCP servers no session; agent-salon's plugin adds it to each call's
# arguments (mcpgate.opencode.plugin).
SESSION_ARGUMENT = "_salon_session"


def _named_session(params: dict) -> tuple[str | None, bool]:
    """(the session a tools/call names, if any; whether agent-salon's own plugin named
    it). OpenCode's argument is taken out of the arguments."""
    arguments = params.get("arguments")
    if isinstance(arguments, dict) and SESSION_ARGUMENT in arguments:
        named = arguments.pop(SESSION_ARGUMENT)
        return (named if isinstance(named, str) else None), True
    meta = params.get("_meta")
    named = meta.get("sessionId") if isinstance(meta, dict) else None
    return (named if isinstance(named, str) else None), False


class StdioBinding:
    """The tools' view of a stdio server: one agent, one Claude Code session."""

    # The session id comes with the process (CLAUDE_CODE_SESSION_ID): nothing to check in.
    takes_checkin = False

    def __init__(self, agent: str, session_id: str | None):
        self.label = agent
        self.client_session = session_id
        self.session_id = ""
        self.protocol_version = protocol.LATEST_VERSION
        self._seat: Seat | None = None

    @property
    def bound(self) -> Seat | None:
        """The seat, if this server has it already (no database work)."""
        return self._seat

    def existing_seat(self) -> Seat | None:
        """The seat of this session if a hook or an earlier server made it (makes none)."""
        if self._seat is None:
            self._seat = services.seats.find_seat(agent=self.label, session_id=self.client_session)
        return self._seat

    def adopt_session(self, params: dict) -> None:
        """A client that names its session in each call (`_meta.sessionId`, or OpenCode's
        SESSION_ARGUMENT, taken out of the arguments here) binds a server its environment
        named none for, at the first call: that call, and every later one, is the
        session's own seat, the one its hooks check in. A later call naming another
        session by the plugin's argument is refused (tools.CallRefused); Codex's
        `_meta.sessionId` of a later call is not looked at, as before."""
        named, by_plugin = _named_session(params)
        if self.client_session or self._seat is not None:
            if by_plugin and named != self.client_session:
                raise tools.CallRefused(
                    protocol.INVALID_PARAMS,
                    f"this salon server serves session {self.client_session}, not "
                    f"{str(named)[:64]!r}: one server serves one session (start the other "
                    "session in a process of its own)",
                )
            return
        if named is None and settings.CLIENT == "gemini":
            from mcpgate.gemini import sessions

            named = sessions.lookup()
        if named is None:
            return
        try:
            self.client_session = rules.validate_claimed_session(named)
        except rules.RuleError as exc:
            log.warning("a tool call's session id is not used: %s", exc)

    def seat(self, *, joining: str | None = None) -> Seat:
        if self._seat is None:
            self._seat = services.seats.check_in(
                agent=self.label,
                session_id=self.client_session,
                default_rooms=settings.AGENT_ROOMS,
                join_defaults=True,
                joining=joining,
                client=settings.CLIENT,
            )
        return self._seat

    def status(self) -> dict:
        return tools.salon_status(
            seat=self.seat(),
            label=self.label,
            protocol_version=self.protocol_version,
            base_url=None,
        )


class StdioServer:
    """The stdio transport, and the one stream of its seat (mcpgate.delivery.Stream)."""

    session = None

    def __init__(
        self, binding: StdioBinding, reader, writer, host: StreamHost, first_line: bytes = b""
    ):
        self.binding = binding
        self.reader = reader  # binary file objects: stdin and stdout, or pipes in tests
        self.writer = writer
        self.host = host
        self.first_line = first_line  # read before this server existed, still to handle
        self.write_lock = asyncio.Lock()
        self.seat: Seat | None = None
        self.streaming = False
        self.ready = False
        self.live_until = None
        self.waiters: set[asyncio.Event] = set()  # wait tool calls in progress
        self.tasks: set[asyncio.Task] = set()
        self.setup: asyncio.Task | None = None
        self.seat_watch: asyncio.Task | None = None
        self.closed = False

    async def write(self, message: dict) -> None:
        async with self.write_lock:
            self.writer.write(protocol.encode_message(message) + b"\n")
            self.writer.flush()

    async def send_event(self, message: dict, event_id: str | None = None) -> None:
        await self.write(message)

    async def keep_open(self, *, renew_groups: bool) -> None:
        """The ticker's keep-alive round: a pipe needs no bytes, and the server is in no
        channel-layer group (its doorbell is its host's listener: salond.host)."""

    async def run(self) -> None:
        # stdin first: initialize, ping and tools/list need no seat, so the client is
        # answered while the seat checks in and the host starts.
        lines = self.read_lines()
        self.setup = asyncio.ensure_future(self.start_serving())
        try:
            requests: set[asyncio.Task] = set()
            while (line := await lines.get()) is not None:
                if isinstance(line, OverlongLine) or line.strip():
                    task = asyncio.ensure_future(self.handle_line(line))
                    requests.add(task)
                    task.add_done_callback(requests.discard)
            # stdin closed: answer what was asked before going.
            await asyncio.gather(*requests, return_exceptions=True)
        finally:
            await self.close()

    async def start_serving(self) -> None:
        await self.host.start()
        self.seat_watch = asyncio.ensure_future(self.find_seat())

    async def find_seat(self) -> None:
        """Wait for this session's seat (a hook makes it, or a tool call), then listen."""
        while self.seat is None:
            seat = await database_sync_to_async(self.binding.existing_seat)()
            if seat is not None:
                await self.listen(seat)
                return
            await asyncio.sleep(SEAT_LOOK_SECONDS)

    def read_lines(self) -> asyncio.Queue:
        """stdin's lines, then None at its end. Blocking reads work for pipes, files and
        terminals alike; a daemon thread of its own never holds up the process's exit.
        A line over MAX_LINE_BYTES is never held whole: its rest is read and dropped, and
        an OverlongLine takes its place."""
        lines: asyncio.Queue[bytes | OverlongLine | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        first, self.first_line = self.first_line, b""

        def read() -> None:
            pending = first
            try:
                while line := pending or self.reader.readline(MAX_LINE_BYTES + 1):
                    pending = b""
                    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                        line = self.skip_rest(len(line))
                    loop.call_soon_threadsafe(lines.put_nowait, line)
                loop.call_soon_threadsafe(lines.put_nowait, None)
            except (OSError, ValueError, RuntimeError):  # closed stdin, or the loop is gone
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(lines.put_nowait, None)

        threading.Thread(target=read, name="salon-stdin", daemon=True).start()
        return lines

    def skip_rest(self, size: int) -> OverlongLine:
        """Read the rest of an overlong line and drop it, a piece at a time."""
        while piece := self.reader.readline(SKIP_BYTES):
            size += len(piece)
            if piece.endswith(b"\n"):
                break
        return OverlongLine(size)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for task in (self.setup, self.seat_watch):
            if task is not None and not task.done():
                task.cancel()
        for task in self.tasks:
            task.cancel()
        self.streaming = False
        await self.host.ticker.remove(self)
        if self.seat is not None:
            # The session ended: its seat is gone now, not when its liveness runs out.
            await database_sync_to_async(services.seats.sign_off)(seat=self.seat)
        await self.host.stop()

    def spawn(self, coroutine) -> None:
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- the doorbell ---------------------------------------------------------------

    async def listen(self, seat: Seat) -> None:
        """Subscribe first, then look at the ledger: nothing can slip between the two."""
        if self.seat is not None:
            self.host.bells.discard(self.seat.pk, self)
        self.seat = seat
        self.host.bells.add(seat.pk, self)
        self.live_until = await database_sync_to_async(services.seats.keep_live)(seat=seat)
        self.streaming = self.ready = True
        self.host.ticker.add(self)
        self.ring()

    def ring(self) -> None:
        self.host.claimer.ring(self)
        for waiter in self.waiters:
            waiter.set()

    def hear_bell(self, *, pushed: bool = False) -> None:  # salond.host.Bells
        self.ring()  # a stdio server's pushes are never written by a send (no `pushed`)

    # -- requests ---------------------------------------------------------------------

    async def handle_line(self, line: bytes | OverlongLine) -> None:
        try:
            if isinstance(line, OverlongLine):
                raise ProtocolError(
                    413,
                    protocol.INVALID_REQUEST,
                    f"a line of {line.size} bytes was skipped: one message may be at most "
                    f"{MAX_LINE_BYTES} bytes (4 MiB); send a smaller message",
                )
            message = protocol.parse_body(line.rstrip(b"\r\n"))
        except ProtocolError as exc:
            await self.write(exc.body())
            return
        if not isinstance(message, protocol.Request):
            return  # notifications and responses need no answer
        try:
            result = await self.answer(message)
        except tools.CallRefused as exc:
            await self.write(protocol.error_message(message.id, exc.code, exc.message))
            return
        await self.write(result)

    async def answer(self, message: protocol.Request) -> dict:
        if message.method == "initialize":
            self.binding.protocol_version, answer = tools.initialize_answer(message)
            return answer
        plain = tools.answer_plain(message, self.binding)
        if plain is not None:
            return plain
        await self.setup  # the host runs: what the tool writes is rung and pushed
        self.binding.adopt_session(message.params)
        tool, arguments = tools.prepare_call(self.binding, message.params)
        if tool.name == "wait" and not validate_arguments(tool.schema, arguments):
            result = await self.wait(message, arguments)
        else:
            result = await database_sync_to_async(tools.run_tool)(self.binding, tool, arguments)
        if self.seat is None and self.binding.bound is not None:
            await self.listen(self.binding.bound)  # the call made the seat, or found it
        return protocol.result_message(message.id, result)

    async def wait(self, message: protocol.Request, arguments: dict) -> dict:
        arrived = asyncio.Event()
        self.waiters.add(arrived)
        try:
            return await tools.wait_for_wakes(self.binding, message, arguments, arrived, self.write)
        finally:
            self.waiters.discard(arrived)


def serve(
    agent: str, session_id: str | None, greeted: tuple[str | None, bytes] = (None, b"")
) -> None:
    """Run the stdio server until stdin closes or a signal asks it to stop. `greeted`:
    the version negotiated by an `initialize` already answered, and the line read but
    not handled yet (mcpgate.greeting)."""
    version, first_line = greeted
    binding = StdioBinding(agent, session_id)
    if version:
        binding.protocol_version = version
    server = StdioServer(
        binding, sys.stdin.buffer, sys.stdout.buffer, StreamHost(), first_line=first_line
    )

    async def main() -> None:
        task = asyncio.ensure_future(server.run())
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            await server.close()

    asyncio.run(main())
    # The stdin reader is a thread blocked in a read that cannot be interrupted: leave
    # without waiting for it (an interpreter shutdown would abort on its buffer's lock).
    sys.stdout.flush()
    os._exit(0)
