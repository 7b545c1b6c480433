"""What `salon top` shows, as plain text: no terminal library here, so every piece of it
is tested without a screen and none of it costs a command that does not draw one.

The data is bus.live's (the same panes and flow as /admin/live/ and `salon watch`);
this module reads it, adds what the terminal view shows beside it (each seat's claims,
an entry in full with its signature's verdict), and turns each row into cells. Every
text that comes from an entry or a seat passes `cell` (or `block`), which writes any
character a terminal would act on as its escape: no stored text can move the cursor,
clear the screen or set a title.

Reads only: nothing here writes a row, moves a cursor or checks a seat in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from bus import live, rules, services, signing, strict, wire
from bus.models import Entry
from bus.services import claimed

# What the flow loads of the past when it opens, and keeps at most (the oldest go first).
BACKLOG = 200
KEEP = 5000
# The filters `f` cycles through: everything, the entries that woke a seat, one type.
FILTERS: tuple[str, ...] = ("all", "waking", *rules.TYPES)


@dataclass
class Snapshot:
    """The rooms and the opened room's seats, each seat with its claims."""

    panes: live.Panes
    claims: dict[int, list[str]] = field(default_factory=dict)


def snapshot(room: str | None, at: datetime | None = None) -> Snapshot:
    """The panes (bus.live.panes: `room`, else the busiest room) and each seat's claims."""
    at = at or timezone.now()
    panes = live.panes(room, at)
    return Snapshot(panes, claims_of([row.seat_id for row in panes.seats], at))


def claims_of(seat_ids: list[int], at: datetime) -> dict[int, list[str]]:
    """{seat id: its open file claims, as short texts}, as `agents` reads them
    (bus.services.claimed)."""
    if not seat_ids:
        return {}
    found = claimed.claims_by_seat(seat_ids=seat_ids, at=at)
    return {seat_id: [claim_text(claim) for claim in claims] for seat_id, claims in found.items()}


def claim_text(claim: dict) -> str:
    """One claim in a few words: its path, marked when an edit made it."""
    return claim["path"] + (" (by editing)" if claim["kind"] == "soft" else "")


# ---------------------------------------------------------------- cells


def cell(value: object, limit: int = 200) -> str:
    """One line for a table cell: whitespace runs made one space, clipped to `limit`
    characters, and every character a terminal acts on escaped."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return strict.terminal_safe(flat)


def block(text: str) -> str:
    """An entry's whole text for the full view: its lines kept, escapes written out."""
    return strict.entry_text(text)


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line
    return ""


def clock(iso: str | None) -> str:
    """An ISO 8601 UTC time as the terminal's local HH:MM:SS ('' for none)."""
    if not iso:
        return ""
    return f"{datetime.fromisoformat(iso.replace('Z', '+00:00')).astimezone():%H:%M:%S}"


ROOM_COLUMNS = ("room", "entries", "seats", "live")


def room_cells(row: live.RoomRow) -> tuple[str, ...]:
    return (cell(row.name, 40), str(row.entries), str(row.seats), str(row.live))


SEAT_COLUMNS = ("seat", "live", "reading", "focus", "quiet", "claims")
LIVENESS_MARK = {rules.LIVE: "live", rules.UNKNOWN: "?", rules.GONE: "gone"}


def seat_cells(row: live.SeatRow, claims: list[str]) -> tuple[str, ...]:
    """The seat, `live`/`?`/`gone`, reading or behind, its focus (and phase), quiet, and
    its claims."""
    focus = ""
    if row.focus:
        phase = f" [{row.focus['phase']}]" if row.focus.get("phase") else ""
        stale = " (stale)" if row.focus.get("stale") else ""
        focus = f"{row.focus['text']}{phase}{stale}"
    quiet = ""
    if row.quiet:
        quiet = f"until {clock(row.quiet_until)}" if row.quiet_until else "quiet"
    return (
        cell(row.name, 60),
        LIVENESS_MARK.get(row.liveness, cell(row.liveness)),
        reading_text(row),
        cell(focus, 40),
        quiet,
        cell(", ".join(claims), 80),
    )


def counted(n: int) -> str:
    return f"{live.UNREAD_CAP:,}+" if n > live.UNREAD_CAP else str(n)


def reading_text(row: live.SeatRow) -> str:
    """Short, for a narrow pane: `reading` (caught up), `behind 12 (2 waking)`, `? 3`
    (unknown), `gone`; a count past bus.live.UNREAD_CAP reads `1,000+`."""
    count = counted(row.unread) if row.unread else ""
    waking = f" ({counted(row.waking)} waking)" if row.waking else ""
    if row.reading == "gone":
        return "gone"
    if row.reading == "unknown":
        return f"? {count}".strip()
    if row.reading == "behind":
        return f"behind {count}{waking}"
    return "reading"


def wakes_text(entry: dict) -> str:
    """Who the entry woke; then the gone seats it waits for, whose quiet held it, and the
    seats of other machines it is for (their own machine decides)."""
    parts = list(entry["wakes"])
    parts += [f"{name} (gone: waits)" for name in entry["waiting"]]
    parts += [f"{name} (quiet)" for name in entry["quieted"]]
    parts += [f"{name} (decided there)" for name in entry["decidedThere"]]
    return ", ".join(parts)


@dataclass(frozen=True)
class FlowRow:
    """One entry of the flow, each part one terminal-safe line: when (local time), the
    room, the type, the sender, the addressees (`*`: everyone), who it wakes, and the
    first line of its text."""

    time: str
    room: str
    type: str
    sender: str
    to: str
    wakes: str
    text: str
    tampered: bool

    @property
    def head(self) -> str:
        wakes = f"  wakes {self.wakes}" if self.wakes else ""
        return f"{self.time} {self.room} {self.type} {self.sender} → {self.to}{wakes}"


def flow_row(entry: dict) -> FlowRow:
    return FlowRow(
        time=clock(entry["ts"]),
        room=cell(entry["room"], 40),
        type=cell(entry["type"], 16),
        sender=cell(entry["from"], 60),
        to=cell(", ".join(entry["to"]) or "*", 80),
        wakes=cell(wakes_text(entry), 160),
        text=cell(first_line(entry["content"]), 300),
        tampered=bool(entry["tampered"]),
    )


# ---------------------------------------------------------------- filter and search


def passes(entry: dict, filter_name: str) -> bool:
    """all · waking (it woke a seat, or waits for a gone one) · one type."""
    if filter_name == "all":
        return True
    if filter_name == "waking":
        return bool(entry["wakes"] or entry["waiting"])
    return entry["type"] == filter_name


def next_filter(filter_name: str) -> str:
    at = FILTERS.index(filter_name) if filter_name in FILTERS else -1
    return FILTERS[(at + 1) % len(FILTERS)]


def found_ids(query: str) -> frozenset[str]:
    """The ids of the entries the store's full-text search finds for `query` in every room
    (the operator sees them all): bus.services.search, the language of `salon search`."""
    found = services.search.search(None, query, limit=SEARCH_LIMIT)
    return frozenset(result["id"] for result in found["results"])


SEARCH_LIMIT = 200


def search(entries: list[dict], query: str, found: frozenset[str] = frozenset()) -> list[dict]:
    """The entries of the loaded flow that match `query`: those the store's search found
    (`found`, from found_ids: words, "a phrase", prefix*, -word), and those with every
    word of it, ignoring case, in the text, the room, the type, the sender, the
    addressees or the seats it wakes. The one place the flow is searched."""
    words = query.lower().split()
    if not words:
        return list(entries)

    def haystack(entry: dict) -> str:
        fields = [entry["content"], entry["room"], entry["type"], entry["from"]]
        fields += [*entry["to"], *entry["wakes"], *entry["waiting"], *entry["decidedThere"]]
        return "\n".join(fields).lower()

    return [
        entry
        for entry in entries
        if entry["id"] in found or all(word in haystack(entry) for word in words)
    ]


# ---------------------------------------------------------------- one entry in full

SIGNATURE_WORDS = {
    signing.VALID: "valid: the entry reads as the bus stored it",
    signing.OLD: "valid (an older signature: some fields are not covered)",
    signing.TAMPERED: "TAMPERED: its signature does not match; it was changed outside the bus",
}


def in_full(shown: dict) -> str:
    """An entry of the flow in full, read again from the store with its signature checked
    now: the header fields, who it woke, its meta, and its whole text (escapes written
    out). An entry gone from the store says so."""
    row = Entry.objects.select_related("room").filter(pk=shown["id"]).first()
    if row is None:
        return f"entry {cell(shown['id'])}: no longer in the store"
    verdict = signing.verdict(row)
    to = ", ".join(rules.names_in(row.to)) or "everyone in the room"
    lines = [
        f"id         {row.id}",
        f"room       {cell(row.room.name)}   seq {row.seq}",
        f"time       {wire.iso(row.ts)}  ({clock(wire.iso(row.ts))} here)",
        f"type       {cell(row.type)}",
        f"from       {cell(row.sender)}",
        f"to         {cell(to)}",
        f"wakes      {cell(wakes_text(shown)) or 'nobody'}",
        f"re         {row.re or '-'}",
        f"via        {cell(row.via) or '-'}",
        f"signature  {SIGNATURE_WORDS.get(verdict, cell(verdict))}",
    ]
    if row.meta:
        meta = json.dumps(row.meta, ensure_ascii=False, sort_keys=True)
        lines.append(f"meta       {cell(meta, 2000)}")
    return "\n".join([*lines, "", block(row.content)])


HELP = """\
salon top: the rooms, the seats of the selected room, and the flow of entries, live.
Reads only: nothing here writes to the store.

Tab / Shift+Tab    move between the panes
j / k, Down / Up   move down / up in the pane
PgDn / PgUp        a page down / up
Home / End         the first / last row; End in the flow follows new entries
Enter              rooms: show that room's seats; flow: the entry in full,
                   with its signature checked
/                  search the flow: words, "a phrase", prefix*, -word (Esc clears)
f                  filter the flow: all, waking only, then each type
?                  this help (Esc closes it)
q, Ctrl-C          quit

Seats: live / ? (unknown: not seen lately) / gone; reading: caught up or
behind with the unread count; focus; quiet; claims.
Flow: wakes names the seats an entry woke; a gone seat it waits for, a
quiet seat it would have woken and a seat of another machine (decided
there) are marked so."""
