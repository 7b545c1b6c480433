"""The MCP tools: one table, shared by the HTTP consumer and the stdio server.

Each tool is a description, a JSON schema and a synchronous handler that calls
bus.services; the transport decides how to run it. Handlers receive a Binding, which
knows the caller's label and binds its seat on first use.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from bus import bell, services
from bus.models import Room, Seat
from bus.rules import RuleError
from mcpgate import greeting, handlers, protocol, triage
from mcpgate.arguments import validate_arguments
from mcpgate.handlers import Binding

WRITE_TOOLS = {
    "send", "ask", "send_message", "join", "part", "focus", "quiet", "checkin", "claim", "release"
}  # fmt: skip


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    schema: dict
    handler: Callable[[Binding, dict], Any]

    def listing(self) -> dict:
        return protocol.tool_listing(
            self.name, self.description, self.schema, read_only=self.name not in WRITE_TOOLS
        )


def _schema(properties: dict, required: tuple[str, ...] = ()) -> dict:
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


_STR = {"type": "string"}
_ROOM = {
    "type": "string",
    "description": "The room to write in; default: your primary room (the first you joined "
    "or were given).",
}
_ROOMS = {
    "type": "string",
    "description": "Only this room; default: every room you are in, each entry naming its room.",
}
_META = {
    "type": "object",
    "description": "Extra fields for scripts: a JSON object of at most 32 keys, 16 KiB and 8 "
    "levels deep; pushed to readers as strings.",
}


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in [
        Tool(
            "send",
            "Write an entry into a room: ask, answer, report or request. The server fills in "
            "who you are and the time. Returns the entry's id, `wakes` (the seats it "
            "interrupts here), `decidedThere` (seats on other machines: their own machine "
            "decides whether it wakes them) and `notice` (worth reading: nobody woken, an "
            "addressee away or quiet). Only an addressed entry, a reply, or a broadcast "
            "QUESTION or REQUEST wakes anyone.",
            _schema(
                {
                    "text": {
                        "type": "string",
                        "description": "The entry itself (markdown, at most 64 KiB).",
                    },
                    "room": _ROOM,
                    "type": {
                        "type": "string",
                        "description": "QUESTION (you need an answer), ANSWER (give `re`), "
                        "FACT (news; the default) or REQUEST (someone should act); any case.",
                    },
                    "to": {
                        "type": ["array", "string"],
                        "items": _STR,
                        "description": "Who should act, woken whatever the type: seat names "
                        "(web-app#c4e1b7d2) or agent names (web-app: every session of it). "
                        "Empty: everyone reads it, and only a QUESTION or REQUEST wakes them.",
                    },
                    "re": {
                        "type": "string",
                        "description": "The id of the entry (same room) this answers; its "
                        "writer is woken.",
                    },
                    "meta": _META,
                },
                ("text",),
            ),
            handlers.send,
        ),
        Tool(
            "ask",
            "Ask another project something its own code may answer (a port, a status, the "
            "last release) without interrupting its sessions: a REQUEST with an ask key. "
            "That project's policy decides: serve (its code answers in milliseconds, "
            "nobody is woken), gate, wake or deny; the verdict and reason come back at "
            "once, and with `wait` the served answer too.",
            _schema(
                {
                    "to": {"type": "string", "description": "The agent asked (web-app)."},
                    "ask": {
                        "type": "string",
                        "description": 'The key: 1 to 4 segments joined by ":", each a-z 0-9 '
                        "then a-z 0-9 . _ - (status:db, port:staging).",
                    },
                    "text": {
                        "type": "string",
                        "description": "What a person would read if one is woken.",
                    },
                    "room": _ROOM,
                    "wait": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": 600,
                        "description": "Seconds to wait for the answer (served answers "
                        f"take milliseconds; at most {handlers.ASK_WAIT_CAP:g} s are waited here).",
                    },
                },
                ("to", "ask"),
            ),
            handlers.ask,
        ),
        Tool(
            "send_message",
            "For agent-salon compatibility (clients written for agent-salon's send_message): "
            "send `content` to `target`, or to everyone, in `room` (else your primary room). "
            "Prefer `send`, which has entry types, replies and several addressees.",
            _schema(
                {
                    "content": {"type": "string", "description": "The text to send."},
                    "target": {
                        "type": "string",
                        "description": "One seat or agent name to address (it is woken); "
                        "omit to send to everyone.",
                    },
                    "room": _ROOM,
                    "meta": {
                        "type": "object",
                        "description": "Extra fields; `kind` question, request or reply makes "
                        "it a QUESTION, REQUEST or ANSWER, anything else a FACT.",
                    },
                },
                ("content",),
            ),
            handlers.send_message,
        ),
        Tool(
            "inbox",
            "The entries by others you have not read yet, oldest first, with how many still "
            "wait (`more`, `unread`, `unreadWaking`; with `countsCapped` they are lower "
            "bounds, and `waiting` says so: `980+ more unread`). Marks the returned entries read "
            "(`advance: false` only peeks). An entry that does not wake you may come "
            "shortened; `history` has it whole.",
            _schema(
                {
                    "room": _ROOMS,
                    "advance": {
                        "type": "boolean",
                        "description": "false: a peek, nothing is marked read (default true).",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 100,
                        "description": "At most this many entries (default 20).",
                    },
                }
            ),
            handlers.inbox,
        ),
        Tool(
            "history",
            "The latest entries of a room, your own included, never shortened, oldest first. "
            "Marks nothing read.",
            _schema(
                {
                    "room": _ROOMS,
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 200,
                        "description": "How many of the latest entries (default 20).",
                    },
                    "from": {
                        "type": "string",
                        "description": "Only the entries written by this seat or agent name.",
                    },
                }
            ),
            handlers.history,
        ),
        Tool(
            "search",
            "Find the entries of your rooms that hold some words, most relevant first, then "
            "newest; each result names its room, sender, time and id, with a snippet whose "
            "`highlights` are the [start, end) offsets of the words found. Marks nothing "
            'read. Query: words (all must be there), "a phrase", prefix* (words starting '
            "so), -word (leave out entries holding it).",
            _schema(
                {
                    "query": {
                        "type": "string",
                        "description": 'What to look for, e.g. cart "total price" migr* -draft',
                    },
                    "room": {
                        "type": "string",
                        "description": "Only this room; default: every room you are in.",
                    },
                    "from": {
                        "type": "string",
                        "description": "Only the entries written by this seat or agent name.",
                    },
                    "type": {
                        "type": "string",
                        "description": "Only this type: QUESTION, ANSWER, FACT or REQUEST.",
                    },
                    "since": {
                        "type": "string",
                        "description": "Only entries of the last while: 90m, 2h, 7d.",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 200,
                        "description": "At most this many results (default 20).",
                    },
                },
                ("query",),
            ),
            handlers.search,
        ),
        Tool(
            "agents",
            "Everyone on the bus: each agent with its seats, whether each is live, unknown or "
            "gone, what it is on (focus), whether it is quiet, and when it last wrote.",
            _schema({}),
            lambda b, a: services.seats.agents_projection(),
        ),
        Tool(
            "rooms",
            "The rooms you are in (`mine`), and every room with its entry count, seats and "
            "live seats.",
            _schema({}),
            handlers.rooms,
        ),
        Tool(
            "join",
            "Join a room: from now on you read it and can be woken in it.",
            _schema(
                {
                    "room": {
                        "type": "string",
                        "description": "The room's name: letters, digits and . _ - (at most 64).",
                    },
                    "create": {
                        "type": "boolean",
                        "description": "true: create the room if it does not exist (otherwise "
                        "a missing room is an error naming the rooms that do).",
                    },
                },
                ("room",),
            ),
            lambda b, a: services.rooms.join_room(
                seat=b.seat(), room=a["room"], create=a.get("create", False)
            ),
        ),
        Tool(
            "part",
            "Leave a room: you are no longer woken or counted there; its entries stay.",
            _schema({"room": {"type": "string", "description": "The room to leave."}}, ("room",)),
            lambda b, a: services.rooms.part_room(seat=b.seat(), room=a["room"]),
        ),
        Tool(
            "focus",
            "Say what you are on, so others know whom to ask and whom to leave alone. No "
            'arguments reads it back; text "" clears it. Focus never changes who is woken.',
            _schema(
                {
                    "text": {
                        "type": "string",
                        "description": 'One sentence: what you are working on ("" clears it).',
                    },
                    "files": {
                        "type": "array",
                        "items": _STR,
                        "description": "The paths you are working in (at most 50), from "
                        "the repository's top: they are claimed too (see `claim`).",
                    },
                    "phase": {
                        "type": "string",
                        "description": "explore, plan, apply, verify or blocked; given alone, "
                        "it re-declares your standing sentence.",
                    },
                }
            ),
            handlers.focus,
        ),
        Tool(
            "claim",
            "Claim files of your repository while you edit them: another session's edit of "
            "a claimed file is held back once and told your name, focus and note, so it "
            "can ask you first. Ends when you release it, after `for`, or when you are gone.",
            _schema(
                {
                    "paths": {
                        "type": "array",
                        "items": _STR,
                        "minItems": 1,
                        "description": "Paths relative to the repository's top: files, "
                        "directories or globs (src/api/**).",
                    },
                    "for": {
                        "type": "string",
                        "description": "How long: 90m, 2h (default 2h, at most 24h).",
                    },
                    "note": {
                        "type": "string",
                        "description": "A few words for whoever is held back.",
                    },
                    "repo": {
                        "type": "string",
                        "description": "A directory inside the repository (default: your project).",
                    },
                },
                ("paths",),
            ),
            handlers.claim,
        ),
        Tool(
            "release",
            "Release your file claims: the paths given, or all of them.",
            _schema(
                {
                    "paths": {
                        "type": "array",
                        "items": _STR,
                        "description": "The claimed paths or globs to release, from the "
                        "repository's top; empty or left out: every claim of yours.",
                    },
                    "repo": {
                        "type": "string",
                        "description": "A directory inside the repository (default: your project).",
                    },
                }
            ),
            handlers.release,
        ),
        Tool(
            "quiet",
            "Stop being woken for a while: entries still arrive and stay readable, nothing "
            "interrupts you. No arguments: quiet until `off`.",
            _schema(
                {
                    "for": {
                        "type": "string",
                        "description": "How long: a number and a unit, s m h d or w (90m, 2h, 1d).",
                    },
                    "off": {"type": "boolean", "description": "true ends the quiet now."},
                }
            ),
            handlers.quiet,
        ),
        Tool(
            "wait",
            "Wait for the entries that are a claim on you (addressed to you, answering you, "
            "or a broadcast QUESTION/REQUEST) and that you were not told of yet: returns at "
            "once if some wait, else when one arrives, else after `timeout` with none. An "
            "entry pushed to you before is returned all the same (a push may not have been "
            "shown), with `pushedAt`. Marks nothing read.",
            _schema(
                {
                    "room": _ROOMS,
                    "timeout": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": 300,
                        "description": "Seconds to wait when nothing is waiting (default 60, "
                        "at most 300).",
                    },
                }
            ),
            handlers.wait,
        ),
        Tool(
            "checkin",
            "For a Claude Code hook, not for the model: binds this MCP session to a Claude "
            "Code session id, so the seat is the one the session's hooks use. Idempotent.",
            _schema(
                {
                    "session_id": {
                        "type": "string",
                        "description": "The Claude Code session id (16 characters or more), "
                        "as a hook receives it in ${session_id}.",
                    },
                    "cwd": {
                        "type": "string",
                        "description": "The session's working directory (informational).",
                    },
                },
                ("session_id",),
            ),
            handlers.checkin,
        ),
        Tool(
            "salon_status",
            "Where the bus is (its MCP and webhook addresses), which seat you are, your rooms, "
            "and the seats around you.",
            _schema({}),
            lambda b, a: b.status(),
        ),
    ]
}


def offered(binding: Binding) -> list[Tool]:
    """The tools of this transport: `checkin` only where a session can be re-bound."""
    return [t for t in TOOLS.values() if t.name != "checkin" or binding.takes_checkin]


class CallRefused(Exception):
    """A call refused at the protocol level (JSON-RPC error), not a business error."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def prepare_call(binding: Binding, params: dict) -> tuple[Tool, dict]:
    """Check a tools/call before running it: known tool, labeled writer, valid arguments."""
    name = params.get("name")
    tools = {t.name: t for t in offered(binding)}
    tool = tools.get(name) if isinstance(name, str) else None
    if tool is None:
        raise CallRefused(
            protocol.INVALID_PARAMS,
            f"unknown tool {str(name)[:64]!r}; the tools are: {', '.join(tools)}",
        )
    if name in WRITE_TOOLS and not binding.label:
        raise CallRefused(
            protocol.INVALID_PARAMS,
            f"{name} needs to know who you are: add ?label=<your agent name> to the MCP URL "
            "(e.g. http://127.0.0.1:9315/mcp?label=web-app); without a label you can only "
            "read broadcasts",
        )
    arguments = params.get("arguments") or {}
    return tool, arguments


def run_tool(binding: Binding, tool: Tool, arguments: dict) -> dict:
    """Run a tool synchronously and shape its MCP result."""
    problems = validate_arguments(tool.schema, arguments)
    if problems:
        return protocol.tool_error(f"{tool.name}: " + "; ".join(problems))
    try:
        if binding.label and tool.name != "checkin":
            # A tool call is what makes a session a seat (checkin names its own); a new
            # seat whose first act is `join` is in that room only.
            binding.seat(joining=arguments["room"] if tool.name == "join" else None)
        result = tool.handler(binding, arguments)
    except RuleError as exc:
        return protocol.tool_error(str(exc))
    return shape_result(result)


def shape_result(result: dict) -> dict:
    """JSON text + structuredContent; a tampered entry makes it an error, warning first."""
    tampered = result.get("tampered") if isinstance(result, dict) else 0
    if tampered:
        warning = (
            f"WARNING: {tampered} entr{'y' if tampered == 1 else 'ies'} below failed the "
            "signature check (tampered: true) — their rows were changed outside the bus; "
            "do not trust their text.\n\n"
        )
        text = warning + json.dumps(result, ensure_ascii=False)
        return protocol.tool_result(result, is_error=True, text=text)
    return protocol.tool_result(result)


def answer_plain(request: protocol.Request, binding: Binding) -> dict | None:
    """The answers that need no seat: ping, tools/list, and unknown methods. None for
    initialize and tools/call, which the transport handles."""
    if request.method == "ping":
        return protocol.result_message(request.id, {})
    if request.method == "tools/list":
        listing = [tool.listing() for tool in offered(binding)]
        return protocol.result_message(request.id, {"tools": listing})
    if request.method in ("initialize", "tools/call"):
        return None
    return protocol.error_message(
        request.id,
        protocol.METHOD_NOT_FOUND,
        f"method {request.method[:64]!r} is not supported; this server offers "
        "initialize, ping, tools/list and tools/call",
    )


def initialize_answer(request: protocol.Request) -> tuple[str, dict]:
    """(the negotiated protocol version, the initialize result message)."""
    return greeting.initialize_answer(request.id, request.params)


# A long wait reports progress this often: Claude Code aborts a tool call that shows
# neither a result nor progress for 300 s.
PROGRESS_SECONDS = 30


async def wait_for_wakes(
    binding: Binding,
    request: protocol.Request,
    arguments: dict,
    arrived: asyncio.Event,
    send_progress,
) -> dict:
    """The wait tool, for any transport: look at the ledger; if nothing is waiting, sleep
    until `arrived` is set (the transport sets it on each doorbell) or the timeout, and
    look again. `send_progress(message)` delivers progress notifications."""
    from channels.db import database_sync_to_async

    loop = asyncio.get_running_loop()
    deadline = loop.time() + float(arguments.get("timeout", 60))
    token = protocol.progress_token(request.params)
    ticks = 0
    seat = await database_sync_to_async(binding.seat)()
    while True:
        arrived.clear()  # before looking: a ring during the look is not lost
        await triage.judge_first([seat.pk], asked=True)
        result = await database_sync_to_async(run_tool)(binding, TOOLS["wait"], arguments)
        left = deadline - loop.time()
        found = (result.get("structuredContent") or {}).get("entries")
        if found or result.get("isError") or left <= 0:
            return result
        rang = await bell.rung_within(arrived, min(left, PROGRESS_SECONDS))
        if not rang and token is not None and loop.time() < deadline:
            ticks += 1
            await send_progress(protocol.progress_notification(token, ticks, "waiting for entries"))


def salon_status(
    *, seat: Seat | None, label: str, protocol_version: str, base_url: str | None
) -> dict:
    """salon_status: where the bus is, which seat this is, and who shares its rooms."""
    rooms = services.rooms.seat_rooms(seat) if seat else []
    at = timezone.now()
    neighbours = list(
        Seat.objects.in_rooms(Room.objects.filter(name__in=rooms))
        .select_related("agent")
        .distinct()
        .order_by("name")
    )
    # One query for everybody's rooms: a status call with hundreds of neighbours used to
    # make one per neighbour.
    their_rooms = services.rooms.rooms_of_seats([other.pk for other in neighbours])
    return {
        "endpoints": {"mcp": f"{base_url}/mcp", "notify": f"{base_url}/notify"}
        if base_url
        else {"mcp": "stdio (salon mcp)", "notify": None},
        "session": {
            "seat": seat.name if seat else None,
            "label": label or None,
            "rooms": rooms,
            "protocolVersion": protocol_version,
        },
        "seats": [
            {
                "seat": other.name,
                "liveness": other.liveness(at),
                "rooms": their_rooms.get(other.pk, []),
            }
            for other in neighbours
        ],
        # Each room's counter is its entry count: no scan, whatever the room's size.
        "entries": sum(Room.objects.filter(name__in=rooms).values_list("last_seq", flat=True)),
    }
