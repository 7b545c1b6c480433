"""The bus commands of `salon` (send, inbox, agents, …), without Django.

A verb is three things: its arguments (argparse), the request it makes (an operation of
bus.management.ops and that operation's JSON arguments), and how it shows the answer.
Who runs the request is the caller's choice: `salon` asks a running server of the store
over its local line and only works on the store itself when none answers (salon/cli.py);
`python manage.py <verb>` always works in-process. Either way the same operation runs
and the same bytes are printed.

* Usage errors (an unknown or misplaced flag, a bad name) are one line on stderr, exit 2,
  before anything is asked: a refused argument writes nothing.
* A refusal by the bus is one line on stderr, `salon <verb>: <message>`, exit 1.
* Output is for people by default; with `--json`, stdout is one JSON document and any
  notice or warning goes to stderr.

Standard library only (and bus.rules): hooks and cron run these on every turn.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping

from bus.management.verbs.base import (
    SESSION_VARIABLE,
    Output,
    Parser,
    UsageError,
    Verb,
    one_line,
)

__all__ = ["Output", "Parser", "UsageError", "Verb", "one_line"]


def _table() -> dict[str, Verb]:
    from bus.management.verbs import claims, messages, policy, presence, rooms, search, upkeep

    verbs = [
        *messages.VERBS,
        *search.VERBS,
        *presence.VERBS,
        *claims.VERBS,
        *rooms.VERBS,
        *upkeep.VERBS,
        *policy.VERBS,
    ]
    return {verb.name: verb for verb in verbs}


_VERBS: dict[str, Verb] | None = None


def find(name: str) -> Verb | None:
    global _VERBS
    if _VERBS is None:
        _VERBS = _table()
    return _VERBS.get(name)


def names() -> list[str]:
    """Every verb, in the order `salon --help` lists them."""
    find("")
    return list(_VERBS or {})


# ---------------------------------------------------------------- who asks


def caller(environ: Mapping[str, str], cwd: str | None = None) -> dict:
    """Who a command speaks for, from its environment (merged with the config
    file): the agent is AGENT_SALON_NAME, else the working directory's name; the seat's
    session is CLAUDE_CODE_SESSION_ID (none: the bare agent name); AGENT_SALON_ROOM are
    the rooms a new seat joins. The server checks the names (bus.management.ops)."""
    agent = environ.get("AGENT_SALON_NAME", "").strip()
    source = "AGENT_SALON_NAME"
    if not agent:
        source = "the working directory's name"
        try:
            agent = os.path.basename((cwd or os.getcwd()).rstrip("/"))
        except OSError:
            agent = ""
    rooms = [r.strip() for r in environ.get("AGENT_SALON_ROOM", "").split(",") if r.strip()]
    return {
        "agent": agent,
        "agentFrom": source,
        "session": environ.get(SESSION_VARIABLE, "").strip() or None,
        "rooms": rooms,
        "host": socket.gethostname(),
    }


# ---------------------------------------------------------------- running one


Answer = Callable[[dict], dict]


def run(argv: list[str], *, caller: dict, answer: Answer, out: Output | None = None) -> int:
    """`salon VERB ARGS…`: parse, ask `answer` to run the request, show the result.

    `answer(request)` returns `{"result": …}` or `{"refusal": …, "status": N}`.
    Returns the exit status.
    """
    out = out or Output()
    verb = find(argv[0])
    assert verb is not None, argv[0]
    options = verb.parser().parse_args(argv[1:])  # exits 2 on a usage error
    prefix = f"salon {verb.name}"
    try:
        arguments = verb.arguments(options)
    except UsageError as exc:
        out.note(f"{prefix}: {exc} (see `{prefix} --help`)")
        return 2
    reply = answer({"op": verb.op, "args": arguments, "caller": caller})
    if "refusal" in reply:
        out.note(f"{prefix}: {one_line(reply['refusal'])}")
        return int(reply.get("status", 1))

    def more(request: dict) -> dict:
        return answer({**request, "caller": caller})

    try:
        status = verb.show(verb.follow(reply["result"], options, more), options, out)
    except BrokenPipeError:
        return 1  # the reader went away (`salon history team | head`): nothing left to say
    return status or 0
