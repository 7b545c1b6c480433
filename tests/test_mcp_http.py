"""/mcp over raw HTTP against a real daphne: every transport rule of docs/MCP.md and
mcpgate.protocol."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.mcp_helpers import ACCEPT_BOTH, RawSession, initialize_message, rpc
from tests.support import Daemon, query_store, run_salon

pytestmark = pytest.mark.slow


@pytest.fixture
async def client():
    async with httpx.AsyncClient(timeout=10) as http:
        yield http


def _error_code(response: httpx.Response) -> int:
    return response.json()["error"]["code"]


# ------------------------------------------------------------------ initialize


async def test_initialize_returns_a_session_id_capabilities_and_instructions(shared_daemon, client):
    response = await client.post(
        f"{shared_daemon.url}/mcp?label=web-app",
        json=initialize_message(),
        headers={"accept": ACCEPT_BOTH},
    )
    assert response.status_code == 200
    assert len(response.headers["mcp-session-id"]) >= 16
    result = response.json()["result"]
    assert result["capabilities"] == {"tools": {}, "experimental": {"claude/channel": {}}}
    assert result["serverInfo"]["name"] == "agent-salon"
    assert result["protocolVersion"] == "2025-11-25"
    for word in ("QUESTION", "REQUEST", "`to`", "`re`", "<channel", "inbox"):
        assert word in result["instructions"]


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("1999-01-01", "2025-11-25"),
    ],
)
async def test_the_clients_version_is_kept_if_supported_else_the_latest(
    shared_daemon, client, asked, answered
):
    response = await client.post(
        f"{shared_daemon.url}/mcp?label=web-app",
        json=initialize_message(asked),
        headers={"accept": ACCEPT_BOTH},
    )
    assert response.json()["result"]["protocolVersion"] == answered


async def test_a_room_that_does_not_exist_fails_initialize_naming_the_rooms(shared_daemon, client):
    response = await client.post(
        f"{shared_daemon.url}/mcp?label=web-app&room=tema",
        json=initialize_message(),
        headers={"accept": ACCEPT_BOTH},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32602
    assert "tema" in error["message"] and "salon" in error["message"]
    assert "create" in error["message"]


async def test_the_stateless_2026_probe_gets_400_with_32600(shared_daemon, client):
    by_header = await client.post(
        f"{shared_daemon.url}/mcp?label=x",
        json=rpc("server/discover", {}),
        headers={"accept": ACCEPT_BOTH, "mcp-protocol-version": "2026-07-28"},
    )
    by_method = await client.post(
        f"{shared_daemon.url}/mcp?label=x",
        json=rpc("server/discover", {}),
        headers={"accept": ACCEPT_BOTH},
    )
    for response in (by_header, by_method):
        assert response.status_code == 400
        assert _error_code(response) == -32600


# ------------------------------------------------------------------ POST rules


async def test_post_without_event_stream_in_accept_is_406(shared_daemon, client):
    response = await client.post(
        f"{shared_daemon.url}/mcp?label=x",
        json=initialize_message(),
        headers={"accept": "application/json"},
    )
    assert response.status_code == 406


async def test_post_that_is_not_json_is_415(shared_daemon, client):
    response = await client.post(
        f"{shared_daemon.url}/mcp?label=x",
        content=b"hello",
        headers={"accept": ACCEPT_BOTH, "content-type": "text/plain"},
    )
    assert response.status_code == 415


async def test_post_over_4_mib_is_413(shared_daemon, client):
    response = await client.post(
        f"{shared_daemon.url}/mcp?label=x",
        content=b"{" + b" " * (4 * 1024 * 1024 + 10) + b"}",
        headers={"accept": ACCEPT_BOTH, "content-type": "application/json"},
    )
    assert response.status_code == 413


async def test_a_json_array_batch_is_400(shared_daemon, client):
    response = await client.post(
        f"{shared_daemon.url}/mcp?label=x",
        content=json.dumps([rpc("ping")]),
        headers={"accept": ACCEPT_BOTH, "content-type": "application/json"},
    )
    assert response.status_code == 400


async def test_malformed_json_is_400_with_a_parse_error(shared_daemon, client):
    response = await client.post(
        f"{shared_daemon.url}/mcp?label=x",
        content=b'{"jsonrpc": "2.0", ',
        headers={"accept": ACCEPT_BOTH, "content-type": "application/json"},
    )
    assert response.status_code == 400
    assert _error_code(response) == -32700


async def test_a_request_without_a_session_header_is_400(shared_daemon, client):
    response = await client.post(
        f"{shared_daemon.url}/mcp?label=x", json=rpc("ping"), headers={"accept": ACCEPT_BOTH}
    )
    assert response.status_code == 400
    assert "initialize" in response.json()["error"]["message"]


async def test_an_unknown_session_is_404(shared_daemon, client):
    response = await client.post(
        f"{shared_daemon.url}/mcp?label=x",
        json=rpc("ping"),
        headers={"accept": ACCEPT_BOTH, "mcp-session-id": "0" * 32},
    )
    assert response.status_code == 404


async def test_notifications_are_answered_202_with_an_empty_body(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url).open()
    response = await session.post(rpc("notifications/initialized", id=None))
    assert response.status_code == 202
    assert response.content == b""


async def test_ping_answers_an_empty_result(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url).open()
    response = await session.post(rpc("ping", id=7))
    assert response.json() == {"jsonrpc": "2.0", "id": 7, "result": {}}


async def test_an_unknown_method_is_32601(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url).open()
    response = await session.post(rpc("resources/list", id=8))
    assert response.json()["error"]["code"] == -32601


async def test_a_foreign_host_is_403(shared_daemon, client):
    response = await client.post(
        f"{shared_daemon.url}/mcp?label=x",
        json=initialize_message(),
        headers={"accept": ACCEPT_BOTH, "host": "evil.example"},
    )
    assert response.status_code == 403


async def test_a_foreign_origin_is_403_and_a_missing_one_is_allowed(shared_daemon, client):
    foreign = await client.post(
        f"{shared_daemon.url}/mcp?label=x",
        json=initialize_message(),
        headers={"accept": ACCEPT_BOTH, "origin": "http://evil.example"},
    )
    local = await client.post(
        f"{shared_daemon.url}/mcp?label=x",
        json=initialize_message(),
        headers={"accept": ACCEPT_BOTH, "origin": f"http://localhost:{shared_daemon.port}"},
    )
    assert foreign.status_code == 403
    assert local.status_code == 200


async def test_delete_ends_the_session_and_later_requests_get_404(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url).open()
    deleted = await client.delete(session.url, headers=session.headers())
    after = await session.post(rpc("ping"))
    assert deleted.status_code == 200
    assert after.status_code == 404


# ------------------------------------------------------------------ tools


async def test_every_tool_has_a_description_and_a_closed_schema(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url).open()
    tools = (await session.post(rpc("tools/list", id=3))).json()["result"]["tools"]
    names = {tool["name"] for tool in tools}
    assert names == {
        "send",
        "ask",
        "send_message",
        "inbox",
        "history",
        "search",
        "agents",
        "rooms",
        "join",
        "part",
        "focus",
        "quiet",
        "wait",
        "checkin",
        "salon_status",
        "claim",
        "release",
    }
    for tool in tools:
        assert tool["description"]
        assert tool["inputSchema"]["additionalProperties"] is False


async def test_an_unlabeled_session_cannot_send_and_is_told_to_add_a_label(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url, query="").open()
    message = await session.call("send", {"text": "hello", "type": "FACT"})
    assert message["error"]["code"] == -32602
    assert "?label=" in message["error"]["message"]


async def test_a_business_error_is_an_is_error_result_that_says_how_to_fix_it(
    shared_daemon, client
):
    session = await RawSession(client, shared_daemon.url).open()
    message = await session.call("send", {"text": "hi", "type": "QUESTION", "to": ["nobody-x"]})
    result = message["result"]
    assert result["isError"] is True
    assert "nobody-x" in result["content"][0]["text"]


async def test_an_unknown_argument_is_named_in_an_is_error_result(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url).open()
    message = await session.call("send", {"text": "hi", "sender": "someone-else"})
    assert message["result"]["isError"] is True
    assert "sender" in message["result"]["content"][0]["text"]


async def test_tools_never_take_a_sender_the_seat_comes_from_the_session(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url, query="label=honest").open()
    report = await session.result(
        "send", {"text": "hi", "type": "FACT", "meta": {"source": "mallory", "from": "x"}}
    )
    assert report["from"] == await session.seat()
    assert report["from"].startswith("honest#")


# ------------------------------------------------------------------ streams


async def test_the_stream_has_sse_headers_and_a_first_comment(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url).open()
    async with session.stream() as stream:
        assert stream.response.status_code == 200
        assert stream.response.headers["content-type"].startswith("text/event-stream")
        assert stream.response.headers["cache-control"] == "no-cache"
        assert stream.response.headers["x-accel-buffering"] == "no"
        first = await stream.next(comments=True)
        assert "comment" in first


async def test_get_without_event_stream_accept_is_406(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url).open()
    response = await client.get(session.url, headers=session.headers(accept="application/json"))
    assert response.status_code == 406


async def test_a_waking_entry_is_pushed_with_an_event_id_and_string_meta(shared_daemon, client):
    reader = await RawSession(client, shared_daemon.url, "label=reader").open()
    writer = await RawSession(client, shared_daemon.url, "label=writer").open()
    reader_seat = await reader.seat()
    async with reader.stream() as stream:
        await stream.next(comments=True)
        report = await writer.result(
            "send",
            {
                "text": "is the API frozen?",
                "type": "QUESTION",
                "to": [reader_seat],
                "meta": {"ticket-id": 42},
            },
        )
        event = await stream.next()
    assert event["id"].isdigit()
    assert event.get("event", "message") == "message"
    message = event["message"]
    assert message["method"] == "notifications/claude/channel"
    assert message["params"]["content"] == "is the API frozen?"
    meta = message["params"]["meta"]
    assert meta["id"] == report["id"]
    assert meta["source"] == report["from"]
    assert meta["type"] == "QUESTION"
    assert meta["to"] == reader_seat
    assert meta["ticket_id"] == "42"
    assert all(isinstance(v, str) for v in meta.values())
    assert "re" not in meta


async def test_a_broadcast_fact_is_not_pushed(shared_daemon, client):
    reader = await RawSession(client, shared_daemon.url, "label=reader2").open()
    writer = await RawSession(client, shared_daemon.url, "label=writer2").open()
    await reader.seat()
    async with reader.stream() as stream:
        await stream.next(comments=True)
        await writer.result("send", {"text": "deployed", "type": "FACT"})
        assert await stream.nothing_for(1.0)


async def test_a_second_get_replaces_the_first(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url).open()
    async with session.stream() as first:
        await first.next(comments=True)
        async with session.stream() as second:
            assert second.response.status_code == 200
            await asyncio.wait_for(first.ended.wait(), 5)
            assert not second.ended.is_set()


async def test_last_event_id_replays_what_came_after_it_including_while_closed(daemon, client):
    reader = await RawSession(client, daemon.url, "label=resumer").open()
    writer = await RawSession(client, daemon.url, "label=asker").open()
    seat = await reader.seat()
    async with reader.stream() as stream:
        await stream.next(comments=True)
        await writer.result("send", {"text": "one", "type": "QUESTION", "to": [seat]})
        first = await stream.next()
        await writer.result("send", {"text": "two", "type": "QUESTION", "to": [seat]})
        second = await stream.next()
    await writer.result("send", {"text": "three", "type": "QUESTION", "to": [seat]})
    async with reader.stream(**{"last-event-id": first["id"]}) as resumed:
        again = [await resumed.next(), await resumed.next()]
        assert await resumed.nothing_for(0.5)
    assert [e["message"]["params"]["content"] for e in again] == ["two", "three"]
    assert again[0]["id"] == second["id"]
    assert int(again[1]["id"]) > int(second["id"])


async def test_a_new_stream_pushes_waiting_entries_once_and_never_again(daemon, client):
    reader = await RawSession(client, daemon.url, "label=late").open()
    writer = await RawSession(client, daemon.url, "label=early").open()
    seat = await reader.seat()
    await writer.result("send", {"text": "while you were out", "type": "REQUEST", "to": [seat]})
    async with reader.stream() as stream:
        event = await stream.next()
    async with reader.stream() as again:
        assert await again.nothing_for(0.8)
    assert event["message"]["params"]["content"] == "while you were out"


async def test_more_than_twenty_waiting_entries_end_with_one_notice(daemon, client):
    reader = await RawSession(client, daemon.url, "label=busy").open()
    writer = await RawSession(client, daemon.url, "label=chatty").open()
    seat = await reader.seat()
    for n in range(23):
        await writer.result("send", {"text": f"q{n}", "type": "QUESTION", "to": [seat]})
    async with reader.stream() as stream:
        events = [await stream.next() for _ in range(21)]
    contents = [e["message"]["params"]["content"] for e in events]
    assert contents[:20] == [f"q{n}" for n in range(20)]
    assert "3 more" in contents[20] and "inbox" in contents[20]


async def test_the_seat_is_live_while_its_stream_is_open(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url, "label=present").open()
    seat = await session.seat()

    async def liveness():
        agents = await session.result("agents")
        return next(
            s["liveness"] for a in agents["agents"] for s in a["seats"] if s["seat"] == seat
        )

    async with session.stream() as stream:
        await stream.next(comments=True)
        while_open = await liveness()
    await asyncio.sleep(0.3)
    assert while_open == "live"


async def test_a_send_from_another_process_reaches_an_open_stream(daemon, client, tmp_path):
    reader = await RawSession(client, daemon.url, "label=listener").open()
    seat = await reader.seat()
    async with reader.stream() as stream:
        await stream.next(comments=True)
        env = {**daemon.env, "AGENT_SALON_NAME": "cron-job"}
        joined = run_salon("join", "salon", env=env, cwd=tmp_path)
        assert joined.returncode == 0, joined.stderr
        sent = await asyncio.to_thread(
            run_salon,
            "send",
            "salon",
            "QUESTION",
            "from cron",
            "--to",
            seat,
            env=env,
            cwd=tmp_path,
        )
        assert sent.returncode == 0, sent.stderr
        event = await stream.next(timeout=5)
    assert event["message"]["params"]["content"] == "from cron"
    assert event["message"]["params"]["meta"]["source"] == "cron-job"


# ------------------------------------------------------------------ tokens


async def test_a_label_with_a_token_needs_it_and_a_wrong_one_is_403_not_401(daemon, client):
    issued = run_salon("token", "issue", "guarded", env=daemon.env, cwd=daemon.cwd)
    assert issued.returncode == 0, issued.stderr
    token = issued.stdout.strip().split()[-1]
    url = f"{daemon.url}/mcp?label=guarded"
    missing = await client.post(url, json=initialize_message(), headers={"accept": ACCEPT_BOTH})
    wrong = await client.post(
        url,
        json=initialize_message(),
        headers={"accept": ACCEPT_BOTH, "authorization": "Bearer nope"},
    )
    right = await client.post(
        url,
        json=initialize_message(),
        headers={"accept": ACCEPT_BOTH, "authorization": f"Bearer {token}"},
    )
    assert missing.status_code == 403 and "salon token issue" in missing.json()["error"]["message"]
    assert wrong.status_code == 403
    assert right.status_code == 200


# ------------------------------------------------------------------ restarts


async def test_a_session_survives_a_daemon_restart_without_reinitializing(tmp_path, env, client):
    first = Daemon(env=env, cwd=tmp_path).start()
    try:
        session = await RawSession(client, first.url, "label=durable").open()
        seat = await session.seat()
    finally:
        first.kill()
    second = Daemon(env=env, cwd=tmp_path, port=first.port).start()
    try:
        pong = await session.post(rpc("ping", id=99))
        status = await session.result("salon_status")
    finally:
        second.stop()
    assert pong.status_code == 200 and pong.json()["result"] == {}
    assert status["session"]["seat"] == seat


# ------------------------------------------------------------------ wait and checkin


async def test_wait_returns_at_once_what_is_waiting_and_leaves_the_cursor(daemon, client):
    reader = await RawSession(client, daemon.url, "label=waiter").open()
    writer = await RawSession(client, daemon.url, "label=poker").open()
    seat = await reader.seat()
    await writer.result("send", {"text": "look", "type": "QUESTION", "to": [seat]})
    told = (await reader.call("wait", {"timeout": 10}))["result"]["structuredContent"]
    inbox = await reader.result("inbox", {"advance": False})
    again = (await reader.call("wait", {"timeout": 0}))["result"]["structuredContent"]
    assert [e["content"] for e in told["entries"]] == ["look"]
    assert [e["content"] for e in inbox["entries"]] == ["look"]
    assert again["entries"] == []


async def test_wait_blocks_until_a_waking_entry_arrives(daemon, client):
    reader = await RawSession(client, daemon.url, "label=sleeper").open()
    writer = await RawSession(client, daemon.url, "label=waker").open()
    seat = await reader.seat()
    waiting = asyncio.create_task(reader.call("wait", {"timeout": 30}))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    await writer.result("send", {"text": "fyi", "type": "FACT"})
    await writer.result("send", {"text": "wake up", "type": "REQUEST", "to": [seat]})
    answer = await asyncio.wait_for(waiting, 10)
    assert [e["content"] for e in answer["result"]["structuredContent"]["entries"]] == ["wake up"]


async def test_wait_with_nothing_arriving_ends_empty_at_its_timeout(shared_daemon, client):
    reader = await RawSession(client, shared_daemon.url, "label=patient").open()
    await reader.seat()
    answer = await reader.call("wait", {"timeout": 1})
    assert answer["result"]["structuredContent"]["entries"] == []
    assert answer["result"]["isError"] is False


async def test_checkin_moves_the_session_to_the_claude_sessions_seat(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url, "label=bound").open()
    before = await session.seat()
    claude_id = "5e3f9c1a-0000-4000-8000-00000000abcd"
    bound = await session.result("checkin", {"session_id": claude_id, "cwd": "/src/bound"})
    after = await session.seat()
    agents = await session.result("agents")
    seats = [s["seat"] for a in agents["agents"] if a["agent"] == "bound" for s in a["seats"]]
    assert bound["seat"] == after == "bound#5e3f9c1a"
    assert before != after
    assert seats == ["bound#5e3f9c1a"]  # the abandoned seat had written nothing: dropped


async def test_a_stream_follows_its_session_after_checkin(daemon, client):
    reader = await RawSession(client, daemon.url, "label=follower").open()
    writer = await RawSession(client, daemon.url, "label=caller").open()
    await reader.seat()
    async with reader.stream() as stream:
        await stream.next(comments=True)
        await reader.result("checkin", {"session_id": "abcdef0123456789"})
        await asyncio.sleep(0.3)
        await writer.result(
            "send", {"text": "found you", "type": "QUESTION", "to": ["follower#abcdef01"]}
        )
        event = await stream.next()
    assert event["message"]["params"]["content"] == "found you"


async def test_a_push_to_a_stream_of_the_sending_daemon_is_claimed_and_recorded_by_the_send(
    shared_daemon, client
):
    """The send claims the push in its own transaction (pushed at the moment it decided)
    and records it in delivered_to: both are stored by the time the tool answers."""
    reader = await RawSession(client, shared_daemon.url, "label=recorded").open()
    writer = await RawSession(client, shared_daemon.url, "label=recorder").open()
    seat = await reader.seat()
    async with reader.stream() as stream:
        await stream.next(comments=True)
        await asyncio.sleep(0.3)  # the stream's first claim is done: it takes pushes direct
        report = await writer.result("send", {"text": "note", "type": "QUESTION", "to": [seat]})
        # 32 hex digits: how SQLite stores a UUID, and a form PostgreSQL accepts too.
        rows = query_store(
            shared_daemon.env,
            "SELECT e.delivered_to, e.delivery_errors, w.push_seq, w.pushed_at, w.decided_at "
            "FROM bus_entry e JOIN bus_wakedecision w ON w.entry_id = e.id WHERE e.id = ?",
            (report["id"].replace("-", ""),),
        )
        event = await stream.next()
    delivered, errors = (json.loads(v) if isinstance(v, str) else v for v in rows[0][:2])
    push_seq, pushed_at, decided_at = rows[0][2:]
    assert delivered == [seat]
    assert errors == []
    assert pushed_at == decided_at
    assert event["id"] == str(push_seq)


async def test_an_open_stream_gets_a_keep_alive_comment_within_15_seconds(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url, "label=idle").open()
    async with session.stream() as stream:
        opened = await stream.next(comments=True)
        keepalive = await stream.next(timeout=16, comments=True)
    assert "comment" in opened and "comment" in keepalive
    assert keepalive["received"] - opened["received"] <= 15.5


async def test_delete_makes_the_seat_gone(shared_daemon, client):
    session = await RawSession(client, shared_daemon.url, "label=leaver").open()
    seat = await session.seat()
    observer = await RawSession(client, shared_daemon.url, "label=observer").open()
    await client.delete(session.url, headers=session.headers())
    agents = await observer.result("agents")
    liveness = {s["seat"]: s["liveness"] for a in agents["agents"] for s in a["seats"]}
    assert liveness[seat] == "gone"
