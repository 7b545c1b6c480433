"""Reading a room: inbox and peek (after the seat's cursor), history, unread counts.

Only an inbox read moves a cursor, and only over the entries it returned.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from bus import rules, wire
from bus.models import Entry, Membership, Room, Seat, WakeDecision
from bus.rules import RuleError
from bus.services import recording, rooms, telling


def _woken_ids(seat: Seat, entries: Sequence[Entry]) -> set:
    return set(
        WakeDecision.objects.filter(
            seat=seat, woken=True, entry__in=[e.id for e in entries]
        ).values_list("entry_id", flat=True)
    )


def _after_cursor(seat: Seat, room: Room, cursor: int):
    """Entries by others after `cursor`, oldest first: `room = R AND seq > cursor ORDER BY
    seq`, served by the entry_room_seq index whatever the size of the room."""
    return Entry.objects.filter(room=room, seq__gt=cursor).exclude(sender=seat.name).order_by("seq")


def _held(seat: Seat, membership: Membership):
    """The entries at or below the cursor that are still unread: those its sibling seats
    wrote in the hour before the seat joined (Membership.held_from), oldest first."""
    if membership.held_from is None or membership.held_from >= membership.cursor:
        return Entry.objects.none()
    return (
        Entry.objects.filter(
            room_id=membership.room_id,
            seq__gt=membership.held_from,
            seq__lte=membership.cursor,
            sender_agent=seat.agent.name,
        )
        .exclude(sender=seat.name)
        .order_by("seq")
    )


def read_inbox(
    *, seat: Seat, room: str | None = None, limit: int = 20, advance: bool = True
) -> dict:
    """Entries by others after this seat's cursors, oldest first, in `room` or (none
    named) every room of the seat, each entry naming its room; moves each cursor only over
    the entries returned (advance=False is `peek`). Counts are as of the call."""
    if limit < 1:
        raise RuleError("limit must be 1 or more")
    rooms_read = rooms.rooms_for_read(seat, room)
    with transaction.atomic():
        memberships = {
            m.room_id: m
            for m in Membership.objects.current().filter(seat=seat, room__in=rooms_read)
        }
        per_room, counts = _unread_of_rooms(seat, rooms_read, memberships, limit)
        # What is returned is a prefix of each room's unread: its cursor moves over just that.
        batch = list(itertools.islice(rules.oldest_first(per_room), limit))
        if advance:
            _advance_cursors(batch, memberships)
        woken = _woken_ids(seat, batch)
        # What the seat is shown is told: no other path repeats it (bus.services.telling).
        telling.mark_read_as_told(seat=seat, entry_ids=[e.id for e in batch if e.id in woken])
        entries = _shown_and_counted(seat, rooms_read, batch, woken)
    more = max(counts["unread"] - len(batch), 0)
    return {
        "room": rooms_read[0].name if room else None,
        "rooms": [r.name for r in rooms_read],
        "seat": seat.name,
        "entries": entries,
        "more": more,
        # The same, said so that a bounded count reads as one ("980+ more unread").
        "waiting": f"{rules.bounded(more, counts['countsCapped'])} more unread",
        **counts,
        "tampered": wire.tampered_count(entries),
    }


def _unread_of_rooms(
    seat: Seat, rooms_read: list, memberships: dict, limit: int
) -> tuple[list[list[Entry]], dict]:
    """Each room's first `limit` unread (the held-back entries of its siblings first), and
    the unread counts summed over the rooms."""
    per_room: list[list[Entry]] = []
    counts = {"unread": 0, "unreadForMe": 0, "unreadWaking": 0, "countsCapped": False}
    for room_row in rooms_read:
        membership = memberships[room_row.pk]
        unread = _after_cursor(seat, room_row, membership.cursor)
        held = list(_held(seat, membership).select_related("room")[:limit])
        per_room.append(held + list(unread.select_related("room")[: limit - len(held)]))
        here = _unread_counts(seat, membership, unread)
        for key in ("unread", "unreadForMe", "unreadWaking"):
            counts[key] += here[key]
        counts["countsCapped"] = counts["countsCapped"] or here["countsCapped"]
    return per_room, counts


def _advance_cursors(batch: list[Entry], memberships: dict) -> None:
    """Move each room's cursor over the entries read from it, and no further."""
    furthest: dict[int, int] = {}
    for entry in batch:
        furthest[entry.room_id] = max(furthest.get(entry.room_id, 0), entry.seq)
    for room_id, seq in furthest.items():
        membership = memberships[room_id]
        if seq <= membership.cursor:  # only held entries were read: fewer are held
            Membership.objects.filter(pk=membership.pk, held_from__lt=seq).update(held_from=seq)
            continue
        Membership.objects.filter(pk=membership.pk, cursor__lt=seq).update(
            cursor=seq, held_from=None
        )


def _shown_and_counted(seat: Seat, rooms_read: list, batch: list[Entry], woken) -> list[dict]:
    """The entries as the seat is shown them (a non-waking one clipped), and the reading
    counted for the stats in the same commit: no second write, no second fsync."""
    entries, held_back = [], {}
    for row in batch:
        clip = rules.clip(row.content, 0 if row.id in woken else settings.INBOX_CHARS)
        held_back[row.room_id] = held_back.get(row.room_id, 0) + clip.held_back
        entries.append(wire.entry(row, reader=seat, woken=row.id in woken, clip=clip))
    for room_row in rooms_read:
        read_here = [e for e in entries if e["room"] == room_row.name]
        if read_here:
            recording.quietly(
                lambda r=room_row, e=read_here: recording.count_reading(seat, r, e, held_back[r.pk])
            )
    return entries


# The counts of a read look at most this many rows per room: a seat with a backlog of a
# million entries reads its first page as fast as a caught-up one; past it the
# counts say "at least" (countsCapped; every face shows them as `1000+`: rules.bounded).
COUNT_CAP = 1000


def _unread_counts(seat: Seat, membership: Membership, unread) -> dict:
    facts = seat.facts()
    tos = list(_held(seat, membership).values_list("to", flat=True)[: COUNT_CAP + 1])
    tos += list(unread.values_list("to", flat=True)[: COUNT_CAP + 1 - len(tos)])
    waking = WakeDecision.objects.filter(
        seat=seat, room_id=membership.room_id, woken=True, seq__gt=membership.cursor
    )
    waking_count = waking.values("pk")[: COUNT_CAP + 1].count()
    return {
        "unread": min(len(tos), COUNT_CAP),
        "unreadForMe": sum(1 for to in tos[:COUNT_CAP] if rules.for_me(rules.names_in(to), facts)),
        "unreadWaking": min(waking_count, COUNT_CAP),
        "countsCapped": len(tos) > COUNT_CAP or waking_count > COUNT_CAP,
    }


def unread_counts(*, seat: Seat) -> list[dict]:
    """Per room of this seat: unread, unreadForMe, unreadWaking (cursor untouched)."""
    result = []
    for membership in (
        Membership.objects.current().in_visible_rooms().filter(seat=seat).select_related("room")
    ):
        unread = _after_cursor(seat, membership.room, membership.cursor)
        result.append(
            {
                "room": membership.room.name,
                **_unread_counts(seat, membership, unread),
            }
        )
    return sorted(result, key=lambda r: (-r["unreadWaking"], -r["unread"], r["room"]))


def mark_unread(*, seat: Seat, room: str, count: int = 1) -> dict:
    """Move the cursor back over the last `count` entries by others that were read."""
    if count < 1:
        raise RuleError("the number of entries to mark unread must be 1 or more")
    room_row = rooms.get_room(room)
    with transaction.atomic():
        membership = rooms.membership(seat, room_row)
        seqs = list(
            Entry.objects.filter(room=room_row, seq__lte=membership.cursor)
            .exclude(sender=seat.name)
            .order_by("-seq")
            .values_list("seq", flat=True)[:count]
        )
        cursor = seqs[-1] - 1 if seqs else membership.cursor
        held_from = membership.held_from
        if held_from is not None and held_from >= cursor:
            held_from = None  # the held entries are after the cursor now
        Membership.objects.filter(pk=membership.pk).update(cursor=cursor, held_from=held_from)
    return {"room": room_row.name, "seat": seat.name, "markedUnread": len(seqs)}


def read_history(
    *,
    seat: Seat | None,
    room: str | None = None,
    limit: int = 20,
    sender: str | None = None,
    broadcast_only: bool = False,
) -> dict:
    """The last `limit` entries including own, oldest first, never clipped; no cursor
    moves. In `room`, or (none named) every room of the seat, each entry naming its room.

    broadcast_only: what a caller with no identity (an unlabeled MCP session) may read,
    in the room named or the default room.
    """
    if limit < 1:
        raise RuleError("limit must be 1 or more")
    if seat is not None:
        rooms_read = rooms.rooms_for_read(seat, room)
    else:
        rooms_read = [rooms.get_room(room or settings.DEFAULT_ROOM)]
    query = Entry.objects.filter(room__in=rooms_read).select_related("room")
    if broadcast_only:
        query = query.filter(to=[])
    if sender:
        sender = rules.validate_name(sender, "sender")
        query = query.filter(Q(sender=sender) | Q(sender_agent=sender))
    if len(rooms_read) == 1:
        batch = list(query.order_by("-seq")[:limit])  # the entry_room_seq index
    else:
        # Across rooms seq says nothing; ids (UUID v7) keep one process's entries of one
        # millisecond in the order they were written.
        batch = list(query.order_by("-ts", "-id")[:limit])
    batch.reverse()
    woken = _woken_ids(seat, batch) if seat else set()
    entries = [wire.entry(e, reader=seat, woken=e.id in woken) for e in batch]
    return {
        "room": rooms_read[0].name if room or seat is None else None,
        "rooms": [r.name for r in rooms_read],
        "entries": entries,
        "tampered": wire.tampered_count(entries),
    }
