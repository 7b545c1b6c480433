"""The Python `mcp` SDK client against a real daphne: what a real MCP client receives."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

pytestmark = pytest.mark.slow


class ChannelParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    content: str
    meta: dict[str, str] = {}


@contextlib.asynccontextmanager
async def connect(url: str):
    """A ClientSession that collects notifications/claude/channel into `session.channel`."""
    received: asyncio.Queue[ChannelParams] = asyncio.Queue()

    async def on_channel(params: ChannelParams) -> None:
        await received.put(params)

    binding = NotificationBinding(
        method="notifications/claude/channel", params_type=ChannelParams, handler=on_channel
    )
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, notification_bindings=[binding]) as session,
    ):
        await session.initialize()
        session.channel = received
        yield session


async def seat_of(session: ClientSession) -> str:
    status = await session.call_tool("salon_status", {})
    return status.structured_content["session"]["seat"]


async def stream_is_open(session: ClientSession) -> None:
    """The SDK opens its GET stream after initialize; give it a moment to be served."""
    for _ in range(50):
        agents = (await session.call_tool("agents", {})).structured_content
        me = await seat_of(session)
        seats = [s for a in agents["agents"] for s in a["seats"] if s["seat"] == me]
        if seats and seats[0]["liveness"] == "live":
            await asyncio.sleep(0.2)
            return
        await asyncio.sleep(0.1)


async def nothing_arrives(queue: asyncio.Queue, seconds: float) -> bool:
    try:
        await asyncio.wait_for(queue.get(), seconds)
    except TimeoutError:
        return True
    return False


async def test_a_question_to_a_seat_reaches_that_sdk_client_as_a_channel_notification(
    shared_daemon,
):
    async with (
        connect(f"{shared_daemon.url}/mcp?label=frontend") as reader,
        connect(f"{shared_daemon.url}/mcp?label=backend") as writer,
    ):
        tools = {tool.name for tool in (await reader.list_tools()).tools}
        assert {"send", "inbox", "wait", "checkin"} <= tools
        reader_seat = await seat_of(reader)
        await stream_is_open(reader)
        sent = await writer.call_tool(
            "send",
            {"text": "which port does the API use?", "type": "question", "to": [reader_seat]},
        )
        assert not sent.is_error
        assert sent.structured_content["wakes"] == [reader_seat]
        pushed = await asyncio.wait_for(reader.channel.get(), 5)
    assert pushed.content == "which port does the API use?"
    assert pushed.meta["type"] == "QUESTION"
    assert pushed.meta["source"] == sent.structured_content["from"]
    assert pushed.meta["id"] == sent.structured_content["id"]
    assert pushed.meta["room"] == "salon"


async def test_an_answer_with_re_reaches_the_asker_only(shared_daemon):
    async with (
        connect(f"{shared_daemon.url}/mcp?label=asker") as asker,
        connect(f"{shared_daemon.url}/mcp?label=answerer") as answerer,
        connect(f"{shared_daemon.url}/mcp?label=bystander") as bystander,
    ):
        asker_seat = await seat_of(asker)
        answerer_seat = await seat_of(answerer)
        await seat_of(bystander)
        for session in (asker, bystander):
            await stream_is_open(session)
        question = await asker.call_tool(
            "send", {"text": "ready?", "type": "QUESTION", "to": [answerer_seat]}
        )
        answer = await answerer.call_tool(
            "send", {"text": "yes", "type": "ANSWER", "re": question.structured_content["id"]}
        )
        pushed = await asyncio.wait_for(asker.channel.get(), 5)
        assert await nothing_arrives(bystander.channel, 1.0)
    assert pushed.content == "yes"
    assert pushed.meta["re"] == question.structured_content["id"]
    assert answer.structured_content["wakes"] == [asker_seat]


async def test_a_broadcast_fact_is_not_pushed_to_an_sdk_client(shared_daemon):
    async with (
        connect(f"{shared_daemon.url}/mcp?label=quiet-reader") as reader,
        connect(f"{shared_daemon.url}/mcp?label=announcer") as writer,
    ):
        await seat_of(reader)
        await stream_is_open(reader)
        sent = await writer.call_tool("send", {"text": "build is green", "type": "FACT"})
        assert sent.structured_content["wakes"] == []
        assert any("wakes nobody" in n for n in sent.structured_content["notice"])
        assert await nothing_arrives(reader.channel, 1.5)


async def test_a_quiet_seat_is_not_pushed_but_can_read_the_entry(shared_daemon):
    async with (
        connect(f"{shared_daemon.url}/mcp?label=focused") as reader,
        connect(f"{shared_daemon.url}/mcp?label=pinger") as writer,
    ):
        seat = await seat_of(reader)
        await reader.call_tool("quiet", {"for": "1h"})
        await stream_is_open(reader)
        sent = await writer.call_tool("send", {"text": "ping", "type": "QUESTION", "to": [seat]})
        assert sent.structured_content["wakes"] == []
        assert await nothing_arrives(reader.channel, 1.5)
        inbox = (await reader.call_tool("inbox", {"limit": 100})).structured_content
    mine = [e for e in inbox["entries"] if e["id"] == sent.structured_content["id"]]
    assert [e["content"] for e in mine] == ["ping"]
    assert mine[0]["wakes"] is False and mine[0]["forMe"] is True


async def test_an_unlabeled_sdk_session_cannot_send(shared_daemon):
    async with connect(f"{shared_daemon.url}/mcp") as anonymous:
        with pytest.raises(MCPError) as refused:
            await anonymous.call_tool("send", {"text": "hello", "type": "FACT"})
    assert refused.value.error.code == -32602
    assert "?label=" in refused.value.error.message


async def test_a_new_http_seat_whose_first_act_is_join_is_in_that_room_only(shared_daemon):
    async with connect(f"{shared_daemon.url}/mcp?label=fresh-joiner") as session:
        joined = await session.call_tool("join", {"room": "team-first", "create": True})
        assert not joined.is_error, joined.content
        mine = (await session.call_tool("rooms", {})).structured_content["mine"]
    assert mine == ["team-first"]
