"""Throughput: entries stored and pushed per second via POST /notify, 50 connected sessions.

A real daemon; 50 sessions connected (initialized, GET stream open), each its own seat
in the default room. For DURATION seconds, CONCURRENCY posters send QUESTIONs to
/notify, each addressed to one of the 50 seats in turn, so that every entry is stored
and pushed to exactly one stream. Stored/s = 202 answers within the window / window;
pushed/s = events received for those entries / time until the last one arrived. The
latency of each entry (POST → event) under this load is reported beside them.

Stores: the embedded default as shipped (SQLite synchronous=FULL), SQLite with
synchronous=NORMAL (bench/settings_sync_normal.py) for the comparison, PostgreSQL.

    python -m bench.throughput [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from bench.common import (
    STORES,
    Figure,
    daemon,
    http_client,
    listeners,
    percentile,
    postgres_available,
    profiled,
    scenario_main,
    summary,
)

SESSIONS = 50
CONCURRENCY = 8
TARGET = 1000  # entries/s on SQLite


async def measure(base: str, seconds: float, posters: int = CONCURRENCY) -> dict:
    async with contextlib.AsyncExitStack() as stack:
        idle = await stack.enter_async_context(http_client())
        client = await stack.enter_async_context(http_client())
        connected = await listeners(stack, idle, base, "reader", SESSIONS)
        seats = [seat for _, seat, _ in connected]
        sent: dict[str, float] = {}
        latencies: list[float] = []
        arrivals: list[float] = []
        stored = 0
        errors: list[str] = []
        url = f"{base}/notify?label=bench-load"

        async def drain(stream) -> None:
            while True:
                event = await stream.next(timeout=3600)
                key = event["message"]["params"]["content"]
                if key in sent:
                    latencies.append((event["received"] - sent[key]) * 1000)
                    arrivals.append(event["received"])

        readers = [asyncio.create_task(drain(stream)) for _, _, stream in connected]
        start = time.time()
        deadline = start + seconds

        async def poster(worker: int) -> None:
            nonlocal stored
            n = 0
            while time.time() < deadline:
                key = f"load {worker}-{n}"
                seat = seats[(worker * 7919 + n) % SESSIONS]
                sent[key] = time.time()
                response = await client.post(
                    url, json={"content": key, "type": "QUESTION", "to": [seat]}
                )
                n += 1
                if response.status_code != 202:  # a finding, not a reason to stop
                    del sent[key]
                    errors.append(f"{response.status_code} {response.text[:120]}")
                    continue
                if time.time() <= deadline:
                    stored += 1

        await asyncio.gather(*(poster(w) for w in range(posters)))
        # Wait for the pushes of everything sent (at most 30 s more).
        settle = time.time() + 30
        while len(arrivals) < len(sent) and time.time() < settle:
            await asyncio.sleep(0.05)
        for task in readers:
            task.cancel()
        last = max(arrivals) if arrivals else start
        return {
            "stored_per_s": stored / seconds,
            "pushed_per_s": len(arrivals) / (last - start),
            "sent": len(sent),
            "pushed": len(arrivals),
            "latencies": latencies,
            "errors": errors,
        }


def run(quick: bool) -> list[Figure]:
    seconds = 5 if quick else 30
    stores = ["sqlite"] if quick else ["sqlite", "sqlite-normal", "postgres"]
    figures = []
    for store in stores:
        name = f"Throughput via /notify, {SESSIONS} sessions, {STORES[store]}"
        target = TARGET if store == "sqlite" else None
        if store == "postgres" and not postgres_available():
            figures.append(
                Figure(name, None, "entries/s", detail="skipped: PostgreSQL not reachable")
            )
            continue
        with daemon(store) as salon, profiled(salon, f"throughput-{store}"):
            result = asyncio.run(measure(salon.url, seconds))
        failed = result["errors"]
        detail = (
            f"{seconds} s, {CONCURRENCY} concurrent posters; {result['sent']} sent, "
            f"{result['pushed']} pushed at {result['pushed_per_s']:.0f}/s; POST → event "
            f"{summary(result['latencies'])} ms"
        )
        if failed:
            detail += f"; **{len(failed)} requests failed**, first: {failed[0]}"
        figures.append(
            Figure(
                f"{name}: stored and pushed",
                round(min(result["stored_per_s"], result["pushed_per_s"])),
                "entries/s",
                target,
                higher_is_better=True,
                detail=detail,
            )
        )
        if result["latencies"]:
            figures.append(
                Figure(
                    f"{name}: POST → event under load, p99",
                    round(percentile(result["latencies"], 99), 1),
                    "ms",
                )
            )
    return figures


if __name__ == "__main__":
    scenario_main(run, __doc__)
