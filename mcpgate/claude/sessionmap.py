"""Which Claude Code session an HTTP connection of it belongs to.

Claude Code sends nothing over HTTP that names its session, and runs the server's
`headersHelper` (`salon hook mcp-headers`) without the session id in its environment —
but it runs it at every connect, the reconnect after a daemon restart included, so a
header from it binds the new MCP session to the right seat from its first request
(mcpgate.sessions.CLAUDE_SESSION_HEADER). The session-start hook, which does get the id,
leaves a record for the helper: `claude-<pid>-<start>.session` in this user's runtime
directory, keyed by the owning Claude Code process (its pid and start time, so a later
process with the same pid is not taken for it), written as soon as the hook has read its
input. Claude Code starts the helper while that hook still runs, so the helper waits up to
WAIT_SECONDS for the record; under `claude mcp list`/`get` (a health check: no session,
no hook) it answers at once, with no header.

Standard library only, and not pathlib (with urllib.parse and ipaddress, ~4 ms of every
hook's start): both run at every session start.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

from mcpgate.claude import processes
from salond.line import private_runtime_dir, runtime_dir

HEADER = "X-Salon-Claude-Session"
WAIT_SECONDS = 1.5
POLL_SECONDS = 0.03


def _record_name(owner: processes.Proc) -> str:
    start = "".join(ch for ch in owner.start if ch.isalnum())
    return f"claude-{owner.pid}-{start}.session"


def _record_path(owner: processes.Proc) -> str:
    return os.path.join(runtime_dir(), _record_name(owner))


def _private_dir() -> bool:
    """Records are only written and read in this user's private runtime directory: one
    that another user made could hand the helper a session id of their choosing."""
    return private_runtime_dir() is not None


def _health_check(owner: processes.Proc) -> bool:
    return "mcp" in owner.argv[1:3]


def record(session_id: str) -> None:
    """The session-start hook: note this Claude Code process's session id (best effort),
    and forget the records of Claude Code processes that are gone."""
    owner = processes.owning_claude(processes.ancestors())
    if owner is None or not session_id or not _private_dir():
        return
    path = _record_path(owner)
    draft = os.path.join(runtime_dir(), f".{_record_name(owner)}.{os.getpid()}")
    with contextlib.suppress(OSError):
        descriptor = os.open(draft, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(session_id)
        os.replace(draft, path)  # whole or not at all, for a helper reading meanwhile
    _forget_the_gone(runtime_dir())


def _forget_the_gone(directory: str) -> None:
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not (name.startswith("claude-") and name.endswith(".session")):
            continue
        pid = name.split("-")[1]
        proc = processes.read_proc(int(pid)) if pid.isdigit() else None
        if proc is None or _record_name(proc) != name:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


def lookup(wait_seconds: float = WAIT_SECONDS) -> str | None:
    """The helper: the session id of the Claude Code process that runs us, if its
    session-start hook has recorded it (waiting up to `wait_seconds` for it)."""
    owner = processes.owning_claude(processes.ancestors())
    if owner is None or _health_check(owner) or not _private_dir():
        return None
    path = _record_path(owner)
    deadline = time.monotonic() + wait_seconds
    while True:
        with contextlib.suppress(OSError), open(path, encoding="utf-8") as file:
            text = file.read().strip()
            if text:
                return text
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_SECONDS)


def headers(data_dir: str | None = None) -> str:
    """What `salon hook mcp-headers` prints: a JSON object of headers ({} when the
    session is unknown: the connection then starts as a seat of its own, and the
    prompt's checkin binds it), with the bearer token `salon install --http` kept in the
    user's `data_dir` for the entry's URL, if any (mcpgate.claude.httptokens)."""
    found: dict[str, str] = {}
    with contextlib.suppress(Exception):
        if data_dir:
            from mcpgate.claude import httptokens

            found.update(httptokens.header(data_dir))
    with contextlib.suppress(Exception):
        session_id = lookup()
        if session_id:
            found[HEADER] = session_id
    return json.dumps(found)
