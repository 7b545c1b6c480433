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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tests.standin_kit import JsonHandler, ScriptedServer


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


class StandIn(ScriptedServer):
    """The server. Use as a context manager; `url` is what ANTHROPIC_BASE_URL takes.
    `answer_all`: a toolless conversation (a `claude -p --tools ''`) is the script's too."""

    def __init__(
        self, script: list[Reply] | Decide = (), model: str = "claude-standin",
        answer_all: bool = False,
    ):  # fmt: skip
        super().__init__(list(script) if isinstance(script, tuple) else script, _Handler)
        self.model = model
        self.answer_all = answer_all
        self._ids = itertools.count(1)

    @property
    def main_requests(self) -> list[Request]:
        return self.recorded(lambda r: r.is_main_loop)

    def seen(self, text: str) -> bool:
        """Whether any main-loop request showed `text` to the model."""
        return any(text in r.shown_text() for r in self.main_requests)

    def reply_for(self, request: Request) -> list[Block]:
        if not request.is_main_loop and not (self.answer_all and request.messages):
            return [Text("ok")]
        reply = self.next_reply(request, Text("done."))
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


class _Handler(JsonHandler):
    def do_POST(self) -> None:
        request = Request(self.path.split("?", 1)[0], self.read_json())
        stand_in = self.stand_in
        stand_in.record(request)
        if request.path == "/v1/messages/count_tokens":
            self.send_json({"input_tokens": 100})
        elif request.path == "/v1/messages":
            message = message_json(stand_in, stand_in.reply_for(request))
            if request.body.get("stream"):
                self.send_events([event for _, event in sse_events(message)], named=True)
            else:
                self.send_json(message)
        else:
            self.send_json({"type": "error", "error": {"type": "not_found_error"}}, 404)

    def do_GET(self) -> None:
        self.send_json({"type": "error", "error": {"type": "not_found_error"}}, 404)
