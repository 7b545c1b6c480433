"""Scale: the `send`, `inbox` and `history` service calls with 1k, 100k and 1M entries.

In-process: Django set up against a bench SQLite file of its own (bench/scale-N.db,
generated once by bulk insert with real signatures, then reused; delete it to
regenerate). One room holds all N entries, written by 20 seats; every tenth entry is a
QUESTION addressed to the reader seat (with its waking ledger row). Timed, median of
RUNS calls each, with the store's own settings (synchronous=FULL):
* send — services.entries.send_entry, a broadcast FACT into the room (one commit);
* inbox — services.reading.read_inbox for the reader, whose cursor is put back 20 entries
  before the end before each call (untimed), so each call reads and advances over 20;
* history — services.reading.read_history, the last 20 entries;
* first inbox — a new seat (an agent with no other seat) joins the room, untimed, and
  reads its first page: its whole room is its backlog (it must read as fast as a caught-up
  seat's page, at any size).

Each size runs in a process of its own (Django's settings name one database file):
`python -m bench.scale [--quick]` runs them all; `--size N` runs one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import REPO, Figure, percentile, scenario_main

SIZES, QUICK_SIZES = (1_000, 100_000, 1_000_000), (1_000, 20_000)
WRITERS = 20
UNREAD = 20
CALLS = ("send", "inbox", "history", "first inbox")


def db_path(size: int) -> Path:
    return REPO / "bench" / f"scale-{size}.db"


def setup_django(db: Path) -> None:
    os.environ["AGENT_SALON_DB"] = str(db)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "salon.settings"
    from salon import config, store

    store.prepare(config.merged_environment())  # the secret, as any command makes it
    import django

    django.setup()


def generate(size: int) -> None:
    """Bulk-insert `size` entries into room 'big' (and the reader's waking ledger rows)."""
    from django.db import connection, transaction

    from bus import services, signing
    from bus.ids import uuid7
    from bus.models import Entry, Room, Seat, WakeDecision

    room, _ = services.rooms.create_room(name="big")
    reader = services.seats.check_in(agent="reader", session_id="reader0000-bench")
    services.rooms.join_room(seat=reader, room="big")
    writers = []
    for k in range(WRITERS):
        seat = services.seats.check_in(agent=f"writer-{k}", session_id=f"w{k:07d}-bench")
        services.rooms.join_room(seat=seat, room="big")
        writers.append(seat)

    def insert_sql(model) -> tuple[str, list]:
        fields = [f for f in model._meta.concrete_fields if not f.primary_key or f.name == "id"]
        if model is WakeDecision:
            fields = [f for f in fields if not f.primary_key]
        columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
        marks = ", ".join("?" for _ in fields)
        sql = f"INSERT INTO {model._meta.db_table} ({columns}) VALUES ({marks})"
        return sql, fields

    entry_sql, entry_fields = insert_sql(Entry)
    wake_sql, wake_fields = insert_sql(WakeDecision)

    def row(fields, values: dict) -> tuple:
        out = []
        for f in fields:
            if f.attname in values:
                out.append(values[f.attname])
            else:  # a column this generator does not know: its default, as Django saves it
                out.append(f.get_db_prep_save(f.get_default(), connection))
        return tuple(out)

    start = datetime.now(UTC) - timedelta(milliseconds=size * 50)
    entries, wakes = [], []
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous=OFF")
        for seq in range(1, size + 1):
            ts = (start + timedelta(milliseconds=seq * 50)).replace(microsecond=0)
            ts = ts + timedelta(milliseconds=seq % 1000)
            writer = writers[seq % WRITERS]
            addressed = seq % 10 == 0
            type_ = "QUESTION" if addressed else "FACT"
            to = [reader.name] if addressed else []
            content = f"entry {seq}: the build of branch {seq % 97} is green on staging"
            entry_id = uuid7(now_ms=int(ts.timestamp() * 1000))
            signature = signing.sign_fields({
                "id": entry_id, "room": "big", "seq": seq, "ts": ts, "sender": writer.name,
                "sender_agent": writer.agent.name, "type": type_, "to": to, "re": None,
                "content": content, "meta": {}, "via": "cli", "sender_addr": "",
                "sender_session": "",
            })  # fmt: skip
            naive = ts.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
            values = {
                "id": entry_id.hex, "room_id": room.pk, "seq": seq, "ts": naive,
                "sender": writer.name, "sender_agent": writer.agent.name, "type": type_,
                "to": json.dumps(to), "re": None, "content": content, "meta": "{}",
                "via": "cli", "sender_addr": "", "sender_session": "",
                "delivered_to": "[]", "delivery_errors": "[]", "signature": signature,
            }  # fmt: skip
            entries.append(row(entry_fields, values))
            if addressed:
                wake = {
                    "entry_id": entry_id.hex, "seat_id": reader.pk, "seat_name": reader.name,
                    "room_id": room.pk, "seq": seq, "woken": True, "reason": "addressed",
                    "decided_at": naive, "push_seq": None, "pushed_at": None,
                    "told_at": None, "told_by": "", "listener": "",
                }  # fmt: skip
                wakes.append(row(wake_fields, wake))
            if len(entries) == 20_000 or seq == size:
                with transaction.atomic():
                    cursor.executemany(entry_sql, entries)
                    cursor.executemany(wake_sql, wakes)
                entries.clear()
                wakes.clear()
                print(f"\r  {seq:,} / {size:,} entries", end="", file=sys.stderr, flush=True)
        Room.objects.filter(pk=room.pk).update(last_seq=size)
        Seat.objects.filter(pk=reader.pk).update(last_seen=datetime.now(UTC))
        cursor.execute("ANALYZE")
    print(f"\n  generated in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def measure(size: int, runs: int) -> dict[str, list[float]]:
    from bus import services
    from bus.models import Entry, Membership, Room

    room = Room.objects.get(name="big")
    reader = services.seats.check_in(agent="reader", session_id="reader0000-bench")
    writer = services.seats.check_in(agent="writer-0", session_id=f"w{0:07d}-bench")
    membership = Membership.objects.get(seat=reader, room=room)
    samples: dict[str, list[float]] = {name: [] for name in CALLS}

    def rewind() -> None:
        last = Room.objects.get(pk=room.pk).last_seq
        Membership.objects.filter(pk=membership.pk).update(cursor=max(last - UNREAD, 0))

    newcomers: list = []

    def newcomer(n: int):
        seat = services.seats.check_in(agent=f"newcomer-{os.getpid()}-{n}", session_id=None)
        services.rooms.join_room(seat=seat, room="big")
        newcomers.append(seat)

    calls = {
        "send": lambda n: services.entries.send_entry(
            seat=writer, text=f"bench {n}", room="big", type="FACT"
        ),
        "inbox": lambda n: services.reading.read_inbox(seat=reader, room="big", limit=UNREAD),
        "history": lambda n: services.reading.read_history(seat=reader, room="big", limit=20),
        "first inbox": lambda n: services.reading.read_inbox(
            seat=newcomers[-1], room="big", limit=UNREAD
        ),
    }
    for n in range(-2, runs):  # two warm-up rounds
        for name, call in calls.items():
            if name == "inbox":
                rewind()
            if name == "first inbox":
                newcomer(n)
            started = time.perf_counter()
            result = call(n)
            elapsed = (time.perf_counter() - started) * 1000
            if name in ("inbox", "first inbox"):
                assert len(result["entries"]) == UNREAD, result["more"]
            if n >= 0:
                samples[name].append(elapsed)
    assert Entry.objects.filter(room=room).count() >= size
    return samples


def one_size(size: int, runs: int, out: Path) -> None:
    db = db_path(size)
    fresh = not db.exists()
    setup_django(db)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bus.models import Room

    if fresh or not Room.objects.filter(name="big", last_seq__gte=size).exists():
        if not fresh:
            raise SystemExit(f"{db} is incomplete; delete it to regenerate")
        print(f"generating {size:,} entries into {db}", file=sys.stderr)
        generate(size)
    out.write_text(json.dumps(measure(size, runs)))


def run(quick: bool) -> list[Figure]:
    sizes = QUICK_SIZES if quick else SIZES
    runs = 20 if quick else 60
    results: dict[int, dict[str, list[float]]] = {s: {c: [] for c in CALLS} for s in sizes}
    load: dict[int, float] = {}
    # Two passes over the sizes, so that a burst of load on the shared machine does not
    # land on one size only.
    for _ in range(2):
        for size in sizes:
            out = Path(f"/tmp/salon-bench-scale-{os.getpid()}-{size}.json")
            subprocess.run(
                [sys.executable, "-m", "bench.scale", "--size", str(size),
                 "--runs", str(runs // 2), "--out", str(out)],
                cwd=REPO, check=True,
            )  # fmt: skip
            for name, values in json.loads(out.read_text()).items():
                results[size][name].extend(values)
            load[size] = max(load.get(size, 0.0), os.getloadavg()[0])
            out.unlink()
    smallest, largest = sizes[0], sizes[-1]
    figures = []
    for name in CALLS:
        base = statistics.median(results[smallest][name])
        for size in sizes:
            values = results[size][name]
            median = statistics.median(values)
            detail = f"median of {len(values)}, p90 {percentile(values, 90):.2f} ms"
            target = None
            if size == largest and size == SIZES[-1]:
                target = round(2 * base, 2)
                detail += f"; target = 2 x the 1k figure ({base:.2f} ms)"
            if size != smallest:
                detail += f"; {median / base:.2f} x the {smallest:,} figure"
            figures.append(
                Figure(
                    f"Scale: `{name}` service call, {size:,} entries in the room",
                    round(median, 2), "ms", target, detail=detail, load=load[size],
                )
            )  # fmt: skip
    return figures


if __name__ == "__main__":
    if "--size" in sys.argv:
        parser = argparse.ArgumentParser()
        parser.add_argument("--size", type=int, required=True)
        parser.add_argument("--runs", type=int, default=50)
        parser.add_argument("--out", type=Path, required=True)
        args = parser.parse_args()
        sys.path.insert(0, str(REPO))
        one_size(args.size, args.runs, args.out)
    else:
        scenario_main(run, __doc__)
