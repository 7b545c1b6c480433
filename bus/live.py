"""What the operator's live views show (/admin/live/, `salon watch`, and any terminal
view): the panes (`panes`: the rooms with their counts, and the seats of one room with
liveness, reading, focus and quiet), and the flow of stored entries — where every room
is, the entries after given positions, who each one wakes. Plain data: no HTTP, no
HTML; each face draws it its own way.

Reads only: nothing here writes a row, moves a cursor or checks a seat in.

A reader's place in the flow is a position per room (`{room id: seq}`), because a room's
seq is the one order that is commit order on every backend (bus.models): entries after
a position are exactly the ones the reader has not seen, whichever process wrote them.
The same map, written as text (`encode`), is the SSE event id the live view resumes from.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from bus import rules, strict, wire
from bus.models import Entry, Membership, Room, Seat, WakeDecision
from bus.services.claimed import claims_by_seat

Positions = dict[int, int]

# What a page that opens the flow is shown of the past, and how much a reconnect replays
# before it says "N entries were stored meanwhile" instead (the history page has them).
BACKLOG = 20
REPLAY_LIMIT = 200


# ---------------------------------------------------------------- the rooms and their seats

# A room's seats shown at most (the seats page lists them all).
SEAT_ROWS = 200
# A seat's unread entries are counted up to here ("1,000+"): a seat that has been away
# from a busy room would otherwise cost a count over its whole backlog.
UNREAD_CAP = 1000
LIVENESS_ORDER = {rules.LIVE: 0, rules.UNKNOWN: 1, rules.GONE: 2}
# What can tell a seat of a wake-up now (Seat.listener), in words.
TOLD_BY = {
    WakeDecision.LISTENER_LIVE: "stream or wait",
    WakeDecision.LISTENER_HOOK: "hook",
    WakeDecision.LISTENER_NONE: "nothing",
}


@dataclass(frozen=True)
class RoomRow:
    """A room: its entries (seqs are dense: the last one counts them), the time of its
    newest entry (ISO 8601 UTC), its seats and how many of them are live or unknown."""

    name: str
    entries: int
    last_entry: str | None
    seats: int
    live: int
    unknown: int


@dataclass(frozen=True)
class SeatRow:
    """A seat of a room. `reading`: caught-up or behind (a live seat), unknown, or gone
    (never "behind": nobody is there to read); `unread` is None where it is not counted
    (a gone seat) and stops at UNREAD_CAP + 1. Times are ISO 8601 UTC."""

    seat_id: int
    name: str
    liveness: str
    told_by: str
    last_seen: str | None
    quiet: bool
    quiet_until: str | None  # None while quiet: no expiry
    focus: dict | None  # bus.wire.focus
    reading: str
    unread: int | None
    waking: int
    # Its open file claims (bus.services.claims.shown), oldest first.
    claims: tuple = ()

    @property
    def reading_text(self) -> str:
        """`reading, caught up` · `behind: 12 unread, 2 waking` · `? 3 unread` · `gone`;
        a count past UNREAD_CAP reads `1,000+`."""
        backlog = ""
        if self.unread:
            backlog = f"{_counted(self.unread)} unread"
            backlog += f", {_counted(self.waking)} waking" if self.waking else ""
        if self.reading == "gone":
            return "gone"
        if self.reading == "unknown":
            return f"? {backlog}".strip()
        if self.reading == "behind":
            return f"behind: {backlog}"
        return "reading, caught up"


def _counted(n: int) -> str:
    return f"{UNREAD_CAP:,}+" if n > UNREAD_CAP else str(n)


@dataclass(frozen=True)
class Panes:
    """The rooms, the room opened (None: there is none), and its first SEAT_ROWS seats."""

    rooms: list[RoomRow]
    room: str | None
    seats: list[SeatRow]
    seats_left_out: int


def panes(room: str | None = None, at: datetime | None = None) -> Panes:
    """Every visible room (by name) with its counts, and the seats of `room` (a name), or
    of the busiest room when `room` is None or names no visible room (the caller compares
    `Panes.room` to say so): live first, then unknown, then gone, each by name."""
    at = at or timezone.now()
    rows, memberships = _rooms(at)
    names = {row.name for row in rows}
    opened = room if room in names else busiest(rows)
    seats, left_out = _seats(opened, memberships, at) if opened else ([], 0)
    return Panes(rows, opened, seats, left_out)


def busiest(rows: list[RoomRow]) -> str | None:
    """The room to open when none is asked for: the one where something happens. A room
    somebody is in comes before an empty one (the default room nobody joined is never
    the first thing shown); then the newest entry; then the most live seats, the most
    seats; then the name (`rows` come by name, and max keeps the first of equals)."""
    someone_in = [r for r in rows if r.seats] or rows
    if not someone_in:
        return None
    # ISO 8601 UTC times of one format sort as the times do; no entry sorts first.
    return max(someone_in, key=lambda r: (r.last_entry or "", r.live, r.seats)).name


def _memberships(in_rooms, at: datetime) -> list[tuple[Membership, str]]:
    """The current memberships of these rooms, each with its seat's liveness at `at`."""
    found = (
        Membership.objects.current()
        .filter(room__in=in_rooms)
        .select_related("seat__agent", "room")
        .order_by("seat__name")
    )
    return [(m, m.seat.liveness(at)) for m in found]


def _rooms(at: datetime) -> tuple[list[RoomRow], list[tuple[Membership, str]]]:
    visible = list(Room.objects.visible().order_by("name"))
    memberships = _memberships(visible, at)
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])  # seats, live, unknown
    for membership, liveness in memberships:
        count = counts[membership.room_id]
        count[0] += 1
        count[1] += liveness == rules.LIVE
        count[2] += liveness == rules.UNKNOWN
    # The newest entry of each room: its last seq, one index lookup per room.
    newest = Q(pk__in=[])
    for room in visible:
        if room.last_seq:
            newest |= Q(room_id=room.pk, seq=room.last_seq)
    last = dict(Entry.objects.filter(newest).values_list("room_id", "ts"))
    rows = [
        RoomRow(room.name, room.last_seq, wire.iso(last.get(room.pk)), *counts[room.pk])
        for room in visible
    ]
    return rows, memberships


def _seats(
    room: str, memberships: list[tuple[Membership, str]], at: datetime
) -> tuple[list[SeatRow], int]:
    here = [(m, liveness) for m, liveness in memberships if m.room.name == room]
    here.sort(key=lambda pair: (LIVENESS_ORDER[pair[1]], pair[0].seat.name))
    shown = here[:SEAT_ROWS]
    # A gone seat is not reading: nothing to count for it.
    counts = _reading_counts([m for m, liveness in shown if liveness != rules.GONE])
    claims = claims_by_seat(seat_ids=[m.seat_id for m, _ in shown], at=at)
    rows = [
        _seat_row(m, liveness, counts.get(m.pk), at, claims.get(m.seat_id, ()))
        for m, liveness in shown
    ]
    return rows, max(len(here) - SEAT_ROWS, 0)


def _reading_counts(memberships: list[Membership]) -> dict[int, tuple[int, int]]:
    """Per membership: the entries by others after its cursor, and the waking ones, each
    counted up to UNREAD_CAP + 1. One query for every seat shown, however many (the
    panes are drawn again every few seconds while a live page is open); each count reads
    at most UNREAD_CAP + 1 rows of an index (room, seq) or (seat, room, seq)."""
    if not memberships:
        return {}
    entry, wake = Entry._meta.db_table, WakeDecision._meta.db_table
    membership, seat = Membership._meta.db_table, Seat._meta.db_table
    marks = ", ".join(["%s"] * len(memberships))
    sql = f"""
        SELECT m.id,
          (SELECT COUNT(*) FROM (SELECT 1 FROM {entry} e
             WHERE e.room_id = m.room_id AND e.seq > m."cursor" AND e.sender <> s.name
             LIMIT %s) AS unread),
          (SELECT COUNT(*) FROM (SELECT 1 FROM {wake} w
             WHERE w.seat_id = m.seat_id AND w.room_id = m.room_id AND w.woken
               AND w.seq > m."cursor"
             LIMIT %s) AS waking)
        FROM {membership} m JOIN {seat} s ON s.id = m.seat_id
        WHERE m.id IN ({marks})
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [UNREAD_CAP + 1, UNREAD_CAP + 1, *(m.pk for m in memberships)])
        return {row[0]: (row[1], row[2]) for row in cursor.fetchall()}


def _seat_row(
    membership: Membership,
    liveness: str,
    counts: tuple[int, int] | None,
    at: datetime,
    claims=(),
) -> SeatRow:
    seat: Seat = membership.seat
    quiet = seat.is_quiet(at)
    unread, waking = counts if counts else (None, 0)
    if liveness == rules.GONE:
        reading = "gone"
    elif liveness == rules.UNKNOWN:
        reading = "unknown"
    else:
        reading = "behind" if unread else "caught-up"
    return SeatRow(
        seat_id=seat.pk,
        name=seat.name,
        liveness=liveness,
        told_by=TOLD_BY[seat.listener(at, liveness)],
        last_seen=wire.iso(seat.last_seen),
        quiet=quiet,
        quiet_until=wire.iso(seat.quiet_until) if quiet else None,
        focus=wire.focus(seat, at),
        reading=reading,
        unread=unread,
        waking=waking,
        claims=tuple(claims),
    )


# ---------------------------------------------------------------- the flow


@dataclass(frozen=True)
class Item:
    """One entry of the flow: where it stands (room id, seq) and what is shown of it."""

    room_id: int
    seq: int
    data: dict


def positions(room: Room | None = None) -> Positions:
    """Where the rooms are now (their newest seq); only `room` if given."""
    rooms = Room.objects.all() if room is None else Room.objects.filter(pk=room.pk)
    return dict(rooms.values_list("id", "last_seq"))


def waiting(since: Positions, room: Room | None = None) -> int:
    """How many entries were stored after `since` (seqs are dense: no query per entry)."""
    return sum(max(seq - since.get(rid, 0), 0) for rid, seq in positions(room).items())


def after(since: Positions, *, room: Room | None = None, limit: int = REPLAY_LIMIT) -> list[Item]:
    """The entries stored after `since`, oldest first: at most `limit` of each room, the
    next ones of its run (call again for the rest). A room missing from `since` counts
    from its beginning (it was made meanwhile)."""
    where = Q(pk__in=[])
    for rid, seq in positions(room).items():
        start = since.get(rid, 0)
        if seq > start:
            # Seqs are dense, so this is exactly the room's next `limit` entries, served
            # by the entry_room_seq index: room = R AND seq BETWEEN a AND b.
            where |= Q(room_id=rid, seq__gt=start, seq__lte=min(seq, start + limit))
    rows = Entry.objects.filter(where).select_related("room").order_by("room_id", "seq")
    return _items(_in_order(rows))


def _in_order(rows) -> list[Entry]:
    """Entries of several rooms, each room's in seq order, as one run (rules.oldest_first)."""
    per_room: dict[int, list[Entry]] = defaultdict(list)
    for row in rows:
        per_room[row.room_id].append(row)
    return list(rules.oldest_first(per_room.values()))


def recent(at: Positions, *, room: Room | None = None, limit: int = BACKLOG) -> list[Item]:
    """The newest `limit` entries up to `at` (a page's first look), oldest first."""
    rows = Entry.objects.select_related("room").order_by("-ts", "-seq")
    if room is not None:
        rows = rows.filter(room=room)
    # Entries stored after `at` was read come in the flow itself: leave them out here.
    kept = [r for r in rows[: limit * 2] if r.seq <= at.get(r.room_id, 0)][:limit]
    return _items(_in_order(kept[::-1]))


def _items(rows: list[Entry]) -> list[Item]:
    """Each entry with the seats it woke (its woken ledger rows of seats that were not
    gone: `send`'s `wakes`), the gone ones it waits for, the seats it would have woken
    but for their quiet (a quiet seat has a ledger row for every entry that reaches it, so
    the wake rule is asked again as if the seat were not quiet), and the seats of other
    machines it is for, woken or quiet as their own machine decides (`send`'s
    `decidedThere`: this machine's rows of them say nothing of that)."""
    by_id = {str(r.id): r for r in rows}
    replied_to = {strict.stored_uuid(r.re) for r in rows} - {None}
    re_authors = dict(Entry.objects.filter(id__in=replied_to).values_list("id", "sender"))
    wakes: dict[str, list[str]] = defaultdict(list)
    waiting: dict[str, list[str]] = defaultdict(list)
    quieted: dict[str, list[str]] = defaultdict(list)
    there: dict[str, list[str]] = defaultdict(list)
    decisions = WakeDecision.objects.filter(entry__in=[r.id for r in rows]).order_by("seat_name")
    for entry_id, name, woken, gone, reason, at in decisions.values_list(
        "entry_id", "seat_name", "woken", "gone", "reason", "decided_at"
    ):
        row = by_id[str(entry_id)]
        if rules.decided_there(name):
            there[str(entry_id)].append(name)
        elif woken:
            (waiting if gone else wakes)[str(entry_id)].append(name)
        elif reason == "quiet" and _would_wake(row, re_authors.get(row.re), name, at):
            quieted[str(entry_id)].append(name)
    return [
        Item(
            r.room_id,
            r.seq,
            wire.live_entry(
                r, wakes[str(r.id)], quieted[str(r.id)], waiting[str(r.id)], there[str(r.id)]
            ),
        )
        for r in rows
    ]


def _would_wake(row: Entry, re_author: str | None, seat: str, at) -> bool:
    entry = rules.EntryFacts(
        sender_seat=row.sender, type=row.type, to=tuple(row.to), re_author=re_author
    )
    unquiet = rules.SeatFacts(seat=seat, agent=rules.agent_of_seat(seat))
    return rules.decide_wake(entry, unquiet, at).woken


# Marks an event id as positions of this module (never empty, so a browser always
# sends it back, even before the first entry of the store).
ID_PREFIX = "p1;"


def encode(at: Positions) -> str:
    """`p1;3:17,5:2`: the positions as an SSE event id (rooms with no entry left out)."""
    return ID_PREFIX + ",".join(f"{rid}:{seq}" for rid, seq in sorted(at.items()) if seq > 0)


def decode(text: str) -> Positions | None:
    """The positions of an event id, or None for one this module did not write."""
    text = text.strip()
    if not text.startswith(ID_PREFIX):
        return None
    found: Positions = {}
    for part in text[len(ID_PREFIX) :].split(","):
        if not part:
            continue
        rid, colon, seq = part.partition(":")
        if not (colon and rid.isdigit() and seq.isdigit()):
            return None
        found[int(rid)] = int(seq)
    return found
