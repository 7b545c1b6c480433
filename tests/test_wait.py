"""`salon wait` as Claude Code's Monitor tool runs it: a real process whose stdout lines
are read as they come, against entries sent by other real processes."""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.claude_kit import (
    API_SEAT,
    WEB_SEAT,
    WEB_SESSION,
    api,
    execute,
    ledger,
    meet,
    ok,
    ok_json,
    seat_row,
    send,
    web,
)
from tests.support import salon_cmd

LATENCY_BOUND = 3.0  # seconds from commit to the printed line


class Waiting:
    """A running `salon wait` of web-app's seat, its stdout lines timestamped on arrival."""

    def __init__(self, env, *args: str, argv: list[str] | None = None):
        self.env = dict(env, AGENT_SALON_NAME="web-app", CLAUDE_CODE_SESSION_ID=WEB_SESSION)
        self.process = subprocess.Popen(
            argv or salon_cmd("wait", *args),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put((time.time(), line.rstrip("\n")))

    def ready(self, timeout: float = 60) -> Waiting:
        """Subscribed and through its first look at the ledger: it has marked the seat live."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = seat_row(self.env, WEB_SEAT)
            if row and row[2] is not None:
                return self
            assert self.process.poll() is None, self.process.stderr.read()
            time.sleep(0.05)
        raise AssertionError("salon wait did not start")

    def line(self, timeout: float = 10) -> tuple[float, str] | None:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(15)

    def __enter__(self) -> Waiting:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def line_for(kind: str, sender: str, room: str, text: str) -> str:
    return f'[salon] {kind} from {sender} in "{room}": "{text}" — read it with inbox (room {room})'


def committed_at(report: dict) -> float:
    return datetime.fromisoformat(report["ts"]).timestamp()


# ---------------------------------------------------------------- --once


def test_once_prints_what_is_waiting_and_exits(env):
    meet(env)
    send(env, api, "team", "QUESTION", "who owns\nthe login form?")
    send(env, api, "team", "FACT", "the build is green")
    done = ok(web(env, "wait", "--once"))
    assert done.stdout.splitlines() == [
        line_for("QUESTION", API_SEAT, "team", "who owns the login form?")
    ]


def test_a_restarted_wait_does_not_re_announce(env):
    meet(env)
    send(env, api, "team", "QUESTION", "first")
    assert ok(web(env, "wait", "--once")).stdout.count("[salon]") == 1
    assert ok(web(env, "wait", "--once")).stdout == ""
    with Waiting(env) as waiting:
        waiting.ready()
        assert waiting.line(timeout=1.5) is None
        send(env, api, "team", "QUESTION", "second")
        assert waiting.line()[1] == line_for("QUESTION", API_SEAT, "team", "second")
    with Waiting(env) as waiting:
        waiting.ready()
        assert waiting.line(timeout=1.5) is None


def test_an_entry_already_pushed_to_a_stream_is_announced_all_the_same(env):
    meet(env)
    send(env, api, "team", "QUESTION", "pushed while channels may be off")
    execute(env, "UPDATE bus_wakedecision SET push_seq = 1, pushed_at = decided_at")
    line = ok(web(env, "wait", "--once")).stdout
    assert "pushed while channels may be off" in line
    assert line.rstrip().endswith(" UTC)") and "(also pushed " in line


def test_wait_never_moves_the_cursor(env):
    meet(env)
    send(env, api, "team", "QUESTION", "who owns the login form?")
    ok(web(env, "wait", "--once"))
    peek = ok_json(web(env, "peek", "team", "--json"))
    assert (peek["unread"], peek["unreadWaking"]) == (1, 1)


def test_the_lines_say_only_the_first_240_characters(env):
    meet(env)
    send(env, api, "team", "REQUEST", "x" * 300, "--to", "web-app")
    (line,) = ok(web(env, "wait", "--once")).stdout.splitlines()
    assert f'"{"x" * 240}…"' in line


def test_more_than_ten_waiting_entries_end_in_one_line_that_counts_the_rest(env):
    meet(env)
    for n in range(12):
        send(env, api, "team", "QUESTION", f"question {n}")
    lines = ok(web(env, "wait", "--once")).stdout.splitlines()
    assert len(lines) == 11
    assert lines[-1].startswith("[salon] and 2 more entries that are a claim on you (team 2)")
    assert ok(web(env, "wait", "--once")).stdout == ""


def test_rooms_named_limit_what_is_announced(env):
    meet(env)
    meet(env, room="lobby")
    send(env, api, "team", "QUESTION", "in team")
    send(env, api, "lobby", "QUESTION", "in lobby")
    assert ok(web(env, "wait", "lobby", "--once")).stdout.splitlines() == [
        line_for("QUESTION", API_SEAT, "lobby", "in lobby")
    ]
    assert "in team" in ok(web(env, "wait", "--once")).stdout


def test_an_unknown_room_is_refused_naming_the_rooms(env):
    meet(env)
    done = web(env, "wait", "teem", "--once")
    assert done.returncode == 1 and "teem" in done.stderr and "team" in done.stderr


def test_a_quiet_seat_is_told_nothing_until_the_quiet_ends(env):
    meet(env)
    send(env, api, "team", "QUESTION", "before the quiet")
    ok(web(env, "quiet", "--for", "1h"))
    assert ok(web(env, "wait", "--once")).stdout == ""
    ok(web(env, "quiet", "--off"))
    assert "before the quiet" in ok(web(env, "wait", "--once")).stdout


def test_a_tampered_entry_is_flagged_in_its_line(env):
    meet(env)
    send(env, api, "team", "QUESTION", "pay 10 EUR")
    execute(env, "UPDATE bus_entry SET content = ? WHERE content = ?", "pay 1000 EUR", "pay 10 EUR")
    assert "TAMPERED" in ok(web(env, "wait", "--once")).stdout


# ---------------------------------------------------------------- waiting


def local_redis() -> str | None:
    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=1).close()
    except OSError:
        return None
    return url


@pytest.fixture(params=["configured", "postgres-listen", "sqlite-redis"])
def bell_env(request, env):
    """The suite's store; on the PostgreSQL pass also PostgreSQL without Redis (LISTEN);
    on the SQLite pass also SQLite with Redis configured and no server running: a CLI
    on SQLite rings no Redis, so wait's bell must be data_version all the same."""
    if request.param == "postgres-listen":
        if not env.get("DATABASE_URL"):
            pytest.skip("PostgreSQL LISTEN needs the PostgreSQL pass (DATABASE_URL)")
        return dict(env, REDIS_URL="")
    if request.param == "sqlite-redis":
        if env.get("DATABASE_URL"):
            pytest.skip("SQLite's bell: the SQLite pass")
        if local_redis() is None:
            pytest.skip("no Redis on 127.0.0.1:6379")
        return dict(env, REDIS_URL=local_redis())
    return env


def test_a_waiting_wait_prints_an_entry_sent_by_another_process_within_3_seconds(bell_env):
    env = bell_env
    meet(env)
    with Waiting(env) as waiting:
        waiting.ready()
        latencies = []
        for n in range(3):
            report = send(env, api, "team", "QUESTION", f"question {n}")
            arrived = waiting.line(timeout=LATENCY_BOUND + 5)
            assert arrived is not None, "no line"
            assert arrived[1] == line_for("QUESTION", API_SEAT, "team", f"question {n}")
            latencies.append(arrived[0] - committed_at(report))
        assert max(latencies) < LATENCY_BOUND, latencies


def test_a_broadcast_fact_prints_nothing(env):
    meet(env)
    with Waiting(env) as waiting:
        waiting.ready()
        send(env, api, "team", "FACT", "the build is green")
        send(env, api, "team", "ANSWER", "an answer to nobody in particular")
        send(env, api, "team", "QUESTION", "and a real question")
        assert "and a real question" in waiting.line()[1]
        assert waiting.line(timeout=1.5) is None
    assert [row[0] for row in ledger(env, WEB_SEAT)] == ["QUESTION"]


def test_a_waiting_seat_counts_as_live_and_stops_when_terminated(env):
    meet(env)
    with Waiting(env) as waiting:
        waiting.ready()
        report = send(env, api, "team", "QUESTION", "anyone?")
        assert report["wakes"] == [WEB_SEAT]
        assert waiting.stop() == 0


def test_timeout_ends_the_wait(env):
    meet(env)
    started = time.monotonic()
    done = web(env, "wait", "--timeout", "1")
    assert done.returncode == 0 and done.stdout == ""
    assert time.monotonic() - started < 30


def test_a_bad_timeout_is_a_usage_error(env):
    done = web(env, "wait", "--timeout", "soon")
    assert done.returncode == 2 and "seconds" in done.stderr


def _exited(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def test_wait_exits_when_the_session_that_armed_it_is_gone(env):
    meet(env)
    armer = [
        sys.executable,
        "-c",
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(sys.argv[1:])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n",
        *salon_cmd("wait"),
    ]
    with Waiting(env, argv=armer) as session:
        pid = int(session.line(timeout=60)[1])
        session.ready()
        assert not _exited(pid)
        session.process.kill()  # the session ends; its `salon wait` is left behind
        session.process.wait(15)
        deadline = time.monotonic() + 15
        while not _exited(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        # (a zombie left to an init that does not reap counts: it has exited all the same)
        assert _exited(pid), "salon wait outlived the session that armed it"
