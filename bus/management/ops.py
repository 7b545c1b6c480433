"""The operations behind the bus commands: one request in, one answer out.

A request is `{"op", "args", "caller"}` (bus.management.verbs builds it): the operation,
its JSON arguments, and who asks — `agent`, `session` (a Claude Code session id, or
none), `agentFrom` (where the agent name came from, for the refusal of a bad one),
`host`, `rooms` (the caller's own AGENT_SALON_ROOM: a new seat's default rooms). The
answer is `{"ok": true, "result": …}` or `{"ok": true, "refusal": …, "status": N}`.

The same function answers in every process: a running server of the store (over the
local line) and a command that found none (in-process). Other apps add operations with
`register` (the Claude Code hooks: mcpgate.claude).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import DatabaseError

from bus import rules, services, stats
from bus.models import Seat
from bus.rules import RuleError

log = logging.getLogger("salon.ops")


@dataclass
class Call:
    args: dict
    caller: dict
    _seat: Seat | None = field(default=None, repr=False)

    def seat(self, *, first_act_join: str | None = None) -> Seat:
        """Check the caller in: a Claude Code session joins its default rooms once; a bare
        caller (cron, a shell) writes as the agent name and joins nothing by itself. A new
        seat whose first act is to join a room gets that room only."""
        if self._seat is None:
            agent = self.caller.get("agent") or ""
            try:
                rules.validate_name(agent, "agent")
            except RuleError as exc:
                source = self.caller.get("agentFrom") or "the working directory's name"
                raise RuleError(
                    f"{exc} (the agent name comes from {source}; set AGENT_SALON_NAME=<name>)"
                ) from None
            session = self.caller.get("session") or None
            self._seat = services.seats.check_in(
                agent=agent,
                session_id=session,
                host=self.caller.get("host") or "",
                default_rooms=self.caller.get("rooms"),
                join_defaults=bool(session),
                joining=first_act_join,
            )
        return self._seat


Operation = Callable[[Call], object]
OPS: dict[str, Operation] = {}


def register(name: str, operation: Operation) -> None:
    OPS[name] = operation


def answer(request: dict) -> dict:
    """Run one request; never raises (a bug is a refusal naming it, logged in full)."""
    operation = OPS.get(request.get("op") or "")
    if operation is None:
        return {"ok": True, "refusal": f"no such operation {request.get('op')!r}", "status": 2}
    call = Call(args=dict(request.get("args") or {}), caller=dict(request.get("caller") or {}))
    try:
        return {"ok": True, "result": operation(call)}
    except RuleError as exc:
        return {"ok": True, "refusal": str(exc), "status": 1}
    except Exception as exc:
        if not isinstance(exc, DatabaseError) and log.hasHandlers():
            # A server's log (salon.settings.LOGGING) gets the traceback; a command that
            # answered itself says it in its one line.
            log.exception("operation %s failed", request.get("op"))
        return {"ok": True, "refusal": explain(exc), "status": 1}


def explain(exc: BaseException) -> str:
    """The one line a user sees for an exception that is not a refusal."""
    text = " ".join(str(exc).split())
    if isinstance(exc, DatabaseError):
        if "no such table" in text or "does not exist" in text:
            # A new store, or one older than this agent-salon (an upgrade not yet migrated).
            return (
                f"the database lacks a table of this agent-salon ({text}): it is new, or "
                "older than this version; run `salon migrate` (or `salon serve`, which "
                "applies migrations)"
            )
        if "no such column" in text:
            return (
                f"the database is older than this agent-salon ({text}): "
                "run `salon migrate` to bring it up to date"
            )
        if "locked" in text:
            return f"the database is busy ({text}); try again in a moment"
        return f"database error: {text}"
    return f"internal error: {type(exc).__name__}: {text}"


# ---------------------------------------------------------------- the bus commands


def _send(call: Call) -> dict:
    a = call.args
    return services.entries.send_entry(
        seat=call.seat(),
        text=a["text"],
        room=a.get("room"),
        type=a.get("type"),
        to=a.get("to") or [],
        re=a.get("re"),
        meta=a.get("meta"),
        create=bool(a.get("create")),
        via="cli",
    )


def _ask(call: Call) -> dict:
    """A request with an ask key to one agent; served, denied or judged already when this
    store holds the agent's project and nothing else settles it first. The waiting for an
    answer (`--wait`) is the command's own, by `answer` (never a server's thread)."""
    a = call.args
    key = a.get("key")
    return services.entries.send_entry(
        seat=call.seat(),
        text=a.get("text") or f"ask {key}",
        room=a.get("room"),
        to=[a["to"]],
        meta={"ask": key},
        via="cli",
    )


def _answer_of(call: Call) -> dict:
    """Where a request stands now, in one look (`salon ask --wait` asks again until its
    time is up: a server's database thread never waits for an answer)."""
    return services.serving.wait_answer(call.args["id"], 0)


def _inbox(call: Call) -> dict:
    a = call.args
    return services.reading.read_inbox(
        seat=call.seat(), room=a.get("room"), limit=a.get("limit", 20), advance=a["advance"]
    )


def _rooms(call: Call):
    a = call.args
    if a.get("create"):
        room, created = services.rooms.create_room(name=a["create"])
        return {"room": room.name, "created": created}
    if a.get("archive"):
        return services.rooms.archive_room(name=a["archive"], force=bool(a.get("force")))
    if a.get("restore"):
        return services.rooms.restore_room(name=a["restore"])
    return services.rooms.list_rooms(archived=bool(a.get("archived")))


def _token(call: Call):
    action, label = call.args["action"], call.args.get("label")
    if action == "issue":
        return {"label": label, "token": services.tokens.issue_token(label=label)}
    if action == "revoke":
        return {"label": label, "revoked": services.tokens.revoke_tokens(label=label)}
    return [t for t in services.tokens.list_tokens() if label in (None, t["label"])]


def _policy(call: Call) -> dict:
    a = call.args
    if a["action"] == "check":
        return services.requests.check(path=a["path"])
    return services.requests.explain(
        agent=a["agent"], key=a["key"], writer=a.get("writer") or call.caller.get("agent") or ""
    )


def _focus(call: Call) -> dict:
    """focus; with --files in a repository (`repo`), the files are claimed too: they
    replace what the last focus claimed, and clearing the focus releases them."""
    a = call.args
    seat = call.seat()
    result = services.seats.declare_focus(
        seat=seat, text=a.get("text"), files=a.get("files"), phase=a.get("phase")
    )
    repo = a.get("repo")
    if repo and (a.get("files") is not None or a.get("text") == ""):
        claimed = services.claims.follow_focus(
            seat=seat, repo=repo, files=a.get("files"), focus=result["focus"]
        )
        if claimed:
            result["claims"] = claimed
    return result


OPS.update(
    {
        "send": _send,
        "ask": _ask,
        "answer": _answer_of,
        "inbox": _inbox,
        "unread": lambda call: services.reading.mark_unread(
            seat=call.seat(), room=call.args["room"], count=call.args["count"]
        ),
        "history": lambda call: services.reading.read_history(
            seat=call.seat(),
            room=call.args.get("room"),
            limit=call.args.get("limit", 20),
            sender=call.args.get("sender"),
        ),
        "search": lambda call: services.search.search(
            call.seat(),
            call.args.get("query") or "",
            room=call.args.get("room"),
            limit=call.args.get("limit", 20),
            sender=call.args.get("sender"),
            type=call.args.get("type"),
            since=call.args.get("since"),
        ),
        "agents": lambda call: services.seats.agents_projection(),
        "focus": _focus,
        "claim": lambda call: services.claims.claim(
            seat=call.seat(),
            repo=call.args.get("repo"),
            paths=call.args.get("paths"),
            duration=call.args.get("for"),
            note=call.args.get("note"),
        ),
        "release": lambda call: services.claims.release(
            seat=call.seat(), repo=call.args.get("repo"), paths=call.args.get("paths")
        ),
        "quiet": lambda call: services.seats.set_quiet(
            seat=call.seat(), duration=call.args.get("duration"), off=bool(call.args.get("off"))
        ),
        "rooms": _rooms,
        "join": lambda call: services.rooms.join_room(
            seat=call.seat(first_act_join=call.args["room"]),
            room=call.args["room"],
            create=bool(call.args.get("create")),
        ),
        "part": lambda call: services.rooms.part_room(seat=call.seat(), room=call.args["room"]),
        "prune": lambda call: services.seats.prune(
            days=call.args.get("days", 7), dry_run=bool(call.args.get("dry_run"))
        ),
        "token": _token,
        "policy": _policy,
        "stats": lambda call: stats.report(
            rooms=call.args.get("rooms") or [],
            since=call.args.get("since") or "24h",
            seats=bool(call.args.get("seats")),
        ),
    }
)
