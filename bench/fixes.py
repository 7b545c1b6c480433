"""The proposed product fixes, measured: shipped code vs the prototypes of bench/proto.

Each variant is a real daemon: `shipped` (salon.settings), and `proto:<patches>` (bench.
settings_proto with BENCH_PROTO=<patches>, see bench/proto/__init__.py). The variants
run one after the other, ROUNDS times in turn, so machine load weighs on each alike.
Measured per variant: push latency (POST /notify and the send tool, 100 sessions),
throughput (/notify, 50 sessions), fan-out (a broadcast to N streams), and the daemon's
CPU while N streams sit idle through a keep-alive round.

Not part of `python -m bench` (it costs several minutes); run by hand:

    python -m bench.fixes [--variants shipped,normal,normal+claim+keepalive,all]
                          [--rounds 2] [--only latency,throughput,fanout,idle]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics

from bench import fanout, idle, push_latency, throughput
from bench.common import (
    daemon,
    loadavg,
    own_environment,
    percentile,
    raise_nofile,
)

ALL = "normal,claim,keepalive,notify"


@contextlib.contextmanager
def variant_daemon(variant: str):
    if variant == "shipped":
        with daemon("sqlite") as salon:
            yield salon
        return
    patches = ",".join(ALL if part == "all" else part for part in variant.split("+"))
    os.environ["BENCH_PROTO"] = patches
    try:
        with daemon("sqlite-proto", BENCH_PROTO=patches) as salon:
            yield salon
    finally:
        os.environ.pop("BENCH_PROTO", None)


def latency(variant: str, runs: int) -> str:
    with variant_daemon(variant) as salon:
        samples, _ = asyncio.run(push_latency.sample(salon.url, 100, runs))
    return "; ".join(
        f"{m} p50 {statistics.median(v):.1f} p99 {percentile(v, 99):.1f} ms"
        for m, v in samples.items()
    )


def rate(variant: str, seconds: float) -> str:
    with variant_daemon(variant) as salon:
        r = asyncio.run(throughput.measure(salon.url, seconds))
    lat = r["latencies"]
    return (
        f"{min(r['stored_per_s'], r['pushed_per_s']):.0f} entries/s stored+pushed; "
        f"POST→event p50 {statistics.median(lat):.0f} p99 {percentile(lat, 99):.0f} ms"
    )


def spread(variant: str, streams: int) -> str:
    with variant_daemon(variant) as salon:
        rounds = asyncio.run(fanout.measure(salon.url, streams, 3))
    return (
        f"{streams} streams: last received "
        + ", ".join(f"{last:.0f}" for _, _, last in rounds)
        + " ms (first "
        + ", ".join(f"{first:.0f}" for first, _, _ in rounds)
        + ")"
    )


def idle_cpu(variant: str, streams: int) -> str:
    with variant_daemon(variant) as salon:
        r = asyncio.run(idle.measure(salon, streams, idle.KEEPALIVE_SECONDS + 5))
    return (
        f"{streams} idle streams: daemon CPU {r['idle_cpu_percent']:.1f} % of a core, "
        f"RSS {r['rss_mib']:.0f} MiB, {r['alive']} alive, {r['keepalives']} keep-alives"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="shipped,normal,all")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", default="latency,throughput,fanout,idle")
    parser.add_argument("--runs", type=int, default=100, help="latency samples per method")
    parser.add_argument("--seconds", type=float, default=10, help="throughput window")
    parser.add_argument("--streams", type=int, default=500, help="fan-out streams")
    parser.add_argument("--idle-streams", type=int, default=1000)
    args = parser.parse_args()
    own_environment()
    raise_nofile()
    measures = {
        "latency": lambda v: latency(v, args.runs),
        "throughput": lambda v: rate(v, args.seconds),
        "fanout": lambda v: spread(v, args.streams),
        "idle": lambda v: idle_cpu(v, args.idle_streams),
    }
    for name in args.only.split(","):
        for round_ in range(args.rounds):
            for variant in args.variants.split(","):
                before = loadavg()
                result = measures[name](variant)
                print(
                    f"{name} round {round_ + 1} {variant:28s} {result}  [load {before} → "
                    f"{loadavg()}]",
                    flush=True,
                )


if __name__ == "__main__":
    main()
