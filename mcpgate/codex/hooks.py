"""What the Codex CLI hooks say, once Django is up (the `hook` operation,
mcpgate.claude.hooks, runs them: the check-in, the telling and the file claims are its).

Codex runs the model's shell commands in a sandbox, where `salon …` cannot reach the
store: everything said here points to the salon MCP server's tools (`inbox`, `wait`,
`send`, `focus`), never to a command line.

* session-start: the seat, who else is live, the unread counts, the claims never told
  (told now, by this context), the open file claims of others, and how the session hears
  of the next claim: with its next prompt (UserPromptSubmit), or when a turn ends (Stop),
  or at once while it calls `wait`.
* prompt-submit (UserPromptSubmit): the claims never told ride along with the prompt as
  context (services.telling.tell_at_prompt).
* stop: the turn is held (`{"decision": "block", "reason": …}`: Codex continues the turn
  with the reason as a new user message) when claims were never told — each entry once
  (services.telling.claim_nudges): Codex sets no limit on how often a Stop hook holds a
  turn, and this hook cannot hold one twice for the same entry.
"""

from __future__ import annotations

from bus import services
from mcpgate.claude import claimhooks
from mcpgate.claude import hooks as common
from mcpgate.claude.commandline import command_env
from mcpgate.claude.hookinput import HookContext

SERVER = "salon"


def read_with_tools(rooms: list[str]) -> str:
    shown = ", ".join(f'"{room}"' for room in rooms)
    return (
        f"the `inbox` tool of the {SERVER} MCP server (room {shown}); answer with its "
        "`send` tool (type ANSWER, `re` the entry's id)."
    )


SANDBOXED = " (your shell commands run sandboxed and cannot reach it)"


def session_start(seat, ctx: HookContext, *, shell_note: str = SANDBOXED) -> str:
    """The SessionStart context's text; `shell_note` says why the tools, not the shell."""
    siblings = services.seats.live_siblings(seat=seat)
    sibling_set = set(siblings)
    others = {
        name: [s for s in seats if s not in sibling_set]
        for name, seats in services.seats.live_others(seat=seat).items()
    }
    others = {name: seats for name, seats in others.items() if seats}
    told = services.telling.tell_at_start(seat=seat, limit=common.TOLD_AT_ONCE)
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
    lines.append(common._unread_line(counts).replace("`… join ROOM`", "the `join` tool"))
    env = command_env(ctx, seat.agent.name)
    if told:
        lines += ["", *common._claims(told, seat, ctx, env, read="Read them with",
                                      reader=read_with_tools)]  # fmt: skip
    lines += [
        "",
        f"Talk to the bus with the tools of the {SERVER} MCP server, not the shell"
        f"{shell_note}: `inbox` reads a room (and marks "
        "what it shows as read), `send` writes (type QUESTION, ANSWER, FACT or REQUEST; `to` "
        "names seats or agents; `re` answers an entry by its id), `focus` says what you are "
        "on, `agents` lists who is there.",
        "Entries that are a claim on you (addressed to you, a reply to what you wrote, or a "
        "broadcast QUESTION/REQUEST) are told to you once each: with your next prompt, or "
        "when a turn ends (the turn then goes on with them). Nothing can wake this session "
        "while it is idle; to wait for one, call the `wait` tool.",
    ]
    claimed = claimhooks.start_lines(seat, ctx)
    if claimed:
        lines += ["", *[line.replace("`salon agents`", "the `agents` tool") for line in claimed]]
    asked = services.seats.claim_focus_request(seat=seat)
    if asked:
        lines += ["", focus_request(asked, seat)]
    return "\n".join(lines)


def focus_request(asked: dict[str, list[str]], seat) -> str:
    present = "; ".join(f"{room}: {', '.join(seats)}" for room, seats in sorted(asked.items()))
    return (
        f"agent-salon: others are live in your rooms ({present}) and {seat.name} has not "
        "said what it is on. Declare a focus in one sentence so they know (asked once): the "
        f"`focus` tool of the {SERVER} MCP server."
    )


def told(seat, ctx: HookContext, *, prompt_event="UserPromptSubmit", hold="block"):
    """prompt-submit and stop: the claims never told, each once; None when there are none
    (a focus request never holds a turn on its own). `prompt_event`: the event a prompt's
    context names; `hold`: the decision that holds a turn (the client's words)."""
    if ctx.kind == "prompt-submit":
        entries = services.telling.tell_at_prompt(seat=seat, limit=common.TOLD_AT_ONCE)
        read = "Read them with"
    else:
        entries = services.telling.claim_nudges(seat=seat, limit=common.TOLD_AT_ONCE)
        read = "Read the inbox before you stop, with"
    if not entries:
        return None
    env = command_env(ctx, seat.agent.name)
    text = "\n".join(common._claims(entries, seat, ctx, env, read=read, reader=read_with_tools))
    if ctx.kind == "prompt-submit":
        return common._context(text, prompt_event)
    asked = services.seats.claim_focus_request(seat=seat)
    if asked:
        text += "\n\n" + focus_request(asked, seat)
    return {"decision": hold, "reason": text}
