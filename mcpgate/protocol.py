"""JSON-RPC 2.0 and MCP (Streamable HTTP) message layer: pure (no Django).

Both the Channels consumer and the stdio loop call these functions, so every
refusal is a :class:`ProtocolError` that carries the HTTP status *and* the
JSON-RPC error; the stdio loop simply ignores the status.

Every message the server sends is built from the MCP SDK's own wire types
(`mcp_types`, the types package `mcp` is built on) and dumped to plain JSON, so the
shapes are the protocol's, not hand-written: an error in a field name fails at once.
Three places keep a plain dict: a JSON-RPC error answering a message whose id could not
be read (JSON-RPC's `"id": null`, which the MCP types do not allow); the result and
notification wrappers carrying a `result` or `params` already built from the types; and
the answer to `initialize` (mcpgate.greeting), which `salon mcp` sends before it loads
the types — tests check it against the types. Cost: importing `mcp_types` takes ~0.3 s
of CPU (pydantic), paid once per process (the daemon, each `salon mcp`); building and
dumping one message ~10 µs. The `mcp` package itself (client and server stacks, ~1 s to
import) is not imported at run time.

Decisions where the MCP spec is silent or loose:

* One message per POST. Batches were removed from MCP in 2025-06-18; we refuse
  them for every version rather than half-support them.
* A missing ``Accept`` header is refused (406): the spec says the client MUST
  list both media types, and the official SDKs refuse it too.
* A leading UTF-8 byte-order mark is tolerated (RFC 8259 allows ignoring it).
* ``NaN``/``Infinity`` literals are not JSON and are refused as parse errors.
* An integer argument must be a JSON integer: ``20.0`` is refused, so a tool
  never receives a float where it slices or counts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import mcp_types as types

from bus import strict
from mcpgate.arguments import shown_value
from mcpgate.greeting import (  # noqa: F401 (the versions and the name are the protocol's)
    LATEST_VERSION,
    MAX_MESSAGE_BYTES,
    SERVER_NAME,
    SUPPORTED_VERSIONS,
    negotiate_version,
)

# The stateless protocol newer clients try first; we must refuse it so they fall
# back to the initialize handshake (channels need a session).
STATELESS_PROBE_VERSION = "2026-07-28"
STATELESS_PROBE_METHOD = "server/discover"

MAX_BODY_BYTES = MAX_MESSAGE_BYTES

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

CHANNEL_METHOD = "notifications/claude/channel"
PROGRESS_METHOD = "notifications/progress"

# Header names as the consumer must look them up (lower-case, as ASGI delivers them).
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
LAST_EVENT_ID_HEADER = "last-event-id"

JsonId = str | int


class ProtocolError(Exception):
    """A refusal: the HTTP status to answer with and the JSON-RPC error to put in the body."""

    def __init__(
        self,
        status: int,
        code: int,
        message: str,
        id: JsonId | None = None,
        data: object = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.id = id
        self.data = data

    def body(self) -> dict[str, Any]:
        return error_message(self.id, self.code, self.message, self.data)

    def __repr__(self) -> str:
        return f"ProtocolError({self.status}, {self.code}, {self.message!r}, id={self.id!r})"


def http_error(
    status: int,
    message: str,
    code: int = INVALID_REQUEST,
    id: JsonId | None = None,
) -> ProtocolError:
    """Shorthand for transport refusals (400 no session, 403 host/token, 404 unknown session…)."""
    return ProtocolError(status, code, message, id)


@dataclass(frozen=True, slots=True)
class Request:
    id: JsonId
    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Response:
    """A client's reply to a request the server sent (answered with 202, nothing else)."""

    id: JsonId | None
    result: Any = None
    error: dict[str, Any] | None = None


Message = Request | Notification | Response


# ---------------------------------------------------------------- parsing


def _json_kind(value: object) -> str:
    """How a JSON value reads in an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is_json_id(value: object) -> bool:
    # bool is an int subclass in Python, but `true` is not a valid id.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse_body(body: bytes) -> Message:
    """Parse one JSON-RPC 2.0 message (a POST body or a stdio line); the JSON rules are
    bus.strict's, shared with /notify."""
    try:
        data = strict.decode_json(body, max_bytes=MAX_BODY_BYTES)
    except strict.TooLarge as exc:
        raise ProtocolError(
            413,
            INVALID_REQUEST,
            f"request body is {exc.size} bytes; the limit is {MAX_BODY_BYTES} bytes (4 MiB): "
            "send a smaller message",
        ) from None
    except strict.NotJson as exc:
        raise ProtocolError(
            400,
            PARSE_ERROR,
            f"request body is not valid JSON ({exc}): send one JSON-RPC 2.0 message as JSON",
        ) from None
    return parse_message(data)


def parse_message(data: object) -> Message:
    """Classify an already-decoded JSON value as a request, notification or response."""
    if isinstance(data, list):
        raise ProtocolError(
            400,
            INVALID_REQUEST,
            "JSON-RPC batches (arrays) are not accepted: send one JSON-RPC message per request",
        )
    if not isinstance(data, dict):
        raise ProtocolError(
            400,
            INVALID_REQUEST,
            f"a JSON-RPC message must be a JSON object, got {_json_kind(data)}: "
            'send {"jsonrpc": "2.0", "method": ..., "id": ...}',
        )
    raw_id = data.get("id")
    # Echo the caller's id in the error when it is usable, so it can match the reply.
    reply_id = raw_id if _is_json_id(raw_id) else None

    def invalid(message: str) -> ProtocolError:
        return ProtocolError(400, INVALID_REQUEST, message, reply_id)

    if data.get("jsonrpc") != "2.0":
        got = shown_value(data["jsonrpc"]) if "jsonrpc" in data else "nothing"
        raise invalid(f'"jsonrpc" must be the string "2.0" (got {got}): add "jsonrpc": "2.0"')
    if "method" in data:
        return _call(data, raw_id, invalid)
    if "result" in data or "error" in data:
        return _response(data, raw_id, invalid)
    raise invalid(
        'a JSON-RPC message needs a "method" (request or notification) '
        'or a "result"/"error" (response)'
    )


def _call(data: dict, raw_id: object, invalid) -> Request | Notification:
    """A message with a method: a request (it has an id) or a notification."""
    if "result" in data or "error" in data:
        raise invalid(
            'a message carries either "method" (request/notification) or "result"/"error" '
            "(response), never both"
        )
    method = data["method"]
    if not isinstance(method, str) or not method:
        raise invalid(f'"method" must be a non-empty string, got {_json_kind(method)}')
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise invalid(
            f'"params" must be an object, got {_json_kind(params)}: '
            "send named parameters as an object, or leave params out"
        )
    if "id" not in data:
        return Notification(method=method, params=params)
    if not _is_json_id(raw_id):
        raise invalid(
            f'a request "id" must be a string or an integer, got {_json_kind(raw_id)}: '
            'use a notification (no "id") if you expect no answer'
        )
    return Request(id=raw_id, method=method, params=params)


def _response(data: dict, raw_id: object, invalid) -> Response:
    """A message with a result or an error: the client answering a request of ours."""
    if "result" in data and "error" in data:
        raise invalid('a response carries "result" or "error", not both')
    error = data.get("error")
    if "error" in data and not isinstance(error, dict):
        raise invalid(f'a response "error" must be an object, got {_json_kind(error)}')
    # JSON-RPC lets an error response have a null id (the request was unreadable).
    id_ok = _is_json_id(raw_id) or (raw_id is None and "error" in data and "id" in data)
    if not id_ok:
        got = _json_kind(raw_id) if "id" in data else "nothing"
        raise invalid(f'a response "id" must be a string or an integer, got {got}')
    return Response(id=raw_id, result=data.get("result"), error=error)


# ---------------------------------------------------------------- headers


def _media_ranges(accept: str) -> list[tuple[str, str, float]]:
    """Parse an Accept header into (type, subtype, q) triples, lower-cased."""
    ranges: list[tuple[str, str, float]] = []
    for part in accept.split(","):
        pieces = [p.strip() for p in part.split(";")]
        media = pieces[0].lower()
        if "/" not in media:
            continue
        main, _, sub = media.partition("/")
        q = 1.0
        for param in pieces[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = 1.0  # a garbled q is not a refusal
                if math.isnan(q):
                    q = 1.0
        ranges.append((main.strip(), sub.strip(), q))
    return ranges


def _accepts(accept: str | None, media_type: str) -> bool:
    """Whether `accept` allows `media_type`: the most specific matching range decides."""
    if not accept:
        return False
    want_main, want_sub = media_type.split("/")
    best_rank = -1
    best_q = 0.0
    for main, sub, q in _media_ranges(accept):
        if main == want_main and sub == want_sub:
            rank = 2
        elif main == want_main and sub == "*":
            rank = 1
        elif main == "*" and sub == "*":
            rank = 0
        else:
            continue
        # Most specific wins; among equals the highest q (RFC 9110 §12.5.1).
        if rank > best_rank or (rank == best_rank and q > best_q):
            best_rank, best_q = rank, q
    return best_rank >= 0 and best_q > 0


def accepts_event_stream(accept: str | None) -> bool:
    """For GET: False means answer 406."""
    return _accepts(accept, "text/event-stream")


def check_post_headers(headers: Mapping[str, str]) -> None:
    """Accept (406) then Content-Type (415) of a POST; header names are lower-case."""
    accept = headers.get("accept")
    if not (_accepts(accept, "application/json") and _accepts(accept, "text/event-stream")):
        raise ProtocolError(
            406,
            INVALID_REQUEST,
            "Accept must allow both application/json and text/event-stream "
            f"(got {strict.shown(accept, 100)}): "
            "send 'Accept: application/json, text/event-stream'",
        )
    content_type = headers.get("content-type")
    media, charset = strict.media_type(content_type)
    if media != "application/json":
        raise ProtocolError(
            415,
            INVALID_REQUEST,
            f"Content-Type must be application/json (got {strict.shown(content_type, 100)}): "
            "send the JSON-RPC message with 'Content-Type: application/json'",
        )
    if not strict.utf8_charset(charset):
        raise ProtocolError(
            415,
            INVALID_REQUEST,
            f"charset {strict.shown(charset, 32)} is not supported: MCP messages are UTF-8; "
            "send 'Content-Type: application/json' (or charset=utf-8)",
        )


def is_stateless_probe(headers: Mapping[str, str], message: Message | None) -> bool:
    """A client speaking the stateless 2026-07-28 protocol: refuse (400/-32600) so it falls back."""
    if (headers.get(VERSION_HEADER) or "").strip() == STATELESS_PROBE_VERSION:
        return True
    return (
        isinstance(message, Request | Notification)
        and message.method == STATELESS_PROBE_METHOD
        and not headers.get(SESSION_HEADER)
    )


def stateless_probe_refusal(id: JsonId | None = None) -> ProtocolError:
    """The 400 that sends a stateless-protocol client back to the initialize handshake."""
    return ProtocolError(
        400,
        INVALID_REQUEST,
        f"protocol {STATELESS_PROBE_VERSION} (stateless) is not supported: this server needs "
        f"a session; send initialize with one of {', '.join(SUPPORTED_VERSIONS)}",
        id,
    )


def check_protocol_version_header(value: str | None) -> None:
    """After initialize: an absent header is fine (spec: assume the negotiated one)."""
    if value is None:
        return
    if value.strip() in SUPPORTED_VERSIONS:
        return
    raise ProtocolError(
        400,
        INVALID_REQUEST,
        f"unsupported MCP-Protocol-Version {value!r}: supported are "
        f"{', '.join(SUPPORTED_VERSIONS)}; send the version negotiated at initialize",
    )


# ---------------------------------------------------------------- building messages


def _wire(model: types.BaseModel, **exclude) -> dict[str, Any]:
    """A wire type as the JSON object it stands for (camelCase, no empty fields)."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json", **exclude)


def tool_listing(
    name: str, description: str, schema: dict[str, Any], *, read_only: bool
) -> dict[str, Any]:
    """One entry of tools/list. Its annotations say what a client's approval rule asks:
    no tool destroys anything or reaches beyond the bus (Codex CLI runs such tools in a
    headless run with no approval setting); the ones that write nothing say so."""
    annotations = types.ToolAnnotations(
        readOnlyHint=read_only, destructiveHint=False, openWorldHint=False
    )
    return _wire(
        types.Tool(name=name, description=description, inputSchema=schema, annotations=annotations)
    )


def result_message(id: JsonId | None, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def error_message(
    id: JsonId | None,
    code: int,
    message: str,
    data: object = None,
) -> dict[str, Any]:
    error = _wire(types.ErrorData(code=code, message=message, data=data))
    return {"jsonrpc": "2.0", "id": id, "error": error}


def tool_result(
    structured: dict[str, Any] | list[Any],
    *,
    is_error: bool = False,
    text: str | None = None,
) -> dict[str, Any]:
    """A tools/call result: JSON text for older clients plus structuredContent.

    structuredContent must be an object, so a list is wrapped as {"items": [...]};
    the text is the JSON of exactly that object, as the spec asks.
    """
    content = structured if isinstance(structured, dict) else {"items": structured}
    if text is None:
        text = json.dumps(content, ensure_ascii=False)
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structuredContent=content,
        isError=is_error,
    )
    # resultType is a field of a later protocol revision than the ones spoken here.
    return _wire(result, exclude={"result_type"})


def tool_error(message: str) -> dict[str, Any]:
    """A business error the model can read and act on (not a JSON-RPC error)."""
    return tool_result({"error": message}, is_error=True, text=message)


def progress_notification(
    token: JsonId,
    progress: float,
    message: str | None = None,
    *,
    total: float | None = None,
) -> dict[str, Any]:
    params = types.ProgressNotificationParams(
        progressToken=token, progress=progress, total=total, message=message
    )
    return _wire(
        types.JSONRPCNotification(jsonrpc="2.0", method=PROGRESS_METHOD, params=_wire(params))
    )


def progress_token(params: Mapping[str, Any]) -> JsonId | None:
    """The request's params._meta.progressToken, if it is a usable token."""
    meta = params.get("_meta")
    if not isinstance(meta, Mapping):
        return None
    token = meta.get("progressToken")
    return token if _is_json_id(token) else None


_LINE_BREAKS_JSON_LEAVES_RAW = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


class SharedMessage(dict):
    """A message sent as it is to many streams (a broadcast's push): encoded once."""

    encoded: bytes | None = None


def encode_message(message: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON on one line: a JSON response body or a stdio line (add b"\\n")."""
    if isinstance(message, SharedMessage):
        if message.encoded is None:
            message.encoded = _encode(message)
        return message.encoded
    return _encode(message)


def _encode(message: Mapping[str, Any]) -> bytes:
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    # Python's str.splitlines() (and so httpx's line reader, under older SSE clients)
    # also breaks at NEL, LS and PS; JSON lets us escape them, so a message stays one line.
    text = text.translate(_LINE_BREAKS_JSON_LEAVES_RAW)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate cannot be UTF-8; \u-escaped ASCII JSON still carries it.
        return json.dumps(message, separators=(",", ":")).encode("ascii")


# ---------------------------------------------------------------- channel push


def sanitize_meta_key(key: str) -> str:
    """Make a key Claude Code keeps: [A-Za-z_][A-Za-z0-9_]* (it drops the event otherwise)."""
    # ASCII only on purpose: str.isalnum() would let 'é' through.
    chars = [
        c if c == "_" or ("a" <= c <= "z") or ("A" <= c <= "Z") or ("0" <= c <= "9") else "_"
        for c in str(key)
    ]
    cleaned = "".join(chars)
    if not cleaned or cleaned[0].isdigit():
        cleaned = "_" + cleaned
    return cleaned


def _meta_value(value: object) -> str:
    """Every meta value as a string: Claude Code drops events with any other kind."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    if isinstance(value, datetime | date):
        return value.isoformat()
    # UUID, Decimal, …: their plain text, not a quoted JSON string.
    return str(value)


def channel_notification(content: str, meta: Mapping[str, object]) -> dict[str, Any]:
    """The push Claude Code shows as a <channel> tag.

    Empty values are left out (a key with no value says nothing). When two keys
    sanitize to the same name the later one gets a numeric suffix, so no value
    is silently lost.
    """
    clean: dict[str, str] = {}
    for key, value in meta.items():
        if value is None:
            continue
        text = _meta_value(value)
        if text == "":
            continue
        name = sanitize_meta_key(key)
        if name in clean:
            n = 2
            while f"{name}_{n}" in clean:
                n += 1
            name = f"{name}_{n}"
        clean[name] = text
    notification = types.JSONRPCNotification(
        jsonrpc="2.0", method=CHANNEL_METHOD, params={"content": content, "meta": clean}
    )
    return _wire(notification)


# ---------------------------------------------------------------- server-sent events


def sse_event(message: Mapping[str, Any], event_id: str | None = None) -> bytes:
    """One SSE event. `event: message` because Claude Code ignores any other event name."""
    lines = []
    if event_id is not None:
        if any(c in event_id for c in "\r\n\0"):
            # A line break would end the field early; NUL makes clients ignore the id.
            raise ValueError(f"an SSE event id cannot contain CR, LF or NUL: {event_id!r}")
        lines.append(f"id: {event_id}")
    lines.append("event: message")
    head = ("\n".join(lines) + "\ndata: ").encode("utf-8")
    # json.dumps escapes \n and \r inside strings, so data is always one line.
    return head + encode_message(message) + b"\n\n"


def sse_comment(text: str = "") -> bytes:
    """A comment line (clients ignore it): keeps proxies and fetch() from timing out."""
    if not text:
        return b":\n\n"
    return "".join(f": {line}\n" for line in text.splitlines()).encode("utf-8") + b"\n"
