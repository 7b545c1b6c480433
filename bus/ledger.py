"""Which ledger rows a seat has still to be told: the one statement of that rule.

A row is *untold* when it wakes the seat, its entry is after the seat's cursor in a room
the seat is still in, and no path has told it yet (WakeDecision.told_at). The services
claim from it (bus.services.telling); the Stop hook's fast path asks it read-only,
without Django, whether there is anything at all (mcpgate.claude.hookinput). Written in
SQL because both run it, and because the plan matters: each membership drives one range
scan of the index wake_seat_room_seq (seat, room, seq > cursor).

Standard library only. Placeholders are `%s` (Django's cursor); sqlite3 callers use
`for_sqlite3`.
"""

from __future__ import annotations

UNTOLD = """
    SELECT w.id FROM bus_membership m CROSS JOIN bus_wakedecision w
    WHERE m.seat_id = %s AND m.left_at IS NULL
      AND w.seat_id = m.seat_id AND w.room_id = m.room_id AND w.seq > m.cursor
      AND w.woken AND w.told_at IS NULL
"""


def for_sqlite3(sql: str) -> str:
    return sql.replace("%s", "?")


# The safety net's candidate (bus.services.triage): the newest entry by others after the seat's
# cursor in each room it is in (one backward step of the unique index entry_room_seq per
# room). Callers add an optional room filter and take the newest of them; it is the
# net's to judge when the seat has no ledger row for it (the rule declined it, and no
# judge has looked at it yet). Params: seat id, seat name.
NEWEST_UNREAD = """
    SELECT e.id, e.room_id FROM bus_membership m CROSS JOIN bus_entry e
    WHERE m.seat_id = %s AND m.left_at IS NULL
      AND e.id = (
          SELECT n.id FROM bus_entry n
          WHERE n.room_id = m.room_id AND n.seq > m.cursor AND n.sender <> %s
          ORDER BY n.seq DESC LIMIT 1
      )
"""
NEWEST_FIRST = " ORDER BY e.ts DESC, e.seq DESC LIMIT 1"
# Whether the seat has a ledger row for an entry. Params: entry id, seat id.
HAS_ROW = "SELECT 1 FROM bus_wakedecision WHERE entry_id = %s AND seat_id = %s"
