"""The bus's operations: the only code that writes bus rows.

Every adapter (the CLI, the MCP tools, the webhook, the hooks) calls these keyword-only
verbs; the rules they apply live in bus.rules. A business refusal is a RuleError whose
message says what was wrong and how to fix it. New entries are announced on commit.
"""

from __future__ import annotations

import re
import secrets
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Max, Q
from django.utils import timezone

from bus import doorbell, rules, signing
from bus.models import (
    Agent,
    Alias,
    DecisionCount,
    Entry,
    Membership,
    ReadCount,
    Room,
    Seat,
    Token,
    WakeDecision,
)
from bus.rules import RuleError

AGENTS_SCHEMA = "salon.agents/1"


class UnknownRoom(RuleError):
    """The room does not exist (or is archived); `rooms` lists those that do."""

    def __init__(self, message: str, rooms: list[str]):
        super().__init__(message)
        self.rooms = rooms


class UnknownAddressee(RuleError):
    def __init__(self, message: str, names: list[str]):
        super().__init__(message)
        self.names = names


class NotAMember(RuleError):
    pass


def now() -> datetime:
    return timezone.now()


def _ms(ts: datetime) -> datetime:
    return ts.replace(microsecond=ts.microsecond // 1000 * 1000)


def iso(ts: datetime | None) -> str | None:
    return signing.iso_ms(ts) if ts else None


# ---------------------------------------------------------------- seats and presence


def seat_liveness(seat: Seat, at: datetime | None = None) -> str:
    at = at or now()
    stream_open = bool(seat.live_until and seat.live_until > at)
    return rules.liveness(seat.last_seen, stream_open, at, signed_off=seat.signed_off_at)


def _seat_facts(seat: Seat) -> rules.SeatFacts:
    return rules.SeatFacts(
        seat=seat.name, agent=seat.agent.name, quiet=seat.quiet, quiet_until=seat.quiet_until
    )


def check_in(
    *,
    agent: str,
    session_id: str | None = None,
    host: str = "",
    rooms: Sequence[str] | None = None,
    join_defaults: bool = False,
    touch: bool = True,
) -> Seat:
    """Find or create the seat of (agent, session id) and record a sign of life.

    With join_defaults, a seat new to the bus joins its default rooms once: `rooms`
    if given (a hook passes its own AGENT_SALON_ROOM), else AGENT_SALON_ROOM, else the
    rooms its agent's other seats are in, else the default room. A seat that later
    parts is never re-joined.
    """
    agent = rules.validate_name(agent, "agent")
    at = now()
    agent_row, _ = Agent.objects.get_or_create(name=agent, defaults={"host": host})
    prefix = f"{agent}#"
    if session_id:
        holders = dict(
            Seat.objects.filter(name__startswith=prefix).values_list("name", "session_id")
        )
        name = rules.seat_name(agent, session_id, holders)
    else:
        name = agent
    try:
        seat, _ = Seat.objects.select_related("agent").get_or_create(
            name=name,
            defaults={
                "agent": agent_row,
                "session_id": session_id or "",
                "host": host,
                "remote": "@" in agent,
                "last_seen": at,
            },
        )
    except IntegrityError:  # a concurrent check-in created it first
        seat = Seat.objects.select_related("agent").get(name=name)
    if touch:
        Seat.objects.filter(pk=seat.pk).update(last_seen=at)
        seat.last_seen = at
    if join_defaults and not seat.defaults_applied:
        _join_default_rooms(seat, rooms)
    return seat


def _join_default_rooms(seat: Seat, rooms: Sequence[str] | None) -> None:
    # None: this process's AGENT_SALON_ROOM; a list (even empty) is the caller's own.
    names = list(settings.AGENT_ROOMS if rooms is None else rooms)
    if not names:
        names = list(
            Membership.objects.filter(
                seat__agent=seat.agent, left_at__isnull=True, room__archived_at__isnull=True
            )
            .exclude(seat=seat)
            .values_list("room__name", flat=True)
            .distinct()
        ) or [settings.DEFAULT_ROOM]
    for name in names:
        room = Room.objects.visible().filter(name=name).first()
        if room is not None:
            _ensure_membership(seat, room)
    Seat.objects.filter(pk=seat.pk).update(defaults_applied=True)
    seat.defaults_applied = True


def seat_by_name(name: str) -> Seat | None:
    return Seat.objects.select_related("agent").filter(name=name).first()


def keep_live(*, seat: Seat, seconds: int = 45) -> datetime:
    """An open stream or a running stdio server: live for the next `seconds`.

    Returns the live_until written, for end_live(only_if_until=…).
    """
    return keep_seats_live(seat_ids={seat.pk}, seconds=seconds)


# Ids per UPDATE: bounds the statement's parameters (SQLite allows 32,766).
LIVE_CHUNK = 1000


def keep_seats_live(*, seat_ids: Iterable[int], seconds: int = 45) -> datetime:
    """keep_live for many seats in set-based UPDATEs (a daemon's keep-alive ticker
    refreshes every open stream's seat at once). Returns the live_until written."""
    at = now()
    until = at + timedelta(seconds=seconds)
    ids = sorted(seat_ids)
    for start in range(0, len(ids), LIVE_CHUNK):
        Seat.objects.filter(pk__in=ids[start : start + LIVE_CHUNK]).update(
            last_seen=at, live_until=until
        )
    return until


def end_live(*, seat: Seat, only_if_until: datetime | None = None) -> None:
    """The stream closed. With only_if_until, only if no newer stream took the seat over
    since (it would have written a later live_until)."""
    query = Seat.objects.filter(pk=seat.pk)
    if only_if_until is not None:
        query = query.filter(live_until=only_if_until)
    query.update(live_until=now())


def sign_off(*, seat: Seat) -> None:
    """The session ended (MCP DELETE): the seat is gone until it shows life again."""
    at = now()
    Seat.objects.filter(pk=seat.pk).update(signed_off_at=at, live_until=None, last_seen=at)


def touch(*, seat: Seat, min_interval: timedelta | None = None) -> bool:
    """A sign of life; with min_interval, written at most that often. True if written."""
    at = now()
    query = Seat.objects.filter(pk=seat.pk)
    if min_interval:
        query = query.filter(Q(last_seen__isnull=True) | Q(last_seen__lt=at - min_interval))
    return bool(query.update(last_seen=at))


# ---------------------------------------------------------------- rooms


def existing_room_names() -> list[str]:
    return list(Room.objects.visible().values_list("name", flat=True))


def _unknown_room(name: str) -> UnknownRoom:
    names = existing_room_names()
    listed = ", ".join(names) or "none yet"
    return UnknownRoom(
        f"there is no room {name!r} (rooms: {listed}); create it with "
        f"`salon rooms --create {name}` or join with create",
        names,
    )


def get_room(name: str) -> Room:
    name = rules.validate_name(name, "room")
    room = Room.objects.visible().filter(name=name).first()
    if room is None:
        raise _unknown_room(name)
    return room


def create_room(*, name: str) -> tuple[Room, bool]:
    name = rules.validate_name(name, "room")
    existing = Room.objects.filter(name=name).first()
    if existing is not None:
        if existing.archived_at:
            raise RuleError(
                f"room {name!r} is archived; bring it back with `salon rooms --restore {name}`"
            )
        return existing, False
    try:
        return Room.objects.create(name=name), True
    except IntegrityError:
        return Room.objects.get(name=name), False


def _ensure_membership(seat: Seat, room: Room) -> Membership:
    membership, created = Membership.objects.get_or_create(seat=seat, room=room)
    if created:
        membership.cursor = _first_cursor(seat, room)
        membership.save(update_fields=["cursor"])
    elif membership.left_at is not None:
        membership.left_at = None
        membership.save(update_fields=["left_at"])
    return membership


def _first_cursor(seat: Seat, room: Room) -> int:
    siblings = Membership.objects.filter(room=room, seat__agent_id=seat.agent_id).exclude(seat=seat)
    cursors = list(siblings.values_list("cursor", flat=True))
    recent = []
    if cursors:
        since = now() - rules.SIBLING_WINDOW
        # By sender_agent, not by the siblings' memberships: a sibling need not be a member
        # to write here (the bare agent name from cron, a webhook), and its entry is still
        # the other half of this agent's conversation.
        recent = list(
            Entry.objects.filter(room=room, sender_agent=seat.agent.name, ts__gte=since)
            .exclude(sender=seat.name)
            .values_list("seq", flat=True)
        )
    return rules.first_cursor(cursors, recent)


def join_room(*, seat: Seat, room: str, create: bool = False) -> dict:
    if create:
        room_row, created = create_room(name=room)
    else:
        room_row, created = get_room(room), False
    with transaction.atomic():
        _ensure_membership(seat, room_row)
    return {"room": room_row.name, "seat": seat.name, "created": created}


def part_room(*, seat: Seat, room: str) -> dict:
    room_row = get_room(room)
    updated = Membership.objects.filter(seat=seat, room=room_row, left_at__isnull=True).update(
        left_at=now()
    )
    if not updated:
        raise NotAMember(f"{seat.name} is not in room {room!r}; nothing to leave")
    return {"room": room_row.name, "seat": seat.name, "left": True}


def seat_rooms(seat: Seat) -> list[str]:
    return rooms_of_seats([seat.pk]).get(seat.pk, [])


def rooms_of_seats(seat_ids) -> dict[int, list[str]]:
    """The rooms (not archived) each seat is in, by name, in one query."""
    rooms: dict[int, list[str]] = {}
    pairs = (
        Membership.objects.filter(
            seat_id__in=seat_ids, left_at__isnull=True, room__archived_at__isnull=True
        )
        .order_by("room__name")
        .values_list("seat_id", "room__name")
    )
    for seat_id, name in pairs:
        rooms.setdefault(seat_id, []).append(name)
    return rooms


def list_rooms(*, archived: bool = False) -> list[dict]:
    at = now()
    rooms = Room.objects.filter(archived_at__isnull=not archived).order_by("name")
    result = []
    for room in rooms:
        members = Seat.objects.filter(
            memberships__room=room, memberships__left_at__isnull=True
        ).select_related("agent")
        seats = sorted(s.name for s in members)
        live = sorted(s.name for s in members if seat_liveness(s, at) == rules.LIVE)
        result.append(
            {
                "room": room.name,
                "entries": room.last_seq,
                "seats": seats,
                "live": live,
                "archived": iso(room.archived_at),
            }
        )
    return result


def archive_room(*, name: str, force: bool = False) -> dict:
    room = get_room(name)
    if name == settings.DEFAULT_ROOM:
        raise RuleError(f"{name!r} is the default room (AGENT_SALON_DEFAULT_ROOM); it stays")
    at = now()
    live = [
        m.seat.name
        for m in Membership.objects.filter(room=room, left_at__isnull=True).select_related("seat")
        if seat_liveness(m.seat, at) == rules.LIVE
    ]
    if live and not force:
        raise RuleError(
            f"room {name!r} has live seats ({', '.join(sorted(live))}); "
            "archive it anyway with --force"
        )
    Room.objects.filter(pk=room.pk).update(archived_at=at)
    return {"room": name, "archived": iso(at), "entriesKept": room.last_seq}


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


# ---------------------------------------------------------------- sending


def resolve_aliases(to: Sequence[str]) -> list[str]:
    aliases = dict(Alias.objects.filter(name__in=list(to)).values_list("name", "real"))
    aliases.update(settings.ALIASES)
    return rules.resolve_aliases(to, aliases)


def _room_for_send(seat: Seat, room: str | None, to: Sequence[str], create: bool) -> Room:
    if room:
        if create:
            return create_room(name=room)[0]
        return get_room(room)
    mine = seat_rooms(seat)
    if len(mine) == 1:
        return get_room(mine[0])
    if not mine:
        return get_room(settings.DEFAULT_ROOM)
    hint = ""
    if to:
        holding = [
            r
            for r in mine
            if Membership.objects.filter(room__name=r)
            .filter(Q(seat__name__in=to) | Q(seat__agent__name__in=to))
            .exists()
        ]
        if len(holding) == 1:
            hint = f"; {', '.join(to)} is only in {holding[0]!r}, so perhaps room={holding[0]}"
    raise RuleError(f"{seat.name} is in several rooms ({', '.join(mine)}): name the room{hint}")


def _known_names(room: Room) -> list[str]:
    """Every seat and agent name that has ever been in the room (parted ones too)."""
    names: set[str] = set()
    for seat_name, agent_name in Membership.objects.filter(room=room).values_list(
        "seat__name", "seat__agent__name"
    ):
        names.update((seat_name, agent_name, rules.base_agent(agent_name)))
    return sorted(names)


def _resolve_re(room: Room, re: str | None) -> Entry | None:
    if not re:
        return None
    text = str(re).strip()
    try:
        return Entry.objects.get(room=room, id=UUID(text))
    except (ValueError, Entry.DoesNotExist):
        pass
    # `re` may also name an entry by its timestamp, as printed by inbox and history.
    try:
        from django.utils.dateparse import parse_datetime

        ts = parse_datetime(text)
    except ValueError:
        ts = None
    if ts is not None:
        found = Entry.objects.filter(room=room, ts=ts).order_by("seq").first()
        if found is not None:
            return found
    raise RuleError(
        f"re={text[:64]!r} names no entry of room {room.name!r}; "
        "give the id (or ts) of an earlier entry in the same room"
    )


def _unstorable(text: str) -> str | None:
    if "\x00" in text:
        return "a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "a lone surrogate"
    return None


def _refuse_unstorable(content: str, meta: dict) -> None:
    """Refuse text no backend stores faithfully, naming the rule.

    PostgreSQL rejects NUL in text and in jsonb (a DataError, i.e. a 500, while SQLite
    stores it), and a lone surrogate in meta cannot be signed; both are refused on every
    backend so the same entry is accepted or refused everywhere.
    """
    problem = _unstorable(content)
    if problem:
        raise RuleError(f"content holds {problem}: remove it and send again")
    pending: list = [meta]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list | tuple):
            pending.extend(value)
        elif isinstance(value, str) and (problem := _unstorable(value)):
            raise RuleError(f"meta holds {problem}: remove it and send again")


def send_entry(
    *,
    seat: Seat,
    text: str,
    room: str | None = None,
    type: str | None = None,
    to: Iterable[str] = (),
    re: str | None = None,
    meta: dict | None = None,
    via: str = "cli",
    sender_addr: str = "",
    sender_session: str = "",
    create: bool = False,
) -> dict:
    """Store one entry and its wake decisions in one transaction; report who it wakes."""
    content = rules.validate_content(text)
    meta = rules.validate_meta(meta)
    _refuse_unstorable(content, meta)
    if isinstance(to, str):
        to = [to]  # one name, not its characters
    for key in ("source", "from", "ts", "id"):
        meta.pop(key, None)  # the server fills these in; a caller cannot
    entry_type = rules.normalize_type(type) if type else rules.type_from_meta(meta)
    names = [rules.validate_name(n.strip(), "addressee") for n in to if n and n.strip()]
    names = resolve_aliases(names)
    room_row = _room_for_send(seat, room, names, create)
    known = _known_names(room_row)
    for name in names:
        if name not in known:
            raise UnknownAddressee(
                rules.unknown_addressee_error(name, known, room_row.name),
                rules.closest_names(name, known),
            )
    re_entry = _resolve_re(room_row, re)

    with transaction.atomic():
        locked = Room.objects.select_for_update().get(pk=room_row.pk)
        seq = locked.last_seq + 1
        Room.objects.filter(pk=locked.pk).update(last_seq=seq)
        ts = _ms(now())
        entry = Entry(
            room=room_row,
            seq=seq,
            ts=ts,
            sender=seat.name,
            sender_agent=seat.agent.name,
            type=entry_type,
            to=names,
            re=re_entry.id if re_entry else None,
            content=content,
            meta=meta,
            via=via,
            sender_addr=sender_addr,
            sender_session=sender_session,
        )
        entry.signature = signing.sign(**_signed_fields(entry, room_row.name))
        entry.save(force_insert=True)
        report = _decide_and_record(entry, room_row, seat, re_entry, ts)
        Seat.objects.filter(pk=seat.pk).update(last_wrote=ts, last_seen=ts)
        woken_ids = report.pop("_woken_ids")
        transaction.on_commit(lambda: doorbell.ring(entry_id=entry.id, seat_ids=woken_ids))

    result = {
        "id": str(entry.id),
        "ts": iso(ts),
        "room": room_row.name,
        "from": seat.name,
        "type": entry_type,
        "to": names,
        "wakes": report["wakes"],
        "notice": report["notice"],
    }
    if not seat.session_id and via == "cli":
        result["warning"] = (
            f"no session id: writing as the bare agent name {seat.name!r}, which several "
            "processes may share; set CLAUDE_CODE_SESSION_ID to write as one seat"
        )
    return result


def _signed_fields(entry: Entry, room_name: str) -> dict:
    return {
        "id": entry.id,
        "room": room_name,
        "ts": entry.ts,
        "sender": entry.sender,
        "type": entry.type,
        "to": entry.to,
        "re": entry.re,
        "content": entry.content,
        "meta": entry.meta,
    }


def _decide_and_record(entry: Entry, room: Room, sender: Seat, re_entry, at) -> dict:
    facts = rules.EntryFacts(
        sender_seat=sender.name,
        type=entry.type,
        to=tuple(entry.to),
        re_author=re_entry.sender if re_entry else None,
    )
    readers = [
        m.seat
        for m in Membership.objects.filter(room=room, left_at__isnull=True)
        .exclude(seat=sender)
        .select_related("seat__agent")
    ]
    decisions, wakes, woken_ids, other_live = [], [], [], 0
    liveness = {}
    unwoken: Counter[str] = Counter()  # decisions with no ledger row: counted per entry
    reasons: list[str] = []  # for salon_wake_decisions_total, counted on commit
    for reader in readers:
        liveness[reader.pk] = seat_liveness(reader, at)
        if liveness[reader.pk] == rules.LIVE:
            other_live += 1
        decision = rules.decide_wake(facts, _seat_facts(reader), at)
        reasons.append(decision.reason)
        if decision.woken or decision.reason == "quiet":
            decisions.append(
                WakeDecision(
                    entry=entry,
                    seat=reader,
                    seat_name=reader.name,
                    room=room,
                    seq=entry.seq,
                    woken=decision.woken,
                    reason=decision.reason,
                    decided_at=at,
                    listener=_listener(reader, liveness[reader.pk], at),
                )
            )
        else:
            unwoken[decision.reason] += 1
        if decision.woken:
            woken_ids.append(reader.pk)
            if liveness[reader.pk] != rules.GONE:
                wakes.append(reader.name)
    WakeDecision.objects.bulk_create(decisions)
    if unwoken:
        _record_quietly(
            lambda: DecisionCount.objects.bulk_create(
                DecisionCount(entry=entry, room=room, reason=reason, count=n, decided_at=at)
                for reason, n in sorted(unwoken.items())
            )
        )
    transaction.on_commit(lambda: _count_decisions(reasons))

    statuses = []
    for name in entry.to:
        matching = [r for r in readers if rules.addressed_to([name], _seat_facts(r))]
        quiet = [r for r in matching if rules.quiet_active(r.quiet, r.quiet_until, at)]
        all_quiet = bool(matching) and len(quiet) == len(matching)
        statuses.append(
            rules.AddresseeStatus(
                name=name,
                live_seats=sum(1 for r in matching if liveness[r.pk] == rules.LIVE),
                quiet_until=max((r.quiet_until for r in quiet if r.quiet_until), default=None)
                if all_quiet
                else None,
                quiet_forever=all_quiet and any(r.quiet_until is None for r in quiet),
            )
        )
    notices = rules.send_notices(
        to_status=statuses,
        woken=sorted(wakes),
        other_live_seats=other_live,
        type=entry.type,
        to=entry.to,
        content_length=len(entry.content),
        long_chars=settings.LONG_CHARS,
    )
    return {"wakes": sorted(wakes), "notice": notices, "_woken_ids": woken_ids}


# ---------------------------------------------------------------- reading


def verify_entry(entry: Entry) -> bool:
    return signing.verify(entry.signature, **_signed_fields(entry, entry.room.name))


def entry_dict(entry: Entry, *, seat: Seat | None, woken: bool, clip_limit: int = 0) -> dict:
    """The wire form of an entry for one reader (forMe / wakes / sibling / tampered)."""
    facts = _seat_facts(seat) if seat else None
    content, clipped = entry.content, None
    if clip_limit and not woken:
        content, clipped = rules.clip(entry.content, clip_limit)
    data = {
        "id": str(entry.id),
        "room": entry.room.name,
        "seq": entry.seq,
        "ts": iso(entry.ts),
        "from": entry.sender,
        "type": entry.type,
        "to": list(entry.to),
        "re": str(entry.re) if entry.re else None,
        "content": content,
        "meta": entry.meta,
        "via": entry.via,
        "forMe": rules.for_me(entry.to, facts) if facts else not entry.to,
        "wakes": woken,
        "sibling": bool(
            seat
            and entry.sender != seat.name
            and rules.agent_of_seat(entry.sender) == seat.agent.name
        ),
        "tampered": not verify_entry(entry),
    }
    if clipped is not None:
        data["clipped"] = clipped
    return data


def _membership(seat: Seat, room: Room) -> Membership:
    membership = Membership.objects.filter(seat=seat, room=room, left_at__isnull=True).first()
    if membership is None:
        raise NotAMember(
            f"{seat.name} is not in room {room.name!r}; join it first (`salon join {room.name}`)"
        )
    return membership


def _room_for_read(seat: Seat, room: str | None) -> Room:
    if room:
        return get_room(room)
    mine = seat_rooms(seat)
    if len(mine) == 1:
        return get_room(mine[0])
    if not mine:
        return get_room(settings.DEFAULT_ROOM)
    raise RuleError(f"{seat.name} is in several rooms ({', '.join(mine)}): name the room")


def _woken_ids(seat: Seat, entries: Sequence[Entry]) -> set:
    return set(
        WakeDecision.objects.filter(
            seat=seat, woken=True, entry__in=[e.id for e in entries]
        ).values_list("entry_id", flat=True)
    )


def _inbox_query(seat: Seat, room: Room, cursor: int):
    """Entries by others after `cursor`, oldest first: `room = R AND seq > cursor ORDER BY
    seq`, served by the entry_room_seq index whatever the size of the room."""
    return Entry.objects.filter(room=room, seq__gt=cursor).exclude(sender=seat.name).order_by("seq")


def read_inbox(
    *, seat: Seat, room: str | None = None, limit: int = 20, advance: bool = True
) -> dict:
    """Entries by others after this seat's cursor, oldest first; moves the cursor only
    over the entries returned (advance=False is `peek`). Counts are as of the call."""
    if limit < 1:
        raise RuleError("limit must be 1 or more")
    room_row = _room_for_read(seat, room)
    with transaction.atomic():
        membership = _membership(seat, room_row)
        start = membership.cursor
        unread = _inbox_query(seat, room_row, start)
        batch = list(unread.select_related("room")[:limit])
        counts = _unread_counts(seat, room_row, start, unread)
        if advance and batch:
            Membership.objects.filter(pk=membership.pk, cursor__lt=batch[-1].seq).update(
                cursor=batch[-1].seq
            )
        woken = _woken_ids(seat, batch)
        entries = [
            entry_dict(e, seat=seat, woken=e.id in woken, clip_limit=settings.INBOX_CHARS)
            for e in batch
        ]
        if entries:  # counted in the same commit: no second write, no second fsync
            _record_quietly(lambda: _count_reading(seat, room_row, entries))
    return {
        "room": room_row.name,
        "seat": seat.name,
        "entries": entries,
        "more": max(counts["unread"] - len(batch), 0),
        **counts,
        "tampered": sum(1 for e in entries if e["tampered"]),
    }


def _unread_counts(seat: Seat, room: Room, cursor: int, unread) -> dict:
    facts = _seat_facts(seat)
    tos = list(unread.values_list("to", flat=True))
    return {
        "unread": len(tos),
        "unreadForMe": sum(1 for to in tos if rules.for_me(to, facts)),
        "unreadWaking": WakeDecision.objects.filter(
            seat=seat, room=room, woken=True, seq__gt=cursor
        ).count(),
    }


def unread_counts(*, seat: Seat) -> list[dict]:
    """Per room of this seat: unread, unreadForMe, unreadWaking (cursor untouched)."""
    result = []
    for membership in Membership.objects.filter(
        seat=seat, left_at__isnull=True, room__archived_at__isnull=True
    ).select_related("room"):
        unread = _inbox_query(seat, membership.room, membership.cursor)
        result.append(
            {
                "room": membership.room.name,
                **_unread_counts(seat, membership.room, membership.cursor, unread),
            }
        )
    return sorted(result, key=lambda r: (-r["unreadWaking"], -r["unread"], r["room"]))


def mark_unread(*, seat: Seat, room: str, count: int = 1) -> dict:
    """Move the cursor back over the last `count` entries by others that were read."""
    if count < 1:
        raise RuleError("the number of entries to mark unread must be 1 or more")
    room_row = get_room(room)
    with transaction.atomic():
        membership = _membership(seat, room_row)
        seqs = list(
            Entry.objects.filter(room=room_row, seq__lte=membership.cursor)
            .exclude(sender=seat.name)
            .order_by("-seq")
            .values_list("seq", flat=True)[:count]
        )
        cursor = seqs[-1] - 1 if seqs else membership.cursor
        Membership.objects.filter(pk=membership.pk).update(cursor=cursor)
    return {"room": room_row.name, "seat": seat.name, "markedUnread": len(seqs)}


def read_history(
    *,
    seat: Seat | None,
    room: str | None = None,
    limit: int = 20,
    sender: str | None = None,
    broadcast_only: bool = False,
) -> dict:
    """The last `limit` entries including own, oldest first, never clipped; no cursor moves.

    broadcast_only: what a caller with no identity (an unlabeled MCP session) may read.
    """
    if limit < 1:
        raise RuleError("limit must be 1 or more")
    room_row = _room_for_read(seat, room) if seat else get_room(room or settings.DEFAULT_ROOM)
    query = Entry.objects.filter(room=room_row).select_related("room")
    if broadcast_only:
        query = query.filter(to=[])
    if sender:
        sender = rules.validate_name(sender, "sender")
        query = query.filter(Q(sender=sender) | Q(sender_agent=sender))
    batch = list(query.order_by("-seq")[:limit])[::-1]
    woken = _woken_ids(seat, batch) if seat else set()
    entries = [entry_dict(e, seat=seat, woken=e.id in woken) for e in batch]
    return {
        "room": room_row.name,
        "entries": entries,
        "tampered": sum(1 for e in entries if e["tampered"]),
    }


# ---------------------------------------------------------------- focus, quiet


def _focus_dict(seat: Seat, at: datetime) -> dict | None:
    if not seat.focus_text:
        return None
    return {
        "text": seat.focus_text,
        "files": list(seat.focus_files or []),
        "phase": seat.focus_phase or None,
        "ts": iso(seat.focus_ts),
        "stale": rules.focus_is_stale(seat.focus_ts, at),
    }


def declare_focus(
    *,
    seat: Seat,
    text: str | None = None,
    files: Sequence[str] | None = None,
    phase: str | None = None,
) -> dict:
    """focus: a new sentence (drops the old phase unless one is given), `phase` or `files`
    alone re-declare the standing sentence, "" clears it, nothing at all reads it back."""
    at = now()
    if isinstance(files, str):  # `--files a,b` passed through as typed: a list, not letters
        files = [f.strip() for f in files.split(",") if f.strip()]
    seat.refresh_from_db(fields=["focus_text", "focus_files", "focus_phase", "focus_ts"])
    if text is None and files is None and phase is None:
        return {"seat": seat.name, "focus": _focus_dict(seat, at)}
    phase = rules.validate_phase(phase) if phase else None
    if text is not None and not text.strip():
        seat.focus_text, seat.focus_files, seat.focus_phase, seat.focus_ts = "", [], "", None
    elif text is not None:
        if len(text) > 500:
            raise RuleError("a focus is one sentence (at most 500 characters); shorten it")
        seat.focus_text, seat.focus_files = text.strip(), list(files or [])
        seat.focus_phase, seat.focus_ts = phase or "", at
    else:
        if not seat.focus_text:
            raise RuleError(
                'there is no focus to re-declare; give the sentence: focus "what I am on"'
            )
        if phase:
            seat.focus_phase = phase
        if files is not None:
            seat.focus_files = list(files)
        seat.focus_ts = at
    seat.save(update_fields=["focus_text", "focus_files", "focus_phase", "focus_ts"])
    return {"seat": seat.name, "focus": _focus_dict(seat, at)}


def set_quiet(*, seat: Seat, duration: str | timedelta | None = None, off: bool = False) -> dict:
    at = now()
    if off:
        seat.quiet, seat.quiet_until = False, None
    else:
        if isinstance(duration, str):
            duration = rules.parse_duration(duration)
        seat.quiet, seat.quiet_until = True, (at + duration if duration else None)
    seat.save(update_fields=["quiet", "quiet_until"])
    active = rules.quiet_active(seat.quiet, seat.quiet_until, at)
    return {"seat": seat.name, "quiet": active, "quietUntil": iso(seat.quiet_until)}


# ---------------------------------------------------------------- agents, prune


def agents_projection(*, at: datetime | None = None) -> dict:
    """The `salon.agents/1` contract: exactly these keys, hand-written on purpose."""
    at = at or now()
    seats_by_agent: dict[int, list[Seat]] = {}
    for seat in Seat.objects.select_related("agent").order_by("agent__name", "name"):
        seats_by_agent.setdefault(seat.agent_id, []).append(seat)
    rooms_by_seat: dict[int, list[str]] = {}
    for seat_id, room in Membership.objects.filter(
        left_at__isnull=True, room__archived_at__isnull=True
    ).values_list("seat_id", "room__name"):
        rooms_by_seat.setdefault(seat_id, []).append(room)
    agents = []
    for agent in Agent.objects.filter(pk__in=seats_by_agent).order_by("name"):
        seats = seats_by_agent[agent.pk]
        seen = [s.last_seen for s in seats if s.last_seen]
        wrote = [s.last_wrote for s in seats if s.last_wrote]
        last_seen = max(seen) if seen else None
        agents.append(
            {
                "agent": agent.name,
                "host": agent.host,
                "rooms": sorted({r for s in seats for r in rooms_by_seat.get(s.pk, [])}),
                "lastSeen": iso(last_seen),
                "silentMinutes": int((at - max(wrote)).total_seconds() // 60) if wrote else None,
                "seats": [
                    {
                        "seat": s.name,
                        "session": s.session_id or None,
                        "liveness": seat_liveness(s, at),
                        "lastSeen": iso(s.last_seen),
                        "lastWrote": iso(s.last_wrote),
                        "quiet": rules.quiet_active(s.quiet, s.quiet_until, at),
                        "quietUntil": iso(s.quiet_until)
                        if rules.quiet_active(s.quiet, s.quiet_until, at)
                        else None,
                        "focus": _focus_dict(s, at),
                    }
                    for s in seats
                ],
            }
        )
    return {"schema": AGENTS_SCHEMA, "generatedAt": iso(at), "agents": agents}


def prune(*, days: int = 7, dry_run: bool = False) -> dict:
    """Forget seats that are gone and silent for `days`, and delete the stats ledger's rows
    older than AGENT_SALON_STATS_DAYS (prune_ledger); never touches an entry."""
    if days < 0:
        raise RuleError("--days must be 0 or more")
    at = now()
    cutoff = at - timedelta(days=days)
    candidates = (
        Seat.objects.filter(
            Q(last_seen__isnull=True) | Q(last_seen__lt=cutoff),
            Q(last_wrote__isnull=True) | Q(last_wrote__lt=cutoff),
        )
        .filter(Q(live_until__isnull=True) | Q(live_until__lt=at))
        .select_related("agent")
    )
    names = sorted(s.name for s in candidates if seat_liveness(s, at) == rules.GONE)
    if not dry_run and names:
        with transaction.atomic():
            Seat.objects.filter(name__in=names).delete()
            Agent.objects.filter(seats__isnull=True).delete()
    ledger = prune_ledger(dry_run=dry_run, at=at)
    return {"seats": names, "dryRun": dry_run, "days": days, "ledger": ledger}


PRUNE_BATCH = 5000


def prune_ledger(*, dry_run: bool = False, at: datetime | None = None) -> dict:
    """Delete the ledger rows (wake decisions, decision counts, read counts) older than
    AGENT_SALON_STATS_DAYS, in batches of PRUNE_BATCH (short write locks: hooks and sends
    go on meanwhile). Entries are never touched.

    A waking entry whose ledger row is gone no longer counts as waking for that seat: it
    is not pushed, announced or nudged any more, and inbox shows it like any other entry
    (by then the seat has left it unread for the whole retention).
    """
    days = settings.STATS_DAYS
    cutoff = (at or now()) - timedelta(days=days)
    tables = (
        ("decisions", WakeDecision.objects.filter(decided_at__lt=cutoff)),
        ("decisionCounts", DecisionCount.objects.filter(decided_at__lt=cutoff)),
        # an hour's counter is older than the cutoff only when all of its hour is
        ("readCounts", ReadCount.objects.filter(hour__lt=cutoff - timedelta(hours=1))),
    )
    result: dict = {"retentionDays": days, "olderThan": iso(cutoff)}
    for key, query in tables:
        if dry_run:
            result[key] = query.count()
            continue
        deleted = 0
        while True:
            with transaction.atomic():
                batch = list(query.values_list("pk", flat=True)[:PRUNE_BATCH])
                if batch:
                    query.model.objects.filter(pk__in=batch).delete()
            deleted += len(batch)
            if len(batch) < PRUNE_BATCH:
                break
        result[key] = deleted
    return result


# ---------------------------------------------------------------- tokens


def issue_token(*, label: str) -> str:
    label = rules.validate_name(label, "label")
    token = "salon_" + secrets.token_urlsafe(32)
    Token.objects.create(label=label, token_hash=signing.hash_token(token))
    return token


def revoke_tokens(*, label: str) -> int:
    label = rules.validate_name(label, "label")
    return Token.objects.filter(label=label, revoked_at__isnull=True).update(revoked_at=now())


def list_tokens() -> list[dict]:
    rows = (
        Token.objects.filter(revoked_at__isnull=True)
        .values("label")
        .annotate(count=Count("id"), newest=Max("created_at"))
        .order_by("label")
    )
    return [{"label": r["label"], "tokens": r["count"], "newest": iso(r["newest"])} for r in rows]


def token_problem(*, label: str | None, token: str | None) -> str | None:
    """None when the caller may proceed; else what is wrong and how to fix it."""
    active = Token.objects.filter(revoked_at__isnull=True)
    needed = settings.REQUIRE_TOKENS or (label and active.filter(label=label).exists())
    if not needed:
        return None
    if not label:
        # Tokens belong to a label, so a caller without one can never present a valid one.
        return (
            "AGENT_SALON_REQUIRE_TOKENS=1: every caller needs a label and its bearer token; "
            "add ?label=<agent> to the URL and send 'Authorization: Bearer <token>' "
            "(issue one with `salon token issue <agent>`)"
        )
    if not token:
        return (
            f"label {label!r} needs a bearer token: send 'Authorization: Bearer <token>' "
            f"(issue one with `salon token issue {label or 'LABEL'}`)"
        )
    if not active.filter(label=label, token_hash=signing.hash_token(token)).exists():
        return (
            f"the bearer token is not valid for label {label!r}; "
            f"issue a new one with `salon token issue {label or 'LABEL'}`"
        )
    return None


# ---------------------------------------------------------------- the push ledger
#
# A seat is told about a waking entry at most once per channel: pushed to its stream
# (push_seq/pushed_at), announced by `salon wait` or the wait tool (announced_at), or
# nudged by the Stop hook (nudged_at). Claims are conditional updates, so two workers
# can never both claim the same row.


def _unread_wakes(seat: Seat, room: Room | None = None):
    """Waking ledger rows of this seat for entries still after its cursor, oldest first."""
    rows = WakeDecision.objects.filter(seat=seat, woken=True)
    cursors = Membership.objects.filter(seat=seat, left_at__isnull=True)
    if room is not None:
        rows, cursors = rows.filter(room=room), cursors.filter(room=room)
    after = Q(pk__in=[])
    for room_id, cursor in cursors.values_list("room_id", "cursor"):
        after |= Q(room_id=room_id, seq__gt=cursor)
    return rows.filter(after).select_related("entry__room").order_by("decided_at", "seq")


def claim_pushes(*, seat: Seat, limit: int = 100) -> tuple[list[tuple[int, Entry]], int]:
    """Claim waking, unread entries never pushed nor announced to this seat, oldest first.

    Returns ([(push_seq, entry)], how many more are waiting beyond `limit`). The push_seq
    is the SSE event id: per seat, increasing in the order the pushes were claimed.
    """
    return claim_pushes_of_seats(limits={seat.pk: limit}).get(seat.pk, ([], 0))


# Seats claimed in one transaction: bounds the statement's parameters (SQLite) and how
# long one claim holds the write lock.
CLAIM_CHUNK = 500


def claim_pushes_of_seats(
    *, limits: dict[int, int]
) -> dict[int, tuple[list[tuple[int, Entry]], int]]:
    """claim_pushes for many seats at once: {seat id: limit} → {seat id: (claimed, more)}.

    A broadcast rings every woken seat at the same moment; claiming them one by one cost a
    transaction (and an fsync) per seat, 2.3-3.5 s for 500 streams (bench/RESULTS.md §5).
    Here every CLAIM_CHUNK seats take one transaction with set-based statements: one
    read of their pending ledger rows, one of their push counters, and two executemany
    UPDATEs. Seats with nothing to claim are absent from the result.

    Once only, across workers and restarts: the seats' rows are locked first (FOR UPDATE
    on PostgreSQL; on SQLite the IMMEDIATE transaction holds the write lock), so claims of
    one seat are serialized and the rows read after the lock are the truth. Each UPDATE
    still requires push_seq IS NULL, and if any of them matched nothing (which only a
    claimer that does not lock the seat could cause) the whole claim is rolled back: a
    push may be delayed to the next ring, never duplicated.
    """
    claimed: dict[int, tuple[list[tuple[int, Entry]], int]] = {}
    seat_ids = sorted(limits)
    for start in range(0, len(seat_ids), CLAIM_CHUNK):
        chunk = {pk: limits[pk] for pk in seat_ids[start : start + CLAIM_CHUNK]}
        claimed.update(_claim_chunk(chunk))
    return claimed


# The rows to push: waking, never pushed nor announced, after the seat's cursor in a room
# it is still in. Written in SQL because the plan matters: each membership drives one
# range scan of the index wake_seat_room_seq (seat, room, seq > cursor), so rows already
# read are never visited, however many there are (CROSS JOIN keeps SQLite from starting
# at the ledger; PostgreSQL plans it as an inner join). Built with the ORM, the same
# filter is a per-seat OR that cost ~0.5 ms of query compilation per seat.
_PENDING = """
    FROM {membership} m CROSS JOIN {wake} w
    WHERE m.seat_id IN ({seats}) AND m.left_at IS NULL
      AND w.seat_id = m.seat_id AND w.room_id = m.room_id AND w.seq > m.cursor
      AND w.woken AND w.push_seq IS NULL AND w.announced_at IS NULL
"""
# Per seat the oldest `limit` (rank), with the seat's total (waiting).
_PENDING_OLDEST = """
    SELECT id, seat_id, entry_id, rank, waiting FROM (
        SELECT w.id, w.seat_id, w.entry_id,
               ROW_NUMBER() OVER (
                   PARTITION BY w.seat_id ORDER BY w.decided_at, w.seq, w.id
               ) AS rank,
               COUNT(*) OVER (PARTITION BY w.seat_id) AS waiting
        {pending}
    ) oldest
    WHERE rank <= %s
    ORDER BY seat_id, rank
"""


def _pending_sql(template: str, seat_ids) -> str:
    pending = _PENDING.format(
        membership=Membership._meta.db_table,
        wake=WakeDecision._meta.db_table,
        seats=", ".join(["%s"] * len(seat_ids)),
    )
    return template.format(pending=pending)


def _anything_pending(seat_ids: list[int]) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(_pending_sql("SELECT 1 {pending} LIMIT 1", seat_ids), seat_ids)
        return cursor.fetchone() is not None


def _oldest_pending(limits: dict[int, int]) -> list[tuple[int, int, UUID, int, int]]:
    """[(row id, seat id, entry id, rank, waiting)] for the seats, by seat then age."""
    seat_ids = sorted(limits)
    with connection.cursor() as cursor:
        cursor.execute(_pending_sql(_PENDING_OLDEST, seat_ids), [*seat_ids, max(limits.values())])
        return cursor.fetchall()


def _claim_chunk(limits: dict[int, int]) -> dict[int, tuple[list[tuple[int, Entry]], int]]:
    # Look before locking: every keep-alive and every ring asks, and on SQLite a write
    # transaction with nothing to claim would still take the database's write lock.
    if not _anything_pending(sorted(limits)):
        return {}
    at = connection.ops.adapt_datetimefield_value(now())  # as the ORM would store it
    claimed: dict[int, tuple[list[tuple[int, Entry]], int]] = {}
    with transaction.atomic():
        counters = dict(
            Seat.objects.select_for_update()
            .filter(pk__in=limits)
            .order_by("pk")  # one lock order for every claimer: no deadlock
            .values_list("pk", "push_counter")
        )
        rows = [row for row in _oldest_pending(limits) if row[3] <= limits[row[1]]]
        # A broadcast's rows all name one entry: each entry is read (and later rendered)
        # once, however many seats it goes to.
        entries = Entry.objects.select_related("room").in_bulk({row[2] for row in rows})
        row_updates, counter_updates = [], {}
        for row_id, seat_id, entry_id, _, waiting in rows:
            if seat_id not in counters:
                continue
            counters[seat_id] += 1
            row_updates.append((counters[seat_id], at, row_id))
            counter_updates[seat_id] = counters[seat_id]
            pushes, _ = claimed.get(seat_id, ([], 0))
            pushes.append((counters[seat_id], entries[_uuid(entry_id)]))
            claimed[seat_id] = (pushes, max(0, waiting - limits[seat_id]))
        if not row_updates:
            return {}
        with connection.cursor() as cursor:
            cursor.executemany(
                f"UPDATE {WakeDecision._meta.db_table} SET push_seq = %s, pushed_at = %s "
                "WHERE id = %s AND push_seq IS NULL",
                row_updates,
            )
            if cursor.rowcount != len(row_updates):
                raise ClaimConflict(
                    f"{len(row_updates) - cursor.rowcount} of {len(row_updates)} pushes were "
                    "claimed by someone else; nothing claimed, the next ring retries"
                )
            cursor.executemany(
                f"UPDATE {Seat._meta.db_table} SET push_counter = %s WHERE id = %s",
                [(value, pk) for pk, value in counter_updates.items()],
            )
    return claimed


def _uuid(value) -> UUID:
    """An entry id as a raw cursor returns it: a UUID (PostgreSQL) or 32 hex digits."""
    return value if isinstance(value, UUID) else UUID(value)


class ClaimConflict(RuntimeError):
    """A row to push was claimed by a claimer that did not lock its seat (rolled back)."""


def replay_pushes(*, seat: Seat, after: int) -> list[tuple[int, Entry]]:
    """Pushes to this seat after SSE event id `after`, in order (Last-Event-ID resume)."""
    rows = (
        WakeDecision.objects.filter(seat=seat, push_seq__gt=after)
        .select_related("entry__room")
        .order_by("push_seq")
    )
    return [(row.push_seq, row.entry) for row in rows]


def collect_wakes(*, seat: Seat, room: str | None = None, limit: int = 20) -> dict:
    """The waking, unread entries this seat has not been told about (by a push, `salon
    wait` or an earlier wait), oldest first; marks them announced. Cursor untouched."""
    room_row = get_room(room) if room else None
    at = now()
    rows = list(
        _unread_wakes(seat, room_row).filter(push_seq__isnull=True, announced_at__isnull=True)[
            :limit
        ]
    )
    announced = [
        row
        for row in rows
        if WakeDecision.objects.filter(pk=row.pk, announced_at__isnull=True).update(announced_at=at)
    ]
    entries = [entry_dict(row.entry, seat=seat, woken=True) for row in announced]
    return {
        "seat": seat.name,
        "entries": entries,
        "tampered": sum(1 for e in entries if e["tampered"]),
    }


def record_deliveries(*, delivered: dict[str, list[str]], failed: dict[str, list[str]]) -> None:
    """Append seat names to entries' delivered_to / delivery_errors (entry id → seats)."""
    with transaction.atomic():
        for entry_id in set(delivered) | set(failed):
            entry = Entry.objects.select_for_update().filter(pk=entry_id).first()
            if entry is None:
                continue
            entry.delivered_to = sorted(set(entry.delivered_to) | set(delivered.get(entry_id, [])))
            entry.delivery_errors = sorted(
                set(entry.delivery_errors) | set(failed.get(entry_id, []))
            )
            entry.save(update_fields=["delivered_to", "delivery_errors"])


def merge_silent_seat(*, old: Seat, into: Seat) -> bool:
    """Drop a seat that never wrote, after `into` joins the rooms it was in (checkin)."""
    if old.pk == into.pk or Seat.objects.filter(pk=old.pk, last_wrote__isnull=False).exists():
        return False
    with transaction.atomic():
        for room in Room.objects.filter(memberships__seat=old, memberships__left_at__isnull=True):
            _ensure_membership(into, room)
        Seat.objects.filter(pk=old.pk).delete()
    return True


# ---------------------------------------------------------------- webhook


def agent_rooms(*, agent: str) -> list[str]:
    """The visible rooms any seat of `agent` is in (parted ones excluded), by name.

    /notify writes, for a label that names no room, into the label's only room (SPEC §10).
    """
    return list(
        Membership.objects.filter(
            seat__agent__name=agent, left_at__isnull=True, room__archived_at__isnull=True
        )
        .values_list("room__name", flat=True)
        .distinct()
        .order_by("room__name")
    )


# ---------------------------------------------------------------- stats recording
#
# What `salon stats` reads (bus.stats) is written where it happens: the decisions with
# the entry (_decide_and_record), what inbox handed out with the read (_count_reading),
# a Stop hook's visit with its claim (claim_nudges); pushes, announcements and held turns
# are the ledger's own pushed_at / announced_at / nudged_at. Recording never fails the
# operation it describes: each write runs in a savepoint of the caller's transaction and
# an error is swallowed (counted in salon_stats_record_failures_total, never printed);
# none waits for another caller's row (inserts, or a counter row of the caller's own).

LISTENER_LIVE, LISTENER_HOOK, LISTENER_NONE = "live", "hook", "none"


def _listener(seat: Seat, liveness: str, at: datetime) -> str:
    """What could tell this seat about a wake-up decided at `at`: `live` (an open MCP
    stream, a running stdio server or a running `salon wait`: each keeps live_until
    ahead), `hook` (a Stop hook has run for it and it is not gone), else `none`."""
    if seat.live_until and seat.live_until > at:
        return LISTENER_LIVE
    if seat.hook_seen_at and liveness != rules.GONE:
        return LISTENER_HOOK
    return LISTENER_NONE


def _record_quietly(write) -> None:
    try:
        with transaction.atomic():  # a savepoint: a failure leaves the caller's work intact
            write()
    except Exception:
        try:
            from salon import metrics

            metrics.inc("salon_stats_record_failures_total")
        except Exception:  # pragma: no cover - metrics are best effort
            pass


_CLIP_TAIL = re.compile(
    re.escape(" " + rules._CLIP_TAIL).replace(re.escape("{n}"), r"([0-9]+)") + r"\Z"
)


def _held_back(entry: dict) -> int:
    """Characters of a clipped entry that inbox did not hand out (the part cut off)."""
    match = _CLIP_TAIL.search(entry["content"])
    if match:
        return int(match.group(1))
    return max(entry["clipped"] - len(entry["content"]), 0)


def _count_reading(seat: Seat, room: Room, entries: list[dict]) -> None:
    """Bump this seat's counter row of the hour for `room` (insert it the first time)."""
    at = now()
    hour = at.replace(minute=0, second=0, microsecond=0)
    clipped = [e for e in entries if "clipped" in e]
    numbers = {
        "reads": 1,
        "entries": len(entries),
        "chars": sum(len(e["content"]) for e in entries),
        "clipped": len(clipped),
        "chars_held_back": sum(_held_back(e) for e in clipped),
    }
    row = ReadCount.objects.filter(room=room, seat_name=seat.name, hour=hour)
    bump = {name: F(name) + value for name, value in numbers.items()}
    if row.update(last_at=at, **bump):
        return
    try:
        with transaction.atomic():
            ReadCount.objects.create(
                room=room, seat_name=seat.name, hour=hour, first_at=at, last_at=at, **numbers
            )
    except IntegrityError:  # another read of this seat created it first
        row.update(last_at=at, **bump)


def _count_decisions(reasons: list[str]) -> None:
    """Feed salon_wake_decisions_total{reason}; a metrics failure never fails a send."""
    try:
        from salon import metrics

        metrics.count_decisions(reasons)
    except Exception:  # pragma: no cover - metrics are best effort
        pass


# ---------------------------------------------------------------- hooks
#
# What makes an entry *noticed* in Claude Code, besides the push: the Stop hook's nudge
# (WakeDecision.nudged_at), `salon wait`'s announcement (announced_at) and the Stop hook's
# one-time request for a focus (Seat.focus_asked_at). Every claim is a conditional
# UPDATE … WHERE <column> IS NULL, so two hooks (or two waits) never both claim a row, and
# none of them moves a cursor. While a seat is quiet nothing is claimed for it: the entries
# stay unclaimed and are nudged or announced once the quiet is over.


def _quiet_now(seat: Seat, at: datetime) -> bool:
    seat.refresh_from_db(fields=["quiet", "quiet_until"])
    return rules.quiet_active(seat.quiet, seat.quiet_until, at)


def claim_nudges(*, seat: Seat, limit: int = 100) -> list[Entry]:
    """Stop hook: the waking, unread entries this seat was never nudged about, oldest
    first, each marked nudged. A nudge is not a delivery: the cursor does not move."""
    at = now()
    # A Stop hook runs for this seat: it can hold a turn (the stats' "listener" = hook).
    _record_quietly(lambda: Seat.objects.filter(pk=seat.pk).update(hook_seen_at=at))
    if _quiet_now(seat, at):
        return []
    rows = list(_unread_wakes(seat).filter(nudged_at__isnull=True)[:limit])
    return [
        row.entry
        for row in rows
        if WakeDecision.objects.filter(pk=row.pk, nudged_at__isnull=True).update(nudged_at=at)
    ]


def announce_wakes(
    *, seat: Seat, rooms: Sequence[str] | None = None, limit: int = 20
) -> list[dict]:
    """`salon wait`: the waking, unread entries never announced to this seat (in `rooms`,
    if given), oldest first, each marked announced. Cursor untouched.

    An entry already pushed to a stream of the seat is announced all the same: the server
    cannot know whether Claude Code showed the push (channels may be off on its side),
    and the Monitor must get every claim noticed without them."""
    at = now()
    if _quiet_now(seat, at):
        return []
    pending = _unread_wakes(seat).filter(announced_at__isnull=True)
    if rooms:
        pending = pending.filter(room__in=[get_room(name) for name in rooms])
    announced = [
        row
        for row in pending[:limit]
        if WakeDecision.objects.filter(pk=row.pk, announced_at__isnull=True).update(announced_at=at)
    ]
    return [entry_dict(row.entry, seat=seat, woken=True) for row in announced]


def live_others(*, seat: Seat) -> dict[str, list[str]]:
    """{room: [the other live seats in it]} for each room of this seat that has any."""
    at = now()
    result: dict[str, list[str]] = {}
    for membership in (
        Membership.objects.filter(
            room__memberships__seat=seat,
            room__memberships__left_at__isnull=True,
            room__archived_at__isnull=True,
            left_at__isnull=True,
        )
        .exclude(seat=seat)
        .select_related("seat__agent", "room")
        .order_by("room__name", "seat__name")
    ):
        if seat_liveness(membership.seat, at) == rules.LIVE:
            result.setdefault(membership.room.name, []).append(membership.seat.name)
    return result


def live_siblings(*, seat: Seat) -> list[str]:
    """The other live seats of this seat's agent, in any room or none."""
    at = now()
    siblings = Seat.objects.filter(agent_id=seat.agent_id).exclude(pk=seat.pk).order_by("name")
    return [s.name for s in siblings.select_related("agent") if seat_liveness(s, at) == rules.LIVE]


def ask_focus_once(*, seat: Seat) -> dict[str, list[str]]:
    """Stop hook: once ever per seat, when it has no focus and someone else is live in one
    of its rooms, claim the request (focus_asked_at) and return {room: [live others]};
    otherwise return {} and mark nothing."""
    seat.refresh_from_db(fields=["focus_text", "focus_asked_at"])
    if seat.focus_text or seat.focus_asked_at:
        return {}
    others = live_others(seat=seat)
    if not others:
        return {}
    claimed = Seat.objects.filter(pk=seat.pk, focus_asked_at__isnull=True).update(
        focus_asked_at=now()
    )
    return others if claimed else {}
