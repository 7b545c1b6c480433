"""A stand-in for the Gemini API on 127.0.0.1, driven by a script.

Gemini CLI talks to the address in GOOGLE_GEMINI_BASE_URL. This server answers `POST
/v1beta/models/MODEL:streamGenerateContent?alt=sse` with server-sent events (one
`GenerateContentResponse` per event: the candidate's parts, then a finish reason and the
usage), and `…:generateContent` — the CLI's model router asks it, with a JSON schema,
how hard the prompt is — with a plain JSON answer of that shape; `…:countTokens` gets a
count; anything else is a 404.

What the "model" says comes from a script (tests/standin_kit.py): a list of replies
taken one per model request, or a function that looks at the request and decides. A
reply is a `Call` (a `functionCall` part: an MCP tool, `write_file`, …), a `Text` (the
turn ends), or a list of them. When a list script runs out, the model says "done.".

Every request is recorded (`StandIn.requests`), so a test can assert what the model was
shown: the prompt, hook context, tool results, and how often a text reached it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tests.standin_kit import JsonHandler, ScriptedServer


@dataclass(frozen=True)
class Call:
    """A function call; `name` as the request's tool list spells it."""

    name: str
    arguments: dict[str, Any]


def mcp(tool: str, arguments: dict[str, Any] | None = None, server: str = "salon") -> Call:
    """A call of an MCP tool of `server` (the model sees it as mcp_<server>_<tool>)."""
    return Call(f"mcp_{server}_{tool}", arguments or {})


@dataclass(frozen=True)
class Text:
    text: str


Item = Call | Text
Reply = Item | list[Item]
Decide = Callable[["Request"], Reply]


@dataclass
class Request:
    """One request as received: its path (the model and method) and JSON body."""

    path: str
    body: dict[str, Any]

    @property
    def method(self) -> str:
        return self.path.rsplit(":", 1)[-1] if ":" in self.path else ""

    @property
    def contents(self) -> list[dict[str, Any]]:
        contents = self.body.get("contents", [])
        return contents if isinstance(contents, list) else []

    @property
    def tool_names(self) -> list[str]:
        names = []
        for tool in self.body.get("tools") or []:
            for declaration in tool.get("functionDeclarations") or []:
                names.append(declaration.get("name", ""))
        return names

    def shown(self) -> list[str]:
        """The text of every part the model did not write itself: the user's turns
        (prompts, hook context, an AfterAgent reason) and function responses."""
        texts = []
        for content in self.contents:
            if content.get("role") == "model":
                continue
            for part in content.get("parts") or []:
                if "text" in part:
                    texts.append(str(part["text"]))
                elif "functionResponse" in part:
                    texts.append(json.dumps(part["functionResponse"].get("response")))
        return texts

    def shown_text(self) -> str:
        return "\n".join(self.shown())

    def count(self, text: str) -> int:
        """In how many of the parts shown to the model `text` occurs."""
        return sum(text in shown for shown in self.shown())

    def last_output(self) -> str:
        """The newest function response's text ('' if none)."""
        outputs = [
            part["functionResponse"]
            for content in self.contents
            for part in content.get("parts") or []
            if "functionResponse" in part
        ]
        return json.dumps(outputs[-1].get("response")) if outputs else ""


class StandIn(ScriptedServer):
    """The server. Use as a context manager; `url` is GOOGLE_GEMINI_BASE_URL."""

    def __init__(self, script: list[Reply] | Decide = ()):
        super().__init__(list(script) if isinstance(script, tuple) else script, _Handler)

    @property
    def model_requests(self) -> list[Request]:
        return self.recorded(lambda r: r.method == "streamGenerateContent")

    def seen(self, text: str) -> bool:
        return any(text in r.shown_text() for r in self.model_requests)

    def reply_for(self, request: Request) -> list[Item]:
        reply = self.next_reply(request, Text("done."))
        return reply if isinstance(reply, list) else [reply]


def parts(items: Iterable[Item]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, Call):
            out.append({"functionCall": {"name": item.name, "args": item.arguments}})
        else:
            out.append({"text": item.text})
    return out


USAGE = {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}


def stream_events(reply: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of a streamed reply: the parts, then the finish with the usage."""
    return [
        {"candidates": [{"content": {"role": "model", "parts": reply}, "index": 0}]},
        {
            "candidates": [
                {"content": {"role": "model", "parts": []}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": USAGE,
        },
    ]


def router_answer() -> dict[str, Any]:
    """The answer to the router's classification request: a simple task."""
    text = json.dumps(
        {
            "reasoning": "a simple task",
            "model_choice": "flash",
            "complexity_reasoning": "a simple task",
            "complexity_score": 1,
        }
    )
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": USAGE,
    }


class _Handler(JsonHandler):
    def do_POST(self) -> None:
        request = Request(self.path.split("?", 1)[0], self.read_json())
        self.stand_in.record(request)
        if request.method == "streamGenerateContent":
            self.send_events(stream_events(parts(self.stand_in.reply_for(request))))
        elif request.method == "generateContent":
            self.send_json(router_answer())
        elif request.method == "countTokens":
            self.send_json({"totalTokens": 100})
        else:
            self.send_json({"error": {"code": 404, "message": f"no {request.path} here"}}, 404)

    def do_GET(self) -> None:
        self.stand_in.record(Request(self.path.split("?", 1)[0], {}))
        self.send_json({"error": {"code": 404, "message": "not found"}}, 404)
