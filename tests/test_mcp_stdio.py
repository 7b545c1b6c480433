"""`salon mcp` over stdio, driven by the Python `mcp` SDK's stdio client."""

from __future__ import annotations

import asyncio
import contextlib
import io
import sys

import pytest
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpgate import stdio
from tests.test_mcp_client import ChannelParams, nothing_arrives

pytestmark = pytest.mark.slow


@contextlib.asynccontextmanager
async def stdio_session(env: dict, project, session_id: str | None):
    """A `salon mcp` process started the way Claude Code starts a stdio server."""
    received: asyncio.Queue[ChannelParams] = asyncio.Queue()

    async def on_channel(params: ChannelParams) -> None:
        await received.put(params)

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "salon.cli", "mcp"],
        cwd=str(project),
        env={**env, "CLAUDE_CODE_SESSION_ID": session_id} if session_id else env,
    )
    binding = NotificationBinding(
        method="notifications/claude/channel", params_type=ChannelParams, handler=on_channel
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, notification_bindings=[binding]) as session,
    ):
        await session.initialize()
        session.channel = received
        yield session


async def test_two_stdio_servers_exchange_a_question_and_an_answer(env, tmp_path):
    web, api = tmp_path / "web-app", tmp_path / "api-service"
    web.mkdir()
    api.mkdir()
    async with (
        stdio_session(env, web, "11111111-aaaa-4000-8000-000000000001") as asker,
        stdio_session(env, api, "22222222-bbbb-4000-8000-000000000002") as answerer,
    ):
        asker_status = (await asker.call_tool("salon_status", {})).structured_content
        answerer_status = (await answerer.call_tool("salon_status", {})).structured_content
        assert asker_status["session"]["seat"] == "web-app#11111111"
        assert answerer_status["session"]["seat"] == "api-service#22222222"
        question = await asker.call_tool(
            "send", {"text": "which schema version?", "type": "QUESTION", "to": ["api-service"]}
        )
        assert question.structured_content["wakes"] == ["api-service#22222222"]
        pushed_question = await asyncio.wait_for(answerer.channel.get(), 10)
        answer = await answerer.call_tool(
            "send", {"text": "v7", "type": "ANSWER", "re": pushed_question.meta["id"]}
        )
        assert answer.structured_content["wakes"] == ["web-app#11111111"]
        pushed_answer = await asyncio.wait_for(asker.channel.get(), 10)
        assert await nothing_arrives(answerer.channel, 0.5)
    assert pushed_question.content == "which schema version?"
    assert pushed_question.meta["source"] == "web-app#11111111"
    assert pushed_answer.content == "v7"
    assert pushed_answer.meta["re"] == question.structured_content["id"]


async def test_a_session_named_in_each_call_is_the_seat_of_a_server_started_without_one(
    env, tmp_path
):
    """Codex CLI puts no session id in a stdio server's environment; it names its session
    (the one its hooks get) in every tool call's `_meta.sessionId`."""
    project = tmp_path / "codex-app"
    project.mkdir()
    session_id = "01a24f37-8f80-7000-8ee7-7998ea25a655"
    env = {k: v for k, v in env.items() if k != "CLAUDE_CODE_SESSION_ID"}
    async with stdio_session(env, project, None) as session:
        first = await session.call_tool("salon_status", {}, meta={"sessionId": session_id})
        later = await session.call_tool("agents", {}, meta={"sessionId": session_id})

    assert first.structured_content["session"]["seat"] == "codex-app#01a24f37"
    (agent,) = [a for a in later.structured_content["agents"] if a["agent"] == "codex-app"]
    assert [seat["seat"] for seat in agent["seats"]] == ["codex-app#01a24f37"]


async def test_a_stdio_seat_is_live_while_the_process_runs(env, tmp_path):
    project = tmp_path / "worker"
    project.mkdir()
    async with stdio_session(env, project, "33333333-cccc-4000-8000-000000000003") as session:
        agents = (await session.call_tool("agents", {})).structured_content
    seats = {s["seat"]: s["liveness"] for a in agents["agents"] for s in a["seats"]}
    assert seats["worker#33333333"] == "live"


async def test_an_overlong_line_is_skipped_in_pieces_and_the_next_one_is_read(monkeypatch):
    """A line over the limit is answered with an error, never held whole."""
    monkeypatch.setattr(stdio, "MAX_LINE_BYTES", 100)
    monkeypatch.setattr(stdio, "SKIP_BYTES", 10)
    reader = io.BufferedReader(io.BytesIO(b"x" * 1000 + b"\n" + b'{"a": 1}\n'))
    server = stdio.StdioServer(None, reader, io.BytesIO(), host=None)

    lines = server.read_lines()
    first, second, end = [await lines.get() for _ in range(3)]

    assert isinstance(first, stdio.OverlongLine) and first.size == 1001
    assert (second, end) == (b'{"a": 1}\n', None)


async def test_a_new_stdio_seat_whose_first_act_is_join_is_in_that_room_only(env, tmp_path):
    project = tmp_path / "fresh2"
    project.mkdir()
    async with stdio_session(env, project, "44444444-dddd-4000-8000-000000000004") as session:
        joined = await session.call_tool("join", {"room": "team", "create": True})
        assert not joined.is_error, joined.content
        mine = (await session.call_tool("rooms", {})).structured_content["mine"]
    assert mine == ["team"]
