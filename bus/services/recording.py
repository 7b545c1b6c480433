"""The stats' own rows, written where the thing they count happens (bus.stats reads them).

Recording never fails the operation it describes: each write runs in a savepoint of the
caller's transaction (a single statement on SQLite needs none: `quietly`) and an error is
logged and swallowed; none waits for another
caller's row (inserts, or a counter row of the caller's own).
"""

from __future__ import annotations

import logging

from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from bus.models import ReadCount, Room, Seat

log = logging.getLogger("salon.stats")


def quietly(write, *, one_statement: bool = False) -> None:
    """Run `write`; an error is logged, never raised. `one_statement`: the write is a
    single statement, which on SQLite needs no savepoint: a statement that fails there is
    undone alone and the transaction goes on (PostgreSQL aborts the whole transaction, so
    it gets one). Every send records its decision counts so: the savepoint's two
    statements were a tenth of what the recording cost."""
    try:
        if one_statement and connection.vendor == "sqlite":
            write()
            return
        with transaction.atomic():  # a savepoint: a failure leaves the caller's work intact
            write()
    except Exception:
        log.warning("a stats record was not written", exc_info=True)


def count_reading(seat: Seat, room: Room, entries: list[dict], held_back: int) -> None:
    """Bump this seat's counter row of the hour for `room` (insert it the first time)."""
    at = timezone.now()
    hour = at.replace(minute=0, second=0, microsecond=0)
    numbers = {
        "reads": 1,
        "entries": len(entries),
        "chars": sum(len(e["content"]) for e in entries),
        "clipped": sum(1 for e in entries if "clipped" in e),
        "chars_held_back": held_back,
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
