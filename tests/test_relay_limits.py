"""The relay's ceilings and retention as a bridge meets them (docs/RELAY.md, "Limits"):
an entry over the size limit stays on its machine and the rest go on (413); a full room
is shown and the backlog waits for retention to free space, then goes on (507); a
machine away longer than the retention counts what it missed.

The bridge (relay.bridge.RoomLink) and the relay's views share this process and store,
and one simulated clock (tests.test_relay_pacing): retention's hours pass in seconds.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from bus import signing
from bus.ids import uuid7
from bus.models import Entry
from relay import bridge as bridges
from relay import client, envelope, keys, server, state
from relay.models import BridgedRoom, RelayDevice, RelayEnvelope, RelayRoom
from tests.factories import make_room
from tests.test_relay_pacing import (
    KEY,
    RELAY,
    START,
    ToTheRelay,
    join,
    on_thread,
    simulated_relay_clock,
    write_backlog,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def relay_clock():
    with simulated_relay_clock() as clock:
        yield clock


def a_link(bridged: BridgedRoom, token: str, clock, transport) -> bridges.RoomLink:
    bridge = bridges.Bridge()
    bridge.sleep = clock.sleep
    bridge.http = httpx.AsyncClient(transport=transport)
    return bridges.RoomLink(bridge, "team", bridged.pk, RELAY, "laptop",
                            keys.RoomKeys(key=KEY, token=token))  # fmt: skip


def carry(link: bridges.RoomLink, until: int, seconds: float = 300) -> None:
    """The link's own push loop, until the room's pushed mark reaches `until`."""

    async def run() -> None:
        link.leased.set()
        pushing = asyncio.ensure_future(link._push_loop())
        deadline = time.monotonic() + seconds
        try:
            while await on_thread(lambda: BridgedRoom.objects.get().pushed_seq) < until:
                assert not pushing.done(), pushing
                assert time.monotonic() < deadline, "the backlog was not carried"
                await asyncio.sleep(0.02)
        finally:
            pushing.cancel()
            await asyncio.gather(pushing, return_exceptions=True)

    async_to_sync(run)()


def at_relay() -> list[str]:
    rows = RelayEnvelope.objects.exclude(sender__startswith="@").order_by("seq")
    return [str(i) for i in rows.values_list("entry_id", flat=True)]


@override_settings(RELAY_RATE=1000, RELAY_MAX_ENTRY_BYTES=1024)
def test_an_entry_over_the_size_limit_stays_here_counted_and_the_rest_arrive(relay_clock):
    room = make_room("team")
    bridged = state.bridge_room(room, relay=RELAY, device="laptop")
    token = join("laptop")
    written = write_backlog(room, 11)
    big = Entry.objects.get(id=written[5])
    Entry.objects.filter(pk=big.pk).update(content="x" * 2000)
    big.content = "x" * 2000
    Entry.objects.filter(pk=big.pk).update(signature=signing.sign_entry(big))
    transport = ToTheRelay()

    carry(a_link(bridged, token, relay_clock, transport), until=11)

    assert at_relay() == written[:5] + written[6:]
    shown = BridgedRoom.objects.get().status()
    assert (shown["rejected"], shown["pushed"], shown["waiting"]) == (1, 10, 0)
    assert 413 in transport.statuses


@override_settings(RELAY_RATE=1000, RELAY_ROOM_ENTRIES=50, RELAY_RETENTION_HOURS=1)
def test_a_full_room_is_shown_and_its_backlog_goes_on_once_retention_frees_space(relay_clock):
    room = make_room("team")
    bridged = state.bridge_room(room, relay=RELAY, device="laptop")
    token = join("laptop")
    written = write_backlog(room, 80)
    transport = ToTheRelay()

    carry(a_link(bridged, token, relay_clock, transport), until=80)

    # The first 50 filled the room and were dropped by retention an hour later; the last
    # 30 went once there was space: each entry once, in order.
    assert RelayRoom.objects.get().purged_seq == 50
    assert at_relay() == written[50:]
    assert relay_clock.now - START >= timedelta(hours=1)
    assert 507 in transport.statuses
    # Shown until a push and a pull have both worked since.
    shown = BridgedRoom.objects.get().status()
    assert "AGENT_SALON_RELAY_ROOM_ENTRIES" in shown["error"]
    state.land(bridged.pk, KEY, [], cursor=0)
    assert BridgedRoom.objects.get().status()["error"] is None


@override_settings(RELAY_RATE=1000, RELAY_ROOM_BYTES=4096, RELAY_RETENTION_HOURS=1)
def test_a_room_over_its_byte_ceiling_takes_smaller_batches_and_never_wedges(relay_clock):
    room = make_room("team")
    bridged = state.bridge_room(room, relay=RELAY, device="laptop")
    token = join("laptop")
    written = write_backlog(room, 30)
    # 300 characters each, signed again as a send would have signed them
    for row in Entry.objects.filter(room=room):
        row.content = f"{row.seq:03d} " + "y" * 296
        Entry.objects.filter(pk=row.pk).update(content=row.content,
                                               signature=signing.sign_entry(row))  # fmt: skip
    transport = ToTheRelay()

    carry(a_link(bridged, token, relay_clock, transport), until=30)

    assert BridgedRoom.objects.get().status()["pushed"] == 30  # each taken once
    kept = at_relay()
    assert kept == written[-len(kept) :]  # the newest, in order; the rest aged out
    assert 507 in transport.statuses
    assert "AGENT_SALON_RELAY_ROOM_BYTES" in BridgedRoom.objects.get().status()["error"]


@override_settings(RELAY_RETENTION_HOURS=1)
def test_a_machine_away_longer_than_the_retention_counts_what_it_missed(relay_clock):
    room = make_room("team")
    bridged = state.bridge_room(room, relay=RELAY, device="laptop")
    laptop, desktop = join("laptop"), join("desktop")
    writer = server.authenticate(desktop, "team")

    def from_desktop(text: str) -> dict:
        return envelope.seal_entry(KEY, device="desktop", id=uuid7(), room="team",
                                   ts=relay_clock.now, sender="web#b2b2b2b2", type="FACT",
                                   to=[], re=None, content=text, meta={})  # fmt: skip

    server.push(writer, [from_desktop(f"early {n}") for n in range(5)])
    relay_clock.now += timedelta(hours=2)  # the laptop is away
    server.push(writer, [from_desktop(f"late {n}") for n in range(2)])
    link = a_link(bridged, laptop, relay_clock, ToTheRelay())

    async def pull_once() -> int:
        answer = await client.pull(link.bridge.http, RELAY, "team", laptop, 0, 0)
        return await link._land(answer, 0)

    assert async_to_sync(pull_once)() == 7
    shown = BridgedRoom.objects.get().status()
    assert (shown["missed"], shown["landed"]) == (5, 2)
    landed = Entry.objects.filter(room=room, via="relay").order_by("seq")
    assert [(e.sender, e.content) for e in landed] == [
        ("web@desktop#b2b2b2b2", "late 0"),
        ("web@desktop#b2b2b2b2", "late 1"),
    ]


@override_settings(RELAY_DEVICE_TTL_DAYS=2)
def test_a_device_token_lasts_the_configured_days_and_then_is_refused(relay_clock):
    token = join("laptop")

    assert RelayDevice.objects.get().expires_at == START + timedelta(days=2)
    assert server.authenticate(token, "team").name == "laptop"
    relay_clock.now += timedelta(days=2, seconds=1)
    with pytest.raises(server.Refusal) as refused:
        server.authenticate(token, "team")
    assert refused.value.status == 401 and "expired" in refused.value.message


def test_the_device_token_lifetime_is_a_setting_like_the_others():
    from salon import config

    assert config.read({}).relay_device_ttl_days == 365
    assert config.read({"AGENT_SALON_RELAY_DEVICE_TTL_DAYS": "30"}).relay_device_ttl_days == 30
    with pytest.raises(config.ConfigError, match="AGENT_SALON_RELAY_DEVICE_TTL_DAYS"):
        config.read({"AGENT_SALON_RELAY_DEVICE_TTL_DAYS": "0"})
