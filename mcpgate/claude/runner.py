"""`salon hook session-start|stop|heartbeat|session-end|mcp-headers`: the never-failing
hook runner.

Claude Code runs it with its hook JSON on stdin. Whatever goes wrong — garbage on stdin,
a malformed setting, a store that cannot be opened, a bug — it prints nothing on stdout
and exits 0; the failure is one line in the hooks' log (mcpgate.claude.hookinput).

The work: the fast path first (no Django, mostly no database); then, for an edit on the
SQLite store, its claim's writes without Django (mcpgate.claude.claimwrite); else the
request goes to a running server of the store over the local line, and only with none
answering does this process load Django and do it itself (the `hook` operation,
registered by the mcpgate app: mcpgate.claude.hooks).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable

from bus import strict
from mcpgate.claude import sessionmap
from mcpgate.claude.hookinput import (
    HOOK_CLIENTS,
    HOOKS,
    HookContext,
    fast_path,
    hook_context,
    read_payload,
    record_error,
    stamp_fresh,
    write_stamp,
)
from mcpgate.claude.processes import HookInputError
from salond.line import Line

USAGE = (
    "usage: salon hook {session-start|stop|heartbeat|pre-edit|session-end|prompt-submit} "
    "[--client claude|codex|gemini|opencode] — run by Claude Code (or Codex CLI, Gemini "
    "CLI, agent-salon's OpenCode plugin) with its hook JSON on stdin; salon hook "
    "mcp-headers — Claude Code's headersHelper for the HTTP server (salon install writes "
    "them)"
)


class BusRefusal(RuntimeError):
    """The bus said no to the hook's request (its rules: a refusal, not a failure)."""


def split_client(argv: list[str]) -> tuple[list[str], str]:
    """(the arguments without `--client NAME`, the client: claude unless named)."""
    if len(argv) == 3 and argv[1] == "--client" and argv[2] in HOOK_CLIENTS:
        return argv[:1], argv[2]
    return argv, "claude"


def run_somewhere(ctx: HookContext, line: Line) -> tuple[dict | None, float | None]:
    """(the hook's output, the seat's last_seen for the stamp)."""
    answer = line.answer({"op": "hook", "args": ctx.to_wire(), "caller": {}})
    if "refusal" in answer:
        raise BusRefusal(answer["refusal"])
    result = answer["result"]
    last_seen = result.get("lastSeen")
    return result.get("output"), last_seen if isinstance(last_seen, float) else None


def judge_somewhere(ctx: HookContext, line: Line) -> None:
    """The Stop hook's letterbox and safety net (bus.services.triage) before the hook
    tells anything: the rows are claimed and recorded by whoever answers the line, and
    the judge runs here, in the hook's own process (twice where the net takes a second
    look at a letterbox "no"). A failure here is logged and the
    hook goes on (a row left pending is failed after its timeout)."""
    from bus import judge  # threads and a subprocess: only a Stop hook with a judge

    answer = line.answer({"op": "triage-claim", "args": ctx.to_wire(), "caller": {}})
    if "refusal" in answer:
        raise BusRefusal(answer["refusal"])
    found = answer["result"]
    work = found.get("work") or []
    command, timeout = list(found["command"]), float(found["timeout"])
    for _look in range(2):  # the letterbox's, then the net's second look at its "no"s
        if not work:
            return
        answers = judge.ask_all(command, [item["document"] for item in work], timeout)
        answered = {str(item["row"]): a for item, a in zip(work, answers, strict=True)}
        recorded = line.answer({"op": "triage-record", "args": {"answers": answered}, "caller": {}})
        if "refusal" in recorded:
            raise BusRefusal(recorded["refusal"])
        work = recorded["result"].get("work") or []


def _print(stdout, output: dict | None) -> None:
    if output:
        # safe_text: a stored row may hold a lone surrogate, which stdout cannot take.
        stdout.write(strict.safe_text(json.dumps(output, ensure_ascii=False)) + "\n")
        stdout.flush()


def _data_dir(data_dir: Callable[[], str] | None) -> str | None:
    with contextlib.suppress(Exception):
        return data_dir() if data_dir is not None else None
    return None


def run_hook(
    argv: list[str],
    *,
    environment: Callable[[], dict[str, str]],
    line_for: Callable[[dict[str, str]], Line],
    stdin=None,
    stdout=None,
    data_dir: Callable[[], str] | None = None,
) -> int:
    """Always exit status 0; stdout holds the hook's JSON or nothing.

    `environment()` reads the caller's settings (the environment merged with the config
    file) and `line_for(values)` names its store: both may fail, inside the guard.
    `data_dir()`: this user's data directory, where mcp-headers finds a kept token.
    """
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    kind = argv[0] if argv else ""
    if argv in (["-h"], ["--help"]):
        stdout.write(USAGE + "\n")
        return 0
    if argv == ["mcp-headers"]:
        # Needs no store and no input; prints a JSON object whatever happens.
        stdout.write(sessionmap.headers(_data_dir(data_dir)) + "\n")
        stdout.flush()
        return 0
    ctx = line = None
    argv, client = split_client(argv)
    try:
        environ = environment()
        line = line_for(environ)
        if len(argv) != 1 or kind not in HOOKS:
            raise HookInputError(USAGE)
        payload = read_payload(stdin)
        ctx = hook_context(kind, payload, environ, line.store, client)
        if not ctx.session:  # refused here: a server of the store has no use for it
            raise HookInputError(
                "no session_id in the hook input and no CLAUDE_CODE_SESSION_ID in the environment"
            )
        own = client_input(client)
        if kind == "session-start" and client == "claude":
            sessionmap.record(ctx.session)  # first: the headers helper is waiting for it
        elif hasattr(own, "record_session"):
            own.record_session(kind, ctx.session)  # for an MCP server told no session
        for one in _each_edit(ctx, environ, line.store, own):
            output = settle(one, environ, line)
            if output and hasattr(own, "answer"):
                output = own.answer(output)
            if output:
                _print(stdout, output)
                break
    except BaseException as exc:  # a hook never fails a turn
        record_error(kind, exc, ctx, line.store if line is not None else None)
    return 0


def client_input(client: str):
    """The client's own reading of hook input and writing of output (a module with
    `edit_payloads`, and optionally `answer` and `record_session`): mcpgate.<client>.
    hookinput; None for Claude Code, whose shapes are this package's."""
    if client == "claude":
        return None
    import importlib

    return importlib.import_module(f"mcpgate.{client}.hookinput")


def _each_edit(ctx, environ: dict[str, str], store: str, own) -> list:
    """The hook's contexts: one, except for an edit in another client's shape, which is
    checked file by file as Claude Code's edit of that file (the first file held back
    answers for the whole call)."""
    if ctx.kind != "pre-edit" or own is None:
        return [ctx]
    return [
        hook_context(ctx.kind, payload, environ, store, ctx.client)
        for payload in own.edit_payloads(ctx.payload)
    ]


def settle(ctx, environ: dict[str, str], line: Line) -> dict | None:
    """One hook's work, by the lightest way that can do it; its output, or None."""
    if fast_path(ctx):
        return None
    ctx.prepare(environ, default_store=line.default_store)
    if ctx.kind in ("pre-edit", "heartbeat") and ctx.sqlite_path:
        from mcpgate.claude import claimwrite

        done, output = claimwrite.settle(ctx, lambda: stamp_fresh(ctx.stamp))
        if done:
            return output
    judging = environ.get("AGENT_SALON_TRIAGE_CMD", "").strip()  # else no line trip
    if ctx.kind == "stop" and not ctx.headless and judging:
        try:
            judge_somewhere(ctx, line)
        except Exception as exc:  # the hook still tells what it can
            record_error(ctx.kind, exc, ctx, line.store)
    output, last_seen = run_somewhere(ctx, line)
    write_stamp(ctx.stamp, last_seen)
    return output
