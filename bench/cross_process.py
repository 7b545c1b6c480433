"""Cross-process push latency: `salon send` in another process → the event on an open stream.

Starts a real daemon on a fresh store, opens a raw MCP session with its GET stream, then
runs `salon send … QUESTION --to <that seat>` as separate processes. The latency of one
entry is the time the event arrived minus the entry's server timestamp (same clock), so
the CLI's own start-up is not counted: it is what the watcher (embedded) or the doorbell
(Redis) costs.

    python -m bench.cross_process [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.mcp_helpers import RawSession
from tests.support import Daemon, migrate, run_salon, salon_env


async def measure(daemon: Daemon, runs: int, workdir: Path) -> list[float]:
    latencies = []
    async with httpx.AsyncClient(timeout=10) as client:
        reader = await RawSession(client, daemon.url, "label=bench-reader").open()
        seat = await reader.seat()
        env = {**daemon.env, "AGENT_SALON_NAME": "bench-cron"}
        run_salon("join", "salon", env=env, cwd=workdir)
        async with reader.stream() as stream:
            await stream.next(comments=True)
            for n in range(runs):
                done = await asyncio.to_thread(
                    run_salon, "send", "salon", "QUESTION", f"ping {n}", "--to", seat, "--json",
                    env=env, cwd=workdir,
                )
                assert done.returncode == 0, done.stderr
                event = await stream.next(timeout=10)
                received = event["received"]
                sent_at = datetime.fromisoformat(json.loads(done.stdout)["ts"].replace("Z",
                                                                                      "+00:00"))
                latencies.append((received - sent_at.timestamp()) * 1000)
                assert event["message"]["params"]["content"] == f"ping {n}"
    return latencies


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        env = salon_env(workdir)
        migrate(env)
        daemon = Daemon(env=env, cwd=workdir).start()
        try:
            latencies = asyncio.run(measure(daemon, args.runs, workdir))
        finally:
            daemon.stop()
    latencies.sort()
    result = {
        "runs": len(latencies),
        "p50_ms": round(statistics.median(latencies), 1),
        "p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 1),
        "max_ms": round(latencies[-1], 1),
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
