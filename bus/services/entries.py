"""Sending: one entry and its per-seat wake decisions, stored in one transaction.
Landing: the same for an entry written on another machine (`land_entry`, via the relay).

Ordering: the entry's seq is taken from its room's counter under the room row's lock, so
within a room seq order is commit order on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from bus import bell, rules, signals, signing, wire
from bus.models import (
    Alias,
    DecisionCount,
    Entry,
    Room,
    RosterStamp,
    Seat,
    WakeDecision,
)
from bus.rules import RuleError, UnknownAddressee
from bus.services import deciding, recording, requests, rooms, seats, telling, triage
from bus.services import roster as rosters
from patches.django import CompiledInsert


def send_entry(
    *,
    seat: Seat,
    text: str,
    room: str | Room | None = None,
    type: str | None = None,
    to: Iterable[str] = (),
    re: str | None = None,
    meta: dict | None = None,
    via: str = "cli",
    sender_addr: str = "",
    sender_session: str = "",
    create: bool = False,
) -> dict:
    """Store one entry and its wake decisions in one transaction; report who it wakes.

    `to` is a list of seat or agent names (an adapter splits what its caller typed); with
    no `room`, the entry goes to the seat's primary room (bus.services.rooms)."""
    content = rules.validate_content(text)
    meta = rules.validate_meta(meta)
    _refuse_unstorable(content, meta)
    for key in ("source", "from", "ts", "id"):
        meta.pop(key, None)  # the server fills these in; a caller cannot
    entry_type = rules.normalize_type(type) if type else rules.type_from_meta(meta)
    names = [rules.validate_name(n.strip(), "addressee") for n in to if n and n.strip()]
    names = rules.validate_addressees(resolve_aliases(list(dict.fromkeys(names))))
    asked = None
    if "ask" in meta:
        # A cross-project request: evaluated by the receiving project's policy now, before
        # any wake decision for it (a file read, outside the transaction).
        asked = requests.ask_of_send(meta, entry_type if type else None, names, seat.name)
        entry_type = "REQUEST"
    room_row = rooms.room_for_write(seat, room, create=create)
    re_entry = _resolve_re(room_row, re)

    with transaction.atomic():
        seq, stamp = _next_seq(room_row)
        # Who has ever been in the room, as of the room's lock: the addressee check and
        # the wake decisions use the same roster. An unknown addressee is refused here,
        # before anything is written (the transaction rolls back).
        roster = rosters.of_room(room_row.pk, stamp)
        if names:
            known = roster.known_names
            for name in names:
                if name not in known:
                    listed = sorted(known)
                    raise UnknownAddressee(
                        rules.unknown_addressee_error(name, listed, room_row.name),
                        rules.closest_names(name, listed),
                    )
        ts = _to_ms(timezone.now())
        entry = _signed_entry(
            room=room_row,
            seq=seq,
            ts=ts,
            seat=seat,
            type=entry_type,
            to=names,
            re=re_entry.id if re_entry else None,
            content=content,
            meta=meta,
            via=via,
            sender_addr=sender_addr,
            sender_session=sender_session,
        )
        decided = deciding.decide(entry, room_row, seat, re_entry, ts, roster)
        if asked is not None:
            deciding.hold(decided, asked)
        _record(entry, decided, sender=seat)
        if asked is not None and asked.verdict is not None:
            requests.record(entry=entry, asked=asked, writer=seat.name, at=ts)
        _mark_wrote(seat, ts)
        wakes, notices = decided.wakes, decided.notices

    report = wire.send_report(entry, seat, wakes, notices, decided.there)
    later = seats.told_at_next_turn(wakes)
    if later:
        report["toldAtNextTurn"] = later
        report["notice"] = [*report["notice"], rules.next_turn_notice(later)]
    if asked is not None:
        # Served, denied or judged already when this process settled it on commit.
        report.update(requests.report_of(asked))
        report.update(requests.outcome_of(entry.id))
    if not seat.session_id and via == "cli":
        report["warning"] = (
            f"no session id: writing as the bare agent name {seat.name!r}, which several "
            "processes may share; set CLAUDE_CODE_SESSION_ID to write as one seat"
        )
    return report


# What every send writes, the INSERTs compiled once per connection (patches.django).
_ENTRY_INSERT = CompiledInsert(Entry)
_WAKE_INSERT = CompiledInsert(WakeDecision)
_COUNT_INSERT = CompiledInsert(DecisionCount)


def _announce_on_commit(entry: Entry, room: Room) -> None:
    transaction.on_commit(
        lambda: signals.entry_stored.send(
            sender=Entry, room=room.name, seq=entry.seq, via=entry.via
        )
    )


def land_entry(
    *,
    id: UUID,
    room: str,
    ts: datetime,
    sender: str,
    type: str,
    to: Sequence[str] = (),
    re: UUID | None = None,
    content: str,
    meta: dict | None = None,
    sender_addr: str = "",
) -> dict | None:
    """Store an entry written on another machine, as it was written there (docs/RELAY.md).

    Its id, time and sender (a remote seat, `agent@device#sid8`) are kept and it is stored
    with via=relay; the signature is this store's own, over the landed fields. The seq is
    this room's next, and the wake decisions are taken here, now, exactly as for a send:
    from then on every read path treats it like any other entry. `to` names are stored as
    given (the writer's machine checked them against its own view of the room) and `re`
    is kept even when the entry it names never reached this store (entry ids are UUIDv7,
    the same on every machine). Returns `{id, room, seq, wakes}`, or None when an entry
    with this id is already stored: a resync after a restart carries some twice.
    """
    content = rules.validate_content(content)
    meta = rules.validate_meta(meta)
    _refuse_unstorable(content, meta)
    entry_type = rules.normalize_type(type)
    names = rules.validate_addressees([rules.validate_name(n, "addressee") for n in to])
    if ts.tzinfo is None:
        raise RuleError("a landed entry's time must carry its time zone (UTC)")
    ts = _to_ms(ts)
    room_row = rooms.get_room(room)
    if Entry.objects.filter(pk=id).exists():
        return None
    at = timezone.now()
    try:
        with transaction.atomic():
            seat = seats.remote_seat(name=sender, room=room_row, wrote_at=min(ts, at))
            seq, stamp = _next_seq(room_row)
            re_entry = Entry.objects.filter(room=room_row, pk=re).first() if re else None
            entry = _signed_entry(
                id=id,
                room=room_row,
                seq=seq,
                ts=ts,
                seat=seat,
                type=entry_type,
                to=names,
                re=re,
                content=content,
                meta=meta,
                via="relay",
                sender_addr=sender_addr[:64],
            )
            roster = rosters.of_room(room_row.pk, stamp)
            decided = deciding.decide(entry, room_row, seat, re_entry, at, roster)
            asked = requests.ask_of_landing(meta, entry_type, names, seat.name)
            if asked is not None:
                deciding.hold(decided, asked)
            _record(entry, decided, sender=seat)
            if asked is not None:
                requests.record(entry=entry, asked=asked, writer=seat.name, at=at)
    except IntegrityError:
        if Entry.objects.filter(pk=id).exists():
            return None  # landed by another bridge of this store a moment ago
        raise
    return {"id": str(entry.id), "room": room_row.name, "seq": seq, "wakes": decided.wakes}


def _signed_entry(*, seat: Seat, **fields) -> Entry:
    """The entry as it will be stored, sender from its seat, signed: the one way both a
    send and a landing build it."""
    entry = Entry(sender=seat.name, sender_agent=seat.agent.name, **fields)
    entry.signature = signing.sign_entry(entry)
    return entry


def _next_seq(room: Room) -> tuple[int, int | None]:
    """Take the room's next seq, locking the room's row until the transaction ends (so
    seq order is commit order): one `UPDATE … RETURNING` where the database has it. With
    it, on SQLite, the store's roster stamp (bus.services.roster), read under that lock."""
    if not connection.features.can_return_columns_from_insert:  # SQLite before 3.35
        locked = Room.objects.select_for_update().get(pk=room.pk)
        Room.objects.filter(pk=locked.pk).update(last_seq=locked.last_seq + 1)
        return locked.last_seq + 1, None
    stamp = "NULL"
    if connection.vendor == "sqlite":
        stamp = f"(SELECT stamp FROM {RosterStamp._meta.db_table} WHERE id = 1)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Room._meta.db_table} SET last_seq = last_seq + 1 WHERE id = %s "
            f"RETURNING last_seq, {stamp}",
            [room.pk],
        )
        row = cursor.fetchone()
    if row is None:
        raise Room.DoesNotExist(f"room {room.pk} is gone")
    return row[0], row[1]


def _mark_wrote(seat: Seat, at: datetime) -> None:
    """The sender's sign of life, in the send's transaction (every send: written out)."""
    value = connection.ops.adapt_datetimefield_value(at)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Seat._meta.db_table} SET last_wrote = %s, last_seen = %s WHERE id = %s",
            [value, value, seat.pk],
        )


def _to_ms(ts: datetime) -> datetime:
    return ts.replace(microsecond=ts.microsecond // 1000 * 1000)


# Names per alias lookup: bounds the statement's parameters (SQLite allows 32,766), however
# long a `to` list a caller sends before the addressee limit refuses it.
ALIAS_CHUNK = 500


def resolve_aliases(to: Sequence[str]) -> list[str]:
    aliases: dict[str, str] = {}
    for start in range(0, len(to), ALIAS_CHUNK):
        chunk = list(to[start : start + ALIAS_CHUNK])
        # Every addressed send asks it: written out, not compiled by the ORM each time.
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT name, {connection.ops.quote_name('real')} FROM {Alias._meta.db_table} "
                f"WHERE name IN ({', '.join(['%s'] * len(chunk))})",
                chunk,
            )
            aliases.update(cursor.fetchall())
    aliases.update(settings.ALIASES)
    return rules.resolve_aliases(to, aliases)


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


def _record(entry: Entry, decided: deciding.Decided, *, sender: Seat) -> None:
    """Write the entry and its decisions, inside the sending transaction, and what follows
    its commit: the pushes claimed here, the doorbell, the signals.

    The woken seats whose stream lives in this process (bus.bell.Pusher) have their push
    claimed here, in this transaction (telling.claim_at_send), and recorded as delivered
    to them: the pusher writes it from memory right after the commit, before the doorbell
    rings the rest. Not while a letterbox judges pushes first (bus.services.triage)."""
    pushers = bell.pushers_of(decided.woken_ids) if not any(triage.halves()) else {}
    seqs = telling.claim_at_send(sorted(pushers), lock_also=sender.pk) if pushers else {}
    pushes = {}
    for row in decided.rows:
        if row.seat_id in seqs:
            row.push_seq, row.pushed_at = seqs[row.seat_id], decided.at
            pushes[row.seat_id] = (pushers[row.seat_id], row.push_seq, row.seat_name)
    if pushes:
        entry.delivered_to = sorted(name for _, _, name in pushes.values())
    _ENTRY_INSERT.insert([entry])
    _WAKE_INSERT.insert(decided.rows)
    if decided.unwoken:
        recording.quietly(
            lambda: _COUNT_INSERT.insert(
                [
                    DecisionCount(
                        entry_id=entry.id,
                        room_id=entry.room_id,
                        reason=reason,
                        count=n,
                        decided_at=decided.at,
                    )
                    for reason, n in sorted(decided.unwoken.items())
                ]
            ),
            one_statement=True,
        )
    reasons = decided.reasons
    transaction.on_commit(lambda: signals.wake_decided.send(sender=Entry, reasons=reasons))
    if pushes:
        bell.push_on_commit(entry, pushes)
    bell.ring_on_commit(entry_id=entry.id, seat_ids=decided.woken_ids)
    _announce_on_commit(entry, entry.room)
