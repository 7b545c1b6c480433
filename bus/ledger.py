"""The ledger's predicates in SQL, each written once: every raw statement is built from here.

* current: a membership not left (a part sets left_at; the row stays);
* untold: a row that wakes its seat and that no path has told yet (WakeDecision.told_at);
* pending: an untold row not pushed either (the push claimers', bus.services.telling).

Their ORM forms are the managers' verbs beside the tables (bus.models:
Membership.objects.current(), WakeDecision.objects.untold()); tests/test_ledger.py holds
the two to the same answers.

A seat's rows are those after its cursor in a room it is still in (`rows_of`). The
services claim from them (bus.services.telling); the Stop hook's fast path asks the same
statement read-only, without Django, whether there is anything at all
(mcpgate.claude.hookinput). Written in SQL because both run it, and because the plan
matters: each membership drives one range scan of the index wake_seat_room_seq (seat,
room, seq > cursor), so rows already read are never visited (CROSS JOIN keeps SQLite from
starting at the ledger; PostgreSQL plans it as an inner join). Built with the ORM, the
same filter over many seats is a per-seat OR that cost ~0.5 ms of query compilation per
seat.

Standard library only. Placeholders are `%s` (Django's cursor); sqlite3 callers use
`for_sqlite3`.
"""

from __future__ import annotations

# The tables, as Django names them (tests/test_ledger.py checks they still are).
MEMBERSHIP, WAKE, ENTRY, ROOM = "bus_membership", "bus_wakedecision", "bus_entry", "bus_room"


def current(m: str = "m") -> str:
    """Membership `m` is current: not left."""
    return f"{m}.left_at IS NULL"


def untold(w: str = "w") -> str:
    """Ledger row `w` wakes its seat and is told to nobody yet."""
    return f"{w}.woken AND {w}.told_at IS NULL"


def pending(w: str = "w") -> str:
    """Ledger row `w` is untold and not pushed: a push claimer's to take."""
    return f"{untold(w)} AND {w}.push_seq IS NULL"


def rows_of(seats: str, *, only_pending: bool = False) -> str:
    """FROM … WHERE of the untold (or pending) rows `w` of the seats `m.seat_id <seats>`
    (`= %s`, `IN (%s, %s)`, `= bus_seat.id`), after the cursor in a room each is still in."""
    rule = pending("w") if only_pending else untold("w")
    return f"""
    FROM {MEMBERSHIP} m CROSS JOIN {WAKE} w
    WHERE m.seat_id {seats} AND {current("m")}
      AND w.seat_id = m.seat_id AND w.room_id = m.room_id AND w.seq > m.cursor
      AND {rule}
"""


# This seat's untold rows (param: seat id); callers add a room filter, an order, a limit.
UNTOLD = "SELECT w.id" + rows_of("= %s")

# A seat's primary room (bus.services.rooms.primary_room; the edit hooks name it in the
# command that asks a claim's holder): the first of its default rooms it is still in,
# else the room it joined first — the oldest current membership of a visible room.
# Callers fill in `{columns}` of `r`. Param: seat id.
PRIMARY_ROOM = f"""
    SELECT {{columns}}
    FROM {MEMBERSHIP} m JOIN {ROOM} r ON r.id = m.room_id
    WHERE m.seat_id = %s AND {current("m")} AND r.archived_at IS NULL
    ORDER BY m.id
    LIMIT 1
"""


def for_sqlite3(sql: str) -> str:
    return sql.replace("%s", "?")


# The safety net's candidate (bus.services.triage): the newest entry by others after the seat's
# cursor in each room it is in (one backward step of the unique index entry_room_seq per
# room). Callers add an optional room filter and take the newest of them; it is the
# net's to judge when the seat has no ledger row for it (the rule declined it, and no
# judge has looked at it yet). Params: seat id, seat name.
NEWEST_UNREAD = f"""
    SELECT e.id, e.room_id FROM {MEMBERSHIP} m CROSS JOIN {ENTRY} e
    WHERE m.seat_id = %s AND {current("m")}
      AND e.id = (
          SELECT n.id FROM {ENTRY} n
          WHERE n.room_id = m.room_id AND n.seq > m.cursor AND n.sender <> %s
          ORDER BY n.seq DESC LIMIT 1
      )
"""
NEWEST_FIRST = " ORDER BY e.ts DESC, e.seq DESC LIMIT 1"
# Whether the seat has a ledger row for an entry. Params: entry id, seat id.
HAS_ROW = f"SELECT 1 FROM {WAKE} WHERE entry_id = %s AND seat_id = %s"
