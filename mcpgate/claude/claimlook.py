"""The file-claim hooks' fast path: standard library and `sqlite3` only, no Django.

`salon hook pre-edit` (PreToolUse on Edit, Write, MultiEdit, NotebookEdit) runs before
every edit, and `salon hook heartbeat` (PostToolUse) after it. Almost always there is
nothing to do: no other seat claims the file, or this seat's own claim on it has long to
run. On the embedded SQLite store both are proved here, read-only, with the statement
bus.services.claims runs (bus.claimsql.OPEN_IN_REPO) and the matcher it uses
(bus.claimpaths). Like the Stop hook's fast path, this only ever concludes "nothing to
do": anything else goes on to the writes without Django (mcpgate.claude.claimwrite, on
SQLite) or to the slow path (a seat not made yet, PostgreSQL, an error), which is
authoritative.
"""

from __future__ import annotations

import os

from bus import claimpaths, claimsql, ledger, repos


def edit_target(payload: dict) -> str | None:
    """The file an Edit, Write, MultiEdit or NotebookEdit call names, else None."""
    tool = payload.get("tool_name")
    # Any JSON value may stand here: only a string can name a tool (a list or an object
    # is no key of the table).
    key = claimpaths.EDIT_TOOLS.get(tool) if isinstance(tool, str) else None
    tool_input = payload.get("tool_input")
    if key is None or not isinstance(tool_input, dict):
        return None
    path = tool_input.get(key)
    return path if isinstance(path, str) and path and "\0" not in path else None


def edit_place(payload: dict, cwd: str) -> repos.Place | None:
    """Where the edited file is: its repository, and its path from the top (None: no edit,
    or a file in no repository, or the repository's top itself)."""
    path = edit_target(payload)
    if path is None:
        return None
    place = repos.locate(path, cwd)
    return place if place is not None and place.relative else None


def _now_strings() -> tuple[str, str, str]:
    """now, now, gone_before as Django stores times in SQLite (naive UTC, str())."""
    from datetime import UTC, datetime

    now = datetime.now(UTC).replace(tzinfo=None)
    return str(now), str(now), str(now - claimpaths.GONE_AFTER)


def _connect(path: str):
    import sqlite3

    uri = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return sqlite3.connect(f"file:{uri}?mode=ro", uri=True, timeout=2)


def _look(ctx, place: repos.Place):
    """(this seat's id or None, the repository's open claims) read from the SQLite store."""
    connection = _connect(ctx.sqlite_path)
    try:
        row = connection.execute(
            "SELECT s.id FROM bus_seat s JOIN bus_agent a ON a.id = s.agent_id "
            "WHERE a.name = ? AND s.session_id = ?",
            (ctx.agent, ctx.session),
        ).fetchone()
        claims = connection.execute(
            ledger.for_sqlite3(claimsql.OPEN_IN_REPO), (place.common, *_now_strings())
        ).fetchall()
    finally:
        connection.close()
    return (row[0] if row else None), claims


def _usable(ctx) -> bool:
    path = ctx.sqlite_path
    return bool(path and ctx.session and os.path.exists(path))


def nothing_to_check(ctx) -> bool:
    """pre-edit: True when the edit needs nothing of the bus — not an edit of a file in a
    repository, or (SQLite) no other seat's open claim covers the file."""
    place = edit_place(ctx.payload, ctx.cwd)
    if place is None:
        return True
    if not _usable(ctx):
        return False
    mine, claims = _look(ctx, place)
    return not any(c[6] != mine and claimpaths.claim_covers(c[1], place.relative) for c in claims)


def soft_claim_fresh(ctx) -> bool:
    """heartbeat: True when the call needs no soft claim — not an edit of a file in a
    repository, autoclaim off, or (SQLite) this seat already holds the file for longer
    than the renewal margin."""
    if not ctx.autoclaim:
        return True
    place = edit_place(ctx.payload, ctx.cwd)
    if place is None:
        return True
    if not _usable(ctx):
        return False
    mine, claims = _look(ctx, place)
    if mine is None:
        return False
    from datetime import UTC, datetime

    margin = (datetime.now(UTC).replace(tzinfo=None) + claimpaths.SOFT_RENEW_BELOW).isoformat(" ")
    return any(
        c[6] == mine and claimpaths.claim_covers(c[1], place.relative) and str(c[5]) >= margin
        for c in claims
    )
