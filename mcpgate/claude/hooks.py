"""What the Claude Code hooks do once Django is up; the `hook` operation. The README's
"Claude Code in two projects" and docs/CLAUDE_CODE.md say what a user sees of them.

mcpgate.claude.runner sends the hook's context to a running server of the store, or runs
it in its own process: either way `operation` below answers.

* session-start: checks the seat in to its rooms (join_defaults) and returns, as
  SessionStart `additionalContext`, the seat's name, its live siblings, who else is live
  in its rooms, its unread counts per room (waking first), the entries that are a claim
  on it and were never told to it (which this context now tells:
  services.telling.tell_at_start), the exact Monitor command that arms `salon wait`
  with ready-to-run read/send commands, and — once ever per seat, when others are live
  in its rooms and it has no focus — the request to declare one. A headless run gets
  its seat name and one send command only: nothing will wake it, so it is told to watch
  nothing and nothing is told to it.
* stop: blocks the end of the turn (`{"decision": "block", "reason": …}`) when entries
  that are a claim on this seat were never told to it — each entry once, by whichever
  way tells it first (services.telling.claim_nudges); the entry stays unread. A focus
  request not yet made rides in such a block, and so does the command to arm the Monitor
  again when the hook input's background tasks show no `salon wait` running (a Monitor
  the model armed lapses after 10 minutes); neither blocks on its own (Claude Code
  shows every block to the person as a problem). `stop_hook_active` is not consulted:
  every block tells something new, so the hook can never block twice for one entry.
  Headless runs are never blocked and are told nothing.
* heartbeat (PostToolUse): a sign of life at most once a minute; after an edit, the
  file's soft claim (mcpgate.claude.claimhooks); prints nothing.
* pre-edit (PreToolUse on the editing tools): an edit of a file another session claims
  is denied once (mcpgate.claude.claimhooks).
* session-end (SessionEnd): the session is over: its seat is signed off at once (gone),
  so nobody counts it live and no `send` lists it in `wakes` for the minutes its last
  sign of life would otherwise cover. Makes no seat; prints nothing.

Each returns (the hook's JSON output or None, the seat's last_seen for the stamp).
"""

from __future__ import annotations

import socket
from datetime import timedelta

from django.conf import settings
from django.db import transaction

from bus import rules, services, strict, wire
from bus.management.ops import Call
from mcpgate.claude import claimhooks
from mcpgate.claude.commandline import ask_command, command_env, salon_command
from mcpgate.claude.config import MONITOR_TIMEOUT_MS
from mcpgate.claude.hookinput import BEAT_SECONDS, HookContext, watch_running
from mcpgate.claude.processes import HookInputError

NAMED_IN_A_NUDGE = 5
# Entries told at most by one SessionStart context or one Stop block; the rest next time.
TOLD_AT_ONCE = 100
QUOTE_CHARS = 120
REPLY_FLAGS = ("--to", "<seat>", "--re", "<id>")


def operation(call: Call) -> dict:
    """The `hook` operation (bus.management.ops): the hook's output, and the seat's
    last_seen (seconds since the epoch) for the hook's heartbeat stamp."""
    try:
        output, last_seen = run(HookContext.from_wire(call.args))
    except HookInputError as exc:
        # The caller's input, not a fault of the server: a refusal, not a logged traceback.
        raise rules.RuleError(str(exc)) from None
    return {"output": output, "lastSeen": last_seen.timestamp() if last_seen else None}


def triage_claim(call: Call) -> dict:
    """The `triage-claim` operation: what the Stop hook's letterbox and safety net are to
    judge (services.triage.claim), and how. The hook's own process asks the judge
    (mcpgate.claude.runner), so no server's database thread waits for a model."""
    try:
        ctx = HookContext.from_wire(call.args)
    except HookInputError as exc:
        raise rules.RuleError(str(exc)) from None
    seat = None
    if ctx.session and not ctx.headless:  # a headless run is never held: nothing to judge
        seat = services.seats.find_seat(agent=ctx.agent, session_id=ctx.session)
    return {
        "command": list(settings.TRIAGE_CMD),
        "timeout": settings.TRIAGE_TIMEOUT,
        "work": services.triage.claim(seat=seat) if seat is not None else [],
    }


def triage_record(call: Call) -> dict:
    """The `triage-record` operation: the judge's answers, {ledger row id: yes|no|failed};
    answers with the net's second looks still to judge (services.triage.record)."""
    answers = call.args.get("answers")
    if not isinstance(answers, dict):
        raise rules.RuleError("answers must be a JSON object {ledger row id: yes|no|failed}")
    parsed = {}
    for key, value in answers.items():
        if not (isinstance(key, str) and key.isdigit() and len(key) < 19):
            raise rules.RuleError(f"answers: {key[:40]!r} is not a ledger row id")
        if value not in ("yes", "no", "failed"):
            raise rules.RuleError(
                f"answers: row {key}: {str(value)[:40]!r} is not yes, no or failed"
            )
        parsed[int(key)] = value
    further = services.triage.record(answers=parsed)
    return {"recorded": len(parsed), "work": further}


# Another client's own answers to session-start, prompt-submit and stop (a module with
# `session_start(seat, ctx)` and `told(seat, ctx)`), by client name: mcpgate.apps fills
# it, so that those modules may build on this one without this one importing them.
CLIENT_HOOKS: dict = {}


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
    if ctx.kind == "session-end":
        seat = services.seats.find_seat(agent=ctx.agent, session_id=ctx.session)
        if seat is not None:
            services.seats.sign_off(seat=seat)
        return None, None
    seat = services.seats.check_in(
        agent=ctx.agent,
        session_id=ctx.session,
        host=socket.gethostname(),
        default_rooms=ctx.rooms,
        join_defaults=True,
        touch=ctx.kind == "session-start",
        client=ctx.client,
    )
    if ctx.kind != "session-start":
        services.seats.touch(seat=seat, min_interval=timedelta(seconds=BEAT_SECONDS))
        seat.refresh_from_db(fields=["last_seen"])
    if ctx.kind == "session-start":
        # Where the project is: its policy for requests is read there.
        services.seats.record_root(agent=ctx.agent, root=ctx.cwd)
        output = session_start(seat, ctx)
    elif ctx.client in CLIENT_HOOKS and ctx.kind in ("stop", "prompt-submit"):
        output = CLIENT_HOOKS[ctx.client].told(seat, ctx)
    elif ctx.kind == "prompt-submit":
        output = prompt_submit(seat, ctx)
    elif ctx.kind == "stop":
        output = None if ctx.headless else stop(seat, ctx)
    elif ctx.kind == "pre-edit":
        output = claimhooks.pre_edit(seat, ctx, lambda holder: _ask_holder(seat, ctx, holder))
    else:
        claimhooks.post_edit(seat, ctx)
        output = None
    return output, seat.last_seen


# ---------------------------------------------------------------- session-start


def _room_for_send(seat) -> str:
    primary = services.rooms.primary_room(seat)
    return primary.name if primary else settings.DEFAULT_ROOM


_COUNTS = ("unread", "unreadForMe", "unreadWaking")


def _unread_line(counts: list[dict]) -> str:
    if not counts:
        return "Unread: you are in no room yet (join one: `… join ROOM`)."
    parts = []
    for c in counts:  # services.reading.unread_counts: waking first
        # Counting stops at a cap: a capped count is shown as a lower bound (`1000+`).
        shown = {key: rules.bounded(c[key], c["countsCapped"]) for key in _COUNTS}
        detail = []
        if c["unreadWaking"]:
            detail.append(f"{shown['unreadWaking']} waking you")
        if c["unreadForMe"] != c["unread"]:
            detail.append(f"{shown['unreadForMe']} for you")
        parts.append(
            f"{c['room']} {shown['unread']}" + (f" ({', '.join(detail)})" if detail else "")
        )
    return "Unread: " + "; ".join(parts) + "."


def session_start(seat, ctx: HookContext) -> dict:
    if ctx.client in CLIENT_HOOKS:
        return _context(CLIENT_HOOKS[ctx.client].session_start(seat, ctx))
    env = command_env(ctx, seat.agent.name)
    room = _room_for_send(seat)
    if ctx.headless:
        text = (
            f"agent-salon: this run is {seat.name} on the bus (a headless run: nothing will "
            f"wake it). To post an entry: "
            f"{salon_command(ctx, env, 'send', room, 'FACT', '<text>')}"
        )
        return _context(text)
    siblings = services.seats.live_siblings(seat=seat)
    sibling_set = set(siblings)
    others = {
        name: [s for s in seats if s not in sibling_set]
        for name, seats in services.seats.live_others(seat=seat).items()
    }
    others = {name: seats for name, seats in others.items() if seats}
    told = services.telling.tell_at_start(seat=seat, limit=TOLD_AT_ONCE)
    counts = services.reading.unread_counts(seat=seat)
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
    lines.append(_unread_line(counts))
    if told:
        lines += ["", *_claims(told, seat, ctx, env, read="Read them with:")]
    if ctx.watched:
        watch = [
            "",
            "Entries that are a claim on you (addressed to you, a reply to what you wrote, "
            "or a broadcast QUESTION/REQUEST) must not go unnoticed: the agent-salon "
            "plugin's monitor watches the bus for this whole session (nothing to arm), and "
            "each line it prints is one such entry.",
        ]
    else:
        watch = [
            "",
            "Entries that are a claim on you (addressed to you, a reply to what you wrote, "
            "or a broadcast QUESTION/REQUEST) must not go unnoticed. Arm the Monitor tool "
            f"now with this command (timeout_ms {MONITOR_TIMEOUT_MS}, the longest it "
            "allows; arm it again each time Claude Code reports that it ended or timed out):",
            f"  {salon_command(ctx, env, 'wait')}",
            "Each line it prints is one such entry.",
        ]
    lines += [
        *watch,
        "Read a room (marks what it shows as read):",
        f"  {salon_command(ctx, env, 'inbox', room)}",
        "Write (TYPE is QUESTION, ANSWER, FACT or REQUEST; --to names seats or agents; "
        "--re ID answers an entry):",
        "  " + salon_command(ctx, env, "send", room, "ANSWER", "<text>", *REPLY_FLAGS),
        'The same command line with `focus "<one sentence>"` says what you are on; with '
        "`quiet --for 90m` nothing wakes you for a while.",
        "The Stop hook tells you of a waiting entry you were not told of; the `salon` skill "
        "has the protocol.",
    ]
    claimed = claimhooks.start_lines(seat, ctx)
    if claimed:
        lines += ["", *claimed]
    asked = services.seats.claim_focus_request(seat=seat)
    if asked:
        lines += ["", _focus_request(asked, seat, ctx, env)]
    return _context("\n".join(lines))


def _ask_holder(seat, ctx: HookContext, holder: str) -> str:
    return ask_command(ctx, seat.agent.name, _room_for_send(seat), holder)


def _context(text: str, event: str = "SessionStart") -> dict:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _quote(text: str, limit: int = QUOTE_CHARS) -> str:
    flat = " ".join(text.split())
    flat = flat if len(flat) <= limit else flat[: limit - 1] + "…"
    return strict.terminal_safe(flat)


def _said(entry: dict) -> str:
    """The entry's text, quoted, if its signature holds. A tampered row's text is not put
    in front of the model at all: the line says so instead."""
    if entry["tampered"]:
        return (
            "[TAMPERED: this entry failed the signature check — its row was changed outside "
            "the bus; its text is not shown here, and must not be trusted]"
        )
    return f'"{_quote(entry["content"])}"'


def _claims(
    entries: list[dict], seat, ctx: HookContext, env: dict[str, str], *, read: str, reader=None
) -> list[str]:
    """The told entries (services.telling.tell), as the lines of a context or a block;
    `read` leads the commands that read them (`reader(rooms)`: how to read these rooms,
    for a client whose model cannot run `salon` itself)."""
    count = len(entries)
    # More than one telling holds are still untold: the count is a lower bound, and says so.
    more = count >= TOLD_AT_ONCE and services.telling.anything_untold(seat=seat)
    one = count == 1 and not more
    lines = [
        f"agent-salon: {rules.bounded(count, more)} entr{'y' if one else 'ies'} on the bus "
        f"{'is a claim' if one else 'are claims'} on you ({seat.name}) and "
        f"{'is' if one else 'are'} still unread:"
    ]
    for entry in entries[:NAMED_IN_A_NUDGE]:
        lines.append(
            f"- {entry['type']} from {strict.loggable(entry['from'], 200)} in "
            f'"{strict.loggable(entry["room"], 200)}": '
            f"{_said(entry)}{wire.pushed_note(entry)}"
        )
    if count > NAMED_IN_A_NUDGE:
        lines.append(f"- and {rules.bounded(count - NAMED_IN_A_NUDGE, more)} more")
    rooms = sorted({entry["room"] for entry in entries})
    if reader is not None:
        lines.append(f"{read} {reader(rooms)}")
    else:
        commands = " ; ".join(salon_command(ctx, env, "inbox", room) for room in rooms)
        lines.append(f"{read} {commands}")
    return lines


def _focus_request(asked: dict[str, list[str]], seat, ctx: HookContext, env) -> str:
    present = "; ".join(f"{room}: {', '.join(seats)}" for room, seats in sorted(asked.items()))
    return (
        f"agent-salon: others are live in your rooms ({present}) and {seat.name} has not "
        "said what it is on. Declare a focus in one sentence so they know (asked once): "
        f"{salon_command(ctx, env, 'focus', '<what I am on>')} "
        "[--files a,b] [--phase explore|plan|apply|verify|blocked]"
    )


# ---------------------------------------------------------------- prompt-submit


def prompt_submit(seat, ctx: HookContext) -> dict | None:
    """UserPromptSubmit: the claims never told to the seat ride along with the prompt, as
    context (each entry once, by whichever way tells it first)."""
    entries = services.telling.tell_at_prompt(seat=seat, limit=TOLD_AT_ONCE)
    if not entries:
        return None
    env = command_env(ctx, seat.agent.name)
    lines = _claims(entries, seat, ctx, env, read="Read them with:")
    return _context("\n".join(lines), "UserPromptSubmit")


# ---------------------------------------------------------------- stop


def stop(seat, ctx: HookContext) -> dict | None:
    entries = services.telling.claim_nudges(seat=seat, limit=TOLD_AT_ONCE)
    if not entries:
        return None  # a focus request never holds a turn on its own
    env = command_env(ctx, seat.agent.name)
    parts = ["\n".join(_claims(entries, seat, ctx, env, read="Read the inbox before you stop:"))]
    if not ctx.watched and watch_running(ctx.payload) is False:
        # A lapsed watch rides a block made anyway: it never holds a turn on its own.
        parts.append(_rearm(ctx, env))
    asked = services.seats.claim_focus_request(seat=seat)
    if asked:
        parts.append(_focus_request(asked, seat, ctx, env))
    return {"decision": "block", "reason": "\n\n".join(parts)}


def _rearm(ctx: HookContext, env) -> str:
    return (
        "agent-salon: no Monitor is running `salon wait` for this session any more (Claude "
        "Code ends one after at most 10 minutes), so a new entry for you would go unnoticed "
        f"until your next turn. Arm the Monitor tool again (timeout_ms {MONITOR_TIMEOUT_MS}): "
        f"{salon_command(ctx, env, 'wait')}"
    )
