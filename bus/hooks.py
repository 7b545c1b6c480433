"""What the Claude Code hooks do once Django is up (SPEC §8); bus.claude runs them.

* session-start: checks the seat in to its rooms (join_defaults) and returns, as
  SessionStart `additionalContext`, the seat's name, its live siblings, who else is live
  in its rooms, its unread counts per room (waking first) and the exact Monitor command
  that arms `salon wait`, with ready-to-run read/send commands. A headless run gets its
  seat name and one send command only: nothing will wake it, so it is told to watch nothing.
* stop: blocks the end of the turn (`{"decision": "block", "reason": …}`) when waking,
  unread entries arrived that this seat was never nudged about — each entry once
  (services.claim_nudges); the entry stays unread. Once ever per seat, when someone else
  is live in one of its rooms and the seat has no focus, the same block (or a block of its
  own) asks for one. `stop_hook_active` is not consulted: every block claims something
  new, so the hook can never block twice for the same reason. Headless runs are never
  blocked and claim nothing.
* heartbeat (PostToolUse): a sign of life at most once a minute; prints nothing.

Each returns (the hook's JSON output or None, the seat's last_seen for the stamp).
"""

from __future__ import annotations

import socket
from datetime import timedelta

from django.conf import settings
from django.db import transaction

from bus import rules, services
from bus.claude import (
    BEAT_SECONDS,
    SESSION_VARIABLE,
    HookContext,
    HookInputError,
    salon_argv,
    shell_command,
)

NAMED_IN_A_NUDGE = 5
QUOTE_CHARS = 120
REPLY_FLAGS = ("--to", "<seat>", "--re", "<id>")
MONITOR_TIMEOUT_MS = 30 * 60 * 1000  # the longest Claude Code's Monitor tool allows


def command_env(ctx: HookContext, agent: str) -> dict[str, str]:
    """The variables a command needs to act as this seat on this store."""
    env = dict(ctx.store_env)
    env["AGENT_SALON_NAME"] = agent
    if ctx.rooms:
        env["AGENT_SALON_ROOM"] = ",".join(ctx.rooms)
    if ctx.session:
        env[SESSION_VARIABLE] = ctx.session
    return env


def salon_command(ctx: HookContext, env: dict[str, str], *args: str) -> str:
    return shell_command(env, salon_argv(*args, python=ctx.python))


def run(ctx: HookContext):
    """The hook's work in one transaction: one commit (one fsync on SQLite), not one per
    write; every claim in it is still a conditional UPDATE."""
    if not ctx.session:
        raise HookInputError(
            "no session_id in the hook input and no CLAUDE_CODE_SESSION_ID in the environment"
        )
    for name in ctx.rooms:  # settings checks them too, but a hook line request did not
        rules.validate_name(name, "room")
    with transaction.atomic():
        return _run(ctx)


def _run(ctx: HookContext):
    seat = services.check_in(
        agent=ctx.agent,
        session_id=ctx.session,
        host=socket.gethostname(),
        rooms=ctx.rooms,
        join_defaults=True,
        touch=ctx.kind == "session-start",
    )
    if ctx.kind != "session-start":
        services.touch(seat=seat, min_interval=timedelta(seconds=BEAT_SECONDS))
        seat.refresh_from_db(fields=["last_seen"])
    if ctx.kind == "session-start":
        output = session_start(seat, ctx)
    elif ctx.kind == "stop":
        output = None if ctx.headless else stop(seat, ctx)
    else:
        output = None
    return output, seat.last_seen


# ---------------------------------------------------------------- session-start


def _room_for_send(seat, counts: list[dict]) -> str:
    rooms = sorted(c["room"] for c in counts)
    return rooms[0] if rooms else settings.DEFAULT_ROOM


def _unread_line(counts: list[dict]) -> str:
    if not counts:
        return "Unread: you are in no room yet (join one: `… join ROOM`)."
    parts = []
    for c in counts:  # services.unread_counts: waking first
        detail = []
        if c["unreadWaking"]:
            detail.append(f"{c['unreadWaking']} waking you")
        if c["unreadForMe"] != c["unread"]:
            detail.append(f"{c['unreadForMe']} for you")
        parts.append(f"{c['room']} {c['unread']}" + (f" ({', '.join(detail)})" if detail else ""))
    return "Unread: " + "; ".join(parts) + "."


def session_start(seat, ctx: HookContext) -> dict:
    env = command_env(ctx, seat.agent.name)
    counts = services.unread_counts(seat=seat)
    room = _room_for_send(seat, counts)
    if ctx.headless:
        text = (
            f"agent-salon: this run is {seat.name} on the bus (a headless run: nothing will "
            f"wake it). To post an entry: "
            f"{salon_command(ctx, env, 'send', room, 'FACT', '<text>')}"
        )
        return _context(text)
    siblings = services.live_siblings(seat=seat)
    sibling_set = set(siblings)
    others = {
        name: [s for s in seats if s not in sibling_set]
        for name, seats in services.live_others(seat=seat).items()
    }
    others = {name: seats for name, seats in others.items() if seats}
    rooms = ", ".join(c["room"] for c in sorted(counts, key=lambda c: c["room"])) or "none"
    lines = [
        f"agent-salon: this session is {seat.name} on the bus "
        f"(agent {seat.agent.name}; rooms: {rooms}).",
        "Live sibling seats of your agent: " + (", ".join(siblings) or "none") + ".",
    ]
    if others:
        lines.append(
            "Also live in your rooms: "
            + "; ".join(f"{name}: {', '.join(seats)}" for name, seats in sorted(others.items()))
            + "."
        )
    lines += [
        _unread_line(counts),
        "",
        "Entries that are a claim on you (addressed to you, a reply to what you wrote, or a "
        "broadcast QUESTION/REQUEST) must not go unnoticed. Arm the Monitor tool now with "
        f"this command (timeout_ms {MONITOR_TIMEOUT_MS}; arm it again whenever it expires "
        "or its stream ends):",
        f"  {salon_command(ctx, env, 'wait')}",
        "Each line it prints is one such entry. Read a room (marks what it shows as read):",
        f"  {salon_command(ctx, env, 'inbox', room)}",
        "Write (TYPE is QUESTION, ANSWER, FACT or REQUEST; --to names seats or agents; "
        "--re ID answers an entry):",
        "  " + salon_command(ctx, env, "send", room, "ANSWER", "<text>", *REPLY_FLAGS),
        'The same command line with `focus "<one sentence>"` says what you are on; with '
        "`quiet --for 90m` nothing wakes you for a while.",
        "The Stop hook reminds you once per waiting entry; the `salon` skill has the protocol.",
    ]
    return _context("\n".join(lines))


def _context(text: str) -> dict:
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}


# ---------------------------------------------------------------- stop


def _quote(text: str, limit: int = QUOTE_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def stop(seat, ctx: HookContext) -> dict | None:
    entries = services.claim_nudges(seat=seat)
    asked = services.ask_focus_once(seat=seat)
    if not entries and not asked:
        return None
    env = command_env(ctx, seat.agent.name)
    parts = []
    if entries:
        count = len(entries)
        head = (
            f"agent-salon: {count} entr{'y' if count == 1 else 'ies'} on the bus "
            f"{'is a claim' if count == 1 else 'are claims'} on you ({seat.name}) and "
            f"{'is' if count == 1 else 'are'} still unread:"
        )
        lines = [head]
        for entry in entries[:NAMED_IN_A_NUDGE]:
            lines.append(
                f'- {entry.type} from {entry.sender} in "{entry.room.name}": '
                f'"{_quote(entry.content)}"'
            )
        if count > NAMED_IN_A_NUDGE:
            lines.append(f"- and {count - NAMED_IN_A_NUDGE} more")
        rooms = sorted({entry.room.name for entry in entries})
        lines.append(
            "Read the inbox before you stop: "
            + " ; ".join(salon_command(ctx, env, "inbox", room) for room in rooms)
        )
        parts.append("\n".join(lines))
    if asked:
        present = "; ".join(f"{room}: {', '.join(seats)}" for room, seats in sorted(asked.items()))
        parts.append(
            f"agent-salon: others are live in your rooms ({present}) and {seat.name} has not "
            "said what it is on. Declare a focus in one sentence so they know (asked once): "
            f"{salon_command(ctx, env, 'focus', '<what I am on>')} "
            "[--files a,b] [--phase explore|plan|apply|verify|blocked]"
        )
    return {"decision": "block", "reason": "\n\n".join(parts)}
