"""A stand-in for an OpenAI-compatible Chat Completions API on 127.0.0.1, for OpenCode.

OpenCode's provider `standin` (tests/opencode_cli/harness.py) posts `/v1/chat/completions`
with `stream: true`; this server answers with chunks of a streamed completion: a text,
or function calls, then the finish reason, the usage and `[DONE]`. Anything else is a
404 (OpenCode asks nothing else of a provider it is given the models of).

What the "model" says comes from a script (tests/standin_kit.py): a `Call` (a function
call: an MCP tool as OpenCode names it, `salon_inbox`, or `write`, …), a `Text` (the turn
ends), or a list of them. When a list script runs out, the model says "done.".

Every request is recorded, so a test can assert what the model was shown: the system
prompt, the user's messages with what the plugin added, and tool results.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

from tests.standin_kit import JsonHandler, ScriptedServer


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]


def mcp(tool: str, arguments: dict[str, Any] | None = None, server: str = "salon") -> Call:
    """A call of an MCP tool of `server` (OpenCode names it <server>_<tool>)."""
    return Call(f"{server}_{tool}", arguments or {})


@dataclass(frozen=True)
class Text:
    text: str


@dataclass
class Request:
    path: str
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return messages if isinstance(messages, list) else []

    @property
    def tool_names(self) -> list[str]:
        return [
            (tool.get("function") or {}).get("name", "") for tool in self.body.get("tools") or []
        ]

    def shown(self) -> list[str]:
        """The text of every message part the model did not write itself: the system
        prompt, the user's messages (with what the plugin added) and tool results."""
        texts = []
        for message in self.messages:
            if message.get("role") == "assistant":
                continue
            content = message.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
        return texts

    def shown_text(self) -> str:
        return "\n".join(self.shown())

    def count(self, text: str) -> int:
        """In how many of the parts shown to the model `text` occurs."""
        return sum(text in shown for shown in self.shown())

    def last_output(self) -> str:
        """The newest tool result's text ('' if none)."""
        results = [m for m in self.messages if m.get("role") == "tool"]
        if not results:
            return ""
        content = results[-1].get("content")
        return content if isinstance(content, str) else json.dumps(content)


class StandIn(ScriptedServer):
    """The server. Use as a context manager; `url` + "/v1" is the provider's baseURL."""

    def __init__(self, script=(), model: str = "standin-model"):
        super().__init__(list(script) if isinstance(script, tuple) else script, _Handler)
        self.model = model
        self._ids = itertools.count(1)

    @property
    def model_requests(self) -> list[Request]:
        """The agent's requests: those that offer tools (not the session's title)."""
        return self.recorded(lambda r: r.path.endswith("/chat/completions") and r.tool_names)

    def seen(self, text: str) -> bool:
        return any(text in r.shown_text() for r in self.model_requests)

    def chunks(self, request: Request) -> list[dict[str, Any]]:
        if not request.tool_names:  # OpenCode asks for the session's title on the side
            reply = Text("A session")
        else:
            reply = self.next_reply(request, Text("done."))
        items = reply if isinstance(reply, list) else [reply]
        number = next(self._ids)
        head = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk",
                "created": 0, "model": self.model}  # fmt: skip

        def chunk(delta: dict, finish: str | None = None, **extra) -> dict:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return {**head, "choices": [choice], **extra}

        out = [chunk({"role": "assistant", "content": ""})]
        calls = [item for item in items if isinstance(item, Call)]
        for item in items:
            if isinstance(item, Text):
                out.append(chunk({"content": item.text}))
        for index, call in enumerate(calls):
            out.append(chunk({"tool_calls": [{
                "index": index, "id": f"call_{number}_{index}", "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }]}))  # fmt: skip
        out.append(chunk({}, "tool_calls" if calls else "stop"))
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
        out.append({**head, "choices": [], "usage": usage})
        return out


class _Handler(JsonHandler):
    def do_POST(self) -> None:
        request = Request(self.path.split("?", 1)[0], self.read_json())
        self.stand_in.record(request)
        if request.path.endswith("/chat/completions"):
            self.send_events(self.stand_in.chunks(request), done="[DONE]")
        else:
            self.send_json({"error": {"message": f"no {request.path} here"}}, 404)

    def do_GET(self) -> None:
        self.stand_in.record(Request(self.path.split("?", 1)[0], {}))
        self.send_json({"error": {"message": "not found"}}, 404)
