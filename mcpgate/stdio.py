"""`salon mcp`: the same MCP tools over stdio, for Claude Code's stdio server setup.

Identity: the agent is AGENT_SALON_NAME or the working directory's name; the seat comes
from CLAUDE_CODE_SESSION_ID (Claude Code puts it in a stdio server's environment). While
the process runs, its seat is `live` and waking entries are pushed to it as
notifications/claude/channel, exactly as on an HTTP stream: the doorbell (Redis), or the
same database watcher the daemon uses, tells it when to look at the ledger.

One JSON-RPC message per line on stdin and stdout; logs go to stderr only.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from bus import doorbell, hookline, services
from bus.models import Seat
from mcpgate import protocol, tools, watcher
from mcpgate.protocol import ProtocolError

log = logging.getLogger("salon.mcp")

KEEPALIVE_SECONDS = 15


class StdioBinding:
    """The tools' view of a stdio server: one agent, one Claude Code session."""

    def __init__(self, agent: str, session_id: str | None):
        self.label = agent
        self.claude_session = session_id
        self.session_id = ""
        self.protocol_version = protocol.LATEST_VERSION
        self._seat: Seat | None = None

    def seat(self) -> Seat:
        if self._seat is None:
            self._seat = services.check_in(
                agent=self.label, session_id=self.claude_session, join_defaults=True
            )
        return self._seat

    def checkin(self, session_id: str, cwd: str | None) -> Seat:
        self.claude_session = session_id.strip()
        self._seat = None
        return self.seat()

    def status(self) -> dict:
        return tools.salon_status(
            seat=self.seat(),
            label=self.label,
            protocol_version=self.protocol_version,
            base_url=None,
        )


class StdioServer:
    def __init__(self, binding: StdioBinding, reader, writer):
        self.binding = binding
        self.reader = reader  # binary file objects: stdin and stdout, or pipes in tests
        self.writer = writer
        self.write_lock = asyncio.Lock()
        self.layer = get_channel_layer()
        self.channel = ""
        self.group = ""
        self.rung = asyncio.Event()  # the pusher's: something may be waiting
        self.waiters: set[asyncio.Event] = set()  # wait tool calls in progress
        self.live_until = None
        self.tasks: set[asyncio.Task] = set()

    async def write(self, message: dict) -> None:
        async with self.write_lock:
            self.writer.write(protocol.encode_message(message) + b"\n")
            self.writer.flush()

    async def run(self) -> None:
        seat = await database_sync_to_async(self.binding.seat)()
        await self.listen(seat)
        self.spawn(self.hear_doorbell())
        self.spawn(self.keepalive())
        try:
            # Blocking reads in a thread work for pipes, files and terminals alike.
            requests: set[asyncio.Task] = set()
            while line := await asyncio.to_thread(self.reader.readline):
                if line.strip():
                    task = asyncio.ensure_future(self.handle_line(line))
                    requests.add(task)
                    task.add_done_callback(requests.discard)
            # stdin closed: answer what was asked before going.
            await asyncio.gather(*requests, return_exceptions=True)
        finally:
            for task in self.tasks:
                task.cancel()
            if self.live_until is not None:
                await database_sync_to_async(services.end_live)(
                    seat=self.binding.seat(), only_if_until=self.live_until
                )

    def spawn(self, coroutine) -> None:
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- the doorbell ---------------------------------------------------------------

    async def listen(self, seat: Seat) -> None:
        """Subscribe first, then look at the ledger: nothing can slip between the two."""
        if not self.channel:
            self.channel = await self.layer.new_channel()
        if self.group:
            await self.layer.group_discard(self.group, self.channel)
        self.group = doorbell.seat_group(seat.pk)
        await self.layer.group_add(self.group, self.channel)
        watcher.ensure_started()
        self.live_until = await database_sync_to_async(services.keep_live)(seat=seat)
        self.rung.set()

    def ring(self) -> None:
        self.rung.set()
        for waiter in self.waiters:
            waiter.set()

    async def hear_doorbell(self) -> None:
        async def receive():
            while True:
                await self.layer.receive(self.channel)
                self.ring()

        self.spawn(receive())
        while True:
            await self.rung.wait()
            self.rung.clear()
            await self.push_pending()

    async def keepalive(self) -> None:
        while True:
            await asyncio.sleep(KEEPALIVE_SECONDS)
            seat = self.binding.seat()
            self.live_until = await database_sync_to_async(services.keep_live)(seat=seat)
            await self.layer.group_add(self.group, self.channel)
            self.ring()  # the safety net for a lost doorbell

    async def push_pending(self) -> None:
        from mcpgate import delivery

        while True:
            # Claimed and rendered in one database hop.
            claimed, more = await database_sync_to_async(delivery.claim_messages_for)(
                seat=self.binding.seat(), limit=100
            )
            for _, _, message in claimed:
                await self.write(message)
            if not more:
                return

    # -- requests ---------------------------------------------------------------------

    async def handle_line(self, line: bytes) -> None:
        try:
            message = protocol.parse_body(line)
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
        plain = tools.answer_plain(message)
        if plain is not None:
            return plain
        tool, arguments = tools.prepare_call(self.binding, message.params)
        if tool.name == "wait" and not protocol.validate_arguments(tool.schema, arguments):
            result = await self.wait(message, arguments)
        else:
            result = await database_sync_to_async(tools.run_tool)(self.binding, tool, arguments)
        if tool.name == "checkin" and not result.get("isError"):
            await self.listen(self.binding.seat())
        return protocol.result_message(message.id, result)

    async def wait(self, message: protocol.Request, arguments: dict) -> dict:
        arrived = asyncio.Event()
        self.waiters.add(arrived)
        try:
            return await tools.wait_for_wakes(self.binding, message, arguments, arrived, self.write)
        finally:
            self.waiters.discard(arrived)


def serve(agent: str, session_id: str | None) -> None:
    """Run the stdio server until stdin closes; meanwhile it also does the writes of
    the Claude Code hooks of its store (bus/hookline.py)."""
    hookline.start()
    server = StdioServer(StdioBinding(agent, session_id), sys.stdin.buffer, sys.stdout.buffer)
    asyncio.run(server.run())
