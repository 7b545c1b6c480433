"""Which file claims are open, read (bus.services.claims writes them): the statements of
bus.claimsql run through Django's cursor, and a claim as every adapter shows it. Kept
apart from the writers so that the agents projection (bus.services.seats) can read claims
without importing the send path the writers use."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable
from datetime import UTC, datetime

from django.db import connection
from django.utils import timezone

from bus import claimsql, rules, wire

Open = namedtuple(
    "Open", "id path kind note created_at expires_at seat_id seat focus repo", defaults=(None,)
)


def stored(at: datetime):
    """A time as this backend's cursor takes it (a string on SQLite: bus.claimsql)."""
    return connection.ops.adapt_datetimefield_value(at)


def run_sql(sql: str, params: list) -> list:
    """bus.claimsql's `run`, through Django's cursor: the rows of a SELECT, else []."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description is not None else []


def _read_time(value) -> datetime:
    if isinstance(value, datetime):
        return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)


def _times(at: datetime) -> list:
    return [stored(at), stored(at), stored(at - rules.UNKNOWN_WINDOW)]


def _rows(sql: str, params: list) -> list[Open]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [Open(r[0], r[1], r[2], r[3], _read_time(r[4]), _read_time(r[5]), *r[6:]) for r in rows]


def open_in_repo(*, repo: str, at: datetime | None = None) -> list[Open]:
    """Every open claim of a repository, oldest first."""
    at = at or timezone.now()
    return _rows(claimsql.OPEN_IN_REPO, [repo, *_times(at)])


def open_of_seats(*, seat_ids: Iterable[int], at: datetime | None = None) -> list[Open]:
    ids = list(seat_ids)
    if not ids:
        return []
    at = at or timezone.now()
    sql = claimsql.OPEN_OF_SEATS.format(seats="IN (" + ", ".join(["%s"] * len(ids)) + ")")
    return _rows(sql, [*ids, *_times(at)])


def shown(claim: Open, at: datetime) -> dict:
    """A claim as every adapter shows it."""
    return {
        "path": claim.path,
        "kind": claim.kind,
        "note": claim.note or None,
        "since": wire.iso(claim.created_at),
        "until": wire.iso(claim.expires_at),
        "ageMinutes": claimsql.age_minutes(claim.created_at, at),
        "seat": claim.seat,
        **({"repo": claim.repo} if claim.repo is not None else {}),
    }


def claims_by_seat(*, seat_ids: Iterable[int], at: datetime | None = None) -> dict[int, list]:
    """{seat id: [its open claims, shown]} for `agents` and the live view."""
    at = at or timezone.now()
    result: dict[int, list] = {}
    for c in open_of_seats(seat_ids=seat_ids, at=at):
        result.setdefault(c.seat_id, []).append(shown(c, at))
    return result
