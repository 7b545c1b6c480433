"""What the file-claim hooks do once Django is up (the `hook` operation,
mcpgate.claude.hooks): reached only when the fast path (mcpgate.claude.claimlook) could
not prove there was nothing to do, and the SQLite store's own writes
(mcpgate.claude.claimwrite) could not do it either — on PostgreSQL, for the first repeat
that passes (it sends the holder a FACT), for a seat not made yet.

* pre-edit (PreToolUse on Edit, Write, MultiEdit, NotebookEdit): another seat's open claim
  covers the file → the edit is denied once, the reason naming the holder, its focus, the
  note and the claim's age, and the two ways on (ask the holder, or repeat the edit); the
  same seat's repeat within 10 minutes goes ahead and the holder is sent a FACT
  (bus.services.claims.check_edit). No claim: nothing is printed.
* heartbeat (PostToolUse) after such an edit: the file is claimed softly for 30 minutes.
* session-start: the open claims of other seats in this repository, one line each.
"""

from __future__ import annotations

from bus import services
from mcpgate.claude.claimlook import edit_place
from mcpgate.claude.claimwrite import age_words, deny_output, deny_reason
from mcpgate.claude.hookinput import HookContext

SHOWN_AT_START = 10


def pre_edit(seat, ctx: HookContext, ask_command) -> dict | None:
    """`ask_command(holder)` is the ready-to-run command that asks the holder."""
    place = edit_place(ctx.payload, ctx.cwd)
    if place is None:
        return None
    verdict = services.claims.check_edit(seat=seat, repo=place.common, path=place.relative)
    if verdict is None or verdict["verdict"] == "pass":
        return None
    from bus.models import Seat

    names = {c["seat"] for c in verdict["holders"]}
    focus_of = dict(Seat.objects.filter(name__in=names).values_list("name", "focus_text"))
    ask = ask_command(verdict["holders"][0]["seat"])
    return deny_output(deny_reason(verdict["path"], verdict["holders"], focus_of, ask))


def post_edit(seat, ctx: HookContext) -> None:
    if not ctx.autoclaim:
        return
    place = edit_place(ctx.payload, ctx.cwd)
    if place is not None:
        services.claims.soft_claim(seat=seat, repo=place.common, path=place.relative)


def start_lines(seat, ctx: HookContext) -> list[str]:
    """The open claims of other seats in the session's repository, for its context."""
    from bus import repos

    place = repos.locate(".", ctx.cwd)
    if place is None:
        return []
    claims = services.claims.of_others(seat=seat, repo=place.common)
    if not claims:
        return []
    lines = [
        "Files claimed by other sessions of this repository (an edit of one is held back "
        "once and tells you who to ask):"
    ]
    for c in claims[:SHOWN_AT_START]:
        note = f': "{c["note"]}"' if c.get("note") else ""
        kind = " (by editing)" if c["kind"] == "soft" else ""
        lines.append(f"- {c['path']} — {c['seat']}{kind}, {age_words(c['ageMinutes'])}{note}")
    if len(claims) > SHOWN_AT_START:
        lines.append(f"- and {len(claims) - SHOWN_AT_START} more (`salon agents` lists them)")
    return lines
