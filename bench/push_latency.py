"""Push latency: POST /notify (or the `send` tool) → the channel notification on a stream.

A real daemon (embedded default) on loopback; one reader session with its GET stream
open; N-1 idle listeners in the same room (initialized, GET stream open, never woken).
Each sample sends one QUESTION addressed to the reader, by POST /notify or by the `send`
tool of another MCP session, and times from just before the request leaves to the
moment the event arrives on the reader's stream (SseStream stamps `received`), one
sample at a time. The idle listeners use their own httpx client, so the measured
requests never wait behind their pool.

    python -m bench.push_latency [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time

from bench.common import (
    Figure,
    daemon,
    http_client,
    listener,
    listeners,
    percentile,
    profiled,
    scenario_main,
    summary,
)

P50_TARGET_MS, P99_TARGET_MS = 5, 25


async def sample(base: str, sessions: int, runs: int) -> tuple[dict, dict]:
    """Latencies (ms) per method, and the time until the request's answer (ms)."""
    async with contextlib.AsyncExitStack() as stack:
        idle_client = await stack.enter_async_context(http_client())
        client = await stack.enter_async_context(http_client())
        _, seat, stream = await listener(stack, client, base, "bench-reader")
        await listeners(stack, idle_client, base, "idle", sessions - 1)
        from tests.mcp_helpers import RawSession

        writer = await RawSession(client, base, "label=bench-writer").open()
        await writer.seat()
        notify_url = f"{base}/notify?label=bench-hook"

        async def by_notify(n: int) -> float:
            body = {"content": f"ping {n}", "type": "QUESTION", "to": [seat]}
            response = await client.post(notify_url, json=body)
            assert response.status_code == 202, response.text
            return time.time()

        async def by_tool(n: int) -> float:
            result = await writer.call(
                "send", {"text": f"ping {n}", "type": "QUESTION", "to": [seat]}
            )
            assert not result["result"].get("isError"), result
            return time.time()

        samples: dict[str, list[float]] = {"notify": [], "send tool": []}
        acks: dict[str, list[float]] = {"notify": [], "send tool": []}
        senders = {"notify": by_notify, "send tool": by_tool}
        for n in range(-3, runs):  # three warm-up rounds
            for name, send in senders.items():
                started = time.time()
                acked = await send(n)
                event = await stream.next(timeout=30)
                assert event["message"]["params"]["content"] == f"ping {n}", event
                if n >= 0:
                    samples[name].append((event["received"] - started) * 1000)
                    acks[name].append((acked - started) * 1000)
                await asyncio.sleep(0.005)
        return samples, acks


def run(quick: bool) -> list[Figure]:
    sizes = (20,) if quick else (1, 100, 1000)
    runs = 30 if quick else 200
    figures = []
    for sessions in sizes:
        with daemon("sqlite") as salon, profiled(salon, f"push-{sessions}"):
            samples, acks = asyncio.run(sample(salon.url, sessions, runs))
        for method, values in samples.items():
            answered = statistics.median(acks[method])
            label = f"Push latency, {method} → event, {sessions} session(s)"
            at_target = not quick and sessions == 100
            figures.append(
                Figure(
                    f"{label}, p50",
                    round(statistics.median(values), 2),
                    "ms",
                    P50_TARGET_MS if at_target else None,
                    detail=f"{summary(values)}; the request's answer came at p50 {answered:.1f} ms",
                )
            )
            figures.append(
                Figure(
                    f"{label}, p99",
                    round(percentile(values, 99), 2),
                    "ms",
                    P99_TARGET_MS if at_target else None,
                )
            )
    return figures


if __name__ == "__main__":
    scenario_main(run, __doc__)
