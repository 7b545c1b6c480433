"""Fan-out: one broadcast QUESTION to N live streams; time until the last one has it.

A real daemon (embedded default); N sessions connected (initialized, GET stream open),
each its own seat in the default room. A broadcast QUESTION posted to /notify by a
non-member wakes every one of them; the figure is the time from just before the POST
to the arrival of the event on the last stream (and on the first, and the median one).

    python -m bench.fanout [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time

from bench.common import Figure, daemon, http_client, listeners, profiled, scenario_main

TARGET_MS = 500


async def measure(base: str, streams: int, rounds: int) -> list[tuple[float, float, float]]:
    """Per round: (first, median, last) arrival in ms after the POST left."""
    results = []
    async with contextlib.AsyncExitStack() as stack:
        idle = await stack.enter_async_context(http_client())
        client = await stack.enter_async_context(http_client())
        connected = await listeners(stack, idle, base, "fan", streams)
        for n in range(rounds):
            await asyncio.sleep(1)
            started = time.time()
            response = await client.post(
                f"{base}/notify?label=bench-announcer",
                json={"content": f"all hands {n}", "type": "QUESTION"},
            )
            assert response.status_code == 202, response.text
            assert len(response.json()["wakes"]) == streams, response.json()
            events = await asyncio.gather(*(stream.next(timeout=120) for _, _, stream in connected))
            arrivals = sorted((e["received"] - started) * 1000 for e in events)
            assert all(e["message"]["params"]["content"] == f"all hands {n}" for e in events)
            results.append((arrivals[0], statistics.median(arrivals), arrivals[-1]))
    return results


def run(quick: bool) -> list[Figure]:
    streams, rounds = (50, 2) if quick else (500, 5)
    with daemon("sqlite") as salon, profiled(salon, "fanout"):
        results = asyncio.run(measure(salon.url, streams, rounds))
    lasts = [last for _, _, last in results]
    detail = "; ".join(
        f"first {first:.0f} / median {mid:.0f} / last {last:.0f}" for first, mid, last in results
    )
    return [
        Figure(
            f"Fan-out: broadcast QUESTION to {streams} live streams, last one received "
            f"(median of {rounds} rounds)",
            round(statistics.median(lasts)),
            "ms",
            TARGET_MS if streams == 500 else None,
            detail=f"ms per round: {detail}",
        )
    ]


if __name__ == "__main__":
    scenario_main(run, __doc__)
