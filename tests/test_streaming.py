"""salond.streaming: a response kept open beside the dispatcher, and ended when its work
dies (security review of 2026-12-01, finding 11)."""

from __future__ import annotations

import asyncio
import logging

from channels.testing import ApplicationCommunicator

from salond.streaming import StreamingHttpConsumer


class DyingStream(StreamingHttpConsumer):
    """Opens a stream, then its task fails."""

    async def handle(self, body: bytes, *, too_large: bool) -> None:
        await self.start_response(200, [(b"content-type", b"text/event-stream")])
        await self.send_chunk(b": open\n\n")
        self.spawn(self.work())

    async def work(self) -> None:
        await asyncio.sleep(0)
        raise RuntimeError("the stream's work failed")


async def test_a_stream_whose_task_dies_is_ended_not_left_open_and_silent(caplog):
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""}
    communicator = ApplicationCommunicator(DyingStream.as_asgi(), scope)
    await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
    with caplog.at_level(logging.ERROR, logger="salon.mcp"):
        start = await communicator.receive_output(timeout=5)
        opened = await communicator.receive_output(timeout=5)
        ended = await communicator.receive_output(timeout=5)

    assert start["status"] == 200 and opened["body"] == b": open\n\n"
    assert ended == {"type": "http.response.body", "body": b"", "more_body": False}
    assert "stream task failed" in caplog.text
    await communicator.wait(timeout=5)
