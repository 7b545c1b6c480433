"""Workers: /notify stored and pushed on PostgreSQL + Redis, `--workers 3` against one.

The scale-out claim of `salon serve --workers N`: N daphne processes on one listening
socket, one PostgreSQL database, pushes across them on the Redis channel layer. The
load is bench/throughput.py's (50 connected sessions, each its own seat; posters POST
QUESTIONs to /notify, each to one seat in turn, for a fixed time), with POSTERS posters
so that three workers have work waiting. The figure is entries stored and pushed per
second (the lower of the two rates), for 1 and for 3 workers, on fresh stores, one after
the other, and their ratio (target: ≥ 2).

Every process runs on this machine: the workers, PostgreSQL, Redis and the client
(posters and the 50 streams) share its cores, so the ratio here says what the machine
leaves to the workers, and its core count is given beside it.

    python -m bench.workers [--quick]
"""

from __future__ import annotations

import asyncio
import os

from bench import throughput
from bench.common import (
    Figure,
    daemon,
    postgres_available,
    profiled,
    redis_available,
    scenario_main,
    summary,
)

POSTERS = 24
TARGET_RATIO = 2.0


def run(quick: bool) -> list[Figure]:
    seconds = 5 if quick else 30
    name = "PostgreSQL + Redis, /notify stored and pushed"
    if not (postgres_available() and redis_available()):
        skipped = "skipped: PostgreSQL or Redis not reachable"
        return [Figure(name, None, "entries/s", detail=skipped)]
    rates: dict[int, float] = {}
    figures = []
    for workers in (1, 3):
        with (
            daemon("postgres-redis", workers=workers) as salon,
            profiled(salon, f"workers-{workers}"),
        ):
            result = asyncio.run(throughput.measure(salon.url, seconds, posters=POSTERS))
        rates[workers] = min(result["stored_per_s"], result["pushed_per_s"])
        detail = (
            f"{seconds} s, {POSTERS} posters, {throughput.SESSIONS} sessions; "
            f"{result['sent']} sent, {result['pushed']} pushed; POST → event "
            f"{summary(result['latencies'])} ms"
        )
        if result["errors"]:
            detail += f"; **{len(result['errors'])} requests failed**, first: {result['errors'][0]}"
        figures.append(
            Figure(
                f"{name}, {workers} worker(s)",
                round(rates[workers]),
                "entries/s",
                higher_is_better=True,
                detail=detail,
            )
        )
    figures.append(
        Figure(
            f"{name}: 3 workers / 1 worker",
            round(rates[3] / rates[1], 2) if rates[1] else None,
            "times",
            None if quick else TARGET_RATIO,
            higher_is_better=True,
            detail=f"{os.cpu_count()} cores shared by the workers, PostgreSQL, Redis, client",
        )
    )
    return figures


if __name__ == "__main__":
    scenario_main(run, __doc__)
