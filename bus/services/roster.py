"""A room's readers as a send decides over them (the wake rule), kept between sends.

Every send reads who has ever been in its room: the addressee check needs every name,
the wake decisions every current reader. Most of that changes rarely (who is in the room,
their names, their quiet), so it is kept per process and per room (`Roster`) while the
store's roster stamp (bus.models.RosterStamp, written by triggers) is unchanged; the send
reads the stamp in its own transaction, with the room's seq. What changes all the time (a
seat's liveness: live_until, last_seen, signed_off_at, hook_seen_at) is read in each send,
and only for the readers a decision needs it of (`Reader`): an entry addressed to one seat
of a hundred reads one row.

Without a stamp (PostgreSQL, or an SQLite store whose stamp row is missing) nothing is
kept: each send reads its room's roster again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from django.db import connection

from bus import ledger, rules
from bus.compiled import ID_CHUNK
from bus.models import Agent, Membership, Seat

# Rooms whose roster a process keeps; past it, it starts over.
KEPT_ROOMS = 256


class Member:
    """A seat that has been in the room (parted ones too, `current` False), with what the
    decisions read of it that only a stamp change can change."""

    __slots__ = ("agent_name", "current", "facts", "keys", "name", "pk", "quiet", "quiet_until")

    def __init__(self, row: tuple) -> None:
        self.pk, self.name, self.agent_name, quiet, quiet_until, current = row
        self.quiet = bool(quiet)
        self.quiet_until = stored_datetime(quiet_until)
        self.current = bool(current)
        # quiet_until means nothing while the quiet flag is off (rules.quiet_active).
        self.facts = rules.SeatFacts(
            seat=self.name,
            agent=self.agent_name,
            quiet=self.quiet,
            quiet_until=self.quiet_until if self.quiet else None,
        )
        self.keys = rules.address_keys(self.facts)


class Roster:
    """Every member of one room, in the order they joined, and the lookups a send makes."""

    def __init__(self, stamp: int | None, members: list[Member]) -> None:
        self.stamp = stamp
        self.members = members
        self.current = [m for m in members if m.current]
        # Every seat and agent name that has ever been in the room: the addressee check.
        self.known_names = {key for m in members for key in (m.name, m.agent_name)}
        self.known_names.update(rules.base_agent(m.agent_name) for m in members)
        self._by_key: dict[str, list[Member]] = {}
        for member in self.current:
            for key in member.keys:
                self._by_key.setdefault(key, []).append(member)

    def named_by(self, to: Sequence[str]) -> list[Member]:
        """The current members `to` names by one of their address keys (rules.addressed_to),
        each once, in the order they joined: the only readers of an addressed entry whose
        decision can be anything but not_addressed."""
        found: dict[int, Member] = {}
        for name in to:
            for member in self._by_key.get(name, ()):
                found[member.pk] = member
        if len(found) < 2:
            return list(found.values())
        order = {m.pk: n for n, m in enumerate(self.current)}
        return sorted(found.values(), key=lambda m: order[m.pk])


_kept: dict[tuple[str, int], Roster] = {}


def of_room(room_id: int, stamp: int | None) -> Roster:
    """The room's roster as of `stamp` (read in the caller's transaction): the kept one
    while the stamp is the same, else read now (and kept, when there is a stamp)."""
    key = (connection.settings_dict["NAME"], room_id)
    kept = _kept.get(key)
    if stamp is not None and kept is not None and kept.stamp == stamp:
        return kept
    roster = Roster(stamp, _read_members(room_id))
    if stamp is not None:
        if len(_kept) >= KEPT_ROOMS and key not in _kept:
            _kept.clear()  # more rooms than are kept: start over (safe on any thread)
        _kept[key] = roster
    return roster


class _ParsedOnRead:
    """A datetime column of a liveness row (`_<name>`, as the cursor gave it), parsed on
    its first read and kept (as functools.cached_property keeps a value)."""

    def __set_name__(self, owner, name: str) -> None:
        self.name, self.raw = name, f"_{name}"

    def __get__(self, reader, owner=None):
        value = reader.__dict__[self.name] = stored_datetime(getattr(reader, self.raw))
        return value


class Reader:
    """A current member with its liveness as of this send. The methods are Seat's own, so
    the rules stay in one place."""

    def __init__(self, member: Member, life: tuple) -> None:
        self.member = member
        self.pk, self.name, self.agent_name = member.pk, member.name, member.agent_name
        self.quiet, self.quiet_until, self.current = member.quiet, member.quiet_until, True
        self._live_until, self._last_seen, self._signed_off_at, self._hook_seen_at = life

    live_until = _ParsedOnRead()
    last_seen = _ParsedOnRead()
    signed_off_at = _ParsedOnRead()
    hook_seen_at = _ParsedOnRead()

    liveness = Seat.liveness
    is_quiet = Seat.is_quiet
    listener = Seat.listener

    def facts(self) -> rules.SeatFacts:
        return self.member.facts


def readers(members: Iterable[Member]) -> list[Reader]:
    """These members with their liveness read now, in the order given (a member whose
    seat is gone meanwhile reads as never seen)."""
    members = list(members)
    life: dict[int, tuple] = {}
    columns = ", ".join(_as_text(column) for column in _LIFE_COLUMNS)
    for start in range(0, len(members), ID_CHUNK):
        ids = [m.pk for m in members[start : start + ID_CHUNK]]
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, {columns} FROM {Seat._meta.db_table} "
                f"WHERE id IN ({', '.join(['%s'] * len(ids))})",
                ids,
            )
            life.update((row[0], row[1:]) for row in cursor.fetchall())
    return [Reader(m, life.get(m.pk, (None,) * len(_LIFE_COLUMNS))) for m in members]


_LIFE_COLUMNS = ("live_until", "last_seen", "signed_off_at", "hook_seen_at")


def _as_text(column: str) -> str:
    """A datetime column as SQLite's text (see stored_datetime); as it is elsewhere."""
    return f"CAST({column} AS TEXT)" if connection.vendor == "sqlite" else column


def stored_datetime(value) -> datetime | None:
    """A datetime column as a raw cursor returns it, made aware as the ORM makes it: an
    aware datetime (PostgreSQL), a naive one in UTC (SQLite's converter; USE_TZ), or
    SQLite's ISO text (read as text: Django's converter parses with a regular
    expression, fromisoformat in a tenth of the time)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


_MEMBERS_SQL = """
    SELECT s.id, s.name, a.name, s.quiet, {quiet_until}, {current}
    FROM {membership} m
    JOIN {seat} s ON s.id = m.seat_id
    JOIN {agent} a ON a.id = s.agent_id
    WHERE m.room_id = %s
    ORDER BY m.id
"""


def _read_members(room_id: int) -> list[Member]:
    """Every membership of the room (parted ones too), one statement, no model instances."""
    sql = _MEMBERS_SQL.format(
        membership=Membership._meta.db_table,
        seat=Seat._meta.db_table,
        agent=Agent._meta.db_table,
        quiet_until=_as_text("s.quiet_until"),
        current=ledger.current("m"),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [room_id])
        return [Member(row) for row in cursor.fetchall()]
