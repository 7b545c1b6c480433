"""Raw HTTP helpers for /mcp tests: a session over httpx and an SSE stream reader."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import httpx

from tests.support import stretched

ACCEPT_BOTH = "application/json, text/event-stream"


def rpc(method: str, params: dict | None = None, id: int | None = 1) -> dict:
    message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if id is not None:
        message["id"] = id
    return message


def initialize_message(version: str = "2025-11-25", id: int = 1) -> dict:
    return rpc(
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "salon-tests", "version": "0"},
        },
        id,
    )


class RawSession:
    """One MCP session spoken by hand: initialize, notifications/initialized, calls."""

    def __init__(self, client: httpx.AsyncClient, base: str, query: str = "label=tester"):
        self.client = client
        self.url = f"{base}/mcp?{query}" if query else f"{base}/mcp"
        self.session_id: str | None = None
        self.next_id = 10

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"accept": ACCEPT_BOTH, "content-type": "application/json"}
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
        headers.update(extra)
        return headers

    async def post(self, message: dict, **headers: str) -> httpx.Response:
        return await self.client.post(self.url, json=message, headers=self.headers(**headers))

    async def open(self) -> RawSession:
        response = await self.post(initialize_message())
        assert response.status_code == 200, response.text
        self.session_id = response.headers["mcp-session-id"]
        done = await self.post(rpc("notifications/initialized", id=None))
        assert done.status_code == 202
        return self

    async def call(self, tool: str, arguments: dict | None = None, **params) -> dict:
        """A tools/call; an SSE answer (the wait tool) is read to its JSON-RPC response."""
        self.next_id += 1
        message = rpc(
            "tools/call", {"name": tool, "arguments": arguments or {}, **params}, self.next_id
        )
        response = await self.client.post(
            self.url, json=message, headers=self.headers(), timeout=400
        )
        assert response.status_code == 200, response.text
        if response.headers["content-type"].startswith("text/event-stream"):
            self.events = sse_messages(response.text)
            return self.events[-1]
        return response.json()

    async def result(self, tool: str, arguments: dict | None = None) -> dict:
        message = await self.call(tool, arguments)
        assert "result" in message, message
        assert not message["result"].get("isError"), message["result"]
        return message["result"]["structuredContent"]

    async def seat(self) -> str:
        return (await self.result("salon_status"))["session"]["seat"]

    def stream(self, **headers: str) -> SseStream:
        return SseStream(self.client, self.url, self.headers(accept="text/event-stream", **headers))


def sse_messages(body: str) -> list[dict]:
    """The JSON messages of a complete text/event-stream body, in order."""
    messages = []
    for block in body.split("\n\n"):
        data = [line[5:].lstrip() for line in block.splitlines() if line.startswith("data:")]
        if data:
            messages.append(json.loads("\n".join(data)))
    return messages


class SseStream:
    """Reads a text/event-stream response in the background into a queue of events."""

    def __init__(self, client: httpx.AsyncClient, url: str, headers: dict[str, str]):
        self.client, self.url, self.headers = client, url, headers
        self.queue: asyncio.Queue = asyncio.Queue()
        self.response: httpx.Response | None = None
        self.ended = asyncio.Event()
        self._cm = None
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> SseStream:
        self._cm = self.client.stream(
            "GET", self.url, headers=self.headers, timeout=httpx.Timeout(5, read=None)
        )
        self.response = await self._cm.__aenter__()
        self._task = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        with contextlib.suppress(Exception):
            await self._cm.__aexit__(None, None, None)

    async def _read(self) -> None:
        event: dict = {}
        try:
            async for line in self.response.aiter_lines():
                if line == "":
                    if event:
                        event["received"] = time.time()
                        if "data" in event:
                            event["message"] = json.loads(event["data"])
                        await self.queue.put(event)
                    event = {}
                elif line.startswith(":"):
                    await self.queue.put({"comment": line[1:].strip(), "received": time.time()})
                else:
                    field, _, value = line.partition(":")
                    event[field] = value[1:] if value.startswith(" ") else value
        except (httpx.HTTPError, asyncio.CancelledError):
            pass
        finally:
            self.ended.set()

    async def next(self, timeout: float = 5, comments: bool = False) -> dict:
        """The next event (comments skipped unless asked for); TimeoutError if none."""
        while True:
            event = await asyncio.wait_for(self.queue.get(), stretched(timeout))
            if comments or "comment" not in event:
                return event

    async def nothing_for(self, seconds: float) -> bool:
        """True if no event (other than comments) arrives within `seconds`."""
        try:
            await self.next(seconds)
        except TimeoutError:
            return True
        return False
