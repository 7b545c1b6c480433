"""Idle capacity: open GET streams held by one daphne process, memory per stream.

A real daemon (embedded default, one daphne process); N sessions connected one after
another (initialized, GET stream open), all on one httpx client with an unbounded pool
(this process's open-file limit is raised first; the daemon inherits it). Then the
streams are held through a keep-alive round (15 s) while the daemon's RSS (from
/proc/PID/status) and its CPU time are read. Per-stream memory = (RSS with N streams -
RSS before the first) / N. The CPU the daemon spends on idle streams is reported too:
every stream's keep-alive also refreshes its seat's liveness and its session in the
database and re-checks the push ledger.

    python -m bench.idle [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from bench.common import (
    Figure,
    cpu_seconds,
    daemon,
    http_client,
    listeners,
    raise_nofile,
    rss_kib,
    scenario_main,
)

TARGET_STREAMS, TARGET_MIB = 2000, 600
KEEPALIVE_SECONDS = 15


async def measure(salon, streams: int, hold: float) -> dict:
    pid = salon.process.pid
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(http_client(timeout=60))
        before = rss_kib(pid)
        started = time.monotonic()
        connected = await listeners(stack, client, salon.url, "idle", streams, parallel=16)
        connect_s = time.monotonic() - started
        await asyncio.sleep(1)
        after_connect = rss_kib(pid)
        cpu_before = cpu_seconds(pid)
        held_from = time.monotonic()
        await asyncio.sleep(hold)
        held = time.monotonic() - held_from
        cpu = cpu_seconds(pid) - cpu_before
        after_hold = rss_kib(pid)
        alive = sum(1 for _, _, stream in connected if not stream.ended.is_set())
        keepalives = sum(
            1
            for _, _, stream in connected
            if any(e.get("comment") == "keep-alive" for e in stream.queue._queue)
        )
    return {
        "streams": streams,
        "alive": alive,
        "keepalives": keepalives,
        "connect_s": connect_s,
        "rss_before_mib": before / 1024,
        "rss_mib": max(after_connect, after_hold) / 1024,
        "per_stream_kib": (max(after_connect, after_hold) - before) / streams,
        "idle_cpu_percent": cpu / held * 100,
        "held_s": held,
    }


def run(quick: bool) -> list[Figure]:
    limit = raise_nofile()
    streams = 50 if quick else TARGET_STREAMS
    hold = 2 if quick else KEEPALIVE_SECONDS + 5
    with daemon("sqlite") as salon:
        result = asyncio.run(measure(salon, streams, hold))
    detail = (
        f"{result['alive']}/{streams} streams still open after {result['held_s']:.0f} s, "
        f"{result['keepalives']} got a keep-alive; RSS {result['rss_before_mib']:.0f} MiB "
        f"before → {result['rss_mib']:.0f} MiB; {result['per_stream_kib']:.0f} KiB per "
        f"stream; connecting them took {result['connect_s']:.0f} s; open-file limit {limit}"
    )
    full = streams == TARGET_STREAMS
    return [
        Figure(
            f"Idle capacity: daemon RSS with {streams} open GET streams",
            round(result["rss_mib"]),
            "MiB",
            TARGET_MIB if full else None,
            detail=detail,
        ),
        Figure(
            f"Idle capacity: streams held (all of {streams} open, keep-alives arriving)",
            result["alive"] if (not full or result["keepalives"] == streams) else 0,
            "streams",
            TARGET_STREAMS if full else None,
            higher_is_better=True,
        ),
        Figure(
            "Idle capacity: memory per stream",
            round(result["per_stream_kib"]),
            "KiB",
            detail="(RSS with the streams - RSS before) / streams",
        ),
        Figure(
            f"Idle capacity: daemon CPU while {streams} streams idle",
            round(result["idle_cpu_percent"], 1),
            "% of a core",
            detail=f"over {result['held_s']:.0f} s (keep-alive every {KEEPALIVE_SECONDS} s)",
        ),
    ]


if __name__ == "__main__":
    scenario_main(run, __doc__)
