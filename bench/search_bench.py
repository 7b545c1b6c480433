"""Search: query time at 10k, 100k and 1M entries, and what the index adds to a send.

One store per run (SQLite: a file under bench/; PostgreSQL: the database DATABASE_URL
names, emptied first), migrated, then filled with bulk SQL (never send by send) to each
size in turn: entries in 8 rooms over 180 days, their words drawn from a Zipf-like
vocabulary of 20,000 words (a few very common, most rare), so a query meets words found
in half the entries and words found in a handful. At each size a seat that is a member
of 3 of the 8 rooms runs the same mix of queries through bus.services.search.search (what
every face calls): common, middling and rare words, two words, a phrase, a prefix, a
word left out; p50 and p99 of the wall time, and per kind.

The send figure: CPU (user+sys of this process, and on PostgreSQL of its server backend)
of bus.services.entries.send_entry on a
fresh store with a 10-seat room and an entry of ~60 words, with the index, without it
(the triggers dropped; on PostgreSQL both columns, the words' and their pairs', made
again as migrations 0017 and 0019 make them), in alternating rounds, so a change of load
on a shared machine falls on both; the medians of the rounds are compared.

    python -m bench.search_bench [--store sqlite|postgres] [--sizes 10000,100000,1000000]
                                 [--queries 300] [--sends 1000] [--write]

--write appends a section to bench/RESULTS.md.

--again measures the queries again on the store the last run filled; on PostgreSQL,
--column first gives it the pairs column of migration 0019_entry_search_pairs (`pairs`:
added if missing, timed: what the migration costs at that size; a phrase asked of its
index by its pairs) or takes it away (`words`: every query asked of the words column
alone, as the store was before 0019). Each --again run on PostgreSQL merges the GIN
indexes' pending lists first (`gin_clean_pending_list`), so runs after a bulk fill
compare.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import loadavg, machine, percentile  # noqa: E402

RESULTS = REPO / "bench" / "RESULTS.md"
ROOMS = ["salon", "team", "ops", "release", "docs", "infra", "design", "support"]
COMMON = [
    "the",
    "a",
    "to",
    "of",
    "and",
    "in",
    "is",
    "it",
    "for",
    "on",
    "that",
    "this",
    "we",
    "be",
    "with",
    "as",
    "at",
    "not",
    "are",
    "from",
    "have",
    "by",
    "or",
    "but",
    "can",
    "was",
    "will",
    "so",
    "if",
    "should",
    "fix",
    "test",
    "build",
    "cart",
    "total",
    "login",
    "deploy",
    "release",
    "review",
    "error",
    "cache",
    "session",
    "migration",
    "api",
    "page",
    "user",
]
VOCABULARY = 20_000


def words(rng: random.Random) -> list[str]:
    """The vocabulary: common English and project words first, then made-up words."""
    made = set()
    while len(made) < VOCABULARY - len(COMMON):
        made.add("".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(3)))
    return COMMON + sorted(made)


def zipf_weights(n: int) -> list[float]:
    return [1 / (rank + 1) ** 1.05 for rank in range(n)]


def setup(store: str, *, again: bool = False) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "salon.settings"
    os.environ.pop("REDIS_URL", None)
    if store == "sqlite":
        os.environ.pop("DATABASE_URL", None)
        os.environ["AGENT_SALON_DB"] = str(REPO / "bench" / "search-bench.db")
        for suffix in ("", "-wal", "-shm") if not again else ():
            Path(os.environ["AGENT_SALON_DB"] + suffix).unlink(missing_ok=True)
    elif not os.environ.get("DATABASE_URL"):
        sys.exit("--store postgres needs DATABASE_URL (its database is emptied)")
    from salon import config
    from salon import store as salon_store

    salon_store.prepare(config.merged_environment())
    import django

    django.setup()
    from django.core.management import call_command

    if again:
        return
    if store == "postgres":
        call_command("flush", "--no-input", verbosity=0)
    call_command("migrate", verbosity=0)


class Filler:
    """Bulk inserts, signed as the bus signs, continuing where the last fill stopped."""

    def __init__(self, rng: random.Random):
        from bus import services
        from bus.models import Entry

        self.rng = rng
        self.vocabulary = words(rng)
        self.cumulative = list(
            __import__("itertools").accumulate(zipf_weights(len(self.vocabulary)))
        )
        self.rooms = {n: services.rooms.create_room(name=n)[0] for n in ROOMS}
        self.seq = dict.fromkeys(ROOMS, 0)
        self.count = 0
        self.cols = [f.column for f in Entry._meta.concrete_fields]
        self.end = datetime.now(UTC).replace(microsecond=0)

    def text(self) -> str:
        chosen = self.rng.choices(
            self.vocabulary, cum_weights=self.cumulative, k=self.rng.randint(8, 80)
        )
        return " ".join(chosen).capitalize() + "."

    def rows(self, n: int, total: int):
        from bus import signing
        from bus.ids import uuid7

        start = self.end - timedelta(days=180)
        step = timedelta(days=180) / total
        for _ in range(n):
            i = self.count
            self.count += 1
            ts = start + step * i
            room = ROOMS[min(int(self.rng.expovariate(0.6)), len(ROOMS) - 1)]
            self.seq[room] += 1
            sender = f"agent{self.rng.randrange(20)}"
            content = self.text()
            entry_id = uuid7(now_ms=int(ts.timestamp() * 1000))
            signature = signing.sign_fields({
                "id": entry_id, "room": room, "seq": self.seq[room], "ts": ts, "sender": sender,
                "sender_agent": sender, "type": "FACT", "to": [], "re": None, "content": content,
                "meta": {}, "via": "cli", "sender_addr": "", "sender_session": "",
            })  # fmt: skip
            row = {
                "id": entry_id,
                "room_id": self.rooms[room].pk,
                "seq": self.seq[room],
                "ts": ts,
                "sender": sender,
                "sender_agent": sender,
                "type": "FACT",
                "to": "[]",
                "re": None,
                "content": content,
                "meta": "{}",
                "via": "cli",
                "sender_addr": "",
                "sender_session": "",
                "delivered_to": "[]",
                "delivery_errors": "[]",
                "signature": signature,
            }
            yield tuple(row[c] for c in self.cols)

    def fill_to(self, size: int, total: int) -> float:
        from django.db import connection, transaction

        from bus.models import Room

        started = time.perf_counter()
        while self.count < size:
            n = min(20_000, size - self.count)
            batch = list(self.rows(n, total))
            with transaction.atomic(), connection.cursor() as cursor:
                if connection.vendor == "postgresql":
                    quoted = ", ".join(f'"{c}"' for c in self.cols)
                    with cursor.cursor.copy(f"COPY bus_entry ({quoted}) FROM STDIN") as copy:
                        for row in batch:
                            copy.write_row(row)
                else:
                    batch = [tuple(_sqlite_value(v) for v in row) for row in batch]
                    names = ", ".join(connection.ops.quote_name(c) for c in self.cols)
                    marks = ", ".join("?" for _ in self.cols)
                    cursor.executemany(f"INSERT INTO bus_entry ({names}) VALUES ({marks})", batch)
            print(f"\r  {self.count:,} / {size:,} entries", end="", file=sys.stderr, flush=True)
        for name, last in self.seq.items():
            Room.objects.filter(pk=self.rooms[name].pk).update(last_seq=last)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        print(file=sys.stderr)
        return time.perf_counter() - started


def _sqlite_value(value):
    """A value as Django stores it on SQLite: UUIDs as hex, times as naive UTC text."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
    if hasattr(value, "hex") and not isinstance(value, (str, bytes, float, int)):
        return value.hex
    return value


def queries(vocabulary: list[str], rng: random.Random) -> list[tuple[str, str]]:
    """(kind, query): the mix every size runs."""
    common = vocabulary[:20]
    middling = vocabulary[200:2000]
    rare = vocabulary[5000:]
    mix = []
    for _ in range(40):
        mix += [
            ("common word", rng.choice(common)),
            ("middling word", rng.choice(middling)),
            ("rare word", rng.choice(rare)),
            ("two words", f"{rng.choice(common)} {rng.choice(middling)}"),
            ("phrase", f'"{rng.choice(common)} {rng.choice(common)}"'),
            ("prefix", rng.choice(middling)[:3] + "*"),
            ("word left out", f"{rng.choice(middling)} -{rng.choice(common)}"),
        ]
    rng.shuffle(mix)
    return mix


def backend_cpu():
    """A function giving the CPU seconds this connection's PostgreSQL server backend has
    used (the scheduler's own count, in nanoseconds, so one query's share is seen);
    on SQLite the store works in this process and it gives 0."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return lambda: 0.0
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        stat = Path(f"/proc/{cursor.fetchone()[0]}/schedstat")
    return lambda: int(stat.read_text().split()[0]) / 1e9


def measure_queries(seat, mix: list[tuple[str, str]], runs: int) -> dict[str, list[float]]:
    from bus import services

    times: dict[str, list[float]] = {"all": [], "cpu": []}
    server = backend_cpu()
    for i in range(runs):
        kind, query = mix[i % len(mix)]
        started, cpu = time.perf_counter(), time.process_time() + server()
        services.search.search(seat, query, limit=20)
        elapsed = (time.perf_counter() - started) * 1000
        times["cpu"].append((time.process_time() + server() - cpu) * 1000)
        times.setdefault("cpu " + kind, []).append(times["cpu"][-1])
        times["all"].append(elapsed)
        times.setdefault(kind, []).append(elapsed)
    return times


def send_cpu(store: str, sends: int) -> dict[str, float]:
    """CPU ms per send with the index, without it, with it again."""
    from django.db import connection

    from bus import services

    module = __import__("bus.migrations.0017_entry_search", fromlist=["install_sqlite"])
    pairs = __import__("bus.migrations.0019_entry_search_pairs", fromlist=["install_postgres"])
    room = services.rooms.create_room(name="sendbench")[0]
    seats = []
    for n in range(10):
        seat = services.seats.check_in(
            agent=f"r{n}", session_id=f"{n:08x}-0000-4000-8000-000000000000"
        )
        services.rooms.join_room(seat=seat, room=room.name)
        seats.append(seat)
    sender = seats[0]
    rng = random.Random(7)
    vocabulary = words(rng)
    text = " ".join(rng.choice(vocabulary[:3000]) for _ in range(60)) + "."

    backend = None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]

    def server_cpu() -> float:
        """The CPU seconds of this connection's PostgreSQL backend (it computes the
        tsvector), 0 on SQLite (the index is written in this process)."""
        if backend is None:
            return 0.0
        fields = Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def run(n: int) -> float:
        started = time.process_time() + server_cpu()
        for i in range(n):
            services.entries.send_entry(
                seat=sender,
                room=room.name,
                text=f"{text} {i}",
                type="QUESTION",
                to=[seats[1 + i % 9].name],
            )
        return (time.process_time() + server_cpu() - started) * 1000 / n

    def drop() -> None:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                for statement in pairs.POSTGRES_DROP:
                    cursor.execute(statement)
                cursor.execute("DROP INDEX IF EXISTS entry_search_words")
                cursor.execute("ALTER TABLE bus_entry DROP COLUMN IF EXISTS search")
            else:
                for name in module.SQLITE_TRIGGERS:
                    cursor.execute(f"DROP TRIGGER IF EXISTS {name}")

    def restore() -> None:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(module.POSTGRES_COLUMN)
                cursor.execute(module.POSTGRES_INDEX)
                pairs.install_postgres(cursor.execute)
            else:
                module.install_sqlite(cursor.execute)

    # Rounds with and without the index, alternating, so that a change of load on a
    # shared machine falls on both; the medians of the rounds are compared.
    run(min(200, sends))  # warm up
    rounds = 6
    with_index, without_index = [], []
    for _ in range(rounds):
        with_index.append(run(sends // rounds))
        drop()
        without_index.append(run(sends // rounds))
        restore()
    with_ms, without_ms = statistics.median(with_index), statistics.median(without_index)
    return {
        "with": with_ms,
        "without": without_ms,
        "rounds": rounds,
        "added": (with_ms - without_ms) / without_ms * 100,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=280)
    parser.add_argument("--sends", type=int, default=1000)
    parser.add_argument("--write", action="store_true")
    parser.add_argument(
        "--again",
        action="store_true",
        help="only the queries, again, on the store the last run filled (no send figure)",
    )
    parser.add_argument(
        "--column",
        choices=["pairs", "words"],
        help="with --again on PostgreSQL: with the pairs column of 0019 (added if missing) "
        "or without it (dropped; every query asked of the words alone)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.again:
        return again(args)

    started_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    setup(args.store)
    from bus import services

    send = send_cpu(args.store, args.sends)
    load_send = loadavg()
    print(json.dumps(send), file=sys.stderr)
    from django.core.management import call_command

    call_command("flush", "--no-input", verbosity=0)
    if args.store == "sqlite":
        services.search.rebuild_index()
    rng = random.Random(9315)
    filler = Filler(rng)
    seat = services.seats.check_in(
        agent="reader", session_id="5eed0000-0000-4000-8000-000000000000"
    )
    for room in ("team", "docs", "design"):
        services.rooms.join_room(seat=seat, room=room)
    mix = queries(filler.vocabulary, random.Random(1))
    rows = []
    for size in sizes:
        fill_s = filler.fill_to(size, max(sizes))
        measure_queries(seat, mix, 20)  # warm the cache
        times = measure_queries(seat, mix, args.queries)
        rows.append((size, fill_s, times, loadavg()))
        print(
            f"{size:>9,}: p50 {statistics.median(times['all']):.1f} ms, "
            f"p99 {percentile(times['all'], 99):.1f} ms (load {loadavg()})",
            file=sys.stderr,
        )
    section = report(args, started_at, send, load_send, rows)
    print(section)
    if args.write:
        with RESULTS.open("a") as results:
            results.write("\n" + section)


def again(args) -> None:
    started_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    setup(args.store, again=True)
    from bus.models import Entry, Seat

    remade = None
    if args.store == "postgres":
        remade = prepare_column(args.column)
    seat = Seat.objects.get(agent__name="reader")
    mix = queries(words(random.Random(9315)), random.Random(1))
    measure_queries(seat, mix, 20)
    times = measure_queries(seat, mix, args.queries)
    size = Entry.objects.count()
    column = f" --column {args.column}" if args.column else ""
    lines = report(args, started_at, None, None, [(size, 0.0, times, loadavg())]).splitlines()
    section = "\n".join(
        [
            lines[0].replace("`,", f" --again{column}`,"),
            *lines[1:],
            "",
            "(No fill: the store the last run filled, queried again"
            + (f"; the pairs column added in {remade:.0f} s" if remade else "")
            + ".)",
            "",
        ]
    )
    print(section)
    if args.write:
        with RESULTS.open("a") as results:
            results.write("\n" + section)


def prepare_column(kind: str | None) -> float | None:
    """PostgreSQL, before queries again: with the pairs column or without it, as `kind`
    says (see --column; None: as it is); the seconds adding it took (else None); the GIN
    indexes' pending lists merged; without it, the index asked by the words alone."""
    from django.db import connection

    from bus import rules

    pairs = __import__("bus.migrations.0019_entry_search_pairs", fromlist=["install_postgres"])
    remade = None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM information_schema.columns "
            "WHERE table_name = 'bus_entry' AND column_name = 'search_pairs'"
        )
        has_pairs = cursor.fetchone() is not None
        if kind == "words" and has_pairs:
            for statement in pairs.POSTGRES_DROP:
                cursor.execute(statement)
            has_pairs = False
        elif kind == "pairs" and not has_pairs:
            started = time.perf_counter()
            pairs.install_postgres(cursor.execute)
            remade = time.perf_counter() - started
            has_pairs = True
            print(f"pairs column added in {remade:.0f} s", file=sys.stderr)
        cursor.execute("ANALYZE bus_entry")
        cursor.execute("SELECT gin_clean_pending_list('entry_search_words'::regclass)")
        if has_pairs:
            cursor.execute("SELECT gin_clean_pending_list('entry_search_word_pairs'::regclass)")
    if not has_pairs:
        rules.tsquery_lookup = lambda query: None  # as before 0019: the words alone
    return remade


def report(args, started_at, send, load_send, rows) -> str:
    store = "SQLite (FTS5)" if args.store == "sqlite" else "PostgreSQL (tsvector + GIN)"
    lines = [
        f"## Search on {store} (`python -m bench.search_bench --store {args.store}`, {started_at})",
        "",
        f"Machine: {machine()}.",
        "",
        f"A seat in 3 of 8 rooms; {args.queries} queries per size through "
        "`bus.services.search.search` (limit 20), the mix of bench/search_bench.py; "
        "entries bulk-inserted (the index written by the store as it would be on a send). "
        "CPU: this process's, and on PostgreSQL its server backend's too (where a query's "
        "work is done), per query.",
        "",
        "| entries | p50 | p99 | target | CPU p50 / p99 | load avg (1 5 15) | fill time "
        "| p50 / p99 by kind, wall (CPU), ms |",
        "|---:|---:|---:|---|---:|---|---:|---|",
    ]
    for size, fill_s, times, load in rows:
        kinds = "; ".join(
            f"{kind} {statistics.median(v):.1f} / {percentile(v, 99):.1f} "
            f"(CPU {statistics.median(times['cpu ' + kind]):.1f} / "
            f"{percentile(times['cpu ' + kind], 99):.1f})"
            for kind, v in sorted(times.items())
            if kind != "all" and not kind.startswith("cpu")
        )
        p50, p99 = statistics.median(times["all"]), percentile(times["all"], 99)
        target = ""
        if size >= 1_000_000:
            met = p50 <= 20 and p99 <= 100
            target = f"p50 ≤ 20, p99 ≤ 100 ms: {'met' if met else '**missed**'}"
        lines.append(
            f"| {size:,} | {p50:.1f} ms | {p99:.1f} ms | {target} "
            f"| {statistics.median(times['cpu']):.1f} / {percentile(times['cpu'], 99):.1f} ms "
            f"| {load} "
            f"| {fill_s:.0f} s | {kinds} |"
        )
    if send is None:
        return "\n".join(lines)
    verdict = "met" if send["added"] <= 30 else "**missed**"
    lines += [
        "",
        f"A send's CPU ({args.sends} sends of ~60 words, QUESTION to one of 9 seats): "
        f"{send['with']:.2f} ms with the index, {send['without']:.2f} ms without (medians "
        f"of {send['rounds']} alternating rounds each): "
        f"**{send['added']:+.1f} %** (target ≤ 30 %: {verdict}); load {load_send}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    tempfile.tempdir = None
    main()
