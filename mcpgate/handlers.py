"""What each MCP tool does: a synchronous handler per tool, over bus.services. The tool
table (mcpgate.tools) names each with its description and schema; a transport runs it
with a Binding, which knows the caller's label and binds its seat on first use."""

from __future__ import annotations

import os
from typing import Protocol

from bus import repos, rules, services
from bus.models import Seat
from bus.rules import RuleError


class Binding(Protocol):
    """What a transport tells the tools about the caller."""

    label: str
    takes_checkin: bool

    def seat(self, *, joining: str | None = None) -> Seat: ...

    def checkin(self, session_id: str, cwd: str | None) -> Seat: ...

    def status(self) -> dict: ...


def send(b: Binding, a: dict) -> dict:
    to = a.get("to") or []
    return services.entries.send_entry(
        seat=b.seat(),
        text=a["text"],
        room=a.get("room"),
        type=a.get("type"),
        to=[to] if isinstance(to, str) else to,
        re=a.get("re"),
        meta=a.get("meta"),
        via="tool",
        sender_session=getattr(b, "session_id", ""),
    )


# The tool's `wait` is held on the server's database thread: short by design (a served
# answer takes milliseconds; a person's answer comes later, to your inbox).
ASK_WAIT_CAP = 10.0


def ask(b: Binding, a: dict) -> dict:
    key = a["ask"]
    report = services.entries.send_entry(
        seat=b.seat(),
        text=a.get("text") or f"ask {key}",
        room=a.get("room"),
        to=[a["to"]],
        meta={"ask": key},
        via="tool",
        sender_session=getattr(b, "session_id", ""),
    )
    wait = min(float(a.get("wait") or 0), ASK_WAIT_CAP)
    if wait > 0 and not report.get("answer") and report.get("outcome") != "woken":
        report.update(services.serving.wait_answer(report["id"], wait))
    return report


def send_message(b: Binding, a: dict) -> dict:
    target = a.get("target")
    return services.entries.send_entry(
        seat=b.seat(),
        text=a["content"],
        room=a.get("room"),
        to=[target] if target else [],
        meta=a.get("meta"),
        via="tool",
        sender_session=getattr(b, "session_id", ""),
    )


def inbox(b: Binding, a: dict) -> dict:
    if not b.label:
        return services.reading.read_history(
            seat=None, room=a.get("room"), limit=a.get("limit", 20), broadcast_only=True
        )
    return services.reading.read_inbox(
        seat=b.seat(), room=a.get("room"), limit=a.get("limit", 20), advance=a.get("advance", True)
    )


def history(b: Binding, a: dict) -> dict:
    seat = b.seat() if b.label else None
    return services.reading.read_history(
        seat=seat,
        room=a.get("room"),
        limit=a.get("limit", 20),
        sender=a.get("from"),
        broadcast_only=seat is None,
    )


def search(b: Binding, a: dict) -> dict:
    if not b.label:
        # With no seat the search would be staff's, every room: refuse, saying how.
        raise RuleError(
            "search needs to know who you are (it finds the entries of your rooms): add "
            "?label=<your agent name> to the MCP URL"
        )
    return services.search.search(
        b.seat(),
        a["query"],
        room=a.get("room"),
        limit=a.get("limit", 20),
        sender=a.get("from"),
        type=a.get("type"),
        since=a.get("since"),
    )


def rooms(b: Binding, a: dict) -> dict:
    mine = services.rooms.seat_rooms(b.seat()) if b.label else []
    return {"mine": mine, "rooms": services.rooms.list_rooms()}


def focus(b: Binding, a: dict) -> dict:
    result = services.seats.declare_focus(
        seat=b.seat(), text=a.get("text"), files=a.get("files"), phase=a.get("phase")
    )
    if a.get("files") is not None or a.get("text") == "":
        # The files are claimed too, in the seat's repository when one is known.
        try:
            place = _place(b, {})
        except RuleError:
            return result
        claimed = services.claims.follow_focus(
            seat=b.seat(),
            repo=place.common,
            files=_claim_paths(place, a.get("files") or []),
            focus=result["focus"],
        )
        if claimed:
            result["claims"] = claimed
    return result


def _place(b: Binding, a: dict) -> repos.Place:
    """The repository a claim is in: `repo` (a directory in it), else the project the
    seat's agent was last seen in (its SessionStart's working directory), else — for a
    stdio server, which runs in the project — this process's working directory."""
    directory = a.get("repo") or b.seat().agent.root
    if not directory and not b.takes_checkin:
        directory = os.getcwd()
    place = repos.locate(".", directory) if directory else None
    if place is None:
        raise RuleError(
            "claims are kept per git repository and none is known for this call: pass "
            "`repo`, a directory inside the repository whose files you claim"
        )
    return place


def _claim_paths(place: repos.Place, paths) -> list:
    if not isinstance(paths, list):
        return paths
    out = []
    for path in paths:
        if isinstance(path, str) and os.path.isabs(path):
            found = repos.locate(path)
            if found is None or found.common != place.common or not found.relative:
                raise RuleError(f"{path[:80]} is not inside the repository at {place.top}")
            path = found.relative
        out.append(path)
    return out


def claim(b: Binding, a: dict) -> dict:
    place = _place(b, a)
    return services.claims.claim(
        seat=b.seat(),
        repo=place.common,
        paths=_claim_paths(place, a["paths"]),
        duration=a.get("for"),
        note=a.get("note"),
    )


def release(b: Binding, a: dict) -> dict:
    paths = a.get("paths") or []
    place = _place(b, a) if paths or a.get("repo") else None
    return services.claims.release(
        seat=b.seat(),
        repo=place.common if place else None,
        paths=_claim_paths(place, paths) if place else None,
    )


def quiet(b: Binding, a: dict) -> dict:
    return services.seats.set_quiet(seat=b.seat(), duration=a.get("for"), off=a.get("off", False))


def checkin(b: Binding, a: dict) -> dict:
    seat = b.checkin(rules.validate_claimed_session(a["session_id"]), a.get("cwd"))
    return {"seat": seat.name, "rooms": services.rooms.seat_rooms(seat)}


def wait(b: Binding, a: dict) -> dict:
    # The waiting itself is the transport's (it must keep hearing doorbells); this is
    # one look at the ledger.
    return services.telling.collect_wakes(seat=b.seat(), room=a.get("room"))
