"""Summarize a py-spy raw profile of the daemon: where its active samples went.

    BENCH_PROFILE=1 python -m bench.fanout          # writes /tmp/salon-bench-profile-fanout.txt
    python -m bench.profile_summary /tmp/salon-bench-profile-fanout.txt [--cumulative]

Each sample is put in the first bucket (in the order below) whose function appears in
its stack; samples whose innermost frame is a wait (a lock, a condition, the selector,
an idle pool worker) are counted apart. The percentages are of the active samples.
"""

from __future__ import annotations

import argparse
import collections
from collections.abc import Iterator
from pathlib import Path

WAITS = ("Condition.wait", "EpollSelector.select", "Event.wait", "Lock.acquire", "socket.accept")
IDLE_WORKER = "_worker (concurrent/futures/thread.py:81)"
BUCKETS = [
    ("send_entry: the roster (bus.services.roster)", "bus/services/roster"),
    ("send_entry: _decide (the wake rule for the room's readers)", "_decide (bus/services/entries"),
    ("send_entry: _record (the INSERTs, the stats record, the push claim)", "_record (bus/"),
    ("send_entry: resolve_aliases", "resolve_aliases"),
    ("send_entry: room_for_write", "room_for_write"),
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
    ("doorbell ring", "ring_after_commit"),
    ("listener", "bus/bell"),
    ("other tool work", "run_tool"),
    ("channels in-memory layer", "channels/layers"),
    ("Django HTTP handler + middleware", "django/core/handlers"),
    ("/notify on the database thread, outside the above (relay.views)", "relay/views"),
    ("MCP protocol parse/encode", "mcpgate/protocol"),
    ("consumer glue (mcpgate)", "mcpgate/"),
    # The hop itself: the awaiting side on the event loop. Every sample of the database
    # thread also has asgiref's thread_handler under it, so "asgiref" alone would put
    # whatever that thread does outside the buckets above here.
    ("the hop to the database thread (SyncToAsync.__call__, on the event loop)",
     "SyncToAsync.__call__ ("),
    ("database thread: outside the above (a batch's transaction, savepoints, the executor)",
     "thread_handler"),
    ("asgiref, other", "asgiref"),
    ("daphne / twisted HTTP", "daphne"),
]  # fmt: skip


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


def _frame_name(frame: str) -> str:
    """'send_entry (bus/services.py:412)' → 'send_entry (bus/services.py)': one name per
    function, whatever line of it the sample was on."""
    name, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0].rstrip(")")
    if "site-packages/" in path:
        path = path.split("site-packages/", 1)[1]
    elif "/lib/python3." in path:
        path = "stdlib/" + path.split("/lib/python3.", 1)[1].split("/", 1)[-1]
    return f"{name} ({path})" if path else name


# Frames under every sample of their thread (thread start, the event loop, the database
# thread's executor and sync_to_async wrappers, the `salon serve` command chain): left
# out of the cumulative list, where they would only repeat the thread's share.
BOILERPLATE = (
    "threading.py", "concurrent/futures/thread.py", "<frozen runpy>", "salon/cli.py",
    "bus/management/", "django/core/management/", "daphne/cli.py", "Server.run (daphne",
    "asyncio/base_events.py", "asyncio/events.py", "twisted/internet/asyncioreactor.py",
    "DatabaseSyncToAsync.thread_handler", "SyncToAsync.thread_handler",
    "SyncToAsync.__call__.<locals>.func",
)  # fmt: skip


def _samples(path: Path) -> Iterator[tuple[str, list[str], int]]:
    """(thread name, frames outermost first, count) of each active stack of a raw
    py-spy profile (recorded with --threads); waits are left out."""
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        innermost = frames[-1]
        if innermost.startswith(IDLE_WORKER) or any(w in innermost for w in WAITS):
            continue
        thread = ""
        if frames[0].startswith(("thread ", "process ")):
            thread = frames.pop(0).split(": ", 1)[-1]
        if frames:
            yield thread, frames, int(count)


def cumulative(path: Path, top: int = 40, per_unit: tuple[float, int] | None = None) -> str:
    """Where the active samples went, by thread, then by function: a sample counts for
    every function on its stack (once, however deep the recursion), so a caller's share
    includes its callees'; then the innermost functions (self time). With per_unit =
    (samples per second, units), each line also says ms per unit (e.g. per send)."""
    threads: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    innermost: collections.Counter[str] = collections.Counter()
    active = 0
    for thread, frames, n in _samples(path):
        active += n
        threads[thread or "?"] += n
        innermost[_frame_name(frames[-1])] += n
        for name in {_frame_name(f) for f in frames}:
            if not any(b in name for b in BOILERPLATE):
                inclusive[name] += n

    def share(n: int) -> str:
        text = f"{n / max(active, 1) * 100:5.1f} %"
        if per_unit:
            rate, units = per_unit
            text += f" {n / rate / max(units, 1) * 1000:6.2f} ms"
        return text

    total = ""
    if per_unit:
        total = f" ({active / per_unit[0] / max(per_unit[1], 1) * 1000:.1f} ms per unit)"
    lines = [f"{path}: {active} active samples{total}", "by thread:"]
    lines += [f"{share(n)}  {name}" for name, n in threads.most_common()]
    lines.append("cumulative (a function with everything it calls):")
    lines += [f"{share(n)}  {name}" for name, n in inclusive.most_common(top)]
    lines.append("self (the innermost function of the sample):")
    lines += [f"{share(n)}  {name}" for name, n in innermost.most_common(top // 2)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--cumulative", action="store_true", help="also list functions by cumulative share"
    )
    args = parser.parse_args()
    for path in args.profiles:
        print(summarize(path, args.top))
        if args.cumulative:
            print(cumulative(path, args.top))


if __name__ == "__main__":
    main()
