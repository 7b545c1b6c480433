"""Across machines: delivery latency and throughput through one relay (docs/RELAY.md).

Starts three real daemons on fresh SQLite stores on 127.0.0.1 — a relay (`salon relay
serve`), machine A and machine B — and joins A and B with the real handshake commands.
On B one seat is in the room, so every QUESTION that lands there is decided for it: the
decision's time is when the entry was stored on B.

* latency: QUESTIONs posted to A's /notify one after another (a random pause of up to
  50 ms between them); one entry's latency is the time it was stored on B minus its
  time on A (the entry keeps its writer's time; one clock);
* throughput: A's daemon is stopped, a backlog of entries is written into A's store,
  and A's daemon started again: its bridge pushes the backlog through the relay, B's
  pulls and lands it. Entries/s = the backlog / (the last one stored on B minus the first
  one stored on the relay); the relay's own rate (stored on the relay) is shown too.

    python -m bench.relay [--quick] [--json PATH]
"""

from __future__ import annotations

import contextlib
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Figure, percentile, scenario_main, summary
from tests.support import Daemon, migrate, query_store, run_django_script, run_salon, salon_env

SECRET = "bench-relay-secret-0123456789abcdef"
READER_SESSION = "beb0beb0-0000-4000-8000-000000000000"


def _env(directory: Path, tmp: str, **extra: str) -> dict[str, str]:
    env = salon_env(directory, TMPDIR=tmp, **extra)
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    migrate(env)
    return env


def _wait(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)
    return result


@contextlib.contextmanager
def three_salons() -> Iterator[tuple[Daemon, Daemon, Daemon]]:
    """A relay, A and B, running and joined (room `team`, B's reader seat in it)."""
    with (
        tempfile.TemporaryDirectory(prefix="salon-bench-relay-") as base,
        tempfile.TemporaryDirectory(prefix="sbr-", dir="/tmp") as tmp,
    ):
        daemons = []
        for name in ("relay", "a", "b"):
            directory = Path(base) / name
            directory.mkdir()
            extra = {"AGENT_SALON_RELAY_SECRET": SECRET} if name == "relay" else {}
            # the backlog is pushed as fast as the bridge can: no rate limit in the way
            extra["AGENT_SALON_RELAY_RATE"] = "1000000"
            command = ("relay", "serve") if name == "relay" else ("serve",)
            daemons.append(Daemon(env=_env(directory, tmp, **extra), cwd=directory,
                                  command=command))  # fmt: skip
        for running in daemons:
            running.launch()
        try:
            for running in daemons:
                running.wait_ready(120)
            relay, a, b = daemons
            for args, at in (
                (("relay", "use", relay.url, "--secret", SECRET, "--device", "machineA"), a),
                (("rooms", "--create", "team"), a),
            ):
                done = run_salon(*args, env=at.env, cwd=at.cwd)
                assert done.returncode == 0, done.stderr
            invited = run_salon("invite", "team", "--for", "machineB", env=a.env, cwd=a.cwd)
            joined = run_salon("join", invited.stdout.strip(), env=b.env, cwd=b.cwd)
            assert joined.returncode == 0, joined.stderr
            reader = {**b.env, "AGENT_SALON_NAME": "reader",
                      "CLAUDE_CODE_SESSION_ID": READER_SESSION}  # fmt: skip
            assert run_salon("join", "team", env=reader, cwd=b.cwd).returncode == 0
            _wait(lambda: _synced(a) and _synced(b), 60, "both bridges synced")
            yield relay, a, b
        finally:
            for running in daemons:
                running.stop()


def _synced(machine: Daemon) -> bool:
    rows = query_store(machine.env, "SELECT last_sync_at FROM relay_bridgedroom")
    return bool(rows and rows[0][0])


def _stored_on_b(b: Daemon, tag: str) -> dict[str, float]:
    """{entry id: when it was stored on B (Unix time)} for the entries tagged `tag`."""
    rows = query_store(
        b.env,
        "SELECT e.id, w.decided_at FROM bus_entry e JOIN bus_wakedecision w "
        "ON w.entry_id = e.id WHERE e.content LIKE ?",
        (f"{tag} %",),
    )
    return {uuid.UUID(str(i)).hex: _unix(at) for i, at in rows}


def _unix(value) -> float:
    """A time from a store or a report (UTC), as Unix time."""
    moment = (
        value
        if isinstance(value, datetime)
        else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    )
    if moment.tzinfo is None:  # SQLite hands back naive UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _all_stored(b: Daemon, tag: str, count: int, timeout: float) -> dict[str, float]:
    def every() -> dict[str, float] | None:
        stored = _stored_on_b(b, tag)
        return stored if len(stored) == count else None

    return _wait(every, timeout, f"all {count} entries stored on B")


def latencies(
    relay: Daemon, a: Daemon, b: Daemon, count: int
) -> tuple[list[float], list[tuple[float, float]]]:
    """Per entry: send on A → stored on B (ms), and its two halves (A → relay, relay → B)."""
    tag = f"lat-{uuid.uuid4().hex[:6]}"
    sent: dict[str, float] = {}
    with httpx.Client(timeout=30) as http:
        for n in range(count):
            time.sleep(random.uniform(0, 0.05))
            answer = http.post(
                f"{a.url}/notify?label=asker",
                json={"content": f"{tag} {n}", "room": "team", "type": "QUESTION"},
            )
            assert answer.status_code == 202, answer.text
            report = answer.json()
            sent[uuid.UUID(report["id"]).hex] = _unix(report["ts"])
    stored = _all_stored(b, tag, count, 120)
    relayed = _stored_on_relay(relay, list(sent))
    halves = [((relayed[i] - sent[i]) * 1000, (stored[i] - relayed[i]) * 1000) for i in sent]
    return [(stored[i] - sent[i]) * 1000 for i in sent], halves


def _stored_on_relay(relay: Daemon, ids: list[str]) -> dict[str, float]:
    rows = query_store(
        relay.env,
        "SELECT entry_id, stored_at FROM relay_relayenvelope WHERE entry_id IN "
        f"({', '.join('?' * len(ids))})",
        tuple(ids),
    )
    return {uuid.UUID(str(i)).hex: _unix(at) for i, at in rows}


BACKLOG_SCRIPT = """
import django
django.setup()
from bus import services
seat = services.seats.check_in(agent="backlog")
for n in range({count}):
    services.entries.send_entry(seat=seat, room="team", text="{tag} %d" % n, type="QUESTION")
"""


def throughput(relay: Daemon, a: Daemon, b: Daemon, count: int) -> tuple[float, float]:
    """(entries/s A → relay → B, entries/s stored on the relay) for a backlog of `count`."""
    tag = f"tput-{uuid.uuid4().hex[:6]}"
    a.stop()
    run_django_script(a.env, BACKLOG_SCRIPT.format(count=count, tag=tag), a.cwd, timeout=600)
    a.start(timeout=120)
    stored = _all_stored(b, tag, count, 600)
    ids = list(stored)
    [(first, last)] = query_store(
        relay.env,
        "SELECT MIN(stored_at), MAX(stored_at) FROM relay_relayenvelope WHERE entry_id IN "
        f"({', '.join('?' * len(ids))})",
        tuple(ids),
    )
    start, relay_end = _unix(first), _unix(last)
    return count / (max(stored.values()) - start), count / max(relay_end - start, 1e-3)


def run(quick: bool) -> list[Figure]:
    sends, backlog = (20, 200) if quick else (200, 2000)
    with three_salons() as (relay, a, b):
        values, halves = latencies(relay, a, b, sends)
        delivered, relayed = throughput(relay, a, b, backlog)
    where = "SQLite stores, one relay, all on 127.0.0.1"
    return [
        Figure(f"Relay delivery latency, send on A → stored on B, p50 ({where})",
               round(statistics.median(values), 1), "ms", detail=summary(values)),
        Figure("Relay delivery latency, send on A → stored on B, p99",
               round(percentile(values, 99), 1), "ms"),
        Figure("… of which send on A → stored on the relay, p50",
               round(statistics.median(h[0] for h in halves), 1), "ms",
               detail=summary([h[0] for h in halves])),
        Figure("… of which stored on the relay → stored on B, p50",
               round(statistics.median(h[1] for h in halves), 1), "ms",
               detail=summary([h[1] for h in halves])),
        Figure(f"Relay throughput, backlog of {backlog} A → relay → B",
               round(delivered, 1), "entries/s", higher_is_better=True),
        Figure("Relay throughput, the same backlog stored on the relay",
               round(relayed, 1), "entries/s", higher_is_better=True),
    ]  # fmt: skip


if __name__ == "__main__":
    scenario_main(run, __doc__)
