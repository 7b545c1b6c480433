"""The file-claim hooks' writes on the SQLite store without Django: a denied edit, a
repeat let through again, an edit's soft claim.

The fast path (mcpgate.claude.claimlook) proves most edits need nothing; the few that
write — the first edit of a file another session claims (the denial is recorded, so that
a repeat passes) and the first edit of a file this session holds no claim on (its soft
claim) — are written here, with `sqlite3`, by bus.claimsql's functions: the statements
bus.services.claims runs through Django's cursor, so the rows are the same whichever
wrote them. The connection is opened as Django opens it (bus.sqliteopen: WAL,
synchronous=FULL, a 20 s busy timeout, the write lock taken at BEGIN IMMEDIATE), so a
hook writes beside a running daemon as safely as another daemon thread would.

Only what needs nothing else is done here; everything else goes to the slow path (a
server of the store, or Django in this process), which is authoritative:

* the seat must exist and have joined its default rooms (check-in makes and seats it);
* the heartbeat stamp must be fresh: the seat's sign of life is then written already
  (the slow path's touch would write nothing);
* the file's path must be stored as it is (bus.claimpaths.stored_as_is);
* a denial needs the seat's primary room, for the command that asks the holder;
* the FIRST repeat that passes stays on the slow path: it tells the holder by a FACT,
  and an entry is signed, sequenced, put in the ledger and pushed by bus.services.entries
  (the send path, with its rules and its notifications to live streams), which this
  module would have to copy. It happens once per held-back file; a later repeat within
  the window, which tells nobody, is let through here.
* PostgreSQL: always the slow path (a server's local line, or Django).

Any error here leaves the store as it was (the transaction is not committed) and hands
the hook to the slow path, which decides, and records a real failure without failing
the edit.
"""

from __future__ import annotations

import os

from bus import claimpaths, claimsql, ledger
from bus.sqliteopen import SQLITE_BEGIN, SQLITE_PRAGMAS, SQLITE_TIMEOUT
from mcpgate.claude.claimlook import edit_place
from mcpgate.claude.commandline import ask_command

# bus.rules.claims' values, which that package costs too much to import here (a test
# holds them equal).
SOFT_CLAIM_MINUTES = 30
REPEAT_WINDOW_MINUTES = 10


# ---------------------------------------------------------------- what the deny says


def age_words(minutes: int) -> str:
    if minutes < 1:
        return "just now"
    if minutes < 60:
        return f"{minutes} min ago"
    return f"{minutes // 60} h {minutes % 60:02d} min ago"


def _holder_words(claim: dict, focus: str) -> str:
    words = [f"claimed {age_words(claim['ageMinutes'])}"]
    if claim["kind"] == "soft":
        words[0] = f"edited by it {age_words(claim['ageMinutes'])} (a claim made by editing)"
    if claim.get("note"):
        words.append(f'note: "{claim["note"]}"')
    words.append(f'focus: "{focus}"' if focus else "no focus declared")
    return f"{claim['seat']} ({'; '.join(words)})"


def deny_reason(path: str, holders: list[dict], focus_of: dict[str, str], ask: str) -> str:
    """Why the edit is held back: the holders (shown claims), their focus, the note, the
    claim's age, and the two ways on."""
    who = "; ".join(_holder_words(c, focus_of.get(c["seat"], "")) for c in holders)
    claimed = ", ".join(dict.fromkeys(c["path"] for c in holders))
    return (
        f"agent-salon: {path} is claimed by another session of this repository "
        f"({claimed}): {who}. This edit was held back once, so the two of you do not "
        "overwrite each other. Two ways on: ask the holder first — "
        f"{ask} — or repeat this same edit to go ahead anyway (a repeat within 10 minutes "
        "passes, and the holder is told that you did)."
    )


def deny_output(reason: str) -> dict:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


# ---------------------------------------------------------------- the writes


def _connect(path: str):
    import sqlite3

    connection = sqlite3.connect(path, timeout=SQLITE_TIMEOUT, isolation_level=None)
    # A row changed outside the bus may hold bytes that are not UTF-8: read, not refused
    # (as the daemon's backend reads them, salon.sqlite).
    connection.text_factory = lambda raw: str(raw, "utf-8", "replace")
    # Django's own (its SQLite backend turns foreign keys on), then the store's.
    connection.execute("PRAGMA foreign_keys = ON")
    for pragma in SQLITE_PRAGMAS:
        connection.execute(f"PRAGMA {pragma}")
    return connection


def _time(value):
    from datetime import datetime

    return datetime.fromisoformat(str(value))


_SEAT = (
    "SELECT s.id, s.defaults_applied FROM bus_seat s JOIN bus_agent a ON a.id = s.agent_id "
    "WHERE a.name = ? AND s.session_id = ?"
)


def settle(ctx, fresh_stamp) -> tuple[bool, dict | None]:
    """(done, the hook's output): done False hands the hook to the slow path.
    `fresh_stamp()`: the seat's sign of life is recent (mcpgate.claude.hookinput)."""
    if ctx.kind not in ("pre-edit", "heartbeat") or (ctx.kind == "heartbeat" and not ctx.autoclaim):
        return False, None
    path = ctx.sqlite_path
    if not (path and ctx.session and os.path.exists(path)) or not fresh_stamp():
        return False, None
    place = edit_place(ctx.payload, ctx.cwd)
    # The services' bounds on a claim's repository and path: whatever is outside them
    # is theirs to refuse, with their words.
    if place is None or len(place.common) > 4096 or not claimpaths.stored_as_is(place.relative):
        return False, None
    try:
        connection = _connect(path)
    except Exception:
        return False, None
    try:
        connection.execute(f"BEGIN {SQLITE_BEGIN}")
        try:
            done, output = _write(connection, ctx, place)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT" if done else "ROLLBACK")
        return done, output
    except Exception:  # the slow path decides, and records a real failure
        return False, None
    finally:
        connection.close()


def _write(connection, ctx, place) -> tuple[bool, dict | None]:
    from datetime import UTC, datetime, timedelta

    def run(sql: str, params) -> list:
        return connection.execute(ledger.for_sqlite3(sql), params).fetchall()

    seat = run(_SEAT, (ctx.agent, ctx.session))
    if not seat or not seat[0][1]:
        return False, None
    mine = seat[0][0]
    at = datetime.now(UTC).replace(tzinfo=None)
    now = claimsql.stored_utc(at)
    gone_before = claimsql.stored_utc(at - claimpaths.GONE_AFTER)
    claims = run(claimsql.OPEN_IN_REPO, (place.common, now, now, gone_before))
    if ctx.kind == "heartbeat":
        if claimsql.soft_claim_due(claims, mine, place.relative, at, lambda c: _time(c[5])):
            claimsql.put_claim(
                run,
                seat_id=mine,
                repo=place.common,
                path=place.relative,
                kind=claimsql.SOFT,
                note="",
                at=now,
                until=claimsql.stored_utc(at + timedelta(minutes=SOFT_CLAIM_MINUTES)),
            )
        return True, None
    holding = claimsql.holding(claims, mine, place.relative)
    if not holding:
        return True, None
    verdict = claimsql.held_edit(
        run,
        seat_id=mine,
        holder_id=holding[0][6],
        repo=place.common,
        path=place.relative,
        at=now,
        since=claimsql.stored_utc(at - timedelta(minutes=REPEAT_WINDOW_MINUTES)),
        first_pass=False,
    )
    if verdict is None:
        return False, None  # the first repeat: the holder is told on the slow path
    if verdict == claimsql.PASS:
        return True, None
    room = run(ledger.PRIMARY_ROOM.format(columns="r.name"), (mine,))
    if not room:
        return False, None
    holders = [
        {
            "path": c[1],
            "kind": c[2],
            "note": c[3] or None,
            "ageMinutes": claimsql.age_minutes(_time(c[4]), at),
            "seat": c[7],
        }
        for c in holding
    ]
    focus_of = {c[7]: c[8] or "" for c in holding}
    ask = ask_command(ctx, ctx.agent, room[0][0], holders[0]["seat"])
    return True, deny_output(deny_reason(place.relative, holders, focus_of, ask))
