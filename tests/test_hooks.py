"""`salon hook session-start|stop|heartbeat` as Claude Code runs them.

Every test spawns `python -m salon.cli hook …` with real hook JSON on stdin, reads the
JSON it prints, and reads the database back. Interactive vs headless is forced with
AGENT_SALON_HEADLESS except in the tests of the detection itself, which put a stand-in
`claude` process (a shell script named claude) between the test and the hook.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import subprocess
import sys
import termios
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mcpgate.claude import commandline, hookinput, processes
from tests.claude_kit import (
    API_SEAT,
    OPS_SEAT,
    WEB_SEAT,
    WEB_SEAT_2,
    WEB_SESSION,
    WEB_SESSION_2,
    api,
    execute,
    hook,
    hook_input,
    hook_json,
    ledger,
    ok,
    ok_json,
    ops,
    project,
    query,
    rooms_of,
    salon,
    seat_row,
    send,
    stop_hooks_at_once,
    web,
)
from tests.support import run_salon


@pytest.fixture
def env(env, tmp_path):
    """The store of the `env` fixture, with a TMPDIR of this test's own (heartbeat stamps
    and the fallback hook log live there) and this agent's default room."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return dict(env, TMPDIR=str(tmp), AGENT_SALON_ROOM="team")


@pytest.fixture
def webdir(tmp_path):
    """The project directory of agent web-app: its name is the agent's name."""
    return project(tmp_path, "web-app")


def start(env, webdir, session=WEB_SESSION, **kw):
    return hook_json(hook(env, "session-start", session, webdir, **kw))


def stop(env, webdir, session=WEB_SESSION, **kw):
    return hook_json(hook(env, "stop", session, webdir, **kw))


def context(output) -> str:
    assert output["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    return output["hookSpecificOutput"]["additionalContext"]


def the_team(env, webdir):
    """Room team with web-app (checked in by its SessionStart hook) and api-service."""
    ok(salon(env, "rooms", "--create", "team"))
    start(env, webdir)
    ok(api(env, "join", "team"))
    ok(web(env, "focus", "wiring the login form"))  # no focus request in the way


def stamps(env) -> list[Path]:
    return list(Path(env["TMPDIR"]).glob("agent-salon-*/beat-*"))


# ---------------------------------------------------------------- session-start


def test_session_start_checks_the_seat_in_and_tells_it_its_name_and_the_monitor_command(
    env, webdir
):
    ok(salon(env, "rooms", "--create", "team"))
    text = context(start(env, webdir))
    assert f"this session is {WEB_SEAT} on the bus" in text
    assert rooms_of(env, WEB_SEAT) == ["team"]  # AGENT_SALON_ROOM, joined once
    monitor = next(line.strip() for line in text.splitlines() if line.strip().endswith(" wait"))
    words = shlex.split(monitor)
    assert words[-4:] == [sys.executable, "-m", "salon.cli", "wait"]
    assigned = dict(word.split("=", 1) for word in words[:-4])
    assert assigned["CLAUDE_CODE_SESSION_ID"] == WEB_SESSION
    assert assigned["AGENT_SALON_NAME"] == "web-app"
    assert assigned["AGENT_SALON_DB"] == env["AGENT_SALON_DB"]  # also where the secret is
    if env.get("DATABASE_URL"):
        assert assigned["DATABASE_URL"] == env["DATABASE_URL"]
    assert "Monitor" in text and "timeout_ms 600000" in text and "arm it again" in text


def test_a_session_the_plugin_monitor_watches_is_asked_to_arm_nothing(env, webdir):
    """The plugin runs `salon wait` for the whole session: a second watch would be a
    wasted turn, so its SessionStart hook (AGENT_SALON_WATCHED=1) asks for none."""
    ok(salon(env, "rooms", "--create", "team"))
    text = context(start({**env, "AGENT_SALON_WATCHED": "1"}, webdir))
    assert "the agent-salon plugin's monitor watches the bus for this whole session" in text
    assert "Arm the Monitor" not in text and "timeout_ms" not in text
    assert not any(line.strip().endswith(" wait") for line in text.splitlines())
    assert " inbox team" in text  # how to read and write is still said


def test_the_printed_monitor_command_runs_as_the_same_seat(env, webdir):
    ok(salon(env, "rooms", "--create", "team"))
    text = context(start(env, webdir))
    ok(api(env, "join", "team"))
    send(env, api, "team", "QUESTION", "who owns the login form?")
    monitor = next(line.strip() for line in text.splitlines() if line.strip().endswith(" wait"))
    clean = {k: v for k, v in env.items() if not k.startswith(("AGENT_SALON_", "DATABASE_"))}
    done = subprocess.run(
        ["sh", "-c", monitor + " --once"], env=clean, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f'[salon] QUESTION from {API_SEAT} in "team": "who owns the login form?" '
        "— read it with inbox (room team)\n"
    )


def test_session_start_names_live_siblings_and_unread_counts_waking_first(env, webdir):
    ok(salon(env, "rooms", "--create", "team"))
    ok(salon(env, "rooms", "--create", "lobby"))
    start(env, webdir, session=WEB_SESSION_2)
    start(env, webdir)  # checked in to its default room (team) first, then joins lobby
    ok(api(env, "join", "team"))
    ok(api(env, "join", "lobby"))
    ok(web(env, "join", "lobby"))
    send(env, api, "lobby", "FACT", "coffee is ready")
    send(env, api, "team", "QUESTION", "who owns the login form?")
    text = context(start(env, webdir))
    assert f"Live sibling seats of your agent: {WEB_SEAT_2}." in text
    assert f"Also live in your rooms: lobby: {API_SEAT}; team: {API_SEAT}." in text
    unread = next(line for line in text.splitlines() if line.startswith("Unread:"))
    assert unread == "Unread: team 1 (1 waking you); lobby 1."


def test_a_headless_session_start_gets_its_name_and_one_send_command_only(env, webdir):
    ok(salon(env, "rooms", "--create", "team"))
    text = context(start(env, webdir, headless=True))
    assert f"this run is {WEB_SEAT} on the bus" in text
    assert rooms_of(env, WEB_SEAT) == ["team"]
    assert len(text.splitlines()) == 1
    assert " send team FACT " in text
    assert "Monitor" not in text and " wait" not in text


# ---------------------------------------------------------------- stop


def test_the_stop_hook_blocks_when_a_waking_entry_arrived(env, webdir):
    the_team(env, webdir)
    assert stop(env, webdir) is None
    send(env, api, "team", "QUESTION", "who owns the login form?\nasking for the API")
    output = stop(env, webdir)
    assert output["decision"] == "block"
    reason = output["reason"]
    assert f'QUESTION from {API_SEAT} in "team": "who owns the login form? asking for' in reason
    assert "inbox team" in reason


def test_the_stop_hook_nudges_once_per_entry(env, webdir):
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "first question")
    assert "first question" in stop(env, webdir)["reason"]
    assert stop(env, webdir) is None
    assert stop(env, webdir) is None
    send(env, api, "team", "REQUEST", "please review the schema", "--to", "web-app")
    reason = stop(env, webdir)["reason"]
    assert "please review the schema" in reason and "first question" not in reason
    assert [row[3] for row in ledger(env, WEB_SEAT)] == ["stop", "stop"]


def test_a_nudge_is_not_a_delivery(env, webdir):
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "who owns the login form?")
    assert stop(env, webdir)["decision"] == "block"
    peek = ok_json(web(env, "peek", "team", "--json"))
    assert (peek["unread"], peek["unreadWaking"]) == (1, 1)
    inbox = ok_json(web(env, "inbox", "team", "--json"))
    assert [e["content"] for e in inbox["entries"]] == ["who owns the login form?"]


def test_an_entry_addressed_to_another_seat_neither_blocks_nor_wakes_this_seat(env, webdir):
    the_team(env, webdir)
    ok(ops(env, "join", "team"))
    send(env, api, "team", "QUESTION", "ops: is staging up?", "--to", OPS_SEAT)
    assert stop(env, webdir) is None
    assert ledger(env, WEB_SEAT) == []
    assert ok(web(env, "wait", "--once")).stdout == ""
    assert [row[2] for row in ledger(env, OPS_SEAT)] == [True]


def test_a_quiet_seat_is_not_nudged_until_the_quiet_ends(env, webdir):
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "who owns the login form?")
    ok(web(env, "quiet", "--for", "1h"))
    assert stop(env, webdir) is None
    ok(web(env, "quiet", "--off"))
    assert stop(env, webdir)["decision"] == "block"


def test_two_stop_hooks_at_once_nudge_an_entry_once(env, webdir):
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "who owns the login form?")
    blocks = stop_hooks_at_once(env, webdir)
    assert len(blocks) == 1 and "who owns the login form?" in blocks[0]["reason"]


def test_the_focus_request_rides_once_in_the_session_start_context_never_in_a_block(env, webdir):
    ok(salon(env, "rooms", "--create", "team"))
    assert "Declare a focus" not in context(start(env, webdir))  # nobody else is here
    ok(api(env, "join", "team"))
    assert stop(env, webdir) is None  # a focus request alone never holds a turn
    assert seat_row(env, WEB_SEAT)[1] is None

    text = context(start(env, webdir))  # the session resumes, with api-service live

    assert f"others are live in your rooms (team: {API_SEAT})" in text
    assert "Declare a focus" in text and " focus " in text
    assert "Declare a focus" not in context(start(env, webdir))  # asked once, ever
    assert seat_row(env, WEB_SEAT)[1] is not None


def test_the_focus_request_rides_in_the_same_block_as_a_nudge(env, webdir):
    ok(salon(env, "rooms", "--create", "team"))
    start(env, webdir)
    ok(api(env, "join", "team"))
    send(env, api, "team", "QUESTION", "who owns the login form?")
    reason = stop(env, webdir)["reason"]
    assert "who owns the login form?" in reason and "Declare a focus" in reason


def test_a_seat_with_a_focus_is_never_asked_for_one(env, webdir):
    the_team(env, webdir)
    assert stop(env, webdir) is None
    assert seat_row(env, WEB_SEAT)[1] is None


def test_a_headless_run_is_checked_in_told_its_name_and_never_blocked(env, webdir):
    ok(salon(env, "rooms", "--create", "team"))
    ok(api(env, "join", "team"))
    assert f"this run is {WEB_SEAT}" in context(start(env, webdir, headless=True))
    send(env, api, "team", "QUESTION", "who owns the login form?")
    assert stop(env, webdir, headless=True) is None
    assert [row[2:4] for row in ledger(env, WEB_SEAT)] == [(True, "")]
    assert seat_row(env, WEB_SEAT)[0] is not None


def test_a_headless_run_does_not_consume_the_interactive_seats_nudge(env, webdir):
    the_team(env, webdir)
    start(env, webdir, session=WEB_SESSION_2, headless=True)
    send(env, api, "team", "QUESTION", "who owns the login form?")
    assert stop(env, webdir, session=WEB_SESSION_2, headless=True) is None
    assert stop(env, webdir, headless=True) is None  # the same session, run with -p
    assert [row[3] for row in ledger(env, WEB_SEAT)] == [""]
    assert stop(env, webdir)["decision"] == "block"


def test_session_start_lists_an_entry_never_told_and_nothing_tells_it_again(env, webdir):
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "asked while the session was away")

    text = context(start(env, webdir))

    assert f'QUESTION from {API_SEAT} in "team": "asked while the session was away"' in text
    assert "inbox team" in text
    assert stop(env, webdir) is None
    assert ok(web(env, "wait", "--once")).stdout == ""
    assert "asked while" not in context(start(env, webdir))
    assert [row[3] for row in ledger(env, WEB_SEAT)] == ["start"]


def test_an_entry_the_monitor_printed_does_not_hold_the_turn_as_well(env, webdir):
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "who owns the login form?")

    assert "who owns the login form?" in ok(web(env, "wait", "--once")).stdout

    assert stop(env, webdir) is None
    assert [row[3] for row in ledger(env, WEB_SEAT)] == ["monitor"]


def test_an_entry_read_in_the_inbox_is_told_by_the_reading(env, webdir):
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "who owns the login form?")
    ok(web(env, "peek", "team"))  # a peek shows it without marking it read

    assert stop(env, webdir) is None
    assert ok(web(env, "wait", "--once")).stdout == ""
    assert [row[3] for row in ledger(env, WEB_SEAT)] == ["inbox"]


def test_a_block_for_an_entry_pushed_before_says_it_was_pushed(env, webdir):
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "who owns the login form?")
    # What the push path records when it hands the entry to an open stream.
    execute(env, "UPDATE bus_wakedecision SET push_seq = 1, pushed_at = decided_at")
    pushed = query(env, "SELECT pushed_at FROM bus_wakedecision")[0][0]

    reason = stop(env, webdir)["reason"]

    assert "who owns the login form?" in reason
    assert f"(also pushed {str(pushed)[11:19]} UTC)" in reason


# ---------------------------------------------------------------- a seat that was not there


def _web2(env, *args):
    return salon(env, *args, agent="web-app", session=WEB_SESSION_2)


def _claim_while_web_app_is_away(env, webdir) -> dict:
    """web-app's session joins team and ends; api-service asks web-app by name while no
    session of it is live."""
    ok(salon(env, "rooms", "--create", "team"))
    start(env, webdir)
    ok(api(env, "join", "team"))
    ok(web(env, "focus", "wiring the login form"))
    assert hook_json(hook(env, "session-end", WEB_SESSION, webdir)) is None
    return send(env, api, "team", "REQUEST", "please rotate the signing key", "--to", "web-app")


def test_a_claim_to_an_absent_agent_is_told_to_its_next_session(env, webdir):
    report = _claim_while_web_app_is_away(env, webdir)
    assert report["wakes"] == []
    assert "will be read when a session of it comes back" in report["notice"][0]

    text = context(start(env, webdir, session=WEB_SESSION_2))

    unread = next(line for line in text.splitlines() if line.startswith("Unread:"))
    assert unread == "Unread: team 1 (1 waking you)."
    assert f'REQUEST from {API_SEAT} in "team": "please rotate the signing key"' in text
    # Told once: no other path repeats it.
    assert ok(_web2(env, "wait", "--once")).stdout == ""
    assert stop(env, webdir, session=WEB_SESSION_2) is None
    inbox = ok_json(_web2(env, "inbox", "--json"))
    [entry] = inbox["entries"]
    assert (entry["content"], entry["forMe"], entry["wakes"]) == (
        "please rotate the signing key",
        True,
        True,
    )
    assert ledger(env, WEB_SEAT_2) == [("REQUEST", "please rotate the signing key", True, "start")]


@pytest.mark.parametrize("first", ["monitor", "stop"])
def test_a_claim_to_an_absent_agent_is_told_once_by_whichever_path_comes_first(env, webdir, first):
    """A session whose first word on the bus is its Monitor's `salon wait`, or a Stop
    hook (no SessionStart hook ran), is told the claim there, and nowhere again."""
    _claim_while_web_app_is_away(env, webdir)

    if first == "monitor":
        line = ok(_web2(env, "wait", "--once")).stdout
        assert f'REQUEST from {API_SEAT} in "team": "please rotate the signing key"' in line
        assert stop(env, webdir, session=WEB_SESSION_2) is None
    else:
        reason = stop(env, webdir, session=WEB_SESSION_2)["reason"]
        assert "please rotate the signing key" in reason
        assert stop(env, webdir, session=WEB_SESSION_2) is None
        assert ok(_web2(env, "wait", "--once")).stdout == ""
    assert "please rotate" not in context(start(env, webdir, session=WEB_SESSION_2))
    assert [row[3] for row in ledger(env, WEB_SEAT_2)] == [first]


def test_a_claim_a_sibling_session_was_told_is_not_told_to_a_new_session(env, webdir):
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "who owns the login form?")
    assert stop(env, webdir)["decision"] == "block"  # told to web-app's first session

    text = context(start(env, webdir, session=WEB_SESSION_2))

    assert "who owns the login form?" not in text
    assert stop(env, webdir, session=WEB_SESSION_2) is None
    assert ledger(env, WEB_SEAT_2) == []


def test_a_session_s_own_agent_s_entries_are_no_claim_on_its_next_session(env, webdir):
    """A sibling's own QUESTION stays unread for the next session (the other half of its
    conversation), but it is the agent's own question, not a claim on it."""
    the_team(env, webdir)
    send(env, web, "team", "QUESTION", "does anyone use the v1 login?")

    text = context(start(env, webdir, session=WEB_SESSION_2))

    assert "Unread: team 1." in text and "v1 login" not in text
    assert ledger(env, WEB_SEAT_2) == []


def _monitor(command: str, status: str = "running") -> dict:
    """One in-flight task of the Stop hook input's `background_tasks`, as Claude Code
    2.1.332 lists a Monitor (tests/test_claude_cli.py sees the real one)."""
    return {"id": "b1x9k2", "type": "monitor", "status": status, "description": "salon",
            "command": command}  # fmt: skip


def test_a_block_made_while_no_monitor_runs_salon_wait_says_to_arm_it_again(env, webdir):
    the_team(env, webdir)
    shell = {"id": "b2", "type": "shell", "status": "running", "command": "npm run dev"}
    send(env, api, "team", "QUESTION", "who owns the login form?")

    reason = stop(env, webdir, background_tasks=[shell])["reason"]

    assert "who owns the login form?" in reason
    assert "no Monitor is running `salon wait` for this session any more" in reason
    rearm = reason.split("Arm the Monitor tool again (timeout_ms 600000): ", 1)[1]
    assert rearm.endswith(" wait") and f"CLAUDE_CODE_SESSION_ID={WEB_SESSION}" in rearm


def test_a_running_salon_wait_monitor_or_an_input_without_the_list_adds_no_rearm_line(env, webdir):
    the_team(env, webdir)
    text = context(start(env, webdir))
    armed = next(line.strip() for line in text.splitlines() if line.strip().endswith(" wait"))
    for n, tasks in enumerate(([_monitor(armed)], [_monitor("salon wait --timeout 60")], None)):
        send(env, api, "team", "QUESTION", f"question {n}")
        fields = {} if tasks is None else {"background_tasks": tasks}
        reason = stop(env, webdir, **fields)["reason"]
        assert f"question {n}" in reason and "no Monitor is running" not in reason


def test_a_lapsed_monitor_never_holds_a_turn_on_its_own(env, webdir):
    the_team(env, webdir)
    assert stop(env, webdir, background_tasks=[]) is None
    assert stop(env, webdir, background_tasks=[_monitor("salon wait", "completed")]) is None


# ---------------------------------------------------------------- heartbeat


def test_heartbeat_writes_at_most_once_a_minute_and_prints_nothing(env, webdir):
    ok(salon(env, "rooms", "--create", "team"))
    done = hook(env, "heartbeat", WEB_SESSION, webdir)
    assert hook_json(done) is None and done.stdout == ""
    first = seat_row(env, WEB_SEAT)[0]
    assert first is not None
    assert hook_json(hook(env, "heartbeat", WEB_SESSION, webdir)) is None
    assert seat_row(env, WEB_SEAT)[0] == first
    for stamp in stamps(env):  # without the stamp, the database rule still holds
        stamp.unlink()
    assert hook_json(hook(env, "heartbeat", WEB_SESSION, webdir)) is None
    assert seat_row(env, WEB_SEAT)[0] == first
    old = datetime.now(UTC) - timedelta(minutes=2)
    execute(env, "UPDATE bus_seat SET last_seen = ? WHERE name = ?", _db_time(env, old), WEB_SEAT)
    for stamp in stamps(env):
        stamp.unlink()
    assert hook_json(hook(env, "heartbeat", WEB_SESSION, webdir)) is None
    assert seat_row(env, WEB_SEAT)[0] != first


def _db_time(env, moment: datetime):
    return moment if env.get("DATABASE_URL") else moment.replace(tzinfo=None).isoformat(" ")


def test_heartbeat_shows_the_seat_live(env, webdir):
    ok(salon(env, "rooms", "--create", "team"))
    hook_json(hook(env, "heartbeat", WEB_SESSION, webdir))
    agents = ok_json(salon(env, "agents", "--json"))
    (seat,) = [s for a in agents["agents"] for s in a["seats"] if s["seat"] == WEB_SEAT]
    assert seat["liveness"] == "live"


# ---------------------------------------------------------------- never fail a turn


def _no_pg(env):
    return {k: v for k, v in env.items() if k not in ("DATABASE_URL", "REDIS_URL")}


def _log_lines(*paths: Path) -> list[str]:
    return [line for path in paths if path.exists() for line in path.read_text().splitlines()]


@pytest.mark.parametrize("kind", ["session-start", "stop", "heartbeat"])
def test_a_store_in_a_directory_that_cannot_exist_exits_0_silently_and_is_logged(env, webdir, kind):
    broken = dict(_no_pg(env), AGENT_SALON_DB="/dev/null/nowhere/salon.db")
    done = hook(broken, kind, WEB_SESSION, webdir)
    assert (done.returncode, done.stdout) == (0, "")
    uid = os.getuid()
    lines = _log_lines(Path(env["TMPDIR"]) / f"agent-salon-{uid}" / hookinput.LOG_NAME)
    assert len(lines) == 1 and f"salon hook {kind}" in lines[0]


def test_a_store_that_cannot_be_opened_exits_0_silently_and_is_logged(env, webdir, tmp_path):
    missing = tmp_path / "no-such-dir" / "salon.db"
    done = hook(dict(_no_pg(env), AGENT_SALON_DB=str(missing)), "stop", WEB_SESSION, webdir)
    assert (done.returncode, done.stdout) == (0, "")
    uid = os.getuid()
    (line,) = _log_lines(Path(env["TMPDIR"]) / f"agent-salon-{uid}" / hookinput.LOG_NAME)
    assert "salon hook stop" in line and "does not exist" in line


def test_the_first_hook_on_a_new_store_makes_its_tables(env, webdir, tmp_path):
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    done = hook(
        dict(_no_pg(env), AGENT_SALON_DB=str(fresh / "salon.db")),
        "session-start",
        WEB_SESSION,
        webdir,
    )
    assert done.returncode == 0 and "this session is web-app#3f9c1a20" in done.stdout


@pytest.mark.parametrize("garbage", ["", "not json", "[1, 2]", '{"session_id": 7}'])
def test_garbage_on_stdin_exits_0_with_nothing_on_stdout(env, webdir, garbage):
    done = run_salon(
        "hook", "stop", env=dict(env, AGENT_SALON_HEADLESS="0"), cwd=webdir, stdin=garbage
    )
    assert (done.returncode, done.stdout) == (0, "")
    assert len(_log_lines(Path(env["AGENT_SALON_DB"]).parent / hookinput.LOG_NAME)) == 1


def test_a_malformed_setting_does_not_fail_the_hook(env, webdir):
    done = hook(dict(env, AGENT_SALON_PORT="not-a-port"), "stop", WEB_SESSION, webdir)
    assert (done.returncode, done.stdout) == (0, "")


def test_an_unknown_hook_kind_exits_0_silently(env, webdir):
    done = run_salon("hook", "pre-tool-use", env=env, cwd=webdir, stdin="{}")
    assert (done.returncode, done.stdout) == (0, "")


def test_the_agent_is_salon_name_when_set(env, webdir):
    ok(salon(env, "rooms", "--create", "team"))
    text = context(start(dict(env, AGENT_SALON_NAME="frontend"), webdir))
    assert "this session is frontend#3f9c1a20" in text


def test_manage_py_hook_behaves_the_same(env, webdir):
    ok(salon(env, "rooms", "--create", "team"))
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve().parent.parent / "manage.py"), "hook", "stop"],
        env=dict(env, AGENT_SALON_HEADLESS="0"),
        cwd=webdir,
        input=hook_input("stop", WEB_SESSION, webdir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, "")
    assert rooms_of(env, WEB_SEAT) == ["team"]


# ---------------------------------------------------------------- headless detection


def _fake_claude(tmp_path: Path) -> Path:
    """A stand-in for Claude Code: a process named claude that runs the hook as its child."""
    script = tmp_path / "bin" / "claude"
    script.parent.mkdir(exist_ok=True)
    script.write_text(
        '#!/bin/sh\n"$SALON_PYTHON" -m salon.cli hook session-start < "$SALON_HOOK_INPUT"\n'
    )
    script.chmod(0o755)
    return script


def _session_start_under_claude(env, tmp_path, webdir, *args, terminal=False) -> str:
    ok(salon(env, "rooms", "--create", "team"))
    given = tmp_path / "hook-input.json"
    given.write_text(hook_input("session-start", WEB_SESSION, webdir))
    environment = dict(env, SALON_PYTHON=sys.executable, SALON_HOOK_INPUT=str(given))
    argv = [str(_fake_claude(tmp_path)), *args]
    if not terminal:
        done = subprocess.run(
            argv,
            env=environment,
            cwd=webdir,
            capture_output=True,
            text=True,
            timeout=60,
            start_new_session=True,  # no controlling terminal
        )
        return context(hook_json(done))
    leader, follower = os.openpty()

    def take_the_terminal():
        os.setsid()
        fcntl.ioctl(follower, termios.TIOCSCTTY, 0)

    try:
        process = subprocess.Popen(
            argv,
            env=environment,
            cwd=webdir,
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=take_the_terminal,
            pass_fds=(follower,),
        )
        out, err = process.communicate(timeout=60)
    finally:
        os.close(follower)
        os.close(leader)
    assert process.returncode == 0 and err == "", err
    return context(json.loads(out))


def test_claude_with_print_flag_in_the_parent_chain_is_headless(env, tmp_path, webdir):
    text = _session_start_under_claude(env, tmp_path, webdir, "-p", "fix the bug", terminal=True)
    assert "a headless run" in text


def test_claude_without_a_terminal_is_headless(env, tmp_path, webdir):
    text = _session_start_under_claude(env, tmp_path, webdir, "--output-format", "stream-json")
    assert "a headless run" in text


def test_claude_in_a_terminal_without_print_is_interactive(env, tmp_path, webdir):
    text = _session_start_under_claude(env, tmp_path, webdir, "--continue", terminal=True)
    assert "Monitor" in text and "a headless run" not in text


def test_agent_salon_headless_forces_either_way(env, tmp_path, webdir):
    text = _session_start_under_claude(
        dict(env, AGENT_SALON_HEADLESS="0"), tmp_path, webdir, "-p", "x"
    )
    assert "Monitor" in text


def test_a_stop_hook_with_no_terminal_and_no_claude_parent_is_not_headless_and_blocks(env, webdir):
    """Nothing says headless (no `claude -p` above it, no variable): an unknown case is
    taken as a session someone waits on, so the entry is told."""
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "who owns the login form?")
    done = subprocess.run(
        [sys.executable, "-m", "salon.cli", "hook", "stop"],
        env={k: v for k, v in env.items() if k != "AGENT_SALON_HEADLESS"},
        cwd=webdir,
        input=hook_input("stop", WEB_SESSION, webdir),
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,  # no controlling terminal
    )
    assert done.returncode == 0, done.stderr
    assert "who owns the login form?" in json.loads(done.stdout)["reason"]


# ---------------------------------------------------------------- the pure parts


def _proc(argv, tty=True, pid=10):
    return processes.Proc(pid=pid, ppid=1, argv=tuple(argv), tty=tty, start="1")


@pytest.mark.parametrize(
    ("chain", "headless"),
    [
        ([_proc(["claude"])], False),
        ([_proc(["claude", "-p", "hi"])], True),
        ([_proc(["claude", "--print"])], True),
        ([_proc(["claude"], tty=False)], True),
        (
            [
                _proc(["bash", "-c", "x"]),
                _proc(["node", "/usr/lib/@anthropic-ai/claude-code/cli.js"]),
            ],
            False,
        ),
        ([_proc(["/home/u/.local/share/claude/versions/2.1.90", "-p"])], True),
        # No Claude Code in the chain, with a terminal or without: nothing says headless.
        ([_proc(["bash"])], False),
        ([_proc(["bash"], tty=False)], False),
        ([], False),
        ([_proc(["python", "-m", "salon.cli", "hook", "stop", "-p"])], False),
    ],
)
def test_headless_rule(chain, headless):
    assert processes.decide_headless(None, chain) is headless


def test_headless_rule_is_forced_by_the_variable():
    chain = [_proc(["claude", "-p"])]
    assert processes.decide_headless(False, chain) is False
    assert processes.decide_headless(True, [_proc(["claude"])]) is True


def test_the_process_chain_reaches_this_test():
    chain = processes.ancestors(os.getpid())
    assert chain[0].pid == os.getpid() and chain[0].argv[0].endswith(
        ("python", "python3", "pytest")
    )
    assert chain[0].start == processes.read_proc(os.getpid()).start


def test_ps_gives_the_same_chain_as_proc():
    here = processes._read_ps(os.getpid())
    assert here is not None and here.ppid == os.getppid()


def test_commands_quote_every_value_and_never_carry_the_secret(tmp_path):
    env = commandline.store_env(
        database_url="",
        redis_url="",
        db_path=tmp_path / "my data" / "salon.db",
        environ={"AGENT_SALON_SECRET": "s3cret"},
    )
    env.update(AGENT_SALON_NAME="web-app", CLAUDE_CODE_SESSION_ID="x'y")
    line = commandline.shell_command(env, ["/venv/bin/python", "-m", "salon.cli", "wait"])
    assert "s3cret" not in line
    assert shlex.split(line) == [
        f"AGENT_SALON_DB={tmp_path / 'my data' / 'salon.db'}",
        "AGENT_SALON_NAME=web-app",
        "CLAUDE_CODE_SESSION_ID=x'y",
        "/venv/bin/python",
        "-m",
        "salon.cli",
        "wait",
    ]


def test_a_config_file_is_named_instead_of_its_secrets(tmp_path):
    config = tmp_path / "salon.env"
    env = commandline.store_env(
        database_url="postgres://u:pw@db/salon",
        redis_url="redis://r:6379/0",
        db_path=tmp_path / "data" / "salon.db",
        environ={"AGENT_SALON_CONFIG": str(config)},
    )
    assert env == {
        "AGENT_SALON_CONFIG": str(config),
        "AGENT_SALON_DB": str(tmp_path / "data" / "salon.db"),  # the data dir: the secret
    }


def test_pythonpath_is_carried_only_when_it_found_agent_salon():
    root = str(Path(commandline.__file__).resolve().parents[2])
    assert commandline.pythonpath_env({"PYTHONPATH": f"/elsewhere:{root}"}) == {"PYTHONPATH": root}
    assert commandline.pythonpath_env({"PYTHONPATH": "/elsewhere"}) == {}
