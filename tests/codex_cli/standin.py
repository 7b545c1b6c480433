"""A stand-in for the OpenAI Responses API on 127.0.0.1, driven by a script.

Codex CLI talks to the custom model provider its config names (`base_url`, `wire_api =
"responses"`). This server answers `POST /v1/responses` with server-sent events (the
Responses API's `response.created`, `response.output_item.added` / `.done` for each
output item, `response.completed` with the usage); anything else is a 404.

What the "model" says comes from a script: a list of replies taken one per request, or a
function that looks at the request and decides. A reply is a `Call` (a function call:
an MCP tool, `apply_patch`, a shell command), a `Text` (an assistant message: the turn
ends), or a list of them (several items in one response). When a list script runs out,
the model says "done." and the turn ends.

Every request body is recorded (`StandIn.requests`), so a test can assert what the model
was shown: tool outputs, hook context (a developer message), a Stop hook's reason (a
user message), and how often a text was put in front of it.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tests.standin_kit import JsonHandler, ScriptedServer


@dataclass(frozen=True)
class Call:
    """A function call; `name` as the request's tool list spells it. An MCP tool sits in
    its server's namespace (`mcp__salon`, Request.tool_names lists both): `namespace`."""

    name: str
    arguments: dict[str, Any]
    namespace: str | None = None


def mcp(tool: str, arguments: dict[str, Any] | None = None, server: str = "salon") -> Call:
    """A call of an MCP tool of `server`."""
    return Call(tool, arguments or {}, namespace=f"mcp__{server}")


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Search:
    """A `tool_search` call: Codex keeps a known model's MCP tools out of the tool list
    until the model searches for them (its answer lists the matching tools), as Claude
    Code's ToolSearch does."""

    query: str
    limit: int = 8


@dataclass(frozen=True)
class Patch:
    """An `apply_patch` call (a free-form tool: its input is the patch text)."""

    text: str


def mcp_turns(tool: str, arguments: dict[str, Any] | None = None) -> list[Reply]:
    """Two turns: find the salon MCP server's tool, then call it."""
    return [Search(f"salon {tool}"), mcp(tool, arguments)]


Item = Call | Text | Search | Patch
Reply = Item | list[Item]
Decide = Callable[["Request"], Reply]


@dataclass
class Request:
    """One request as received: its path and JSON body, with readers for tests."""

    path: str
    body: dict[str, Any]

    @property
    def items(self) -> list[dict[str, Any]]:
        """The conversation as sent: messages, function calls and their outputs."""
        items = self.body.get("input", [])
        return items if isinstance(items, list) else []

    @property
    def tool_names(self) -> list[str]:
        names = []
        for tool in self.body.get("tools", []):
            names.append(tool.get("name") or tool.get("type", ""))
            # A namespace of tools (MCP servers) lists its functions inside it.
            names += [t.get("name", "") for t in tool.get("tools", []) if isinstance(t, dict)]
        return names

    def shown(self) -> list[str]:
        """The text of every item the model did not write itself: user and developer
        messages (prompts, hook context, a Stop hook's reason) and function outputs."""
        texts = []
        for item in self.items:
            kind = item.get("type", "message")
            if kind == "message" and item.get("role") != "assistant":
                texts.append(_text_of(item.get("content")))
            elif kind.endswith("_output"):
                texts.append(_text_of(item.get("output")))
        return texts

    def shown_text(self) -> str:
        return "\n".join(self.shown())

    def count(self, text: str) -> int:
        """In how many of the items shown to the model `text` occurs."""
        return sum(text in shown for shown in self.shown())

    def last_output(self) -> str:
        """The newest function call output's text ('' if none)."""
        outputs = [i for i in self.items if i.get("type", "").endswith("_output")]
        return _text_of(outputs[-1].get("output")) if outputs else ""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return _text_of(content.get("content") or content.get("text") or "")
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    return ""


class StandIn(ScriptedServer):
    """The server. Use as a context manager; `url` + "/v1" is the provider's base_url."""

    def __init__(self, script: list[Reply] | Decide = (), model: str = "gpt-standin"):
        super().__init__(list(script) if isinstance(script, tuple) else script, _Handler)
        self.model = model
        self._ids = itertools.count(1)

    @property
    def model_requests(self) -> list[Request]:
        return self.recorded(lambda r: r.path == "/v1/responses")

    def seen(self, text: str) -> bool:
        return any(text in r.shown_text() for r in self.model_requests)

    def times_told(self, text: str) -> int:
        """How many items of the conversation carried `text` to the model: the most any
        one request holds (each request repeats the history before it), plus the items of
        requests that do not continue the same history (a new session's)."""
        return max((r.count(text) for r in self.model_requests), default=0)

    def reply_for(self, request: Request) -> list[Item]:
        reply = self.next_reply(request, Text("done."))
        return reply if isinstance(reply, list) else [reply]

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_standin{next(self._ids):06d}"


def output_items(stand_in: StandIn, items: Iterable[Item]) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, Call):
            call = {
                "type": "function_call",
                "id": stand_in.next_id("fc"),
                "call_id": stand_in.next_id("call"),
                "name": item.name,
                "arguments": json.dumps(item.arguments),
                "status": "completed",
            }
            if item.namespace:
                call["namespace"] = item.namespace
            output.append(call)
        elif isinstance(item, Search):
            output.append(
                {
                    "type": "tool_search_call",
                    "id": stand_in.next_id("ts"),
                    "call_id": stand_in.next_id("call"),
                    "execution": "client",
                    "status": "completed",
                    "arguments": {"query": item.query, "limit": item.limit},
                }
            )
        elif isinstance(item, Patch):
            output.append(
                {
                    "type": "custom_tool_call",
                    "id": stand_in.next_id("ctc"),
                    "call_id": stand_in.next_id("call"),
                    "name": "apply_patch",
                    "input": item.text,
                    "status": "completed",
                }
            )
        else:
            output.append(
                {
                    "type": "message",
                    "id": stand_in.next_id("msg"),
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": item.text, "annotations": []}],
                }
            )
    return output


def sse_events(response_id: str, model: str, output: list[dict]) -> Iterable[dict[str, Any]]:
    """The event sequence of a streamed Responses API reply."""
    head = {"id": response_id, "object": "response", "model": model, "status": "in_progress"}
    yield {"type": "response.created", "response": {**head, "output": []}}
    for index, item in enumerate(output):
        yield {"type": "response.output_item.added", "output_index": index, "item": item}
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    usage = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 110,
    }
    done = {**head, "status": "completed", "output": output, "usage": usage}
    yield {"type": "response.completed", "response": done}


class _Handler(JsonHandler):
    def do_POST(self) -> None:
        request = Request(self.path.split("?", 1)[0], self.read_json())
        stand_in = self.stand_in
        stand_in.record(request)
        if request.path != "/v1/responses":
            self.send_json({"error": {"message": f"no {request.path} here"}}, 404)
            return
        output = output_items(stand_in, stand_in.reply_for(request))
        events = sse_events(stand_in.next_id("resp"), stand_in.model, output)
        if request.body.get("stream", True):
            self.send_events(events, named=True)
        else:
            self.send_json(list(events)[-1]["response"])

    def do_GET(self) -> None:
        self.stand_in.record(Request(self.path.split("?", 1)[0], {}))
        self.send_json({"error": {"message": "not found"}}, 404)
