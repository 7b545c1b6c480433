"""Rooms and memberships: a room exists only when created on purpose."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from bus import compiled, ledger, rules, wire
from bus.models import Entry, Membership, Request, Room, Seat, WakeDecision
from bus.rules import NotAMember, RuleError, UnknownRoom
from patches.django import CompiledLookup


def existing_room_names() -> list[str]:
    return list(Room.objects.visible().values_list("name", flat=True))


def unknown_room(name: str) -> UnknownRoom:
    names = existing_room_names()
    if Room.objects.filter(name=name, archived_at__isnull=False).exists():
        return UnknownRoom(archived_room(name), names)
    listed = ", ".join(names) or "none yet"
    return UnknownRoom(
        f"there is no room {name!r} (rooms: {listed}); create it with "
        f"`salon rooms --create {name}` or `salon join {name} --create` (the join tool: "
        "create: true)",
        names,
    )


def archived_room(name: str) -> str:
    """The one refusal for an archived room, whatever was asked of it: the way back."""
    return f"room {name!r} is archived: `salon rooms --restore {name}` brings it back"


def get_room(name: str) -> Room:
    name = rules.validate_name(name, "room")
    found = _VISIBLE_ROOMS.fetch([name])
    if not found:
        raise unknown_room(name)
    return found[0]


# Every send to a named room, and every write with none that falls back to the default
# room, looks its room up: compiled once (patches.django).
_VISIBLE_ROOMS = CompiledLookup(Room, "name", archived_at__isnull=True)


def create_room(*, name: str) -> tuple[Room, bool]:
    name = rules.validate_name(name, "room")
    existing = Room.objects.filter(name=name).first()
    if existing is not None:
        if existing.archived_at:
            raise RuleError(archived_room(name))
        return existing, False
    try:
        return Room.objects.create(name=name), True
    except IntegrityError:
        return Room.objects.get(name=name), False


# ---------------------------------------------------------------- memberships


def ensure_membership(seat: Seat, room: Room) -> Membership:
    """The seat is in the room: a new membership starts at the seat's first cursor, a
    parted one is taken up again where it was."""
    membership, created = Membership.objects.get_or_create(seat=seat, room=room)
    if created:
        (membership.cursor, membership.held_from), inherited = _first_cursor(seat, room)
        membership.save(update_fields=["cursor", "held_from"])
        if inherited:
            owe_inherited(seat=seat, room=room, cursor=membership.cursor)
    elif membership.left_at is not None:
        membership.left_at = None
        membership.save(update_fields=["left_at"])
    return membership


# A new seat looks for the claims owed to it among at most this many of the newest entries
# it inherits as unread: joining costs the same however big the room or its backlog.
OWED_LOOKBACK = 1000


def owe_inherited(*, seat: Seat, room, cursor: int) -> int:
    """A seat new to `room` inherits the entries after its first `cursor` as unread; each
    of them that rules.owed_on_arrival makes a claim on it gets the ledger row it would
    have had, had the seat been there when the entry was sent. So a claim written while
    none of the agent's sessions was live is listed by the next session's SessionStart,
    and told once by whichever path comes first. Returns how many rows were written."""
    if seat.remote:  # its own machine tells it
        return 0
    rows = list(
        Entry.objects.filter(room=room, seq__gt=cursor)
        .order_by("-seq")
        .values_list("id", "seq", "sender", "sender_agent", "type", "to", "re")[:OWED_LOOKBACK]
    )
    if not rows:
        return 0
    ids = [row[0] for row in rows]
    told = set(
        WakeDecision.objects.filter(
            entry_id__in=ids, seat__agent_id=seat.agent_id, told_at__isnull=False
        ).values_list("entry_id", flat=True)
    )
    # A request its project's policy served, denied or is settling wakes nobody there:
    # nor a session that arrives later.
    held = set(Request.objects.holding().filter(entry_id__in=ids).values_list("pk", flat=True))
    if held:
        rows = [row for row in rows if row[0] not in held]
    re_ids = {row[6] for row in rows if row[6]}
    authors = dict(Entry.objects.filter(id__in=re_ids).values_list("id", "sender"))
    facts, agent, at = seat.facts(), seat.agent.name, timezone.now()
    listener = seat.listener(at, seat.liveness(at))
    owed = []
    for entry_id, seq, sender, sender_agent, type_, to, re in reversed(rows):
        decision = rules.owed_on_arrival(
            rules.EntryFacts(sender, type_, tuple(rules.names_in(to)), authors.get(re)),
            facts,
            at,
            by_own_agent=sender_agent == agent,
            sibling_told=entry_id in told,
        )
        if decision is not None:
            owed.append(
                WakeDecision(
                    entry_id=entry_id,
                    seat=seat,
                    seat_name=seat.name,
                    room_id=room.pk,
                    seq=seq,
                    woken=True,
                    reason=decision.reason,
                    decided_at=at,
                    listener=listener,
                    gone=False,
                )
            )
    # A send that saw the new membership wrote its own row: that one stands.
    WakeDecision.objects.bulk_create(owed, ignore_conflicts=True)
    return len(owed)


def _first_cursor(seat: Seat, room: Room) -> tuple[tuple[int, int | None], bool]:
    """((the first cursor, held_from), whether it is inherited from a sibling seat)."""
    siblings = Membership.objects.filter(room=room, seat__agent_id=seat.agent_id).exclude(seat=seat)
    cursors = list(siblings.values_list("cursor", flat=True))
    recent = []
    if cursors:
        since = timezone.now() - rules.SIBLING_WINDOW
        # By sender_agent, not by the siblings' memberships: a sibling need not be a member
        # to write here (the bare agent name from cron, a webhook), and its entry is still
        # the other half of this agent's conversation.
        recent = list(
            Entry.objects.filter(room=room, sender_agent=seat.agent.name, ts__gte=since)
            .exclude(sender=seat.name)
            .values_list("seq", flat=True)
        )
    return rules.first_cursor(cursors, recent), bool(cursors)


def membership(seat: Seat, room: Room) -> Membership:
    """The seat's current membership of the room, or a refusal saying how to join."""
    found = Membership.objects.current().filter(seat=seat, room=room).first()
    if found is None:
        raise NotAMember(
            f"{seat.name} is not in room {room.name!r}; join it first (`salon join {room.name}`)"
        )
    return found


def join_room(*, seat: Seat, room: str, create: bool = False) -> dict:
    if create:
        room_row, created = create_room(name=room)
    else:
        room_row, created = get_room(room), False
    with transaction.atomic():
        ensure_membership(seat, room_row)
    return {"room": room_row.name, "seat": seat.name, "created": created}


def part_room(*, seat: Seat, room: str) -> dict:
    room_row = get_room(room)
    updated = (
        Membership.objects.current().filter(seat=seat, room=room_row).update(left_at=timezone.now())
    )
    if not updated:
        raise NotAMember(f"{seat.name} is not in room {room!r}; nothing to leave")
    return {"room": room_row.name, "seat": seat.name, "left": True}


# ---------------------------------------------------------------- which room -----


def primary_room(seat: Seat) -> Room | None:
    """The first of the seat's default rooms it is still in, else the room it joined
    first: its default rooms are joined first, in order, so it is the oldest current
    membership of a visible room."""
    sql = ledger.PRIMARY_ROOM.format(columns=compiled.columns(Room, "r"))
    with connection.cursor() as cursor:
        cursor.execute(sql, [seat.pk])
        row = cursor.fetchone()
    return compiled.model_from_row(Room, row) if row else None


def room_for_write(seat: Seat, name: str | Room | None, *, create: bool = False) -> Room:
    """The room a write goes to: the one named, else the seat's primary room, else the
    default room (a caller in no room, such as cron). Never an error for several rooms."""
    if isinstance(name, Room):
        return name  # the caller has looked it up already
    if name:
        return create_room(name=name)[0] if create else get_room(name)
    return primary_room(seat) or get_room(settings.DEFAULT_ROOM)


def rooms_for_read(seat: Seat, name: str | None) -> list[Room]:
    """The rooms a read covers: the one named (the seat must be in it), else every room
    of the seat, oldest membership first."""
    memberships = list(
        Membership.objects.current()
        .in_visible_rooms()
        .filter(seat=seat)
        .select_related("room")
        .order_by("pk")
    )
    mine = [m.room for m in memberships]
    if name:
        room = get_room(name)
        if room not in mine:
            listed = ", ".join(r.name for r in mine) or "none"
            raise NotAMember(
                f"{seat.name} is not in room {room.name!r} (its rooms: {listed}); join it "
                f"first (`salon join {room.name}`)"
            )
        return [room]
    if not mine:
        raise NotAMember(
            f"{seat.name} is in no room yet: join one (`salon join ROOM`; `salon rooms` lists them)"
        )
    return mine


def agent_primary_room(agent: str) -> Room:
    """Where a caller that is only an agent name (the webhook's label) writes by default:
    the primary room of its most recently seen seat that is in a room, else the default
    room."""
    sql = _AGENT_PRIMARY_ROOM_SQL.format(
        columns=compiled.columns(Room, "r"),
        room=Room._meta.db_table,
        membership=Membership._meta.db_table,
        seat=Seat._meta.db_table,
        agent=Seat._meta.get_field("agent").related_model._meta.db_table,
        current=ledger.current("m"),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [agent])
        row = cursor.fetchone()
    return compiled.model_from_row(Room, row) if row else get_room(settings.DEFAULT_ROOM)


# The oldest current membership in a visible room of the most recently seen of the
# agent's seats that has one (seats in no room drop out). Every /notify without a room
# asks it: written out, not compiled by the ORM each time.
_AGENT_PRIMARY_ROOM_SQL = """
    SELECT {columns}
    FROM {membership} m
    JOIN {room} r ON r.id = m.room_id
    JOIN {seat} s ON s.id = m.seat_id
    JOIN {agent} a ON a.id = s.agent_id
    WHERE a.name = %s AND {current} AND r.archived_at IS NULL
    ORDER BY s.last_seen DESC, s.id DESC, m.id
    LIMIT 1
"""


def seat_rooms(seat: Seat) -> list[str]:
    return rooms_of_seats([seat.pk]).get(seat.pk, [])


def rooms_of_seats(seat_ids: Iterable[int] | None) -> dict[int, list[str]]:
    """The rooms (not archived) each seat is in, by name, in one query; None: every seat."""
    query = Membership.objects.current().in_visible_rooms()
    if seat_ids is not None:
        query = query.filter(seat_id__in=list(seat_ids))
    rooms: dict[int, list[str]] = {}
    for seat_id, name in query.order_by("room__name").values_list("seat_id", "room__name"):
        rooms.setdefault(seat_id, []).append(name)
    return rooms


def agent_rooms(*, agent: str) -> list[str]:
    """The visible rooms any seat of `agent` is in (parted ones excluded), by name."""
    return list(
        Membership.objects.current()
        .in_visible_rooms()
        .filter(seat__agent__name=agent)
        .values_list("room__name", flat=True)
        .distinct()
        .order_by("room__name")
    )


# ---------------------------------------------------------------- listing, archiving


# What adapters add to `salon rooms` about a room: a provider gives {room name: {key:
# value}} for the rooms it knows (the relay's bridge: which rooms are bridged, to which
# relay, when each last synced). The domain lists them and never asks who they are.
RoomNotes = Callable[[], dict[str, dict]]
_room_notes: list[RoomNotes] = []


def add_room_notes(provider: RoomNotes) -> None:
    if provider not in _room_notes:
        _room_notes.append(provider)


class _Member(NamedTuple):
    """The columns of a seat that say whether it is live, with Seat's own rule."""

    name: str
    live_until: datetime | None
    last_seen: datetime | None
    signed_off_at: datetime | None

    liveness = Seat.liveness


def list_rooms(*, archived: bool = False) -> list[dict]:
    at = timezone.now()
    notes: dict[str, dict] = {}
    for provider in _room_notes:
        for name, extra in provider().items():
            notes.setdefault(name, {}).update(extra)
    rooms = list(Room.objects.filter(archived_at__isnull=not archived).order_by("name"))
    # Every room's members in one query of plain values: no Seat per member (a room of
    # thousands of seats cost a model instance each, on every `rooms` call).
    seats: dict[int, set[str]] = {room.pk: set() for room in rooms}
    live: dict[int, set[str]] = {room.pk: set() for room in rooms}
    for row in (
        Membership.objects.current()
        .filter(room__in=rooms)
        .values_list(*(f"seat__{field}" for field in _Member._fields), "room_id")
        .iterator()
    ):
        member, room_id = _Member(*row[:-1]), row[-1]
        seats[room_id].add(member.name)
        if member.liveness(at) == rules.LIVE:
            live[room_id].add(member.name)
    return [
        {
            "room": room.name,
            "entries": room.last_seq,
            "seats": sorted(seats[room.pk]),
            "live": sorted(live[room.pk]),
            "archived": wire.iso(room.archived_at),
            **notes.get(room.name, {}),
        }
        for room in rooms
    ]


def archive_room(*, name: str, force: bool = False) -> dict:
    room = get_room(name)
    if name == settings.DEFAULT_ROOM:
        raise RuleError(f"{name!r} is the default room (AGENT_SALON_DEFAULT_ROOM); it stays")
    at = timezone.now()
    live = [
        m.seat.name
        for m in Membership.objects.current().filter(room=room).select_related("seat")
        if m.seat.liveness(at) == rules.LIVE
    ]
    if live and not force:
        raise RuleError(
            f"room {name!r} has live seats ({', '.join(sorted(live))}); "
            "archive it anyway with --force"
        )
    Room.objects.filter(pk=room.pk).update(archived_at=at)
    return {"room": name, "archived": wire.iso(at), "entriesKept": room.last_seq}


def restore_room(*, name: str) -> dict:
    name = rules.validate_name(name, "room")
    updated = Room.objects.filter(name=name, archived_at__isnull=False).update(archived_at=None)
    if not updated:
        archived = list(
            Room.objects.filter(archived_at__isnull=False).values_list("name", flat=True)
        )
        raise RuleError(
            f"there is no archived room {name!r} (archived: {', '.join(archived) or 'none'})"
        )
    return {"room": name, "restored": True}
