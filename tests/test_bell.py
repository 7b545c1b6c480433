"""Waiting on a bell with a timeout (bus.bell.rung_within), which every loop that waits
for a ring uses: the relay bridge's push loop, the relay's long poll, the doorbell's
listener, `salon wait`, the wait tool and the live view's stream."""

from __future__ import annotations

import asyncio

import pytest

from bus import bell


async def test_a_bell_rung_in_time_says_so_and_a_silent_one_times_out():
    event = asyncio.Event()
    asyncio.get_running_loop().call_later(0.01, event.set)

    assert await bell.rung_within(event, 5) is True
    assert await bell.rung_within(asyncio.Event(), 0.01) is False


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
async def test_a_loop_cancelled_just_as_its_bell_rings_stops(turns):
    """REGRESSION (2026-12-01): `salon relay bridge` kept running after Ctrl-C in a test
    run, and stayed up for minutes. Its loop waited on its kick with asyncio.wait_for,
    which on Python 3.11 returns the event's result to a task cancelled in the same few
    loop turns as the event is set: the cancel is lost and the loop goes on. Measured
    with wait_for: 3 of these 4 cases never stop."""
    event = asyncio.Event()

    async def loop():
        while True:
            await bell.rung_within(event, 10)
            event.clear()

    task = asyncio.ensure_future(loop())
    for _ in range(3):
        await asyncio.sleep(0)  # the loop is waiting on its bell
    event.set()
    for _ in range(turns):
        await asyncio.sleep(0)
    task.cancel()

    done, _ = await asyncio.wait([task], timeout=1)
    assert done == {task} and task.cancelled()
