"""Cross-process push latency: `salon send` in another process → the event on an open stream.

Starts a real daemon on a fresh store, opens a raw MCP session with its GET stream, then
runs `salon send … QUESTION --to <that seat>` as separate processes. The latency of one
entry is the time the event arrived minus the entry's server timestamp (same clock), so
the CLI's own start-up is not counted: it is what the doorbell costs (bus/bell.py: the
daemon answers the command itself over its local line and rings its own streams; a
command that works on the store itself rings the servers' lines on SQLite, NOTIFY on
PostgreSQL; each server's listener polls SQLite every 100 ms as the safety net). The
sends are spaced by a random pause so they do not fall into step with the poll.

    python -m bench.cross_process [--runs 20] [--store sqlite|sqlite-redis|postgres|…]
    python -m bench.cross_process --suite [--quick]     # the figures of python -m bench
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import tempfile
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    STORES,
    Figure,
    daemon,
    http_client,
    listener,
    own_environment,
    percentile,
    redis_available,
    summary,
    write_json,
)
from tests.support import run_salon

TARGETS_MS = {"sqlite": 250, "sqlite-redis": 30}


async def measure(salon, runs: int, workdir: Path) -> list[float]:
    latencies = []
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(http_client())
        _, seat, stream = await listener(stack, client, salon.url, "bench-reader")
        env = {**salon.env, "AGENT_SALON_NAME": "bench-cron"}
        done = await asyncio.to_thread(run_salon, "join", "salon", env=env, cwd=workdir)
        assert done.returncode == 0, done.stderr
        for n in range(runs):
            await asyncio.sleep(random.uniform(0, 0.1))
            done = await asyncio.to_thread(
                run_salon, "send", "salon", "QUESTION", f"ping {n}", "--to", seat, "--json",
                env=env, cwd=workdir,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            event = await stream.next(timeout=10)
            assert event["message"]["params"]["content"] == f"ping {n}", event
            stamped = json.loads(done.stdout)["ts"].replace("Z", "+00:00")
            latencies.append(
                (event["received"] - datetime.fromisoformat(stamped).timestamp()) * 1000
            )
    return latencies


def latencies(store: str, runs: int, **extra: str) -> list[float]:
    with daemon(store, **extra) as salon, tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(measure(salon, runs, Path(tmp)))


def run(quick: bool) -> list[Figure]:
    runs = 5 if quick else 100
    figures = []
    for store, target in TARGETS_MS.items():
        name = f"Cross-process latency, `salon send` → event, {STORES[store]}"
        if store.endswith("redis") and not redis_available():
            figures.append(Figure(name, None, "ms", None, detail="skipped: Redis not reachable"))
            continue
        values = latencies(store, runs)
        figures.append(
            Figure(
                f"{name}, p50", round(statistics.median(values), 1), "ms", None,
                detail=summary(values),
            )
        )  # fmt: skip
        figures.append(Figure(f"{name}, p99", round(percentile(values, 99), 1), "ms", target))
    return figures


def main(argv: list[str] | None = None) -> dict | list[Figure]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--store", default="sqlite", choices=sorted(STORES))
    parser.add_argument("--suite", action="store_true", help="the figures of python -m bench")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path, help="with --suite: write the figures here")
    args = parser.parse_args(argv)
    own_environment()
    if args.suite:
        from bench.common import table

        figures = run(args.quick)
        if args.json:
            write_json(figures, args.json)
        print(table(figures))
        return figures
    values = sorted(latencies(args.store, args.runs))
    result = {
        "store": args.store,
        "runs": len(values),
        "p50_ms": round(statistics.median(values), 1),
        "p99_ms": round(percentile(values, 99), 1),
        "max_ms": round(values[-1], 1),
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
