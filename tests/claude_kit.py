"""Helpers for the Claude Code integration tests (hooks, wait, install): real processes.

Identity is set per call the way Claude Code sets it: AGENT_SALON_NAME (or the working
directory's name) and CLAUDE_CODE_SESSION_ID for commands, the hook JSON's `session_id`
and `cwd` for hooks. The database is read back with SQL on whichever store the `env`
fixture made (SQLite by default, PostgreSQL in the PostgreSQL pass).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from tests.support import run_salon

WEB_SESSION = "3f9c1a20-5b7e-4c1d-9a2f-0e1d2c3b4a51"
WEB_SESSION_2 = "aa11bb22-0000-4c1d-9a2f-0e1d2c3b4a51"
API_SESSION = "c4e1b7d2-8a9f-4e3d-b2c1-a0f9e8d7c6b5"
OPS_SESSION = "0b5e7f10-1111-4e3d-b2c1-a0f9e8d7c6b5"
WEB_SEAT = "web-app#3f9c1a20"
WEB_SEAT_2 = "web-app#aa11bb22"
API_SEAT = "api-service#c4e1b7d2"
OPS_SEAT = "ops#0b5e7f10"

EVENTS = {
    "session-start": "SessionStart",
    "stop": "Stop",
    "heartbeat": "PostToolUse",
    "pre-edit": "PreToolUse",
    "session-end": "SessionEnd",
}


def salon(env, *args, agent=None, session=None, cwd=None, stdin="", **extra):
    environment = dict(env, **extra)
    if agent:
        environment["AGENT_SALON_NAME"] = agent
    if session:
        environment["CLAUDE_CODE_SESSION_ID"] = session
    return run_salon(*args, env=environment, cwd=cwd, stdin=stdin)


def web(env, *args, **kw):
    return salon(env, *args, agent="web-app", session=WEB_SESSION, **kw)


def api(env, *args, **kw):
    return salon(env, *args, agent="api-service", session=API_SESSION, **kw)


def ops(env, *args, **kw):
    return salon(env, *args, agent="ops", session=OPS_SESSION, **kw)


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return done


def ok_json(done):
    return json.loads(ok(done).stdout)


def send(env, who, room, kind, text, *flags) -> dict:
    return ok_json(who(env, "send", room, kind, text, "--json", *flags))


def hook_input(kind: str, session: str, cwd: Path, **fields) -> str:
    payload = {
        "session_id": session,
        "transcript_path": str(cwd / "transcript.jsonl"),
        "cwd": str(cwd),
        "hook_event_name": EVENTS[kind],
    }
    if kind == "session-start":
        payload["source"] = "startup"
    if kind == "stop":
        payload["stop_hook_active"] = False
    if kind == "heartbeat":
        payload.update(tool_name="Bash", tool_input={"command": "ls"}, tool_response={})
    payload.update(fields)
    return json.dumps(payload)


def hook(env, kind, session, cwd: Path, *, headless: bool | None = False, **fields):
    """`salon hook KIND` as Claude Code runs it: JSON on stdin, cwd = the project.

    headless=None leaves AGENT_SALON_HEADLESS unset (the process chain decides)."""
    environment = dict(env)
    if headless is not None:
        environment["AGENT_SALON_HEADLESS"] = "1" if headless else "0"
    return run_salon(
        "hook", kind, env=environment, cwd=cwd, stdin=hook_input(kind, session, cwd, **fields)
    )


def stop_hooks_at_once(env, cwd: Path, n: int = 2) -> list[dict]:
    """n interactive Stop hooks of WEB_SESSION started side by side; the blocks they
    printed (each hook exits 0)."""
    environment = dict(env, AGENT_SALON_HEADLESS="0")
    payload = hook_input("stop", WEB_SESSION, cwd)
    hooks = [
        subprocess.Popen(
            [sys.executable, "-m", "salon.cli", "hook", "stop"],
            env=environment,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    outputs = [p.communicate(payload, timeout=60) for p in hooks]
    assert all(p.returncode == 0 for p in hooks), [err for _, err in outputs]
    return [json.loads(out) for out, _ in outputs if out.strip()]


def hook_json(done) -> dict | None:
    """A hook's result: exit 0, nothing on stderr, stdout one JSON object or nothing."""
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def project(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir(exist_ok=True)
    return path


# ---------------------------------------------------------------- the database


def _connect(env):
    if env.get("DATABASE_URL"):
        import psycopg

        return psycopg.connect(env["DATABASE_URL"], autocommit=True), "%s"
    return sqlite3.connect(env["AGENT_SALON_DB"]), "?"


def query(env, sql: str, *params):
    connection, mark = _connect(env)
    with closing(connection):
        return connection.execute(sql.replace("?", mark), params).fetchall()


def execute(env, sql: str, *params) -> None:
    connection, mark = _connect(env)
    with closing(connection):
        connection.execute(sql.replace("?", mark), params)
        if not env.get("DATABASE_URL"):
            connection.commit()


def ledger(env, seat: str) -> list[tuple]:
    """(entry type, content, woken, told by) for each ledger row of a seat ("" untold)."""
    return query(
        env,
        "SELECT e.type, e.content, w.woken, w.told_by FROM bus_wakedecision w "
        "JOIN bus_seat s ON s.id = w.seat_id JOIN bus_entry e ON e.id = w.entry_id "
        "WHERE s.name = ? ORDER BY e.seq",
        seat,
    )


def seat_row(env, seat: str):
    rows = query(
        env, "SELECT last_seen, focus_asked_at, live_until FROM bus_seat WHERE name = ?", seat
    )
    return rows[0] if rows else None


def rooms_of(env, seat: str) -> list[str]:
    return [
        r[0]
        for r in query(
            env,
            "SELECT r.name FROM bus_membership m JOIN bus_room r ON r.id = m.room_id "
            "JOIN bus_seat s ON s.id = m.seat_id WHERE s.name = ? AND m.left_at IS NULL "
            "ORDER BY r.name",
            seat,
        )
    ]


def meet(env, *who, room="team"):
    ok(salon(env, "rooms", "--create", room))
    for person in who or (web, api):
        ok(person(env, "join", room))
