"""The flow of stored entries, for the operator's live view (/admin/live/) and `salon
watch`: where every room is, the entries after given positions, who each one wakes.

Reads only: nothing here writes a row, moves a cursor or checks a seat in.

A reader's place in the flow is a position per room (`{room id: seq}`), because a room's
seq is the one order that is commit order on every backend (bus.models): entries after
a position are exactly the ones the reader has not seen, whichever process wrote them.
The same map, written as text (`encode`), is the SSE event id the live view resumes from.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Q

from bus import rules, wire
from bus.models import Entry, Room, WakeDecision

Positions = dict[int, int]

# What a page that opens the flow is shown of the past, and how much a reconnect replays
# before it says "N entries were stored meanwhile" instead (the history page has them).
BACKLOG = 20
REPLAY_LIMIT = 200


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
    """Each entry with the seats it woke (its woken ledger rows) and the seats it would
    have woken but for their quiet: a quiet seat has a ledger row for every entry that
    reaches it, so the wake rule is asked again as if the seat were not quiet."""
    by_id = {str(r.id): r for r in rows}
    re_authors = dict(
        Entry.objects.filter(id__in={r.re for r in rows if r.re}).values_list("id", "sender")
    )
    wakes: dict[str, list[str]] = defaultdict(list)
    quieted: dict[str, list[str]] = defaultdict(list)
    decisions = WakeDecision.objects.filter(entry__in=[r.id for r in rows]).order_by("seat_name")
    for entry_id, name, woken, reason, at in decisions.values_list(
        "entry_id", "seat_name", "woken", "reason", "decided_at"
    ):
        row = by_id[str(entry_id)]
        if woken:
            wakes[str(entry_id)].append(name)
        elif reason == "quiet" and _would_wake(row, re_authors.get(row.re), name, at):
            quieted[str(entry_id)].append(name)
    return [
        Item(r.room_id, r.seq, wire.live_entry(r, wakes[str(r.id)], quieted[str(r.id)]))
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
