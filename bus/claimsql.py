"""File claims in SQL, each predicate written once: the open claims of a repository.

A claim is open while it is not released, its time has not run out, and its seat is not
gone (bus.rules.liveness: an open stream, or a sign of life within UNKNOWN_WINDOW not
followed by a sign-off). bus.services.claims runs these through Django's cursor; the
PreToolUse and PostToolUse hooks' fast paths run them with `sqlite3` and no Django
(mcpgate.claude.claimhooks), so the hook and the services can never disagree on which
claims hold. tests/test_claims.py holds the SQL to bus.rules.liveness.

Standard library only. Placeholders are `%s` (Django's cursor); sqlite3 callers use
bus.ledger.for_sqlite3. Times are passed as the backend stores them (Django's
adapt_datetimefield_value; on SQLite `YYYY-MM-DD HH:MM:SS[.ffffff]`, UTC).
"""

from __future__ import annotations

CLAIM, SEAT = "bus_fileclaim", "bus_seat"


def seat_not_gone(s: str = "s") -> str:
    """Seat `s` is live or unknown, not gone. Params: now, gone_before (now minus
    UNKNOWN_WINDOW)."""
    return (
        f"({s}.live_until > %s OR ({s}.last_seen IS NOT NULL"
        f" AND ({s}.signed_off_at IS NULL OR {s}.signed_off_at < {s}.last_seen)"
        f" AND {s}.last_seen > %s))"
    )


def claim_open(c: str = "c") -> str:
    """Claim `c` is neither released nor run out. Param: now."""
    return f"{c}.released_at IS NULL AND {c}.expires_at > %s"


# (id, path, kind, note, created_at, expires_at, seat id, seat name, seat focus)
COLUMNS = "c.id, c.path, c.kind, c.note, c.created_at, c.expires_at, s.id, s.name, s.focus_text"

# The open claims of one repository. Params: repo, now, now, gone_before.
OPEN_IN_REPO = f"""
    SELECT {COLUMNS}
    FROM {CLAIM} c JOIN {SEAT} s ON s.id = c.seat_id
    WHERE c.repo = %s AND {claim_open("c")} AND {seat_not_gone("s")}
    ORDER BY c.created_at, c.id
"""

# The open claims of some seats (callers fill in `{seats}`: `= %s`, `IN (…)`).
# Params: the seat ids, now, now, gone_before.
OPEN_OF_SEATS = f"""
    SELECT {COLUMNS}, c.repo
    FROM {CLAIM} c JOIN {SEAT} s ON s.id = c.seat_id
    WHERE c.seat_id {{seats}} AND {claim_open("c")} AND {seat_not_gone("s")}
    ORDER BY c.created_at, c.id
"""
