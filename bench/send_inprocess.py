"""In-process cost of one send: bus.services.entries.send_entry alone, no HTTP, no push.

A fresh migrated SQLite store in a temporary directory (synchronous=FULL as shipped),
N receiving seats and one sender in the default room; each send is a QUESTION addressed
to one receiver (round robin), as in bench/side_by_side.py. Prints the statements of one
send (--sql lists them) and the CPU time (user+sys of this process) per send over
--runs sends; --profile adds a cProfile listing.

    python -m bench.send_inprocess [--seats 100] [--runs 300] [--sql] [--profile]

A quick way to see what a change to the write path costs, without the daemon's noise;
the side-by-side harness is the judge.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seats", type=int, default=100, help="receiving seats in the room")
    parser.add_argument("--runs", type=int, default=300, help="sends measured")
    parser.add_argument("--sql", action="store_true", help="list the statements of one send")
    parser.add_argument("--profile", action="store_true", help="cProfile the measured sends")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="salon-send-")
    os.environ["AGENT_SALON_DB"] = os.path.join(tmp, "salon.db")
    os.environ.setdefault("AGENT_SALON_SECRET", "b" * 64)
    os.environ["DJANGO_SETTINGS_MODULE"] = "salon.settings"
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from bus import services

    call_command("migrate", verbosity=0)
    seats = [
        services.seats.check_in(
            agent=f"r{n}", session_id=f"{n:08x}-0000-4000-8000-000000000000", join_defaults=True
        )
        for n in range(args.seats)
    ]
    sender = services.seats.check_in(
        agent="sender", session_id="ffffffff-0000-4000-8000-000000000000", join_defaults=True
    )

    def one(n: int) -> None:
        target = seats[n % len(seats)].name
        services.entries.send_entry(
            seat=sender, text="who?", type="QUESTION", to=[target], via="mcp"
        )

    for n in range(20):  # warm
        one(n)
    with CaptureQueriesContext(connection) as queries:
        one(0)
    print(f"statements per send: {len(queries.captured_queries)}")
    if args.sql:
        for query in queries.captured_queries:
            print("  ", " ".join(query["sql"].split())[:160])
    started = time.process_time()
    for n in range(args.runs):
        one(n)
    cpu = (time.process_time() - started) / args.runs * 1000
    print(f"CPU per send: {cpu:.2f} ms ({args.seats} receiving seats, {args.runs} sends)")
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        for n in range(args.runs):
            one(n)
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
