"""Group commit (bus.groupcommit): sends that wait on the database thread together are
stored in one transaction, each in its own savepoint, and none is answered before that
transaction has committed. Judged on the answers, the rows, and what a real stream got."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from django.db import OperationalError, connections

from bus import groupcommit, services
from bus.models import Entry
from bus.rules import UnknownAddressee
from tests.factories import RoomFactory
from tests.mcp_helpers import RawSession
from tests.support import query_store


class Recorded(groupcommit.Calls):
    """Calls, with the size of every batch it ran."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def run_batch(self, items):
        self.batches.append(len(items))
        return super().run_batch(items)


def _run_together(calls: Recorded, sends: list[dict]) -> list:
    """Every send submitted at once; each one's report, or the exception it raised."""
    from patches.asgiref import on_database_thread

    def one(arguments: dict) -> dict:
        seat = services.seats.check_in(agent="writer", session_id="aaaa1111")
        return services.entries.send_entry(seat=seat, room="team", **arguments)

    async def main():
        return await asyncio.gather(
            *(calls.run(one, arguments) for arguments in sends), return_exceptions=True
        )

    try:
        return asyncio.run(main())
    finally:
        # The database thread's connection, closed: the test database can be dropped.
        asyncio.run(on_database_thread(connections.close_all))


@pytest.fixture
def team():
    room = RoomFactory(name="team")
    for agent, session in (("writer", "aaaa1111"), ("reader", "bbbb2222")):
        seat = services.seats.check_in(agent=agent, session_id=session)
        services.rooms.join_room(seat=seat, room="team")
    return room


@pytest.mark.django_db(transaction=True)
def test_sends_waiting_together_share_one_transaction_and_a_refused_one_rolls_back_alone(team):
    calls = Recorded()
    sends = [{"text": f"n{i}", "type": "QUESTION", "to": ["reader"]} for i in range(5)]
    sends[2] = {"text": "lost", "to": ["nobody-here"]}

    answers = _run_together(calls, sends)

    assert calls.batches == [5]  # one transaction for the five
    assert isinstance(answers[2], UnknownAddressee)
    stored = list(Entry.objects.order_by("seq").values_list("id", "content", "seq"))
    assert [content for _, content, _ in stored] == ["n0", "n1", "n3", "n4"]
    assert [str(id) for id, _, _ in stored] == [answers[i]["id"] for i in (0, 1, 3, 4)]
    assert [seq for _, _, seq in stored] == [1, 2, 3, 4]  # the refused one took no seq
    assert all(answers[i]["wakes"] == ["reader#bbbb2222"] for i in (0, 1, 3, 4))


@pytest.mark.django_db(transaction=True)
def test_a_send_alone_is_a_batch_of_one(team):
    calls = Recorded()

    [answer] = _run_together(calls, [{"text": "alone", "type": "QUESTION", "to": ["reader"]}])

    assert calls.batches == [1]
    assert Entry.objects.get(id=answer["id"]).content == "alone"


@pytest.mark.django_db(transaction=True)
def test_when_the_batchs_commit_fails_no_send_of_it_is_answered_or_stored(team, monkeypatch):
    def failing_commit(self):
        raise OperationalError("disk I/O error")

    monkeypatch.setattr(type(connections["default"]), "commit", failing_commit)
    answers = _run_together(Recorded(), [{"text": f"n{i}"} for i in range(3)])
    monkeypatch.undo()

    assert all(isinstance(answer, OperationalError) for answer in answers)
    assert not Entry.objects.exists()


# ------------------------------------------------------------------ over /mcp


@pytest.mark.slow
async def test_concurrent_mcp_sends_are_each_stored_answered_and_pushed_once(shared_daemon):
    async with httpx.AsyncClient(timeout=30) as client:
        reader = await RawSession(client, shared_daemon.url, "label=batched-reader").open()
        writers = [
            await RawSession(client, shared_daemon.url, f"label=batched-w{n}").open()
            for n in range(8)
        ]
        seat = await reader.seat()
        async with reader.stream() as stream:
            await stream.next(comments=True)
            await asyncio.sleep(0.3)  # the stream's first claim is done

            async def two(n: int, writer: RawSession) -> list[dict]:
                return [
                    await writer.call(
                        "send",
                        {"text": f"w{n} s{k}", "type": "QUESTION", "to": [seat, *extra]},
                    )
                    for k, extra in enumerate(([], ["nobody-here"] if n == 3 else []))
                ]

            answers = [m for ms in await asyncio.gather(*map(two, range(8), writers)) for m in ms]
            refused = [m for m in answers if m["result"].get("isError")]
            reports = [m["result"]["structuredContent"] for m in answers if m not in refused]
            events = [await stream.next() for _ in reports]

    assert len(refused) == 1 and "nobody-here" in refused[0]["result"]["content"][0]["text"]
    assert len(reports) == 15 and all(r["wakes"] == [seat] for r in reports)
    pushed = [event["message"]["params"]["meta"]["id"] for event in events]
    assert sorted(pushed) == sorted(r["id"] for r in reports)
    ids = [int(event["id"]) for event in events]
    assert ids == sorted(ids) and len(set(ids)) == 15  # event ids only grow
    rows = query_store(
        shared_daemon.env,
        "SELECT delivered_to FROM bus_entry WHERE content LIKE 'w_ s_' ORDER BY seq",
    )
    assert len(rows) == 15
    assert all((json.loads(v) if isinstance(v, str) else v) == [seat] for (v,) in rows)
