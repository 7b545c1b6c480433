"""A plain MCP push server, for comparison: the `mcp` SDK's low-level server, storing nothing.

It speaks the same tool and the same push as agent-salon, with none of the bus behind
them: `send` (arguments text, to, type) pushes `notifications/claude/channel` with
params {content, meta} (meta values all strings) on the GET streams of the sessions
whose label (`?label=` on the URL) is in `to`, or of every other session when `to` is
empty, and answers the call with the labels it pushed to. No rooms, no ledger, no
database: what a push costs when nothing is kept. bench/side_by_side.py runs it beside
`salon serve` with the same clients.

With `--store PATH` it keeps each message before pushing it, as little as a durable server
can: one INSERT into a SQLite table (WAL, synchronous=FULL, as agent-salon ships) and its
commit, on one writer thread so the event loop keeps serving during the fsync, and the
push only after the commit. No rules, rooms, signature, index or ledger: what durability
alone adds to a push server (bench.ab --durable-peer puts it beside the plain peer).

Built from the SDK's own pieces: `mcp.server.lowlevel.Server` (handlers for tools/list
and tools/call), its `StreamableHTTPSessionManager` (sessions, the POST and GET
streams), under uvicorn. A session is registered when its `notifications/initialized`
arrives (a server middleware sees it with the HTTP request, so with `?label=`), and
forgotten on DELETE.

    python -m bench.peer_server --port 9400 [--store /tmp/peer.sqlite3]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import logging
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import mcp_types as types
import uvicorn
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

CHANNEL = "notifications/claude/channel"
SESSION_HEADER = "mcp-session-id"

SEND_TOOL = types.Tool(
    name="send",
    description="Push a message to the sessions named in `to` (labels), or to everyone else.",
    input_schema={
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "to": {"type": "array", "items": {"type": "string"}},
            "type": {"type": "string"},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
)


ChannelMethod = Literal["notifications/claude/channel"]


class ChannelNotification(types.Notification[dict[str, Any], ChannelMethod]):
    """The channel push: the SDK sends any notification model with a method and params."""

    method: ChannelMethod = CHANNEL
    params: dict[str, Any]


@dataclass
class Listener:
    """One initialized session: its label and the SDK session object that reaches its
    connection's standalone (GET) stream."""

    session_id: str
    label: str
    session: ServerSession


class Registry:
    """The sessions this process knows, by MCP session id."""

    def __init__(self) -> None:
        self.by_id: dict[str, Listener] = {}
        self.ids = itertools.count(1)

    def add(self, listener: Listener) -> None:
        self.by_id[listener.session_id] = listener

    def forget(self, session_id: str) -> None:
        self.by_id.pop(session_id, None)

    def addressed(self, sender: str, to: list[str]) -> list[Listener]:
        if to:
            wanted = set(to)
            return [one for one in self.by_id.values() if one.label in wanted]
        return [one for one in self.by_id.values() if one.session_id != sender]


registry = Registry()


class Store:
    """The messages kept, one row each, committed before the push (--store)."""

    def __init__(self, path: str) -> None:
        # One thread writes, as one writer thread does in agent-salon.
        self.writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="store")
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS message (id INTEGER PRIMARY KEY, ts TEXT, "
            "sender TEXT, type TEXT, recipients TEXT, content TEXT)"
        )

    def _keep(self, row: tuple) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?, ?)", row)
        self.db.execute("COMMIT")

    async def keep(self, *row) -> None:
        await asyncio.get_running_loop().run_in_executor(self.writer, self._keep, row)


store: Store | None = None


def _label(request: Request | None) -> str:
    return request.query_params.get("label", "") if request is not None else ""


def _session_id(request: Request | None) -> str:
    return request.headers.get(SESSION_HEADER, "") if request is not None else ""


async def register_sessions(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Server middleware: on `notifications/initialized`, remember the session's label."""
    result = await call_next(ctx)
    if ctx.method == "notifications/initialized":
        session_id = _session_id(ctx.request)
        if session_id:
            registry.add(Listener(session_id, _label(ctx.request), ctx.session))
    return result


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[SEND_TOOL])


def _text_result(payload: dict[str, Any], is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(payload))],
        structured_content=payload,
        is_error=is_error,
    )


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    if params.name != "send":
        return _text_result({"error": f"unknown tool {params.name!r}; this server has send"}, True)
    arguments = params.arguments or {}
    text = arguments.get("text")
    to = arguments.get("to") or []
    kind = str(arguments.get("type") or "FACT").upper()
    if not isinstance(text, str) or not isinstance(to, list):
        return _text_result({"error": "send needs text (a string) and to (a list of labels)"}, True)
    sender = _label(ctx.request)
    entry_id = next(registry.ids)
    ts = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    meta = {"id": str(entry_id), "ts": ts, "source": sender, "type": kind}
    if to:
        meta["to"] = ",".join(str(name) for name in to)
    if store is not None:
        await store.keep(entry_id, ts, sender, kind, meta.get("to", ""), text)
    push = ChannelNotification(params={"content": text, "meta": meta})
    targets = registry.addressed(_session_id(ctx.request), [str(name) for name in to])
    for target in targets:
        await target.session.send_notification(push)
    wakes = [target.label for target in targets]
    return _text_result(
        {"id": entry_id, "ts": ts, "from": sender, "type": kind, "to": to, "wakes": wakes}
    )


class McpEndpoint:
    """/mcp as a plain ASGI app (a class, so Starlette's Route hands it the raw scope):
    the session manager serves it; a DELETE also drops the session from the registry."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "DELETE":
            for name, value in scope["headers"]:
                if name == SESSION_HEADER.encode():
                    registry.forget(value.decode("latin-1"))
        await self.manager.handle_request(scope, receive, send)


def build_app() -> Starlette:
    server: Server[Any] = Server("peer-push", version="1", on_list_tools=list_tools,
                                 on_call_tool=call_tool)  # fmt: skip
    server.middleware.append(register_sessions)
    manager = StreamableHTTPSessionManager(
        app=server,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
        ),
        session_idle_timeout=None,  # streams live as long as the bench holds them
        max_sessions=None,
    )

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "sessions": len(registry.by_id)})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(
        routes=[Route("/healthz", healthz), Route("/mcp", McpEndpoint(manager))],
        lifespan=lifespan,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--store", help="keep every message in this SQLite file first")
    args = parser.parse_args()
    global store
    if args.store:
        store = Store(args.store)
    logging.basicConfig(level=logging.WARNING)
    uvicorn.run(build_app(), host=args.host, port=args.port, log_level="warning",
                access_log=False, timeout_keep_alive=600)  # fmt: skip


if __name__ == "__main__":
    main()
