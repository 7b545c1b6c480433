"""A Channels HTTP consumer that can keep a response open and still hear the layer.

Channels' AsyncHttpConsumer stops as soon as handle() returns, and a loop inside
handle() blocks the dispatcher, so a long-poll or SSE response never receives a group
message (django/channels #1302, #1747). Here handle() returns as soon as the response is
started; the consumer then keeps dispatching channel-layer messages to handlers until
the client disconnects or the response is finished.
"""

from __future__ import annotations

import asyncio
import logging

from channels.consumer import AsyncConsumer
from channels.exceptions import StopConsumer

log = logging.getLogger("salon.mcp")

# An open stream with nothing to say sends a comment this often (an SSE keep-alive), so
# neither a proxy nor the client takes it for dead: the MCP streams (mcpgate.delivery's
# ticker) and the staff's live flow (salon.live) alike.
KEEPALIVE_SECONDS = 15


class RequestBody:
    """A request's body as its http.request messages bring it: its first `limit` bytes are
    kept, the rest only counted (`too_large`: the handler answers 413)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._chunks: list[bytes] = []
        self._kept = 0
        self.too_large = False

    def add(self, message: dict) -> bool:
        """Take one http.request message; True once it was the last."""
        chunk = message.get("body", b"")
        room = self.limit - self._kept
        if len(chunk) > room:
            self.too_large = True
            chunk = chunk[:room]
        if chunk:
            self._chunks.append(chunk)
            self._kept += len(chunk)
        return not message.get("more_body")

    def value(self) -> bytes:
        return b"".join(self._chunks)


class StreamingHttpConsumer(AsyncConsumer):
    max_body = 4 * 1024 * 1024

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._body = RequestBody(self.max_body)
        self.response_started = False
        self.response_finished = False
        self.groups_joined: set[str] = set()
        self.tasks: set[asyncio.Task] = set()

    # -- ASGI in ------------------------------------------------------------------

    async def dispatch(self, message):
        # Unlike AsyncConsumer.dispatch, no close_old_connections hop per message: a
        # stream receives many doorbells, and database calls manage their own connection.
        handler = getattr(self, message["type"].replace(".", "_"), None)
        if handler is None:
            log.debug("no handler for %s", message["type"])
            return
        await handler(message)

    async def http_request(self, message):
        if not self._body.add(message):
            return
        try:
            await self.handle(self._body.value(), too_large=self._body.too_large)
        except StopConsumer:
            raise
        except Exception:
            log.exception("unhandled error in %s", type(self).__name__)
            if not self.response_started:
                await self.send_response(
                    500,
                    b'{"error": "internal error; see the daemon log"}',
                    headers=[(b"content-type", b"application/json")],
                )
        if self.response_finished:
            await self.finish()

    async def http_disconnect(self, message):
        await self.finish()

    async def finish(self):
        for task in list(self.tasks):
            task.cancel()
        try:
            await self.closed()
        finally:
            for group in list(self.groups_joined):
                await self.channel_layer.group_discard(group, self.channel_name)
            self.groups_joined.clear()
        raise StopConsumer()

    # -- hooks for subclasses ------------------------------------------------------

    async def handle(self, body: bytes, *, too_large: bool) -> None:
        raise NotImplementedError

    async def closed(self) -> None:
        """The client went away or the response ended; release what the stream held."""

    # -- ASGI out ------------------------------------------------------------------

    async def join_group(self, group: str) -> None:
        await self.channel_layer.group_add(group, self.channel_name)
        self.groups_joined.add(group)

    async def leave_group(self, group: str) -> None:
        if group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)
            self.groups_joined.discard(group)

    async def start_response(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.response_started = True
        await self.send({"type": "http.response.start", "status": status, "headers": headers})

    async def send_chunk(self, body: bytes, *, more: bool = True) -> None:
        if self.response_finished:
            return
        await self.send({"type": "http.response.body", "body": body, "more_body": more})
        if not more:
            self.response_finished = True

    async def send_response(self, status: int, body: bytes, *, headers=()) -> None:
        await self.start_response(status, list(headers))
        await self.send_chunk(body, more=False)

    def spawn(self, coroutine) -> asyncio.Task:
        """Run work beside the dispatcher, so the consumer keeps hearing messages."""
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("stream task failed", exc_info=task.exception())
            # A stream whose task died would stay open and silent (no keep-alive, no
            # push) while the client waits on it: end it, so the client reconnects.
            if not self.response_finished:
                self.tasks.add(asyncio.ensure_future(self.end_response()))

    async def end_response(self) -> None:
        """Finish the body (if open) and stop the consumer; safe to call from a task."""
        if self.response_started and not self.response_finished:
            await self.send_chunk(b"", more=False)
        # StopConsumer only works when raised in the dispatcher: ask it to stop.
        await self.channel_layer.send(self.channel_name, {"type": "consumer.stop"})

    async def consumer_stop(self, message):
        await self.finish()
