"""The JSON shapes the bus answers with: one place, so every adapter (the CLI, the MCP
tools, the webhook, the hooks, the local socket) hands out the same keys.

Keys are camelCase on the wire; timestamps are UTC ISO 8601 with milliseconds.
"""

from __future__ import annotations

from datetime import datetime

from bus import rules, signing
from bus.models import Entry, Seat

AGENTS_SCHEMA = "salon.agents/1"


def iso(ts: datetime | None) -> str | None:
    return signing.iso_ms(ts) if ts else None


def entry(row: Entry, *, reader: Seat | None, woken: bool, clip: rules.Clip | None = None) -> dict:
    """An entry as one reader sees it: forMe / wakes / sibling / tampered; `clip` is what
    inbox cut it to (rules.clip), if anything.

    Any stored row reads: `to` is taken as the names it holds, and meta as it
    was read (bus.models.StoredJSONField); a row the bus did not write reads as tampered."""
    facts = reader.facts() if reader else None
    to = rules.names_in(row.to)
    data = {
        "id": str(row.id),
        "room": row.room.name,
        "seq": row.seq,
        "ts": iso(row.ts),
        "from": row.sender,
        "type": row.type,
        "to": to,
        "re": str(row.re) if row.re else None,
        "content": clip.text if clip else row.content,
        "meta": row.meta,
        "via": row.via,
        "forMe": rules.for_me(to, facts) if facts else not to,
        "wakes": woken,
        "sibling": bool(
            reader
            and row.sender != reader.name
            and rules.agent_of_seat(row.sender) == reader.agent.name
        ),
        "tampered": not signing.verify_entry(row),
    }
    if clip is not None and clip.full is not None:
        data["clipped"] = clip.full
    return data


def pushed_note(entry: dict) -> str:
    """A telling of an entry pushed before says so, in a few words (bus.services.telling)."""
    pushed = entry.get("pushedAt")
    return f" (also pushed {pushed[11:19]} UTC)" if pushed else ""


def tampered_count(entries: list[dict]) -> int:
    return sum(1 for e in entries if e["tampered"])


def focus(seat: Seat, at: datetime) -> dict | None:
    if not seat.focus_text:
        return None
    return {
        "text": seat.focus_text,
        "files": list(seat.focus_files or []),
        "phase": seat.focus_phase or None,
        "ts": iso(seat.focus_ts),
        "stale": rules.focus_is_stale(seat.focus_ts, at),
    }


def seat_line(seat: Seat, at: datetime, claims: list[dict] | None = None) -> dict:
    """One seat in the `salon.agents/1` projection: exactly these keys. `claims`: its open
    file claims (bus.services.claims.shown)."""
    quiet = seat.is_quiet(at)
    return {
        "seat": seat.name,
        "session": rules.shown_session(seat.session_id),
        "liveness": seat.liveness(at),
        "lastSeen": iso(seat.last_seen),
        "lastWrote": iso(seat.last_wrote),
        "quiet": quiet,
        "quietUntil": iso(seat.quiet_until) if quiet else None,
        "focus": focus(seat, at),
        "claims": claims or [],
        "client": seat.client or None,
        # False: nothing can start a turn in its idle session; a claim is told at its
        # next turn (bus.rules.TOLD_AT_NEXT_TURN).
        "idleWake": seat.client not in rules.TOLD_AT_NEXT_TURN if seat.client else None,
    }


def agent_line(
    name: str,
    host: str,
    seats: list[Seat],
    rooms: list[str],
    at: datetime,
    claims: dict[int, list[dict]] | None = None,
) -> dict:
    """One agent in the `salon.agents/1` projection: exactly these keys."""
    seen = [s.last_seen for s in seats if s.last_seen]
    wrote = [s.last_wrote for s in seats if s.last_wrote]
    return {
        "agent": name,
        "host": host,
        "rooms": rooms,
        "lastSeen": iso(max(seen)) if seen else None,
        "silentMinutes": int((at - max(wrote)).total_seconds() // 60) if wrote else None,
        "seats": [seat_line(s, at, (claims or {}).get(s.pk)) for s in seats],
    }


def agents(lines: list[dict], at: datetime) -> dict:
    return {"schema": AGENTS_SCHEMA, "generatedAt": iso(at), "agents": lines}


def send_report(
    row: Entry, sender: Seat, wakes: list[str], notices: list[str], there: list[str] = ()
) -> dict:
    """What `send` answers: who it wakes here, the seats of other machines it is for
    (`decidedThere`, only when there are some: their own machine decides whether it
    wakes them), and the notices."""
    report = {
        "id": str(row.id),
        "ts": iso(row.ts),
        "room": row.room.name,
        "from": sender.name,
        "type": row.type,
        "to": list(row.to),
        "wakes": wakes,
        "notice": notices,
    }
    if there:
        report["decidedThere"] = list(there)
    return report


def live_entry(
    row: Entry, wakes: list[str], quieted: list[str], waiting: list[str], there: list[str]
) -> dict:
    """An entry as the operator's live flow shows it (no reader): who it wakes (the seats
    `send` named: woken and not gone), whose quiet held it back, the gone seats the
    rule woke, which it waits for (`send` left them out), and the seats of other machines
    it is for (`decidedThere`, as `send` reports them: their own machine decides)."""
    return {
        "id": str(row.id),
        "room": row.room.name,
        "seq": row.seq,
        "ts": iso(row.ts),
        "from": row.sender,
        "type": row.type,
        "to": rules.names_in(row.to),
        "re": str(row.re) if row.re else None,
        "content": row.content,
        "meta": row.meta,
        "via": row.via,
        "wakes": wakes,
        "quieted": quieted,
        "waiting": waiting,
        "decidedThere": there,
        "tampered": not signing.verify_entry(row),
    }
