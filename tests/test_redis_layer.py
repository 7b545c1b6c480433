"""The Redis channel layer (patches.channels_redis) against a real Redis (REDIS_URL)."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from patches.channels_redis import CancelSafeRedisChannelLayer

REDIS_URL = os.environ.get("REDIS_URL")

pytestmark = pytest.mark.skipif(not REDIS_URL, reason="needs Redis: set REDIS_URL (.ci/run does)")

TRIALS = 40


def new_layer() -> CancelSafeRedisChannelLayer:
    return CancelSafeRedisChannelLayer(
        hosts=[{"address": REDIS_URL, "socket_timeout": 30}],
        prefix=f"salon.test-{uuid.uuid4().hex[:12]}",
    )


async def a_message_sent_as_its_neighbour_ends(layer, n: int) -> dict | None:
    """Two consumers of one process wait (the first holds the process's blocking pop);
    the first sends to a group of the second and ends at once, with no await between,
    as a POST consumer does after checkin. What the second receives within 2 s."""
    ending, staying = await layer.new_channel(), await layer.new_channel()
    holder = asyncio.ensure_future(layer.receive(ending))
    await asyncio.sleep(0.02)
    waiter = asyncio.ensure_future(layer.receive(staying))
    await asyncio.sleep(0.02)
    group = f"g{n}"
    await layer.group_add(group, staying)
    await layer.group_send(group, {"type": "session.rebind", "n": n})
    holder.cancel()
    try:
        return await asyncio.wait_for(waiter, 2)
    except TimeoutError:
        return None
    finally:
        await layer.group_discard(group, staying)


async def test_a_message_sent_as_the_popping_consumer_ends_still_reaches_its_consumer():
    """REGRESSION: 2026-12-01, CI's PostgreSQL + Redis pass: a stream never followed its
    session after checkin. The checkin's consumer sent session.rebind and ended; channels
    cancelled its receive, which held the process's BZPOPMIN, and redis-py dropped the
    popped answer. With channels_redis's own layer this loop lost messages in every run
    (16 of 40 in one)."""
    layer = new_layer()
    try:
        got = [await a_message_sent_as_its_neighbour_ends(layer, n) for n in range(TRIALS)]
    finally:
        await layer.flush()
    assert [message and message["n"] for message in got] == list(range(TRIALS))


async def test_a_receive_cancelled_while_nothing_comes_leaves_the_next_message_in_order():
    """A pop whose caller is gone puts what it takes back in its old place: two messages
    sent one after the other arrive in the order sent."""
    layer = new_layer()
    try:
        ending, staying = await layer.new_channel(), await layer.new_channel()
        holder = asyncio.ensure_future(layer.receive(ending))
        await asyncio.sleep(0.02)
        holder.cancel()
        await layer.send(staying, {"type": "first"})
        await layer.send(staying, {"type": "second"})
        first = await asyncio.wait_for(layer.receive(staying), 2)
        second = await asyncio.wait_for(layer.receive(staying), 2)
    finally:
        await layer.flush()
    assert (first["type"], second["type"]) == ("first", "second")
