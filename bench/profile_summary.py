"""Summarize a py-spy raw profile of the daemon: where its active samples went.

    BENCH_PROFILE=1 python -m bench.fanout          # writes /tmp/salon-bench-profile-fanout.txt
    python -m bench.profile_summary /tmp/salon-bench-profile-fanout.txt

Each sample is put in the first bucket (in the order below) whose function appears in
its stack; samples whose innermost frame is a wait (a lock, a condition, the selector,
an idle pool worker) are counted apart. The percentages are of the active samples.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

WAITS = ("Condition.wait", "EpollSelector.select", "Event.wait", "Lock.acquire")
IDLE_WORKER = "_worker (concurrent/futures/thread.py:81)"
BUCKETS = [
    ("send_entry: _decide_and_record (wake decisions)", "_decide_and_record"),
    ("send_entry: _known_names", "_known_names"),
    ("send_entry: resolve_aliases", "resolve_aliases"),
    ("send_entry: _room_for_send", "_room_for_send"),
    ("send_entry: the rest", "send_entry"),
    ("check_in", "check_in"),
    ("token_problem", "token_problem"),
    ("load_session", "load_session"),
    ("keep-alive ticker (keep_seats_live, mark_sessions_active)", "keep_seats_live"),
    ("keep-alive ticker (keep_seats_live, mark_sessions_active)", "mark_sessions_active"),
    ("claims (claim_pushes_of_seats)", "claim_pushes_of_seats"),
    ("channel_message", "channel_message"),
    ("record_deliveries", "record_deliveries"),
    ("salon_status", "salon_status"),
    ("commit (Atomic.__exit__)", "Atomic.__exit__"),
    ("doorbell ring", "ring (bus/doorbell"),
    ("watcher", "mcpgate/watcher"),
    ("other tool work", "run_tool"),
    ("channels in-memory layer", "channels/layers"),
    ("Django HTTP handler + middleware", "django/core/handlers"),
    ("MCP protocol parse/encode", "mcpgate/protocol"),
    ("consumer glue (mcpgate)", "mcpgate/"),
    ("asgiref thread hops", "asgiref"),
    ("daphne / twisted HTTP", "daphne"),
]


def summarize(path: Path, top: int = 25) -> str:
    buckets: collections.Counter[str] = collections.Counter()
    active = waiting = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        n = int(count)
        innermost = frames[-1]
        if innermost.startswith(IDLE_WORKER) or any(w in innermost for w in WAITS):
            waiting += n
            continue
        active += n
        for name, key in BUCKETS:
            if any(key in frame for frame in frames):
                buckets[name] += n
                break
        else:
            buckets["other: " + innermost.split(" (")[0]] += n
    lines = [f"{path}: {active} active samples, {waiting} waiting"]
    for name, n in buckets.most_common(top):
        lines.append(f"{n / max(active, 1) * 100:5.1f} %  {name}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    for path in args.profiles:
        print(summarize(path, args.top))


if __name__ == "__main__":
    main()
