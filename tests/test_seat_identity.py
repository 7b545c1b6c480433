"""Which seat a connection acts as (docs/MCP.md): an MCP session becomes a seat only when it
calls a tool or checks in, a Claude Code session names itself at connect (the
X-Salon-Claude-Session header its headersHelper sends), and a stdio server makes no seat
of its own until a hook or a tool call does, and signs it off when it ends.

Against a real daemon (daphne) and real `salon mcp` / `salon hook` processes.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time

import httpx
import pytest

from mcpgate import tools
from mcpgate.sessions import CLAUDE_SESSION_HEADER
from tests.mcp_helpers import RawSession, initialize_message
from tests.support import query_store, run_salon, salon_cmd

pytestmark = pytest.mark.slow

CLAUDE_SESSION = "5e55104a-1d00-4000-8000-00000000c1a0"


@pytest.fixture
async def client():
    async with httpx.AsyncClient(timeout=30) as http:
        yield http


def seats(env) -> list[str]:
    return [name for (name,) in query_store(env, "SELECT name FROM bus_seat ORDER BY name")]


# ---------------------------------------------------------------- HTTP


async def test_an_http_session_with_a_stream_and_a_tools_list_makes_no_seat(daemon, client):
    """What `claude mcp list` does over HTTP: initialize, GET, tools/list, gone."""
    session = await RawSession(client, daemon.url, "label=web-app").open()
    async with session.stream() as stream:
        await stream.next(timeout=30, comments=True)  # "stream open"
        listed = (await session.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).json()
        assert "checkin" in [tool["name"] for tool in listed["result"]["tools"]]
    await client.delete(session.url, headers=session.headers())
    assert seats(daemon.env) == []


async def test_a_stream_opened_before_the_first_tool_call_gets_pushes_once_it_has_a_seat(
    daemon, client
):
    session = await RawSession(client, daemon.url, "label=web-app").open()
    async with session.stream() as stream:
        await stream.next(timeout=30, comments=True)
        assert seats(daemon.env) == []
        await session.result("rooms")  # the first tool call makes the seat
        seat = f"web-app#{session.session_id[:8]}"
        assert seats(daemon.env) == [seat]
        posted = await client.post(
            f"{daemon.url}/notify?label=ci",
            json={"content": "is the build green?", "type": "QUESTION", "to": ["web-app"]},
        )
        assert posted.status_code == 202, posted.text
        pushed = await stream.next(timeout=15)
    assert pushed["message"]["params"]["meta"]["id"] == posted.json()["id"]
    assert posted.json()["wakes"] == [seat]


async def test_the_claude_session_header_makes_the_first_tool_call_act_as_that_sessions_seat(
    daemon, client
):
    """A reconnect after a daemon restart: no prompt (so no checkin) comes for minutes, yet
    the first send is signed by the Claude Code session's seat, the one its hooks use."""
    session = RawSession(client, daemon.url, "label=web-app")
    answer = await session.post(initialize_message(), **{CLAUDE_SESSION_HEADER: CLAUDE_SESSION})
    assert answer.status_code == 200, answer.text
    session.session_id = answer.headers["mcp-session-id"]
    sent = await session.result("send", {"text": "back after the restart", "type": "FACT"})
    assert sent["from"] == f"web-app#{CLAUDE_SESSION[:8]}"
    assert seats(daemon.env) == [f"web-app#{CLAUDE_SESSION[:8]}"]


@pytest.mark.parametrize(
    "claimed, refusal",
    [
        ("short-id", "16 characters"),
        ("x" * 40 + "\n", "x-salon-claude-session"),
    ],
)
async def test_a_malformed_claude_session_header_is_refused_at_initialize(
    daemon, client, claimed, refusal
):
    session = RawSession(client, daemon.url, "label=web-app")
    with contextlib.suppress(httpx.LocalProtocolError):  # httpx refuses a newline itself
        answer = await session.post(initialize_message(), **{CLAUDE_SESSION_HEADER: claimed})
        assert answer.status_code == 400, answer.text
        assert refusal in answer.text
        assert "mcp-session-id" not in answer.headers
    assert seats(daemon.env) == []


async def test_a_claude_session_held_by_a_live_session_of_another_label_is_refused(daemon, client):
    holder = RawSession(client, daemon.url, "label=web-app")
    answer = await holder.post(initialize_message(), **{CLAUDE_SESSION_HEADER: CLAUDE_SESSION})
    holder.session_id = answer.headers["mcp-session-id"]
    await holder.result("rooms")

    thief = RawSession(client, daemon.url, "label=intruder")
    answer = await thief.post(initialize_message(), **{CLAUDE_SESSION_HEADER: CLAUDE_SESSION})

    assert answer.status_code == 400, answer.text
    assert CLAUDE_SESSION_HEADER in answer.text
    assert seats(daemon.env) == [f"web-app#{CLAUDE_SESSION[:8]}"]


# ---------------------------------------------------------------- stdio


def stdio(env, cwd, session_id: str = CLAUDE_SESSION) -> subprocess.Popen:
    return subprocess.Popen(
        salon_cmd("mcp"),
        env={**env, "CLAUDE_CODE_SESSION_ID": session_id, "AGENT_SALON_NAME": "web-app"},
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def ask(process: subprocess.Popen, message: dict) -> dict:
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    while True:
        answer = json.loads(process.stdout.readline())
        if answer.get("id") == message["id"]:
            return answer


def test_a_stdio_server_offers_no_checkin_and_makes_no_seat_until_a_tool_call(env, tmp_path):
    process = stdio(env, tmp_path)
    try:
        assert ask(process, initialize_message())["result"]["serverInfo"]["name"]
        listed = ask(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        names = [tool["name"] for tool in listed["result"]["tools"]]
        assert "send" in names and "checkin" not in names  # its session is known already
        time.sleep(1.5)  # past the server's look for a seat a hook made
        assert seats(env) == []

        called = ask(
            process,
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
             "params": {"name": "rooms", "arguments": {}}},
        )  # fmt: skip
        assert "result" in called and not called["result"].get("isError"), called
        assert seats(env) == [f"web-app#{CLAUDE_SESSION[:8]}"]
    finally:
        process.stdin.close()
        process.wait(15)


def test_a_stdio_server_that_ends_signs_its_seat_off_at_once(env, tmp_path):
    process = stdio(env, tmp_path)
    ask(process, initialize_message())
    ask(
        process,
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "rooms", "arguments": {}}},
    )  # fmt: skip
    process.stdin.close()
    assert process.wait(15) == 0
    done = run_salon("agents", "--json", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [agent] = json.loads(done.stdout)["agents"]
    assert [(s["seat"], s["liveness"]) for s in agent["seats"]] == [
        (f"web-app#{CLAUDE_SESSION[:8]}", "gone")
    ]


# ---------------------------------------------------------------- hooks


def test_the_headers_helper_outside_claude_code_answers_no_header_at_once(env, tmp_path):
    started = time.monotonic()
    done = subprocess.run(
        salon_cmd("hook", "mcp-headers"), env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {}
    assert time.monotonic() - started < 10  # no 1.5 s wait for a record: no Claude Code


def test_the_session_end_hook_signs_the_seat_off(env, tmp_path):
    hook_input = json.dumps(
        {"session_id": CLAUDE_SESSION, "cwd": str(tmp_path), "hook_event_name": "SessionStart"}
    )
    hook_env = {**env, "AGENT_SALON_NAME": "web-app", "AGENT_SALON_HEADLESS": "0"}
    for kind in ("session-start", "session-end"):
        done = subprocess.run(
            salon_cmd("hook", kind), env=hook_env, cwd=tmp_path, input=hook_input,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    done = run_salon("agents", "--json", env=env, cwd=tmp_path)
    [agent] = json.loads(done.stdout)["agents"]
    assert [(s["seat"], s["liveness"]) for s in agent["seats"]] == [
        (f"web-app#{CLAUDE_SESSION[:8]}", "gone")
    ]


# ---------------------------------------------------------------- tool descriptions


def test_every_tool_and_every_parameter_says_what_it_is_for():
    for tool in tools.TOOLS.values():
        assert len(tool.description) > 40, tool.name
        for name, schema in tool.schema.get("properties", {}).items():
            assert len(schema.get("description", "")) > 15, f"{tool.name}.{name}"
