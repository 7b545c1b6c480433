"""A relay's rate limit paces a bridge and never wedges it (docs/RELAY.md, "Limits").

The bridge's own push loop (relay.bridge.RoomLink) talks HTTP to the relay's own views
(relay.api, relay.server) through Django's async test client, both in this process and
this store. Time is simulated: the relay's clock (relay.server.clock) and the bridge's
pauses (Bridge.sleep) share one clock that moves only when the bridge waits, so a
backlog that takes over four hours of rate windows is carried in seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, override_settings

from bus import signing
from bus.ids import uuid7
from bus.models import Entry, Room
from relay import bridge as bridges
from relay import crypto, envelope, keys, server, state
from relay.models import BridgedRoom, RelayDevice, RelayEnvelope
from tests.factories import make_room, make_seat

pytestmark = pytest.mark.django_db

SECRET = "relay-secret-for-tests-0123456789"
RELAY = "http://relay.test"
KEY = bytes(range(32))
START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


class SimulatedClock:
    """The one clock of the relay and the bridge: it moves when the bridge waits."""

    def __init__(self) -> None:
        self.now = START
        self.waited: list[float] = []

    def __call__(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waited.append(seconds)
        self.now += timedelta(seconds=seconds)
        await asyncio.sleep(0)


KEPT_HEADERS = ("content-type", "retry-after")


class ToTheRelay(httpx.AsyncBaseTransport):
    """httpx requests answered by the relay's views, through Django's async test client;
    every answer's status is kept."""

    def __init__(self) -> None:
        self.django = AsyncClient()
        self.statuses: list[int] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode()
        headers = {k: v for k, v in request.headers.items() if k.lower() == "authorization"}
        body = await request.aread()
        answer = await self.django.generic(
            request.method, path, body, content_type="application/json", headers=headers
        )
        self.statuses.append(answer.status_code)
        return httpx.Response(
            answer.status_code,
            headers={
                k: v for k, v in answer.items() if k.lower() in ("content-type", "retry-after")
            },
            content=answer.content,
        )


@contextlib.contextmanager
def simulated_relay_clock():
    """Relay mode at 40 entries a minute, on a clock of its own."""
    clock = SimulatedClock()
    server._last_purge[0] = 0.0  # retention is due at once (nothing is old enough here)
    with override_settings(RELAY_SECRET=SECRET, RELAY_RATE=40, RELAY_ROOM_ENTRIES=100_000):
        server.clock = clock
        try:
            yield clock
        finally:
            server.clock = server.timezone.now


@pytest.fixture
def relay_clock():
    with simulated_relay_clock() as clock:
        yield clock


def join(device: str) -> str:
    invite = crypto.make_claim(SECRET, kind="join", ttl=900, now=time.time(), room="team",
                               device=device)  # fmt: skip
    return server.redeem(invite)["token"]


def write_backlog(room: Room, count: int) -> list[str]:
    """`count` entries of one local seat, stored and signed as a send stores them."""
    seat = make_seat("api", room)
    rows = []
    for n in range(1, count + 1):
        row = Entry(id=uuid7(), room=room, seq=room.last_seq + n, ts=START, sender=seat.name,
                    sender_agent="api", type="FACT", to=[], content=f"entry {n}", meta={},
                    via="cli")  # fmt: skip
        row.signature = signing.sign_entry(row)
        rows.append(row)
    Entry.objects.bulk_create(rows, batch_size=500)
    Room.objects.filter(pk=room.pk).update(last_seq=room.last_seq + count)
    return [str(row.id) for row in rows]


def test_ten_thousand_entries_behind_forty_a_minute_all_arrive_in_order_once(relay_clock):
    room = make_room("team")
    bridged = state.bridge_room(room, relay=RELAY, device="laptop")
    laptop, desktop = join("laptop"), join("desktop")
    written = write_backlog(room, 10_000)
    transport = ToTheRelay()

    async def carry() -> None:
        bridge = bridges.Bridge()
        bridge.sleep = relay_clock.sleep
        bridge.http = httpx.AsyncClient(transport=transport)
        link = bridges.RoomLink(bridge, "team", bridged.pk, RELAY, "laptop",
                                keys.RoomKeys(key=KEY, token=laptop))  # fmt: skip
        link.leased.set()
        pushing = asyncio.ensure_future(link._push_loop())
        deadline = time.monotonic() + 600
        try:
            while await on_thread(lambda: BridgedRoom.objects.get().pushed_seq) < 10_000:
                assert not pushing.done(), pushing
                assert time.monotonic() < deadline, "the backlog was not carried"
                await asyncio.sleep(0.05)
        finally:
            pushing.cancel()
            await asyncio.gather(pushing, return_exceptions=True)
            await bridge.http.aclose()

    async_to_sync(carry)()

    # At the relay: every entry, once, in the order it was written here.
    stored = list(
        RelayEnvelope.objects.filter(device="laptop")
        .exclude(sender="@laptop")
        .order_by("seq")
        .values_list("entry_id", flat=True)
    )
    assert [str(i) for i in stored] == written
    # The other device reads them all, in order, and each opens to its own text.
    device = RelayDevice.objects.get(name="desktop")
    assert device.revoked_at is None and desktop
    read, after = [], 0
    while True:
        answer = server.pull(device, after, server.MAX_PULL_ENTRIES)
        read += answer["entries"]
        if answer["cursor"] == after:
            break
        after = answer["cursor"]
    opened = [envelope.open_envelope(KEY, item, room="team", device="desktop") for item in read]
    texts = [item.content for item in opened if isinstance(item, envelope.Landing)]
    assert texts == [f"entry {n}" for n in range(1, 10_001)]
    # Paced by the windows, not wedged: 250 windows of 40, and hardly a refusal.
    elapsed = (relay_clock.now - START).total_seconds() / 60
    assert 249 <= elapsed <= 262, elapsed
    assert transport.statuses.count(429) <= 2, transport.statuses.count(429)
    assert transport.statuses.count(200) >= 250


def test_a_rate_limit_shows_until_a_push_and_a_pull_have_both_succeeded_after_it(relay_clock):
    room = make_room("team")
    bridged = state.bridge_room(room, relay=RELAY, device="laptop")
    laptop = join("laptop")
    write_backlog(room, 100)
    transport = ToTheRelay()
    bridge = bridges.Bridge()
    bridge.sleep = relay_clock.sleep
    bridge.http = httpx.AsyncClient(transport=transport)
    link = bridges.RoomLink(bridge, "team", bridged.pk, RELAY, "laptop",
                            keys.RoomKeys(key=KEY, token=laptop))  # fmt: skip
    one_push = async_to_sync(link.push_once)

    # 100 at once is over 40 a minute: refused, and said so; 40 fit now.
    assert one_push() == 0.0
    assert transport.statuses == [429]
    shown = BridgedRoom.objects.get().status()
    assert "AGENT_SALON_RELAY_RATE" in shown["error"] and shown["waiting"] == 100

    # A push that works is not enough: the error stays until a pull has worked too.
    assert one_push() > 0  # 40 stored, the window spent: wait for the next
    shown = BridgedRoom.objects.get().status()
    assert (shown["waiting"], transport.statuses) == (60, [429, 200])
    assert shown["error"] is not None
    state.land(bridged.pk, KEY, [], cursor=0)
    assert BridgedRoom.objects.get().status()["error"] is None


async def on_thread(func):
    from patches.asgiref import on_database_thread

    return await on_database_thread(func)


def test_a_push_answer_says_what_is_left_of_the_window(relay_clock):
    token = join("laptop")
    device = server.authenticate(token, "team")
    fields = {"room": "team", "ts": START, "sender": "api#a5a5a5a5", "type": "FACT",
              "to": [], "re": None, "content": "hi", "meta": {}}  # fmt: skip
    sealed = [envelope.seal_entry(KEY, device="laptop", id=uuid7(), **fields) for _ in range(30)]
    answer = server.push(device, sealed)
    assert (answer["rate"], answer["rateLeft"], answer["rateResetIn"]) == (40, 10, 61)
    with pytest.raises(server.Refusal) as refused:
        server.push(device, [dict(s, id=str(uuid7())) for s in sealed[:11]])
    assert refused.value.status == 429
    assert (refused.value.extra["rateLeft"], refused.value.extra["retryAfter"]) == (10, 61)
    assert "10 fit now" in refused.value.message


def test_salon_relay_sync_sends_what_the_window_takes_and_says_what_still_waits(
    relay_clock, tmp_path
):
    room = make_room("team")
    state.bridge_room(room, relay=RELAY, device="laptop")
    path = tmp_path / "relay-keys.json"
    team = keys.RoomKeys(key=KEY, token=join("laptop"))
    keys.save(keys.Keys(relay=RELAY, device="laptop", rooms={"team": team}), path)
    written = write_backlog(room, 100)

    def sync() -> dict:
        http = httpx.AsyncClient(transport=ToTheRelay())
        [result] = async_to_sync(bridges.sync_once)(keys_path=path, http=http)["rooms"]
        return result

    first = sync()
    # 100 is over the window: 40 go, 60 wait (`salon relay sync` exits 3), nothing failed
    assert (first["pushed"], first["bridge"]["waiting"], first["error"]) == (40, 60, None)
    assert first["bridge"]["error"] is None  # the 429 was followed by a push and a pull
    relay_clock.now += timedelta(minutes=1, seconds=1)
    second = sync()
    assert (second["pushed"], second["bridge"]["waiting"]) == (40, 20)
    relay_clock.now += timedelta(minutes=1, seconds=1)
    assert sync()["bridge"]["waiting"] == 0
    stored = RelayEnvelope.objects.exclude(sender__startswith="@").order_by("seq")
    assert [str(i) for i in stored.values_list("entry_id", flat=True)] == written
