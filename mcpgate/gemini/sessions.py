"""Which Gemini CLI session a `salon mcp` server serves.

Gemini gives its MCP servers no session id (not in their environment, not in
`initialize`, not in a call's `_meta`); its hooks get one (`session_id` on stdin). The
hooks and the servers are children of the same gemini process, so a hook leaves a record
for the server: `gemini-<pid>-<start>.session` in this user's private runtime directory,
keyed by that gemini process (its pid and start time, so a later process with the same
pid is not taken for it). The server reads it at its first tool call — SessionStart has
run by then — and checks in as that session's seat: the one its hooks check in. A server
started by `gemini mcp list` finds no record and makes no seat (it is called by no one).

Standard library only: the hooks run on every prompt.
"""

from __future__ import annotations

import contextlib
import os

from mcpgate.claude import processes
from salond.line import private_runtime_dir, runtime_dir


def is_gemini(argv: tuple[str, ...] | list[str]) -> bool:
    """The command line of Gemini CLI: node running its `gemini` script or bundle (after
    node's own flags: the CLI relaunches itself with a larger heap)."""
    for arg in list(argv)[:4]:
        path = arg.replace("\\", "/")
        base = path.rsplit("/", 1)[-1].lower()
        if base in ("gemini", "gemini.js") or "/@google/gemini-cli/" in path:
            return True
    return False


def owning_gemini(chain: list[processes.Proc]) -> processes.Proc | None:
    return next((proc for proc in chain if is_gemini(proc.argv)), None)


def _record_name(owner: processes.Proc) -> str:
    start = "".join(ch for ch in owner.start if ch.isalnum())
    return f"gemini-{owner.pid}-{start}.session"


def record(session_id: str) -> None:
    """A hook: note the session id of the gemini process that runs it (best effort), and
    forget the records of gemini processes that are gone."""
    owner = owning_gemini(processes.ancestors())
    if owner is None or not session_id or private_runtime_dir() is None:
        return
    directory = runtime_dir()
    path = os.path.join(directory, _record_name(owner))
    with contextlib.suppress(OSError), open(path, encoding="utf-8") as file:
        if file.read().strip() == session_id:
            return
    draft = os.path.join(directory, f".{_record_name(owner)}.{os.getpid()}")
    with contextlib.suppress(OSError):
        descriptor = os.open(draft, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(session_id)
        os.replace(draft, path)  # whole or not at all, for a server reading meanwhile
    _forget_the_gone(directory)


def _forget_the_gone(directory: str) -> None:
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not (name.startswith("gemini-") and name.endswith(".session")):
            continue
        pid = name.split("-")[1]
        proc = processes.read_proc(int(pid)) if pid.isdigit() else None
        if proc is None or _record_name(proc) != name:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


def lookup() -> str | None:
    """The server: the session id its gemini process's hooks recorded, if any."""
    owner = owning_gemini(processes.ancestors())
    if owner is None or private_runtime_dir() is None:
        return None
    path = os.path.join(runtime_dir(), _record_name(owner))
    with contextlib.suppress(OSError), open(path, encoding="utf-8") as file:
        return file.read().strip() or None
    return None
