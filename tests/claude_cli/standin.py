"""A stand-in for the Anthropic Messages API on 127.0.0.1, driven by a script.

Claude Code talks to whatever ANTHROPIC_BASE_URL names. This server answers
`POST /v1/messages` (server-sent events when the request says `"stream": true`, plain
JSON otherwise) and `POST /v1/messages/count_tokens`; anything else is a 404, which
Claude Code shrugs off.

What the "model" says comes from a script: a list of replies taken one per main-loop
request, or a function that looks at the request and decides. A reply is a `ToolUse`,
a `Text`, or a list of them (several blocks in one assistant message). When a list
script runs out, the model says "done." and the turn ends.

Claude Code also sends side requests that are not the conversation (a title for the
session, a one-token quota probe, ...). Those carry no tools; they are answered with a
short text and do not consume the script, but they are recorded like every request.

Every request body is recorded (`StandIn.requests`), so a test can assert what the
model was shown: tool results, hook context, system reminders, a Stop hook's reason.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Text:
    text: str


Block = ToolUse | Text
Reply = Block | list[Block]
Decide = Callable[["Request"], Reply]


def select(tool: str) -> ToolUse:
    """MCP tools are deferred in Claude Code: the model loads one with ToolSearch first."""
    return ToolUse("ToolSearch", {"query": f"select:{tool}"})


def mcp_call(server: str, tool: str, arguments: dict[str, Any]) -> list[Reply]:
    """Two turns: load the MCP tool's schema, then call it."""
    name = f"mcp__{server}__{tool}"
    return [select(name), ToolUse(name, arguments)]


@dataclass
class Request:
    """One request as received: its path and JSON body, with readers for tests."""

    path: str
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def is_main_loop(self) -> bool:
        # The conversation carries the tool list; side requests (titles, probes) do not.
        return self.path == "/v1/messages" and bool(self.body.get("tools"))

    @property
    def tool_names(self) -> list[str]:
        return [tool.get("name", "") for tool in self.body.get("tools", [])]

    def system_text(self) -> str:
        system = self.body.get("system", "")
        if isinstance(system, str):
            return system
        return "\n".join(block.get("text", "") for block in system)

    def last_user_blocks(self) -> list[dict[str, Any]]:
        """The content blocks of the newest user message (tool results, reminders)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _blocks(message.get("content"))
        return []

    def last_tool_result(self) -> str:
        """The text of the newest tool_result block, or '' if the newest user message has
        none."""
        results = [b for b in self.last_user_blocks() if b.get("type") == "tool_result"]
        return _text_of(results[-1].get("content")) if results else ""

    def last_tool_result_is_error(self) -> bool:
        results = [b for b in self.last_user_blocks() if b.get("type") == "tool_result"]
        return bool(results and results[-1].get("is_error"))

    def shown_text(self) -> str:
        """Every text this request put in front of the model apart from its own earlier
        turns and the system prompt (prompts, hook context, system reminders — which
        arrive as user or system messages — and tool results), joined: what a test greps
        for."""
        parts = []
        for message in self.messages:
            if message.get("role") == "assistant":
                continue
            for block in _blocks(message.get("content")):
                if block.get("type") == "text":
                    parts.append(block.get("text", ""))
                elif block.get("type") == "tool_result":
                    parts.append(_text_of(block.get("content")))
        return "\n".join(parts)


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def _text_of(content: Any) -> str:
    return "\n".join(b.get("text", "") for b in _blocks(content) if b.get("type") == "text")


@dataclass
class StandIn:
    """The server. Use as a context manager; `url` is what ANTHROPIC_BASE_URL takes."""

    script: list[Reply] | Decide = field(default_factory=list)
    model: str = "claude-standin"
    requests: list[Request] = field(default_factory=list)
    # A toolless conversation (a `claude -p --tools ''`) is the script's too.
    answer_all: bool = False

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._turns = iter(self.script) if isinstance(self.script, list) else None
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> StandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def main_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.is_main_loop]

    def seen(self, text: str) -> bool:
        """Whether any main-loop request showed `text` to the model."""
        return any(text in r.shown_text() for r in self.main_requests)

    # ------------------------------------------------------------ answering

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def reply_for(self, request: Request) -> list[Block]:
        if not request.is_main_loop and not (self.answer_all and request.messages):
            return [Text("ok")]
        if self._turns is None:
            reply = self.script(request)  # type: ignore[operator]
        else:
            with self._lock:
                reply = next(self._turns, Text("done."))
        return reply if isinstance(reply, list) else [reply]

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_standin{next(self._ids):06d}"


def message_json(stand_in: StandIn, blocks: Iterable[Block]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, ToolUse):
            content.append(
                {
                    "type": "tool_use",
                    "id": stand_in.next_id("toolu"),
                    "name": block.name,
                    "input": block.input,
                }
            )
        else:
            content.append({"type": "text", "text": block.text})
    uses_tool = any(block["type"] == "tool_use" for block in content)
    return {
        "id": stand_in.next_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": stand_in.model,
        "content": content,
        "stop_reason": "tool_use" if uses_tool else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def sse_events(message: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    """The event sequence a streamed Messages API reply is made of."""
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": 10, "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        )
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": 10},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _handler_for(stand_in: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparsed": raw.decode(errors="replace")}
            request = Request(path, body)
            stand_in.record(request)
            if path == "/v1/messages/count_tokens":
                self.send_json({"input_tokens": 100})
            elif path == "/v1/messages":
                message = message_json(stand_in, stand_in.reply_for(request))
                if body.get("stream"):
                    self.send_stream(message)
                else:
                    self.send_json(message)
            else:
                self.send_json({"type": "error", "error": {"type": "not_found_error"}}, 404)

        def do_GET(self) -> None:
            self.send_json({"type": "error", "error": {"type": "not_found_error"}}, 404)

        def send_json(self, payload: dict[str, Any], status: int = 200) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def send_stream(self, message: dict[str, Any]) -> None:
            data = b"".join(
                f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()
                for name, payload in sse_events(message)
            )
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
