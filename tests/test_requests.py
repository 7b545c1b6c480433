"""Cross-project requests end to end on one machine: `salon ask` (and `send` with an ask
key) from one project, the other project's policy deciding — one test per verdict of the
policy's table — and a served request waking nobody on any path. Real `salon` processes,
real hooks, a real store (SQLite; PostgreSQL and Redis when the run has them).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.claude_kit import (
    WEB_SEAT,
    WEB_SESSION,
    WEB_SESSION_2,
    hook,
    hook_json,
    ok,
    ok_json,
    project,
    query,
    salon,
)

TODAY = datetime.now(UTC).date()
SINCE = TODAY - timedelta(days=1)
CONSUMER_SESSION = "5e5e5e5e-1111-4e3d-b2c1-a0f9e8d7c6b5"
CONSUMER_SEAT = "consumer-b#5e5e5e5e"


def grants(since=SINCE, extra: str = "") -> str:
    return f"""\
[[grant]]
ask = "status:*"
to = ["consumer-b"]
since = {since}
serve = ["scripts/status.sh", "{{2}}"]

[[grant]]
ask = "secrets:*"
to = ["consumer-b"]
since = {since}
verdict = "deny"

[[grant]]
ask = "deploy:*"
to = ["consumer-b"]
since = {since}
verdict = "gate"

[[grant]]
ask = "capabilities"
to = ["consumer-b"]
since = 2026-01-01
until = 2026-03-01
serve = ["scripts/status.sh", "caps"]

[[grant]]
ask = "port:*"
to = ["qa"]
since = {since}
serve = ["scripts/status.sh", "{{2}}"]

[[grant]]
ask = "review:*"
to = ["consumer-b"]
since = {since}
verdict = "wake"
{extra}"""


STATUS_SCRIPT = """#!/bin/sh
echo run >> "{root}/runs"
echo "$1 is up (asked by $AGENT_SALON_ASKER for $AGENT_SALON_ASK)"
"""


@pytest.fixture
def web(tmp_path) -> Path:
    """The project web-app: a policy, the script it serves (each run leaves a line in
    `runs`), and one session started there (its SessionStart hook records the project)."""
    root = project(tmp_path, "web-app")
    (root / ".agent-salon").mkdir()
    (root / ".agent-salon" / "policy.toml").write_text(grants())
    (root / "scripts").mkdir()
    script = root / "scripts" / "status.sh"
    script.write_text(STATUS_SCRIPT.format(root=root))
    script.chmod(0o755)
    return root


@pytest.fixture
def rooms(env, web):
    """web-app's session and consumer-b's session, both in the default room."""
    hook_json(hook(env, "session-start", WEB_SESSION, web))
    ok(consumer(env, "join", "salon"))
    return env


def consumer(env, *args, **kw):
    return salon(env, *args, agent="consumer-b", session=CONSUMER_SESSION, **kw)


def ask(env, *args) -> dict:
    return ok_json(consumer(env, "ask", *args, "--json"))


def runs(root: Path) -> int:
    path = root / "runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


def untold_rows(env, seat: str) -> list[tuple]:
    return query(
        env,
        "SELECT e.type, w.reason FROM bus_wakedecision w JOIN bus_entry e ON e.id = w.entry_id "
        "WHERE w.seat_name = ? AND w.woken AND w.told_at IS NULL",
        seat,
    )


def stop_blocks(env, root: Path, session: str = WEB_SESSION):
    return hook_json(hook(env, "stop", session, root))


# ---------------------------------------------------------------- serve


def test_a_served_ask_is_answered_by_the_projects_code_in_the_same_call(rooms, web):
    report = ask(rooms, "web-app", "status:db", "--wait", "10")
    assert report["verdict"] == "serve"
    assert report["reason"].startswith("granted to consumer-b until ")
    assert report["outcome"] == "served"
    answer = report["answer"]
    assert answer["text"] == ("db is up (asked by consumer-b#5e5e5e5e for status:db)\n")
    assert answer["from"] == "web-app"
    assert answer["servedBy"] == "policy"
    assert report["wakes"] == []
    assert runs(web) == 1


def test_a_served_ask_wakes_nobody_on_the_stop_monitor_or_session_start_paths(rooms, web):
    ask(rooms, "web-app", "status:db", "--wait", "10")
    assert untold_rows(rooms, WEB_SEAT) == []
    # Stop: no block.
    assert stop_blocks(rooms, web) is None
    # Monitor: `salon wait --once` prints nothing for the session.
    waited = ok(salon(rooms, "wait", "--once", agent="web-app", session=WEB_SESSION, cwd=web))
    assert waited.stdout == ""
    # SessionStart: a second session of web-app starting now is owed nothing.
    started = hook_json(hook(rooms, "session-start", WEB_SESSION_2, web))
    context = json.dumps(started)
    assert "status:db" not in context
    assert untold_rows(rooms, "web-app#aa11bb22") == []


def test_the_served_answer_is_an_answer_re_the_request_written_by_the_receiving_agent(rooms):
    report = ask(rooms, "web-app", "status:db", "--wait", "10")
    rows = query(
        rooms,
        "SELECT type, sender, via, re FROM bus_entry WHERE content LIKE ?",
        "db is up%",
    )
    assert len(rows) == 1
    kind, sender, via, re = rows[0]
    assert (kind, sender, via) == ("ANSWER", "web-app", "policy")
    assert str(re).replace("-", "") == report["id"].replace("-", "")


def test_a_serve_that_fails_falls_to_wake_once_and_releases_nothing(rooms, web):
    (web / "scripts" / "status.sh").write_text(
        f'#!/bin/sh\necho run >> "{web}/runs"\necho secret-ish output\nexit 3\n'
    )
    report = ask(rooms, "web-app", "status:db", "--wait", "10")
    assert report["outcome"] == "woken"
    assert "exited with status 3" in report["woke"]
    assert report["answer"] is None
    assert runs(web) == 1
    assert untold_rows(rooms, WEB_SEAT) == [("REQUEST", "addressed")]
    block = stop_blocks(rooms, web)
    assert block is not None and block["decision"] == "block"
    assert query(rooms, "SELECT count(*) FROM bus_entry WHERE content LIKE ?", "%secret-ish%") == [
        (0,)
    ]


def test_a_serve_that_times_out_falls_to_wake_saying_so(rooms, web):
    (web / "scripts" / "status.sh").write_text(
        f'#!/bin/sh\necho run >> "{web}/runs"\nsleep 30\necho late\n'
    )
    env = dict(rooms, AGENT_SALON_SERVE_TIMEOUT="1")
    report = ask(env, "web-app", "status:db", "--wait", "10")
    assert report["outcome"] == "woken"
    assert "did not finish within 1 s" in report["woke"]
    assert runs(web) == 1
    assert untold_rows(rooms, WEB_SEAT) == [("REQUEST", "addressed")]


# ---------------------------------------------------------------- the other verdicts


def test_a_grant_whose_verdict_is_wake_wakes_a_person_as_written(rooms, web):
    report = ask(rooms, "web-app", "review:pr-12")
    assert report["verdict"] == "wake"
    assert report["wakes"] == [WEB_SEAT]
    assert report["outcome"] == "woken"
    assert runs(web) == 0


def test_an_ask_to_a_project_with_no_policy_wakes_as_before(rooms, web):
    (web / ".agent-salon" / "policy.toml").unlink()
    report = ask(rooms, "web-app", "status:db")
    assert report["verdict"] == "wake"
    assert report["reason"] == "no policy: this project has not opted in"
    assert report["wakes"] == [WEB_SEAT]
    assert runs(web) == 0


def test_an_invalid_policy_wakes_and_serves_nothing_naming_the_line(rooms, web):
    serve = 'serve = ["scripts/status.sh", "{2}"]\n'
    both = grants().replace(serve, serve + 'verdict = "deny"\n', 1)
    (web / ".agent-salon" / "policy.toml").write_text(both)
    report = ask(rooms, "web-app", "status:db")
    assert report["verdict"] == "wake"
    assert "the policy cannot be read (line " in report["reason"]
    assert "line 6: the grant has both serve and verdict" in report["reason"]
    assert report["wakes"] == [WEB_SEAT]
    assert runs(web) == 0


def test_a_denied_ask_tells_the_asker_why_and_wakes_nobody(rooms, web):
    report = ask(rooms, "web-app", "secrets:db", "--wait", "10")
    assert report["verdict"] == "deny"
    assert report["outcome"] == "denied"
    assert report["answer"]["text"].startswith("denied: ")
    assert report["wakes"] == []
    assert untold_rows(rooms, WEB_SEAT) == []


def test_a_grant_for_another_writer_denies_naming_the_key_and_the_writer(rooms, web):
    report = ask(rooms, "web-app", "port:staging", "--wait", "10")
    assert report["verdict"] == "deny"
    assert report["reason"] == f'no grant reaches "port:staging" for {CONSUMER_SEAT}'
    assert runs(web) == 0
    assert untold_rows(rooms, WEB_SEAT) == []


def test_an_expired_grant_denies_saying_when_it_expired(rooms, web):
    report = ask(rooms, "web-app", "capabilities")
    assert report["verdict"] == "deny"
    assert report["reason"] == 'your grant for "capabilities" expired on 2026-03-01'
    assert runs(web) == 0


def test_a_key_nothing_covers_wakes_a_person(rooms, web):
    report = ask(rooms, "web-app", "uptime:db")
    assert report["verdict"] == "wake"
    assert report["reason"] == 'nothing in the policy covers "uptime:db"'
    assert report["wakes"] == [WEB_SEAT]


def test_a_request_without_an_ask_key_is_free_text_and_wakes_as_before(rooms, web):
    report = ok_json(
        consumer(rooms, "send", "salon", "REQUEST", "look at db", "--to", "web-app", "--json")
    )
    assert "verdict" not in report
    assert report["wakes"] == [WEB_SEAT]
    explained = ok_json(
        salon(rooms, "policy", "explain", "web-app", "", "--as", CONSUMER_SEAT, "--json")
    )
    assert explained["verdict"] == "wake"
    assert explained["reason"].startswith("free text")


def test_send_with_an_ask_meta_is_the_same_request(rooms, web):
    report = ok_json(
        consumer(
            rooms,
            "send",
            "salon",
            "REQUEST",
            "db?",
            "--to",
            "web-app",
            "--meta",
            "ask=status:db",
            "--json",
        )
    )
    assert report["verdict"] == "serve"
    assert report["outcome"] == "served"
    assert runs(web) == 1


@pytest.mark.parametrize("key", ["../etc", "status/db", "status;rm", "Status", "a\x01b"])
def test_a_malformed_key_is_refused_at_a_local_writer_naming_the_rule(rooms, web, key):
    done = consumer(rooms, "ask", "web-app", key)
    assert done.returncode == 2
    assert "is not well-formed" in done.stderr and "Traceback" not in done.stderr
    sent = consumer(
        rooms, "send", "salon", "REQUEST", "x", "--to", "web-app", "--meta", f"ask={key}"
    )
    assert sent.returncode in (1, 2)
    assert "Traceback" not in sent.stderr
    assert query(rooms, "SELECT count(*) FROM bus_entry WHERE type = 'REQUEST'") == [(0,)]
    assert runs(web) == 0
