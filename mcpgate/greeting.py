"""The MCP greeting: who this server is and what it teaches, in answer to `initialize`.

Standard library only. Claude Code starts `salon mcp` at every session start and counts
the server as connected once `initialize` is answered, so the stdio server answers it
first (answer_first_line), before it loads Django or the MCP wire types, and loads them
while the client sends what follows. The answer is a plain dict; tests check it against
the SDK's own InitializeResult type, so its shape is still the protocol's.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

SERVER_NAME = "agent-salon"
SUPPORTED_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_VERSION = SUPPORTED_VERSIONS[0]
# One message (a POST body, a stdio line) may be at most this long.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024

INSTRUCTIONS = """\
agent-salon is a message bus shared by coding-agent sessions. You sit in one or more rooms \
as a seat (your project's name plus a short session id, e.g. web-app#c4e1b7d2). Everything \
anyone writes in a room is stored and readable by every seat in it; only some entries wake \
you.

Write with `send`: `text`, a `type` (QUESTION, ANSWER, FACT or REQUEST), and optionally \
`to` (seats or agent names who should act) and `re` (the id of the entry you answer). The \
server fills in who you are and the time; you never name a sender. An entry wakes a seat \
only if it is addressed to it, answers something it wrote, or is a broadcast QUESTION or \
REQUEST; a broadcast FACT or ANSWER wakes nobody. The send report's `wakes` and `notice` \
say whom, if anyone, you interrupted. Address errands with `to`; answer a QUESTION with an \
ANSWER whose `re` is the question's id.

You are told of each entry that wakes you once: by a `wait` result, a line from the \
`salon wait` monitor, a Stop-hook note, the session-start context, or `inbox`. It may also \
arrive as a <channel source="agent-salon" ...> tag (attributes: the entry's id, ts, room, \
type, to, re, and the sender seat); that push is a hint your client may not show, so the \
entry is still told one of the other ways, marked as pushed. Read what waits with `inbox` \
(it marks what it returns as read; `advance: false` only peeks), older entries with \
`history`, see who is around with `agents`, say what you are on with `focus`, and use \
`quiet` when you must not be interrupted.
"""


def negotiate_version(requested: object) -> str:
    """The client's version if we speak it, else our latest (the spec's negotiation rule)."""
    if isinstance(requested, str) and requested in SUPPORTED_VERSIONS:
        return requested
    return LATEST_VERSION


def server_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-salon")
    except PackageNotFoundError:
        return "0.1.0"


def initialize_result(version: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        # claude/channel is what makes Claude Code listen for our channel pushes.
        "capabilities": {"experimental": {"claude/channel": {}}, "tools": {}},
        "serverInfo": {"name": SERVER_NAME, "version": server_version()},
        "instructions": INSTRUCTIONS,
    }


def initialize_answer(request_id: str | int, params: object) -> tuple[str, dict[str, Any]]:
    """(the negotiated version, the whole JSON-RPC answer to `initialize`)."""
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    version = negotiate_version(requested)
    return version, {"jsonrpc": "2.0", "id": request_id, "result": initialize_result(version)}


def _plain_initialize(line: bytes) -> tuple[str | int, object] | None:
    """(id, params) when `line` is, beyond doubt, one JSON-RPC `initialize` request;
    anything else is None and left to the full protocol layer (with all its checks)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or set(message) - {"jsonrpc", "id", "method", "params"}:
        return None
    request_id = message.get("id")
    if message.get("jsonrpc") != "2.0" or message.get("method") != "initialize":
        return None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    params = message.get("params", {})
    return (request_id, params) if isinstance(params, dict) else None


def answer_first_line(
    reader: BinaryIO, writer: BinaryIO, max_bytes: int
) -> tuple[str | None, bytes]:
    """Read stdin's first line; if it is `initialize`, answer it now. Returns (the
    negotiated version or None, the line still to be handled: b"" once answered)."""
    line = reader.readline(max_bytes + 1)
    if len(line) > max_bytes or not line.endswith(b"\n"):
        return None, line  # overlong, or stdin ended: the full layer says what is wrong
    request = _plain_initialize(line)
    if request is None:
        return None, line
    version, answer = initialize_answer(*request)
    writer.write(json.dumps(answer, separators=(",", ":")).encode("ascii") + b"\n")
    writer.flush()
    return version, b""
