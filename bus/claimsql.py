"""File claims in SQL, each predicate and each write written once: the open claims of a
repository, a claim put or renewed, an edit held back and let through.

A claim is open while it is not released, its time has not run out, and its seat is not
gone (bus.rules.liveness: an open stream, or a sign of life within UNKNOWN_WINDOW not
followed by a sign-off). bus.services.claims runs these through Django's cursor; the
PreToolUse and PostToolUse hooks' fast paths run them with `sqlite3` and no Django
(mcpgate.claude.claimhooks), so the hook and the services can never disagree on which
claims hold. tests/test_claims.py holds the SQL to bus.rules.liveness.

The writes are functions over `run(sql, params) -> rows` (the fetched rows of a SELECT,
[] otherwise), inside a transaction their caller holds: bus.services.claims runs them
through Django's cursor on either backend, and the edit hooks' own path on the SQLite
store (mcpgate.claude.claimwrite) through `sqlite3`, so whichever wrote a row wrote the
same row. Rows are inserted without an id (the table's own autoincrement, as Django's
inserts leave it).

Standard library only. Placeholders are `%s` (Django's cursor); sqlite3 callers use
bus.ledger.for_sqlite3. Times are passed as the backend stores them (Django's
adapt_datetimefield_value; on SQLite `YYYY-MM-DD HH:MM:SS[.ffffff]`, UTC: `stored_utc`).
"""

from __future__ import annotations

from datetime import datetime

from bus.claimpaths import SOFT_RENEW_BELOW, claim_covers

CLAIM, SEAT, DENIAL = "bus_fileclaim", "bus_seat", "bus_claimdenial"


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


# ---------------------------------------------------------------- reading rows


def stored_utc(at: datetime) -> str:
    """A time as Django stores it in SQLite (naive UTC, `str()`): what the hooks pass."""
    from datetime import UTC

    if at.tzinfo is not None:
        at = at.astimezone(UTC).replace(tzinfo=None)
    return str(at)


def age_minutes(created_at: datetime, at: datetime) -> int:
    return max(0, int((at - created_at).total_seconds() // 60))


def holding(claims, seat_id, path: str) -> list:
    """The open claims (rows or bus.services.claimed.Open, oldest first) of seats other
    than `seat_id` that cover `path`: an edit of it by that seat is held back once."""
    return [c for c in claims if c[6] != seat_id and claim_covers(c[1], path)]


def soft_claim_due(claims, seat_id, path: str, at: datetime, expires_at=lambda c: c[5]) -> bool:
    """Does this seat's edit of `path` claim it softly now? Not while one of the seat's own
    open claims covers it for SOFT_RENEW_BELOW more (a burst of edits writes once)."""
    return not any(
        c[6] == seat_id and claim_covers(c[1], path) and expires_at(c) - at >= SOFT_RENEW_BELOW
        for c in claims
    )


# ---------------------------------------------------------------- writes

# This seat's open claim on exactly this path, the newest. Params: seat, repo, path, now.
_HELD = f"""
    SELECT id FROM {CLAIM}
    WHERE seat_id = %s AND repo = %s AND path = %s AND {claim_open(CLAIM)}
    ORDER BY id DESC LIMIT 1
"""
_INSERT_CLAIM = (
    f"INSERT INTO {CLAIM} (seat_id, repo, path, kind, note, created_at, expires_at)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
# A soft claim only lengthens what is held, and leaves its kind and note.
_LENGTHEN = (
    f"UPDATE {CLAIM} SET expires_at = CASE WHEN expires_at > %s THEN expires_at ELSE %s END"
    " WHERE id = %s"
)
_RENEW = f"UPDATE {CLAIM} SET expires_at = %s, kind = %s, note = %s WHERE id = %s"

SOFT = "soft"


def put_claim(run, *, seat_id, repo: str, path: str, kind: str, note: str, at, until) -> None:
    """Claim one path (already normalized) for a seat until `until`: its open claim on
    exactly this path is renewed (a soft claim lengthens it, never shortens it, and
    keeps its kind and note), else a new row is made. `at`, `until`: stored times."""
    held = run(_HELD, [seat_id, repo, path, at])
    if not held:
        run(_INSERT_CLAIM, [seat_id, repo, path, kind, note, at, until])
    elif kind == SOFT:
        run(_LENGTHEN, [until, until, held[0][0]])
    else:
        run(_RENEW, [until, kind, note, held[0][0]])


# The denial of this seat's edit of this file within the window (the newest), then, if
# none, the last time such an edit was let through within it. Params: seat, repo, path,
# window start. `{lock}`: " FOR UPDATE" where the backend has it (SQLite's writers are
# one at a time from BEGIN IMMEDIATE).
_DENIED = f"""
    SELECT id, passed_at FROM {DENIAL}
    WHERE seat_id = %s AND repo = %s AND path = %s AND denied_at > %s
    ORDER BY denied_at DESC LIMIT 1{{lock}}
"""
_PASSED = f"""
    SELECT id, passed_at FROM {DENIAL}
    WHERE seat_id = %s AND repo = %s AND path = %s AND passed_at > %s
    ORDER BY passed_at DESC LIMIT 1
"""
_INSERT_DENIAL = (
    f"INSERT INTO {DENIAL} (seat_id, holder_id, repo, path, denied_at) VALUES (%s, %s, %s, %s, %s)"
)
_LET_THROUGH = f"UPDATE {DENIAL} SET passed_at = %s WHERE id = %s"

DENY, PASS, FIRST_PASS = "deny", "pass", "first-pass"


def held_edit(
    run, *, seat_id, holder_id, repo: str, path: str, at, since, lock: str = "", first_pass=True
) -> str | None:
    """The verdict on an edit another seat's claim covers (`holder_id`: the first such
    holder). Its first edit of the file is denied and recorded (DENY); a repeat within
    the window since `since` goes ahead (passed_at set): FIRST_PASS the first time, when
    the holders are to be told, PASS after. first_pass=False: a first pass is left
    unwritten and None returned, for a caller that cannot tell the holders.
    `at`, `since`: stored times."""
    recent = run(_DENIED.format(lock=lock), [seat_id, repo, path, since])
    if not recent:
        recent = run(_PASSED, [seat_id, repo, path, since])
    if not recent:
        run(_INSERT_DENIAL, [seat_id, holder_id, repo, path, at])
        return DENY
    told_before = recent[0][1] is not None
    if not told_before and not first_pass:
        return None
    run(_LET_THROUGH, [at, recent[0][0]])
    return PASS if told_before else FIRST_PASS
