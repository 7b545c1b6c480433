"""Several daphne workers on one PostgreSQL and one Redis, and faults that lose nothing.

The cross-worker tests need real PostgreSQL and Redis (DATABASE_URL and REDIS_URL, as
.ci/run sets them); the embedded fault test runs everywhere.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import signal
import sqlite3
import time
import uuid
from dataclasses import dataclass, field

import httpx
import pytest

from tests.mcp_helpers import RawSession
from tests.support import Daemon, drop_store, migrate, query_store, salon_env

pytestmark = pytest.mark.slow

needs_scale = pytest.mark.skipif(
    not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")),
    reason="needs PostgreSQL and Redis: set DATABASE_URL and REDIS_URL (.ci/run does)",
)


@pytest.fixture
def workers(tmp_path):
    """Three real daphne processes on their own ports, one PostgreSQL, one Redis."""
    env = salon_env(tmp_path)
    migrate(env)
    daemons = [Daemon(env=env, cwd=tmp_path).start() for _ in range(3)]
    yield daemons
    for daemon in daemons:
        daemon.stop()
    drop_store(env)


@pytest.fixture
async def client():
    async with httpx.AsyncClient(timeout=10) as http:
        yield http


def on(session: RawSession, daemon: Daemon) -> RawSession:
    """The same MCP session, spoken to through another worker."""
    session.url = f"{daemon.url}/mcp?{session.url.split('?', 1)[1]}"
    return session


# ------------------------------------------------------------------ across workers


@needs_scale
async def test_a_session_initialized_on_one_worker_posts_on_another_and_streams_on_a_third(
    workers, client
):
    w1, w2, w3 = workers
    reader = await RawSession(client, w1.url, "label=roamer").open()
    seat = await on(reader, w2).seat()
    writer = await RawSession(client, w1.url, "label=sender").open()
    async with on(reader, w3).stream() as stream:
        await stream.next(comments=True)
        await asyncio.sleep(0.2)
        report = await writer.result(
            "send", {"text": "across workers", "type": "QUESTION", "to": [seat]}
        )
        event = await stream.next(timeout=5)
        assert await stream.nothing_for(1.0)
    assert event["message"]["params"]["meta"]["id"] == report["id"]


@needs_scale
async def test_a_broadcast_question_reaches_streams_on_every_worker_exactly_once(workers, client):
    readers = []
    for n, daemon in enumerate(workers):
        session = await RawSession(client, daemon.url, f"label=reader-{n}").open()
        await session.seat()
        readers.append(session)
    writer = await RawSession(client, workers[1].url, "label=broadcaster").open()
    streams = [reader.stream() for reader in readers]
    for stream in streams:
        await stream.__aenter__()
        await stream.next(comments=True)
    try:
        await asyncio.sleep(0.3)
        report = await writer.result("send", {"text": "anyone?", "type": "QUESTION"})
        firsts = [await stream.next(timeout=5) for stream in streams]
        extra = [await stream.nothing_for(1.0) for stream in streams]
    finally:
        for stream in streams:
            await stream.__aexit__(None, None, None)
    assert sorted(report["wakes"]) == sorted([await r.seat() for r in readers])
    assert [e["message"]["params"]["meta"]["id"] for e in firsts] == [report["id"]] * 3
    assert extra == [True, True, True]


@needs_scale
async def test_a_new_get_on_another_worker_closes_the_old_stream(workers, client):
    w1, w2, w3 = workers
    session = await RawSession(client, w1.url, "label=mover").open()
    await session.seat()
    async with on(session, w2).stream() as old:
        await old.next(comments=True)
        async with on(session, w3).stream() as new:
            await new.next(comments=True)
            await asyncio.wait_for(old.ended.wait(), 5)
            assert not new.ended.is_set()


@needs_scale
async def test_two_stores_on_one_redis_never_end_or_ring_each_others_streams(tmp_path, client):
    """REGRESSION (2026-12-01): the channel layer's groups were named seat.<id> with no
    store in the name, so on one Redis a stream of store B on seat 1 told store A's
    stream on seat 1 to let go: CI saw 50 of 50 streams end within a second, no push
    reached any of them. Both stores' first seat is seat 1 here."""
    daemons = []
    try:
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            env = salon_env(tmp_path / name)
            migrate(env)
            daemons.append((Daemon(env=env, cwd=tmp_path / name), env))
            daemons[-1][0].start()
        (first, _), (second, _) = daemons
        mine = await RawSession(client, first.url, "label=reader").open()
        theirs = await RawSession(client, second.url, "label=reader").open()
        await mine.seat(), await theirs.seat()
        ids = [query_store(env, "SELECT id FROM bus_seat") for _, env in daemons]
        assert ids[0] == ids[1] and len(ids[0]) == 1  # the same seat id in each store
        async with mine.stream() as stream:
            await stream.next(comments=True)
            async with theirs.stream() as other:
                await other.next(comments=True)
                writer = await RawSession(client, second.url, "label=writer").open()
                await writer.result("send", {"text": "only for store b", "type": "QUESTION"})
                pushed_there = await other.next(timeout=5)
                quiet_here = await stream.nothing_for(1.0)
            assert not stream.ended.is_set()
            report = await (await RawSession(client, first.url, "label=w").open()).result(
                "send", {"text": "for store a", "type": "QUESTION"}
            )
            pushed_here = await stream.next(timeout=5)
    finally:
        for daemon, env in daemons:
            daemon.stop()
            drop_store(env)
    assert pushed_there["message"]["params"]["content"] == "only for store b"
    assert quiet_here
    assert pushed_here["message"]["params"]["meta"]["id"] == report["id"]


# ------------------------------------------------------------------ faults


@dataclass
class Reader:
    session: RawSession
    seat: str
    received: list[str] = field(default_factory=list)
    last_event: str | None = None
    reconnects: int = 0
    streaming: bool = False


async def follow(reader: Reader, urls, stop: asyncio.Event) -> None:
    """Keep a stream open, reconnecting with Last-Event-ID to the next worker when it ends."""
    for url in itertools.cycle(urls):
        if stop.is_set():
            return
        reader.session.url = f"{url}/mcp?{reader.session.url.split('?', 1)[1]}"
        headers = {"last-event-id": reader.last_event} if reader.last_event else {}
        try:
            async with reader.session.stream(**headers) as stream:
                reader.streaming = True
                while not stop.is_set():
                    try:
                        event = await stream.next(timeout=0.5)
                    except TimeoutError:
                        if stream.ended.is_set():
                            break
                        continue
                    if "id" not in event:
                        continue  # the "N more are waiting" notice: not an entry
                    reader.received.append(event["message"]["params"]["meta"]["id"])
                    reader.last_event = event["id"]
        except httpx.HTTPError:
            pass
        if not stop.is_set():
            reader.reconnects += 1
            await asyncio.sleep(0.2)


async def send_load(
    senders, readers, urls, total: int, seconds: float, acknowledged: list[str]
) -> list[str]:
    """`total` QUESTIONs spread over `seconds` from every sender, each through a worker
    chosen in turn; the ids the server acknowledged go into `acknowledged` as they come."""
    per_sender = total // len(senders)
    interval = seconds / per_sender

    async def one_sender(n: int, session: RawSession) -> None:
        rotation = itertools.cycle(urls)
        start = time.monotonic()
        for i in range(per_sender):
            await asyncio.sleep(max(0.0, start + i * interval - time.monotonic()))
            target = random.choice(readers).seat
            session.url = f"{next(rotation)}/mcp?{session.url.split('?', 1)[1]}"
            try:
                message = await session.call(
                    "send", {"text": f"load {n}-{i}", "type": "QUESTION", "to": [target]}
                )
            except (httpx.HTTPError, AssertionError):
                # No acknowledgement: the entry may or may not exist. Pause before the
                # next one, so a sender running behind its schedule does not spend the
                # rest of its load on a daemon that is down for a second.
                await asyncio.sleep(0.2)
                continue
            result = message.get("result", {})
            if not result.get("isError"):
                acknowledged.append(result["structuredContent"]["id"])

    await asyncio.gather(*(one_sender(n, s) for n, s in enumerate(senders)))
    return acknowledged


async def until(condition, timeout: float = 60) -> None:
    """Poll `condition` until it holds (or the timeout: the assertions then say why)."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


async def run_fault(client, urls, kill_and_restart, stored_ids) -> dict:
    senders = [await RawSession(client, urls[0], f"label=sender-{n}").open() for n in range(4)]
    readers = []
    for n in range(3):
        session = await RawSession(client, urls[n % len(urls)], f"label=target-{n}").open()
        readers.append(Reader(session, await session.seat()))
    stop = asyncio.Event()
    followers = [
        asyncio.create_task(follow(r, urls[i % len(urls) :] + urls[: i % len(urls)], stop))
        for i, r in enumerate(readers)
    ]
    await until(lambda: all(r.streaming for r in readers))
    acknowledged: list[str] = []
    load = asyncio.create_task(
        send_load(senders, readers, urls, total=1000, seconds=10, acknowledged=acknowledged)
    )
    await until(lambda: len(acknowledged) >= 250)  # a third of the load is in: kill now
    await asyncio.to_thread(kill_and_restart)
    at_restart = len(acknowledged)
    await load
    # Let every reader catch up (a reconnect replays what it missed), then stop.
    await until(lambda: sum(len(set(r.received)) for r in readers) >= len(acknowledged))
    stop.set()
    await asyncio.gather(*followers)
    stored, by_target = stored_ids()
    counts = {
        "acknowledged": len(acknowledged),
        "acknowledged_stored": sum(1 for i in acknowledged if stored.get(i, 0) == 1),
        "stored": sum(stored.values()),
        "received": sum(len(r.received) for r in readers),
        "duplicates": sum(len(r.received) - len(set(r.received)) for r in readers),
        "reconnects": sum(r.reconnects for r in readers),
    }
    print("fault test:", counts)
    assert counts["acknowledged"] > at_restart + 50  # the load really ran through the fault
    assert counts["acknowledged_stored"] == counts["acknowledged"]
    assert counts["duplicates"] == 0
    for reader in readers:
        waking = by_target.get(reader.seat, set())
        assert set(reader.received) == waking, (reader.seat, len(reader.received), len(waking))
    assert counts["reconnects"] >= 1
    return counts


def tally(rows) -> tuple[dict[str, int], dict[str, set[str]]]:
    """(entry id → rows with that id, addressee → ids of the QUESTIONs sent to it)."""
    counts: dict[str, int] = {}
    by_target: dict[str, set[str]] = {}
    for entry_id, target in rows:
        counts[entry_id] = counts.get(entry_id, 0) + 1
        by_target.setdefault(target, set()).add(entry_id)
    return counts, by_target


@needs_scale
async def test_a_worker_killed_mid_load_loses_no_acknowledged_entry_and_no_push(workers, client):
    import psycopg

    url = workers[0].env["DATABASE_URL"]

    def kill_and_restart():
        workers[1].kill()
        time.sleep(2)
        workers[1] = Daemon(env=workers[1].env, cwd=workers[1].cwd, port=workers[1].port).start()

    def stored_ids():
        with psycopg.connect(url) as connection:
            return tally(
                connection.execute(
                    "SELECT id::text, (\"to\"::jsonb)->>0 FROM bus_entry WHERE type = 'QUESTION'"
                ).fetchall()
            )

    await run_fault(client, [d.url for d in workers], kill_and_restart, stored_ids)


async def test_the_embedded_daemon_killed_mid_load_loses_nothing(tmp_path, client):
    if os.environ.get("DATABASE_URL"):
        pytest.skip("the embedded variant runs in the SQLite pass")
    env = salon_env(tmp_path)
    migrate(env)
    holder = [Daemon(env=env, cwd=tmp_path).start()]

    def kill_and_restart():
        holder[0].kill()
        time.sleep(1)
        holder[0] = Daemon(env=env, cwd=tmp_path, port=holder[0].port).start()

    def stored_ids():
        with sqlite3.connect(env["AGENT_SALON_DB"]) as connection:
            rows = connection.execute(
                "SELECT id, json_extract(\"to\", '$[0]') FROM bus_entry WHERE type = 'QUESTION'"
            ).fetchall()
        return tally((str(uuid.UUID(raw)), target) for raw, target in rows)

    try:
        await run_fault(client, [holder[0].url], kill_and_restart, stored_ids)
    finally:
        holder[0].stop()


# ------------------------------------------------------------------ salon serve --workers


def test_several_workers_without_redis_are_refused_with_the_fix(env, tmp_path):
    from tests.support import run_salon

    done = run_salon("serve", "--workers", "2", env={**env, "REDIS_URL": ""}, cwd=tmp_path)
    assert done.returncode != 0
    assert "REDIS_URL" in done.stderr and "Traceback" not in done.stderr


@needs_scale
def test_serve_workers_stopped_while_its_workers_start_exits_0_without_a_traceback(env, tmp_path):
    """REGRESSION (2026-12-01): stopped soon after its start, `salon serve --workers 2`
    printed a KeyboardInterrupt traceback: it passed its SIGINT on to a worker still
    loading Django. It stops its workers with SIGTERM now, and a worker stopped while it
    starts says nothing."""
    import subprocess

    from tests.support import free_port, salon_cmd

    server = subprocess.Popen(
        salon_cmd("serve", "--workers", "2", "--port", str(free_port())), env=env, cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        lines = []
        for line in server.stdout:  # the banner's last line comes once both workers run
            lines.append(line)
            if "workers      :" in line:
                break
        server.send_signal(signal.SIGINT)  # the workers are still loading Django
        output, _ = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
    assert "workers      : 2" in "".join(lines)
    assert "Traceback" not in output
    assert server.returncode == 0


@needs_scale
async def test_serve_workers_runs_that_many_daphne_processes_on_one_port(env, tmp_path, client):
    import subprocess

    from tests.support import free_port, salon_cmd

    port = free_port()
    server = subprocess.Popen(
        salon_cmd("serve", "--workers", "2", "--port", str(port)),
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(150):
            try:
                if (await client.get(f"{base}/healthz")).status_code == 200:
                    break
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
        # A session made through one worker is used through whichever accepts next.
        session = await RawSession(client, base, "label=pooled").open()
        seats = {await session.seat() for _ in range(6)}
    finally:
        server.send_signal(2)
        output, _ = server.communicate(timeout=30)
    assert len(seats) == 1
    assert "workers      : 2" in output
    assert server.returncode == 0
    assert "Traceback" not in output
