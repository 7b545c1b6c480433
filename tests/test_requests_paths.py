# ruff: noqa: F811 - the fixtures `rooms` and `web` come from tests.test_requests
"""Cross-project requests, the harder paths: a served request never pushed to a live MCP
stream (the `ask` tool of a real daemon), a gate asking the triage judge, two processes
of one store settling the same request, a server killed in the middle of a serve.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.claude_kit import WEB_SEAT, WEB_SESSION, hook, hook_json, ok, query
from tests.mcp_helpers import RawSession
from tests.support import REPO
from tests.test_requests import (  # noqa: F401 - the fixtures are shared
    consumer,
    rooms,
    runs,
    untold_rows,
    web,
)


@pytest.fixture
async def client():
    async with httpx.AsyncClient(timeout=30) as http:
        yield http


# ---------------------------------------------------------------- push and the tool


async def test_a_served_ask_through_the_tool_is_answered_never_pushed_nor_told_by_wait(
    env, web, daemon, client
):
    hook_json(hook(env, "session-start", WEB_SESSION, web))  # records web-app's project
    reader = await RawSession(client, daemon.url, "label=web-app").open()
    asker = await RawSession(client, daemon.url, "label=consumer-b").open()
    reader_seat = await reader.seat()
    await asker.seat()
    async with reader.stream() as stream:
        await stream.next(comments=True)
        report = await asker.result("ask", {"to": "web-app", "ask": "status:db", "wait": 10})
        assert report["verdict"] == "serve"
        assert report["outcome"] == "served"
        assert report["answer"]["text"].startswith("db is up")
        # The control: an entry that does wake the reader is the first thing pushed.
        control = await asker.result(
            "send", {"text": "please look", "type": "REQUEST", "to": [reader_seat]}
        )
        event = await stream.next()
        # The wait tool tells the control, and nothing of the served request.
        waited = await reader.result("wait", {"timeout": 5})
    assert event["message"]["params"]["meta"]["id"] == control["id"]
    assert [entry["id"] for entry in waited["entries"]] == [control["id"]]
    assert runs(web) == 1
    pushed = query(
        env,
        "SELECT count(*) FROM bus_wakedecision w JOIN bus_entry e ON e.id = w.entry_id "
        "WHERE e.type = 'REQUEST' AND w.pushed_at IS NOT NULL",
    )
    assert pushed == [(1,)]


async def test_the_ask_tool_refuses_a_malformed_key_naming_the_rule(daemon, client):
    asker = await RawSession(client, daemon.url, "label=consumer-b").open()
    await asker.seat()
    message = await asker.call("ask", {"to": "web-app", "ask": "status:../../etc"})
    result = message["result"]
    assert result["isError"]
    assert "is not well-formed" in result["content"][0]["text"]


# ---------------------------------------------------------------- gate


def judge(tmp_path: Path, word: str) -> Path:
    calls = tmp_path / "judged.jsonl"
    script = tmp_path / f"judge-{word}"
    script.write_text(f'#!/bin/sh\ncat >> "{calls}"\necho >> "{calls}"\necho {word}\n')
    script.chmod(0o755)
    return script


def test_a_gate_the_judge_says_yes_to_wakes_a_person(rooms, web, tmp_path):
    env = dict(rooms, AGENT_SALON_TRIAGE_CMD=str(judge(tmp_path, "yes")))
    report = json.loads(ok(consumer(env, "ask", "web-app", "deploy:prod", "--json")).stdout)
    assert report["verdict"] == "gate"
    assert report["outcome"] == "woken"
    assert "the judge said a person should see it" in report["woke"]
    assert untold_rows(rooms, WEB_SEAT) == [("REQUEST", "addressed")]
    document = json.loads((tmp_path / "judged.jsonl").read_text().splitlines()[0])
    assert document["half"] == "gate"
    assert document["request"]["ask"] == "deploy:prod"


def test_a_gate_the_judge_says_no_to_tells_the_asker_it_was_declined(rooms, web, tmp_path):
    env = dict(rooms, AGENT_SALON_TRIAGE_CMD=str(judge(tmp_path, "no")))
    report = json.loads(ok(consumer(env, "ask", "web-app", "deploy:prod", "--json")).stdout)
    assert report["outcome"] == "declined"
    assert report["answer"]["text"].startswith("declined: ")
    assert untold_rows(rooms, WEB_SEAT) == []


def test_a_gate_with_no_judge_wakes_a_person(rooms, web):
    report = json.loads(ok(consumer(rooms, "ask", "web-app", "deploy:prod", "--json")).stdout)
    assert report["outcome"] == "woken"
    assert "no triage judge" in report["woke"]
    assert untold_rows(rooms, WEB_SEAT) == [("REQUEST", "addressed")]


# ---------------------------------------------------------------- once only

# A process of the store, in Python: sends a request without settling it (as a writer
# that died right after its commit would leave it), or settles one, or sweeps.
STORE_PROCESS = """
import os, sys, json
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "salon.settings")
import django
django.setup()
from bus import services
what = sys.argv[1]
if what == "send":
    services.serving.set_dispatch(lambda work: None)
    seat = services.seats.check_in(agent="consumer-b", session_id=sys.argv[2])
    report = services.entries.send_entry(
        seat=seat, text="db?", to=["web-app"], meta={"ask": sys.argv[3]}, room="salon"
    )
    print(report["id"])
elif what == "settle":
    print(json.dumps(services.serving.settle(sys.argv[2])))
else:
    print(json.dumps(services.serving.sweep()))
"""


def store_process(env, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", STORE_PROCESS, *args],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out.strip()


def unsettled(env, key: str = "status:db") -> str:
    return finished(store_process(env, "send", "5e5e5e5e-1111-4e3d-b2c1-a0f9e8d7c6b5", key))


def test_two_processes_settling_the_same_request_serve_it_once(rooms, web):
    script = web / "scripts" / "status.sh"
    # Slow enough that both processes look while the first is serving.
    script.write_text(f'#!/bin/sh\necho run >> "{web}/runs"\nsleep 0.5\necho "$1 is up"\n')
    entry_id = unsettled(rooms)
    both = [store_process(rooms, "settle", entry_id) for _ in range(2)]
    outcomes = sorted(json.loads(finished(p)) or "" for p in both)
    assert outcomes == ["", "served"]
    assert runs(web) == 1
    answers = query(rooms, "SELECT count(*) FROM bus_entry WHERE type = 'ANSWER'")
    assert answers == [(1,)]
    assert untold_rows(rooms, WEB_SEAT) == []


def test_a_request_nobody_claimed_is_served_by_the_sweep(rooms, web):
    entry_id = unsettled(rooms)
    deadline = time.monotonic() + 60
    while runs(web) == 0 and time.monotonic() < deadline:
        finished(store_process(rooms, "sweep"))
    assert runs(web) == 1
    assert query(rooms, "SELECT outcome FROM bus_request") == [("served",)]
    assert entry_id


def test_a_server_killed_mid_serve_falls_to_wake_after_the_timeout_never_a_second_run(rooms, web):
    script = web / "scripts" / "status.sh"
    script.write_text(
        f'#!/bin/sh\necho $$ > "{web}/pid"\necho run >> "{web}/runs"\nsleep 60\necho late\n'
    )
    env = dict(rooms, AGENT_SALON_SERVE_TIMEOUT="1")
    entry_id = unsettled(env)
    server = store_process(env, "settle", entry_id)
    deadline = time.monotonic() + 60
    while runs(web) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    server.kill()  # the server dies; the command it started is left running
    server.communicate()
    try:
        while time.monotonic() < deadline:
            swept = json.loads(finished(store_process(env, "sweep")))
            if swept["woken"]:
                break
        assert swept == {"woken": 1, "settled": 0}
        assert runs(web) == 1
        assert query(rooms, "SELECT outcome FROM bus_request") == [("woken",)]
        assert untold_rows(rooms, WEB_SEAT) == [("REQUEST", "addressed")]
        # Another sweep finds nothing to do: the request is settled, and never served.
        assert json.loads(finished(store_process(env, "sweep"))) == {"woken": 0, "settled": 0}
        assert runs(web) == 1
    finally:
        pid = int((web / "pid").read_text())
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
