"""The push path of a daemon process: set-based claims, the claim coalescer, the keep-alive
ticker and the in-process channel layer (mcpgate.delivery, patches.channels,
bus.services.telling.claim_pushes_of_seats).

The claims are judged on the ledger rows they write; the coalescer and the ticker on what
real streams of a real daphne receive and on the rows the daemon wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading

import httpx
import pytest
from django.db import connections

from bus import services
from bus.models import Seat, WakeDecision
from patches import channels as layers
from salond.host import LoopCalls
from tests.factories import make_room, make_seat, send
from tests.mcp_helpers import RawSession
from tests.support import query_store

# ------------------------------------------------------------------ set-based claims


@pytest.fixture
def team(db):
    return make_room("team")


def _limits(seats, limit: int = 100) -> dict[int, int]:
    return {seat.pk: limit for seat in seats}


def test_one_claim_of_many_seats_gives_each_seat_each_waking_entry_once_in_order(team):
    writer = make_seat("writer", team)
    readers = [make_seat(f"reader-{n}", team) for n in range(30)]
    reports = [send(writer, team, f"q{n}?", type="QUESTION") for n in range(3)]

    claimed = services.telling.claim_pushes_of_seats(limits=_limits(readers))

    assert set(claimed) == {seat.pk for seat in readers}
    for pushes, more in claimed.values():
        assert [str(entry.id) for _, entry in pushes] == [r["id"] for r in reports]
        assert [push_seq for push_seq, _ in pushes] == [1, 2, 3]
        assert more == 0
    assert services.telling.claim_pushes_of_seats(limits=_limits(readers)) == {}
    assert WakeDecision.objects.filter(seat__in=readers, push_seq__isnull=True).count() == 0
    assert {s.push_counter for s in Seat.objects.filter(pk__in=_limits(readers))} == {3}


def test_a_claim_takes_at_most_each_seats_limit_and_says_how_many_more_wait(team):
    writer = make_seat("writer", team)
    busy, calm = make_seat("busy", team), make_seat("calm", team)
    for n in range(5):
        send(writer, team, f"q{n}?", type="QUESTION", to=[busy.name])
    send(writer, team, "and you?", type="QUESTION", to=[calm.name])

    claimed = services.telling.claim_pushes_of_seats(limits={busy.pk: 2, calm.pk: 2})

    assert [push_seq for push_seq, _ in claimed[busy.pk][0]] == [1, 2]
    assert claimed[busy.pk][1] == 3
    assert len(claimed[calm.pk][0]) == 1 and claimed[calm.pk][1] == 0
    rest = services.telling.claim_pushes_of_seats(limits={busy.pk: 100, calm.pk: 100})
    assert [push_seq for push_seq, _ in rest[busy.pk][0]] == [3, 4, 5]
    assert calm.pk not in rest


def test_a_claim_skips_entries_already_read_announced_or_left_behind(team):
    writer = make_seat("writer", team)
    reader, waiter, leaver = (make_seat(n, team) for n in ("reader", "waiter", "leaver"))
    send(writer, team, "anyone?", type="QUESTION")
    services.reading.read_inbox(seat=reader, room="team")  # read: the cursor moved past it
    services.telling.collect_wakes(seat=waiter)  # announced by the wait tool
    services.rooms.part_room(seat=leaver, room="team")  # no longer in the room

    assert services.telling.claim_pushes_of_seats(limits=_limits([reader, waiter, leaver])) == {}


def test_a_single_seat_claim_still_answers_pairs_of_push_seq_and_entry(team):
    writer, reader = make_seat("writer", team), make_seat("reader", team)
    report = send(writer, team, "ping?", type="QUESTION", to=[reader.name])

    claimed, more = services.telling.claim_pushes(seat=reader)

    assert [(push_seq, str(entry.id)) for push_seq, entry in claimed] == [(1, report["id"])]
    assert more == 0


def test_a_claim_records_its_pushes_as_delivered_and_earlier_failures_in_one_transaction(team):
    from bus.models import Entry
    from mcpgate import delivery

    writer = make_seat("writer", team)
    reader, gone = make_seat("reader", team), make_seat("gone", team)
    first = send(writer, team, "q1?", type="QUESTION", to=[reader.name])
    second = send(writer, team, "q2?", type="QUESTION", to=[gone.name])
    # gone's push of `second` was claimed (and so recorded as delivered) but not written
    services.telling.claim_pushes_of_seats(limits={gone.pk: 100})
    records = ({}, {second["id"]: [gone.name]})

    claimed = delivery.claim_messages({reader.pk: 100}, records)

    assert [str(entry.id) for _, entry, _ in claimed[reader.pk][0]] == [first["id"]]
    rows = {
        str(pk): (delivered, errors)
        for pk, delivered, errors in Entry.objects.values_list(
            "pk", "delivered_to", "delivery_errors"
        )
    }
    assert rows[first["id"]] == ([reader.name], [])
    assert rows[second["id"]] == ([], [gone.name])  # the failure moved it


def test_delivery_records_taken_and_put_back_are_kept():
    from mcpgate import delivery

    async def main():
        records = delivery.DeliveryRecords()
        records.add("e1", "a#1", ok=True)
        records.add("e1", "b#2", ok=False)
        taken = records.take()
        assert records.take() == ({}, {})
        records.put_back(*taken)
        return records.take()

    assert asyncio.run(main()) == ({"e1": ["a#1"]}, {"e1": ["b#2"]})


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_of_the_same_seats_never_claim_a_row_twice():
    team = make_room("team")
    writer = make_seat("writer", team)
    readers = [make_seat(f"reader-{n}", team) for n in range(10)]
    for n in range(6):
        send(writer, team, f"q{n}?", type="QUESTION")
    got: list[tuple[int, str, int]] = []
    failures: list[BaseException] = []

    def claim_until_empty():
        try:
            while claimed := services.telling.claim_pushes_of_seats(limits=_limits(readers, 1)):
                for seat_id, (pushes, _) in claimed.items():
                    got.extend((seat_id, str(entry.id), seq) for seq, entry in pushes)
        except BaseException as exc:  # reported below; a thread cannot fail the test
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claim_until_empty) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert failures == []
    assert len(got) == 60
    assert len({(seat, entry) for seat, entry, _ in got}) == 60
    for seat in readers:
        assert sorted(seq for s, _, seq in got if s == seat.pk) == [1, 2, 3, 4, 5, 6]


# ------------------------------------------------------------------ the channel layer


async def test_the_in_memory_layer_sweeps_at_most_once_a_second_and_still_sweeps():
    layer = layers.SweepingInMemoryChannelLayer(expiry=0.2)
    dead = await layer.new_channel()
    await layer.group_add("seat.1", dead)
    await layer.send(dead, {"type": "bus.entry"})  # never received: its reader is gone
    await layer.group_send("seat.1", {"type": "bus.entry"})  # sweeps once, nothing old
    await asyncio.sleep(0.3)

    await layer.group_send("seat.1", {"type": "bus.entry"})  # within the second: no sweep
    kept = dead in layer.groups.get("seat.1", {})
    await asyncio.sleep(layers.SWEEP_SECONDS)
    await layer.group_send("seat.2", {"type": "bus.entry"})  # a second later: sweeps

    assert kept
    assert dead not in layer.groups.get("seat.1", {})


# ------------------------------------------------------------------ real streams


@pytest.fixture
async def client():
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        yield http


async def open_streams(stack: contextlib.AsyncExitStack, client, base: str, label: str, n: int):
    """n sessions, each its own seat in the default room (made by a first tool call), with
    its GET stream open."""

    async def one(i: int):
        session = await RawSession(client, base, f"label={label}-{i}").open()
        await session.result("rooms")
        stream = await stack.enter_async_context(session.stream())
        await stream.next(timeout=30, comments=True)  # "stream open"
        return session, stream

    return [await one(i) for i in range(n)]


async def events_until_quiet(stream, quiet: float = 1.0) -> list[dict]:
    events = []
    with contextlib.suppress(TimeoutError):
        while True:
            events.append(await stream.next(timeout=quiet))
    return events


@pytest.mark.slow
async def test_a_broadcast_to_50_open_streams_reaches_every_stream_exactly_once(daemon, client):
    async with contextlib.AsyncExitStack() as stack:
        streams = await open_streams(stack, client, daemon.url, "fan", 50)
        answer = await client.post(
            f"{daemon.url}/notify?label=announcer",
            json={"content": "all hands", "type": "QUESTION"},
        )
        assert answer.status_code == 202
        received = await asyncio.gather(*(events_until_quiet(s) for _, s in streams))

    assert len(answer.json()["wakes"]) == 50
    for events in received:
        assert [e["message"]["params"]["meta"]["id"] for e in events] == [answer.json()["id"]]
    pushed = query_store(
        daemon.env,
        "SELECT COUNT(*) FROM bus_wakedecision "
        "WHERE push_seq IS NOT NULL AND pushed_at IS NOT NULL",
    )
    assert pushed == [(50,)]


@pytest.mark.slow
async def test_rings_arriving_during_a_claim_are_not_lost(daemon, client):
    """Four posters broadcast at once while claims run: every stream gets every entry,
    once, in increasing event-id order."""
    async with contextlib.AsyncExitStack() as stack:
        streams = await open_streams(stack, client, daemon.url, "busy", 20)

        async def poster(n: int) -> list[str]:
            ids = []
            for i in range(10):
                answer = await client.post(
                    f"{daemon.url}/notify?label=poster-{n}",
                    json={"content": f"q {n}-{i}", "type": "QUESTION"},
                )
                assert answer.status_code == 202, answer.text
                ids.append(answer.json()["id"])
            return ids

        sent = [i for ids in await asyncio.gather(*(poster(n) for n in range(4))) for i in ids]
        received = await asyncio.gather(*(events_until_quiet(s, 2.0) for _, s in streams))

    assert len(sent) == 40
    for events in received:
        ids = [e["message"]["params"]["meta"]["id"] for e in events]
        assert sorted(ids) == sorted(sent)  # all of them, none twice
        event_ids = [int(e["id"]) for e in events]
        assert event_ids == sorted(event_ids) and len(set(event_ids)) == 40


class _Stream:
    """What the ticker knows of an open stream (mcpgate.delivery.Stream)."""

    def __init__(self, seat, session=None):
        self.seat, self.session = seat, session
        self.streaming = self.ready = True
        self.live_until = None
        self.events: list[dict] = []
        self.kept_open: list[bool] = []  # renew_groups of each keep-alive

    async def send_event(self, message, event_id=None):
        self.events.append(message)

    async def keep_open(self, *, renew_groups):
        self.kept_open.append(renew_groups)


@pytest.mark.django_db(transaction=True)
async def test_one_tick_keeps_every_open_stream_open_and_refreshes_its_seat_and_session():
    from asgiref.sync import sync_to_async
    from django.utils import timezone

    from mcpgate import delivery
    from mcpgate.models import McpSession

    def setup():
        room = make_room("team")
        seats = [make_seat(f"ticking-{n}", room) for n in range(3)]
        sessions = [
            McpSession.objects.create(
                id=f"s{n}",
                label="ticking",
                protocol_version="2025-06-18",
                last_active_at=timezone.now(),
            )
            for n in range(3)
        ]
        return seats, sessions

    def rows(seats, sessions):
        return (
            {
                s.pk: (s.last_seen, s.live_until)
                for s in Seat.objects.filter(pk__in=[x.pk for x in seats])
            },
            dict(
                McpSession.objects.filter(pk__in=[x.pk for x in sessions]).values_list(
                    "pk", "last_active_at"
                )
            ),
        )

    seats, sessions = await sync_to_async(setup)()
    records = delivery.DeliveryRecords()
    ticker = delivery.KeepAliveTicker(delivery.Claimer(delivery.Outbox(records)))
    streams = [_Stream(seat, session) for seat, session in zip(seats, sessions, strict=True)]
    for stream in streams:
        ticker.streams.add(stream)  # open, without starting the 15-second loop
    await ticker.remove(streams[2])  # closed before the tick
    before = await sync_to_async(rows)(seats, sessions)

    await ticker.tick()

    seats_after, sessions_after = await sync_to_async(rows)(seats, sessions)
    for seat in seats[:2]:  # open: last_seen and live_until moved forward
        assert seats_after[seat.pk][0] > before[0][seat.pk][0]
        assert seats_after[seat.pk][1] > timezone.now()
        assert [s.live_until for s in streams[:2]] == [seats_after[seat.pk][1]] * 2
    for session in sessions[:2]:
        assert sessions_after[session.pk] > before[1][session.pk]
    assert seats_after[seats[2].pk] == before[0][seats[2].pk]  # closed: not refreshed
    assert sessions_after[sessions[2].pk] == before[1][sessions[2].pk]
    # One keep-alive each for the open streams, none for the closed one; groups are
    # renewed hourly, not on every beat.
    assert [s.kept_open for s in streams] == [[False], [False], []]


async def test_the_keep_alive_round_renews_groups_once_an_hour_has_passed(monkeypatch):
    from mcpgate import delivery

    streams = [_Stream(None) for _ in range(2 * delivery.KEEPALIVE_BATCH + 1)]
    ticker = delivery.KeepAliveTicker(delivery.Claimer(delivery.Outbox(delivery.DeliveryRecords())))
    ticker.streams.update(streams)
    await ticker.keep_streams_open()
    monkeypatch.setattr(delivery, "GROUP_RENEW_SECONDS", 0)
    await ticker.keep_streams_open()
    monkeypatch.setattr(delivery, "GROUP_RENEW_SECONDS", 3600)
    await ticker.keep_streams_open()
    assert {tuple(s.kept_open) for s in streams} == {(False, True, False)}


class _Listener:
    def __init__(self):
        self.heard = 0

    def hear_bell(self, *, pushed=False):
        self.heard += 1


async def test_a_ring_calls_the_seats_listeners_of_this_process_and_sends_nothing_on_the_layer():
    """Every process that hosts streams hears every commit with its own listener, so a
    doorbell never crosses the channel layer (with Redis and three workers, each ring was
    a group send per seat from every worker that heard the commit)."""
    import gc

    from mcpgate.streamhost import StreamHost, seat_group
    from patches.channels import SweepingInMemoryChannelLayer

    host = StreamHost(serve_line=False)
    host.layer = SweepingInMemoryChannelLayer()
    channel = await host.layer.new_channel()
    await host.layer.group_add(seat_group(1), channel)
    first, second, other, gone = _Listener(), _Listener(), _Listener(), _Listener()
    for seat, listener in ((1, first), (1, second), (2, other), (1, gone)):
        host.bells.add(seat, listener)
    host.bells.discard(1, second)  # left the seat (a rebind, a closed stream)
    del gone, listener
    gc.collect()  # a listener that vanished without leaving is not rung either

    host.heard("an-entry-of-another-process", {1, 3})
    host._ring_here([1, 3], {})  # a send of this process

    assert (first.heard, second.heard, other.heard) == (2, 0, 0)
    assert len(host.bells._by_seat[1]) == 1
    assert host.layer.channels.get(channel) is None or host.layer.channels[channel].empty()
    host.bells.discard(1, first)
    host.bells.discard(2, other)
    assert host.bells._by_seat == {}


async def _counts_between(count, work) -> list[int]:
    """Run `work` while another task samples `count()` at every event-loop turn."""
    seen: list[int] = []
    done = False

    async def probe():
        while not done:
            seen.append(count())
            await asyncio.sleep(0)

    watcher = asyncio.ensure_future(probe())
    try:
        await work
    finally:
        done = True
        await watcher
    return seen


@pytest.mark.django_db(transaction=True)
async def test_a_claims_pushes_leave_in_batches_with_the_event_loop_turning_between(monkeypatch):
    """After a broadcast's claim, other work (Twisted sending the written streams' bytes)
    runs between every WRITE_BATCH streams, not only after the last one."""
    from asgiref.sync import sync_to_async

    from mcpgate import delivery

    monkeypatch.setattr(delivery, "WRITE_BATCH", 2)

    def setup():
        room = make_room("team")
        readers = [make_seat(f"reader-{n}", room) for n in range(7)]
        send(make_seat("caller", room), room, "all hands?", type="QUESTION")
        return readers

    streams = [_Stream(seat) for seat in await sync_to_async(setup)()]
    records = delivery.DeliveryRecords()
    outbox = delivery.Outbox(records)
    claimer = delivery.Claimer(outbox)
    for stream in streams:
        claimer.ring(stream)

    async def claimed_and_written():
        await claimer._task
        await outbox.written()

    seen = await _counts_between(lambda: sum(len(s.events) for s in streams), claimed_and_written())

    assert [len(s.events) for s in streams] == [1] * 7
    assert any(0 < n < 7 for n in seen), seen  # the loop turned while pushes were written
    await records.flush()


async def test_the_keep_alive_round_lets_the_event_loop_turn_between_batches(monkeypatch):
    from mcpgate import delivery

    monkeypatch.setattr(delivery, "KEEPALIVE_BATCH", 2)
    streams = [_Stream(None) for _ in range(7)]
    ticker = delivery.KeepAliveTicker(delivery.Claimer(delivery.Outbox(delivery.DeliveryRecords())))
    ticker.streams.update(streams)

    seen = await _counts_between(
        lambda: sum(len(s.kept_open) for s in streams), ticker.keep_streams_open()
    )

    assert all(s.kept_open == [False] for s in streams)
    assert any(0 < n < 7 for n in seen), seen


# ------------------------------------------------------------------ pushes claimed in the send


class _Pusher:
    """A process's streams as a send sees them (bus.bell.Pusher): these seats are pushable."""

    def __init__(self, seat_ids):
        self.seat_ids = set(seat_ids)
        self.handed: list[tuple[str, dict]] = []

    def pushable(self, seat_ids):
        return self.seat_ids & set(seat_ids)

    def pushed(self, entry, pushes):
        self.handed.append((str(entry.pk), pushes))


@pytest.fixture
def pusher():
    from bus import bell

    registered = []

    def register(seats):
        one = _Pusher(seat.pk for seat in seats)
        bell.add_pusher(one)
        registered.append(one)
        return one

    yield register
    for one in registered:
        bell.remove_pusher(one)


@pytest.mark.django_db(transaction=True)
def test_a_send_claims_the_push_of_a_seat_whose_stream_is_here_in_its_own_transaction(pusher):
    from bus.models import Entry

    room = make_room("team")
    writer, here, elsewhere = (make_seat(n, room) for n in ("writer", "here", "elsewhere"))
    streams = pusher([here])

    report = send(writer, room, "all hands?", type="QUESTION")

    rows = {row.seat_id: row for row in WakeDecision.objects.filter(entry_id=report["id"])}
    assert rows[here.pk].push_seq == 1
    assert rows[here.pk].pushed_at == rows[here.pk].decided_at  # the send's own moment
    assert rows[elsewhere.pk].push_seq is None  # left to the claimer of its process
    assert Entry.objects.get(pk=report["id"]).delivered_to == [here.name]
    assert streams.handed == [(report["id"], {here.pk: (1, here.name)})]  # after the commit
    assert Seat.objects.get(pk=here.pk).push_counter == 1


@pytest.mark.django_db(transaction=True)
def test_a_seat_with_an_older_push_still_to_claim_gets_both_from_the_claimer_in_order(pusher):
    room = make_room("team")
    writer, reader = make_seat("writer", room), make_seat("reader", room)
    first = send(writer, room, "one?", type="QUESTION")  # no stream here yet: left pending
    streams = pusher([reader])

    second = send(writer, room, "two?", type="QUESTION")

    assert streams.handed == []
    claimed, more = services.telling.claim_pushes(seat=reader)
    assert [(seq, str(entry.id)) for seq, entry in claimed] == [(1, first["id"]), (2, second["id"])]
    assert more == 0


@pytest.mark.django_db(transaction=True)
def test_a_send_that_rolls_back_hands_no_push_over_and_moves_no_counter(pusher):
    from django.db import transaction

    room = make_room("team")
    writer, reader = make_seat("writer", room), make_seat("reader", room)
    streams = pusher([reader])

    with contextlib.suppress(RuntimeError), transaction.atomic():
        send(writer, room, "never mind?", type="QUESTION")
        raise RuntimeError("the caller's transaction fails after the send")

    assert streams.handed == []
    assert Seat.objects.get(pk=reader.pk).push_counter == 0
    assert not WakeDecision.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_while_a_letterbox_judges_pushes_a_send_claims_none_itself(pusher, settings):
    settings.TRIAGE_CMD = "true"
    settings.TRIAGE_LETTERBOX = True
    room = make_room("team")
    writer, reader = make_seat("writer", room), make_seat("reader", room)
    streams = pusher([reader])

    send(writer, room, "judge me?", type="QUESTION")

    assert streams.handed == []
    assert WakeDecision.objects.get(seat=reader).push_seq is None


async def test_the_outbox_writes_in_the_order_things_were_put_from_any_thread():
    from mcpgate import delivery

    outbox = delivery.Outbox(delivery.DeliveryRecords())
    outbox.bind(asyncio.get_running_loop())
    streams = [_Stream(None) for _ in range(3)]

    def put_from_the_database_thread():
        for n in range(60):
            outbox.put([(streams[n % 3], [(n, None, {"n": n})], None)])

    thread = threading.Thread(target=put_from_the_database_thread)
    thread.start()
    await asyncio.to_thread(thread.join)
    await outbox.written()

    for k, stream in enumerate(streams):
        assert [m["n"] for m in stream.events] == list(range(k, 60, 3))


@pytest.mark.django_db(transaction=True)
async def test_a_push_whose_stream_closed_before_the_commit_is_recorded_as_a_delivery_error():
    from asgiref.sync import sync_to_async

    from bus.models import Entry
    from mcpgate.streamhost import StreamHost

    host = StreamHost(serve_line=False)
    host.outbox.bind(asyncio.get_running_loop())

    def setup():
        room = make_room("team")
        reader = make_seat("reader", room)
        report = send(make_seat("writer", room), room, "still there?", type="QUESTION")
        return reader, Entry.objects.select_related("room").get(pk=report["id"])

    reader, entry = await sync_to_async(setup)()
    host.pushed(entry, {reader.pk: (1, reader.name)})  # its stream left host.direct
    await host.outbox.written()
    await host.records.flush()

    stored = await sync_to_async(Entry.objects.get)(pk=entry.pk)
    assert stored.delivery_errors == [reader.name]


async def test_the_stream_a_send_wrote_to_is_told_so_and_claims_nothing_while_a_wait_still_hears():
    from salond.host import Bells

    class Listener:
        def __init__(self):
            self.heard = []

        def hear_bell(self, *, pushed=False):
            self.heard.append(pushed)

    bells = Bells()
    stream, wait, other = Listener(), Listener(), Listener()
    bells.add(1, stream)
    bells.add(1, wait)
    bells.add(2, other)

    bells.ring([1, 2], {1: stream})

    assert (stream.heard, wait.heard, other.heard) == ([True], [False], [False])


# ------------------------------------------------------------------ a POST without a consumer


async def _post(app, body: dict, headers: dict[str, str]):
    from asgiref.testing import ApplicationCommunicator

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "query_string": b"label=lean",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }
    call = ApplicationCommunicator(app, scope)
    await call.send_input(
        {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}
    )
    start = await call.receive_output(5)
    answer = await call.receive_output(5)
    return start, answer, call


@pytest.mark.skipif(
    bool(os.environ.get("REDIS_URL")), reason="counts the in-process layer's channels: SQLite pass"
)
@pytest.mark.django_db(transaction=True)
async def test_a_post_is_answered_without_a_channel_on_the_layer_and_a_wait_gets_one():
    """A POST to /mcp opens no channel on the layer (a consumer per POST cost one, two
    receiving tasks and a dispatch loop); a `wait` call, which must hear its seat's
    doorbell, is handed to the stream consumer with its body, and has one."""
    from mcpgate.consumers import mcp_application
    from mcpgate.streamhost import StreamHost
    from tests.mcp_helpers import ACCEPT_BOTH, initialize_message

    host = StreamHost(serve_line=False)
    app = mcp_application(host)
    headers = {"host": "127.0.0.1", "accept": ACCEPT_BOTH, "content-type": "application/json"}
    try:
        start, _, _ = await _post(app, initialize_message(), headers)
        session = dict(start["headers"])[b"mcp-session-id"].decode()
        headers["mcp-session-id"] = session
        calls = [
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
             "params": {"name": "rooms", "arguments": {}}},
        ]  # fmt: skip
        answers = []

        async def post_all():
            for call in calls:
                answers.append(await _post(app, call, headers))

        # The layer's channels, sampled at every event-loop turn while the POSTs run.
        channels_during_posts = await _counts_between(lambda: len(host.layer.channels), post_all())

        wait = {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "wait", "arguments": {"timeout": 1}}}  # fmt: skip
        wait_start, _, waiting = await _post(app, wait, headers)
        channels_while_waiting = dict(host.layer.channels)
        await waiting.wait(5)
    finally:
        await host.stop()

    assert [start["status"] for start, _, _ in answers] == [200, 200]
    assert json.loads(answers[0][1]["body"]) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert "mine" in json.loads(answers[1][1]["body"])["result"]["structuredContent"]
    assert set(channels_during_posts) == {0}
    assert wait_start["status"] == 200
    assert dict(wait_start["headers"])[b"content-type"] == b"text/event-stream"
    assert len(channels_while_waiting) == 1


async def test_calls_from_the_database_thread_wake_the_loop_once_and_run_in_order():
    """A send's commit hands the loop its pushes, its rings and the live view's ring:
    each call_soon_threadsafe wrote a byte to the loop's self-pipe (a wake-up and a GIL
    hand-over each); calls made before the loop runs them share one."""
    import socket

    loop = asyncio.get_running_loop()
    calls = LoopCalls()
    calls.loop = loop
    ran: list[int] = []

    def from_the_database_thread():
        for n in range(100):
            calls.soon(ran.append, n)

    thread = threading.Thread(target=from_the_database_thread)
    thread.start()
    thread.join()  # the loop is held here: nothing has run yet
    waiting = loop._ssock.recv(4096, socket.MSG_PEEK)  # the self-pipe's unread wake-ups
    await asyncio.sleep(0)

    assert ran == list(range(100))
    assert waiting == b"\0"


@pytest.mark.django_db(transaction=True)
def test_a_row_the_letterbox_has_not_judged_is_neither_pushed_nor_told_until_it_is(
    settings, tmp_path
):
    """An entry stored after a look's judge claimed its rows reaches the claim unjudged:
    the push and the telling leave it for the next look, which judges it first."""
    judge = tmp_path / "judge-yes"
    judge.write_text("#!/bin/sh\ncat > /dev/null\necho yes\n")
    judge.chmod(0o755)
    settings.TRIAGE_CMD, settings.TRIAGE_LETTERBOX = [str(judge)], True
    room = make_room("team")
    writer, reader = make_seat("writer", room), make_seat("reader", room)
    send(writer, room, "who owns billing?", type="QUESTION")
    send(writer, room, "please review the schema", type="REQUEST", to=[reader.name])

    pushed, _ = services.telling.claim_pushes(seat=reader)
    told = services.telling.announce_wakes(seat=reader)

    # Only the entry naming exactly this seat, which the letterbox never judges.
    assert [entry.content for _, entry in pushed] == ["please review the schema"]
    assert [entry["content"] for entry in told] == ["please review the schema"]
    assert services.triage.judge(seat=reader) == 1
    pushed, _ = services.telling.claim_pushes(seat=reader)
    told = services.telling.announce_wakes(seat=reader)
    assert [entry.content for _, entry in pushed] == ["who owns billing?"]
    assert [entry["content"] for entry in told] == ["who owns billing?"]
    row = WakeDecision.objects.get(seat=reader, entry__content="who owns billing?")
    assert (row.judge, row.judgement, row.told_by) == ("letterbox", "yes", "monitor")


@pytest.mark.django_db(transaction=True)
def test_the_wait_tool_judges_a_quiet_seats_rows_as_it_tells_them_and_no_other_path_does(
    settings, tmp_path
):
    judge = tmp_path / "judge-no"
    judge.write_text("#!/bin/sh\ncat > /dev/null\necho no\n")
    judge.chmod(0o755)
    settings.TRIAGE_CMD, settings.TRIAGE_LETTERBOX = [str(judge)], True
    room = make_room("team")
    writer, reader = make_seat("writer", room), make_seat("reader", room)
    send(writer, room, "who owns billing?", type="QUESTION")
    services.seats.set_quiet(seat=reader, duration="1h")

    assert services.triage.claim(seat=reader) == []  # unasked: a quiet seat is left alone
    [work] = services.triage.claim(seat=reader, asked=True)
    services.triage.record(answers={work["row"]: "no"})

    assert services.telling.collect_wakes(seat=reader)["entries"] == []
    row = WakeDecision.objects.get(seat=reader)
    assert (row.judge, row.judgement, row.woken, row.told_by) == ("letterbox", "no", False, "")
