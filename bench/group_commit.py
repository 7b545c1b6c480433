"""Group commit of MCP sends, seen from the kernel: fsyncs per send at 1 and 8 in flight.

agent-salon alone (`salon serve` on a fresh SQLite store, synchronous=FULL), 100 SDK
receivers and 8 SDK senders as in bench/side_by_side.py. During each round `perf stat`
counts the daemon's fsync and fdatasync calls (every thread): with the sends that wait
on the writer stored together, a round at 8 in flight makes fewer than one per send,
where each send alone makes one (its commit; SQLite's checkpoints add a few). Also
prints the daemon's CPU per send.

    python -m bench.group_commit [--sends 400]

Needs `perf` with the syscalls tracepoints (run as root, or perf_event_paranoid ≤ -1).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import subprocess
import time

from bench.common import loadavg, own_environment, raise_nofile
from bench.side_by_side import FULL, Arrivals, closed_loop, open_side, salon_server, warm_up

EVENTS = "syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync"


@contextlib.contextmanager
def syncs_counted(pid: int, counted: dict) -> None:
    """Counts the process's fsync + fdatasync calls while the block runs."""
    process = subprocess.Popen(
        ["perf", "stat", "-x", ",", "-e", EVENTS, "-p", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.3)  # attached before the first send
    try:
        yield
    finally:
        process.send_signal(2)
        _, err = process.communicate(timeout=30)
        counted["syncs"] = sum(
            int(m.group(1)) for m in re.finditer(r"^(\d+),,syscalls", err, re.MULTILINE)
        )


async def main(sends: int) -> None:
    arrivals = Arrivals()
    print(f"load average {loadavg()} at the start")
    with salon_server() as salon:
        async with contextlib.AsyncExitStack() as stack:
            side = await open_side(stack, salon, arrivals, FULL.receivers, 8, "gc")
            await warm_up(side, arrivals)
            for in_flight in (1, 8, 1, 8):
                counted: dict = {}
                with syncs_counted(salon.pid, counted):
                    run = await closed_loop(
                        side, arrivals, in_flight, sends // in_flight, 0, f"gc{in_flight}"
                    )
                print(
                    f"{in_flight} in flight: {run.sent} sends, {counted['syncs']} fsyncs "
                    f"({counted['syncs'] / run.sent:.2f} per send), daemon CPU "
                    f"{run.server_cpu / run.sent * 1000:.2f} ms per send, "
                    f"load {loadavg()}"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=400, help="sends per round")
    args = parser.parse_args()
    own_environment()
    raise_nofile()
    asyncio.run(main(args.sends))
