"""Server-side time of the staff history browser on a table of a million entries.

Generates N entries (default 1,000,000) once into a separate SQLite database (bulk
insert, signatures computed in bulk with the real signing key), then renders the
entry list through Django's test client as a logged-in superuser, RUNS times per
scenario, and prints the median (and min / max) in milliseconds, with the query plan
of the headline page. Run by hand (generation takes a minute or two the first time):

    /work/venv/bin/python bench/admin_bench.py [--entries 1000000] [--runs 7] [--write]

--write appends the table to bench/RESULTS.md under an "Admin" heading (replacing an
earlier "Admin" section, leaving every other section alone).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: bench/ is on the path, not the checkout
    sys.path.insert(0, str(REPO))

from bench.common import machine  # noqa: E402

DEFAULT_DB = REPO / "bench" / "admin-bench.db"
RESULTS = REPO / "bench" / "RESULTS.md"
TARGET_MS = 300

ROOMS = ["salon", "team", "ops", "release", "docs", "infra", "design", "support"]
AGENTS = [
    "web-app", "api-service", "docs", "infra", "mobile", "billing", "search", "auth",
    "payments", "notifier", "ci", "deploy-bot", "data-pipeline", "ml-train", "frontend",
    "backend", "gateway", "api-gateway", "cron", "monitor",
]  # fmt: skip
PROSE = (
    "the login form loses the session after refresh so we moved the endpoint to v2 and "
    "tests pass on staging but the cache key changed which breaks the mobile client until "
    "the next release please review the migration guide and the rollback plan before friday"
)
WORDS = PROSE.split()


def setup_django(db: Path) -> None:
    os.environ["AGENT_SALON_DB"] = str(db)
    os.environ.pop("DATABASE_URL", None)  # always the benchmark's own SQLite file
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "salon.settings")
    sys.path.insert(0, str(REPO))
    from salon import config, store

    store.prepare(config.merged_environment())  # the secret, as any command makes it
    import django

    django.setup()


def _seats(rng: random.Random) -> list[tuple[str, str]]:
    """One to three sessions' seats per agent, and the webhook's `ci`: (seat, agent)."""
    from bus import services

    seats = []
    for agent in AGENTS:
        for k in range(rng.randint(1, 3)):
            session = f"{rng.getrandbits(32):08x}-bench-{k}"
            seat = services.seats.check_in(agent=agent, session_id=session)
            seats.append((seat.name, agent))
    seats.append(("ci", "ci"))
    return seats


def _entry_type(draw: float) -> str:
    """Mostly facts, then questions, answers and a few requests."""
    for type_, below in (("FACT", 0.55), ("QUESTION", 0.75), ("ANSWER", 0.92)):
        if draw < below:
            return type_
    return "REQUEST"


def generate(n: int, seed: int = 9315) -> None:
    """Bulk-insert n entries spread over the last 180 days, as the bus would store them."""
    from django.db import connection, transaction

    from bus import services, signing
    from bus.ids import uuid7
    from bus.models import Entry, Room

    rng = random.Random(seed)
    rooms = {name: services.rooms.create_room(name=name)[0] for name in ROOMS}
    seats = _seats(rng)
    # A few agents talk a lot, most a little (as in a real salon).
    weights = [1 / (i + 1) ** 0.8 for i in range(len(seats))]
    rng.shuffle(weights)
    names = [s for s, _ in seats] + AGENTS

    end = datetime.now(UTC).replace(microsecond=0)
    start = end - timedelta(days=180)
    step_ms = (end - start).total_seconds() * 1000 / n
    seq = dict.fromkeys(ROOMS, 0)
    cols = [f.column for f in Entry._meta.concrete_fields]
    sql = (
        f"INSERT INTO bus_entry ({', '.join(connection.ops.quote_name(c) for c in cols)}) "
        f"VALUES ({', '.join('?' for _ in cols)})"
    )
    started = time.perf_counter()
    batch: list[tuple] = []
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous=OFF")
        for i in range(n):
            ts = start + timedelta(milliseconds=int(i * step_ms))
            room = ROOMS[min(int(rng.expovariate(0.6)), len(ROOMS) - 1)]
            seq[room] += 1
            sender, agent = rng.choices(seats, weights)[0]
            type_ = _entry_type(rng.random())
            to = rng.sample(names, rng.randint(1, 2)) if rng.random() < 0.35 else []
            words = rng.randint(8, 90)
            content = " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."
            meta = {"kind": "question"} if type_ == "QUESTION" and rng.random() < 0.3 else {}
            entry_id = uuid7(now_ms=int(ts.timestamp() * 1000))
            signature = signing.sign_fields({
                "id": entry_id, "room": room, "seq": seq[room], "ts": ts, "sender": sender,
                "sender_agent": agent, "type": type_, "to": to, "re": None, "content": content,
                "meta": meta, "via": "cli", "sender_addr": "", "sender_session": "",
            })  # fmt: skip
            row = {
                "id": entry_id.hex,
                "room_id": rooms[room].pk,
                "seq": seq[room],
                "ts": ts.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds"),
                "sender": sender,
                "sender_agent": agent,
                "type": type_,
                "to": json.dumps(to),
                "re": None,
                "content": content,
                "meta": json.dumps(meta),
                "via": "cli",
                "sender_addr": "",
                "sender_session": "",
                "delivered_to": "[]",
                "delivery_errors": "[]",
                "signature": signature,
            }
            batch.append(tuple(row[c] for c in cols))
            if len(batch) == 20_000:
                with transaction.atomic():
                    cursor.executemany(sql, batch)
                batch.clear()
                print(f"\r  {i + 1:,} / {n:,} entries", end="", file=sys.stderr, flush=True)
        if batch:
            with transaction.atomic():
                cursor.executemany(sql, batch)
        for name, last in seq.items():
            Room.objects.filter(pk=rooms[name].pk).update(last_seq=last)
        cursor.execute("ANALYZE")
    print(f"\n  generated in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def scenarios() -> list[tuple[str, str]]:
    from bus.models import Entry

    newest = Entry.objects.order_by("-ts").values_list("ts", flat=True).first()
    week_ago = (newest - timedelta(days=7)).strftime("%Y-%m-%dT%H:%M:%SZ")
    month_ago = (newest - timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    until = newest.strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        ("source (agent) + 30-day time range [headline]",
         f"?source=web-app&since={month_ago}&until={until}"),
        ("no filter, page 1", ""),
        ("no filter, page 150", "?p=150"),
        ("source (one seat)", "?source=" + busiest_seat()),
        ("room + type", "?room=ops&type=REQUEST"),
        ("target (agent)", "?target=api-service"),
        ("participant (agent)", "?participant=billing"),
        ("between a,b", "?between=web-app,api-service"),
        ("exclude 2 senders + 7 days", f"?exclude=ci,web-app&since={week_ago}"),
        ("free text, common word", "?q=rollback"),
        ("free text, 7 days", f"?q=staging&since={week_ago}"),
        ("free text, no match (full scan)", "?q=zebra"),
    ]  # fmt: skip


def busiest_seat() -> str:
    from django.db.models import Count

    from bus.models import Entry

    row = Entry.objects.values("sender").annotate(n=Count("id")).order_by("-n").first()
    return row["sender"].replace("#", "%23")


def measure(runs: int) -> tuple[list[tuple[str, str, float, float, float, int]], str]:
    from django.contrib.auth.models import User
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()
    user = User.objects.filter(username="bench").first() or User.objects.create_superuser(
        "bench", "bench@example.com", "bench-password"
    )
    client = Client()
    client.force_login(user)
    rows = []
    for label, query in scenarios():
        url = "/admin/bus/entry/" + query
        first = client.get(url)
        assert first.status_code == 200, (url, first.status_code)
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
        shown = response.content.decode().count('<th class="field-when"')
        rows.append((label, query, statistics.median(times), min(times), max(times), shown))
        print(f"  {statistics.median(times):7.1f} ms  {label}", file=sys.stderr)
    return rows, explain(scenarios()[0][1], user)


def explain(query: str, user) -> str:
    """SQLite's plan for the headline page's count and rows queries."""
    from django.contrib.admin.sites import site
    from django.db import connection
    from django.test import RequestFactory

    from bus.admin.base import COUNT_CAP
    from bus.models import Entry

    request = RequestFactory().get("/admin/bus/entry/" + query)
    request.user = user
    model_admin = site._registry[Entry]
    changelist = model_admin.get_changelist_instance(request)
    queryset = changelist.queryset
    plans = []
    for name, qs in (
        ("count", queryset.order_by().values("pk")[: COUNT_CAP + 1]),
        ("page", queryset[:50]),
    ):
        sql, params = qs.query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            steps = [row[-1] for row in cursor.fetchall()]
        plans.append(f"{name}: " + " / ".join(steps))
    return "\n".join(plans)


def report(n: int, runs: int, rows, plans: str) -> str:
    headline = rows[0][2]
    lines = [
        "## Admin",
        "",
        f"Entry list (`/admin/bus/entry/`) rendered server-side through Django's test client, "
        f"as a logged-in superuser, over {n:,} entries in SQLite "
        f"({date.today().isoformat()}; {machine()}, "
        f"load average {os.getloadavg()[0]:.1f}). Median of {runs} runs after one warm-up; "
        f"50 rows a page, count capped at 10,001 rows. `python bench/admin_bench.py`.",
        "",
        f"Headline (filtered list, target < {TARGET_MS} ms): **{headline:.0f} ms** "
        f"({'met' if headline < TARGET_MS else 'MISSED'}).",
        "",
        "| scenario | query | median ms | min | max | rows shown |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for label, query, median, low, high, shown in rows:
        lines.append(
            f"| {label} | `{query or '(none)'}` | {median:.0f} | {low:.0f} | {high:.0f} | {shown} |"
        )
    lines += ["", "Query plan of the headline page (SQLite `EXPLAIN QUERY PLAN`):", "", "```"]
    lines += [*plans.splitlines(), "```", "", *FINDINGS.splitlines(), ""]
    return "\n".join(lines)


# What the first runs showed and what was changed (same data, same machine, 2026-11-30).
FINDINGS = """\
What was slow at first, and the fix (first run → now, medians):

* headline 253 ms: the count walked 30 days of the `ts` index (166k rows) testing
  `sender = X OR sender_agent = X` on each row. Query shape: one column, never the OR
  (a seat name holds `#`, an agent name never does, and a bare seat's agent is itself),
  and an index `entry_by_sender_agent (sender_agent, ts)` → about 50 ms.
* room + type 998 ms: the rows query sorted the whole room (135k rows, `USE TEMP B-TREE
  FOR ORDER BY`). Index `entry_room_newest (room, ts)` reads the room newest first.
* counts of 300 to 530 ms (target and participant: no index can serve a name inside
  the JSON `to` list; room + type: REQUEST is 8 % of the room): the count now stops
  after 0.1 s and the page says "not counted" (PostgreSQL: a local
  `statement_timeout`; SQLite: a progress handler); the rows themselves come fast.
* between a,b 784 ms: a partial index `entry_addressed_by_agent (sender_agent, ts) WHERE
  to != '[]'`, used from each branch of the OR, reads only the addressed entries of the
  two agents: about 105 ms on a quiet machine, up to 270 ms at load average 4.
* Still slow: free text that matches (almost) nothing reads every row (about 1 s for a
  million). Add a time range; a full-text index (SQLite FTS5, PostgreSQL pg_trgm) would
  be the fix and is not built."""


def write_results(section: str) -> None:
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    parts = text.split("\n## ")
    kept = [parts[0].rstrip("\n")] + [
        "## " + p.rstrip("\n") for p in parts[1:] if not p.startswith("Admin\n")
    ]
    RESULTS.write_text("\n\n".join([*kept, section.rstrip("\n")]) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=DEFAULT_DB)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    parser.add_argument("--json", type=Path, help="write every scenario's figures here")
    args = parser.parse_args()

    setup_django(args.db.resolve())
    from django.core.management import call_command

    from bus.models import Entry

    call_command("migrate", verbosity=0)
    have = Entry.objects.count()
    if have < args.entries:
        if have:
            raise SystemExit(f"{args.db} holds {have:,} entries; delete it to regenerate")
        print(f"generating {args.entries:,} entries into {args.db}", file=sys.stderr)
        generate(args.entries)
    rows, plans = measure(args.runs)
    section = report(args.entries, args.runs, rows, plans)
    print(section)
    if args.json:
        args.json.write_text(json.dumps([list(r) for r in rows]))
    if args.write:
        write_results(section)
        print(f"written to {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
