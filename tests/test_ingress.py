"""How entries get in and who is told: /notify on the consumers' database thread, and the
doorbell table of bus/bell.py, checked on real daemons, CLIs and stdio servers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.mcp_helpers import RawSession
from tests.support import Daemon, migrate, query_store, run_salon, salon_env
from tests.test_mcp_stdio import stdio_session

pytestmark = pytest.mark.slow

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


def redis_reachable() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except Exception:
        return False


needs_redis = pytest.mark.skipif(
    not redis_reachable(), reason=f"needs a Redis server at {REDIS_URL} (set REDIS_URL)"
)


def sqlite_store(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A migrated SQLite store whatever the suite's configuration (PostgreSQL pass too)."""
    env = salon_env(tmp_path, DATABASE_URL="", **extra)
    if os.environ.get("DATABASE_URL"):  # the migrated template is a PostgreSQL database
        done = run_salon("migrate", "--verbosity", "0", env=env)
        assert done.returncode == 0, done.stderr
    else:
        migrate(env)
    return env


# ---------------------------------------------------------------- /notify


class ConnectionCounter:
    """Counts the daemon's open database connections, sampled every few ms in a thread.

    PostgreSQL: the store's backends in pg_stat_activity (our own excluded). SQLite: the
    daemon's file descriptors open on the database file (one per connection)."""

    def __init__(self, env: dict[str, str], daemon: Daemon):
        self.env, self.pid = env, daemon.process.pid
        self.counts: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def now(self) -> int:
        if self.env.get("DATABASE_URL"):
            import psycopg

            name = self.env["DATABASE_URL"].rsplit("/", 1)[-1]
            with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as db:
                return db.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (name,),
                ).fetchone()[0]
        database = os.path.realpath(self.env["AGENT_SALON_DB"])
        count = 0
        for fd in Path(f"/proc/{self.pid}/fd").iterdir():
            with contextlib.suppress(OSError):  # closed while we looked
                count += os.readlink(fd) == database
        return count

    def _run(self) -> None:
        while not self._stop.is_set():
            self.counts.append(self.now())
            time.sleep(0.005)

    def __enter__(self) -> ConnectionCounter:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)


async def post_concurrently(url: str, posters: int, each: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=30) as client:

        async def poster(worker: int) -> list[httpx.Response]:
            return [
                await client.post(url, json={"content": f"load {worker}-{n}", "type": "FACT"})
                for n in range(each)
            ]

        batches = await asyncio.gather(*(poster(w) for w in range(posters)))
    return [response for batch in batches for response in batch]


def test_concurrent_notify_posts_all_get_202_are_all_stored_and_open_no_database_connection(
    daemon, env
):
    url = daemon.url + "/notify?label=ci"
    # The first post opens the connection of the consumers' database thread.
    assert httpx.post(url, json={"content": "warm up"}, timeout=10).status_code == 202
    counter = ConnectionCounter(env, daemon)
    before = counter.now()

    with counter:
        responses = asyncio.run(post_concurrently(url, posters=8, each=6))

    assert [r.status_code for r in responses] == [202] * 48, [r.text for r in responses][:3]
    stored = query_store(env, "SELECT count(*) FROM bus_entry WHERE sender = 'ci'")[0][0]
    assert stored == 49
    # A thread per request would be a connection per request (8 at a time here).
    assert max(counter.counts) <= before, (before, sorted(set(counter.counts)))
    metrics = httpx.get(daemon.url + "/metrics", timeout=10).text
    assert 'salon_request_duration_seconds_count{path="/notify"} 49' in metrics


def test_notify_refusals_over_a_real_daemon_keep_their_status_codes(daemon):
    url = daemon.url + "/notify"
    posts = {
        "no label": httpx.post(url, json={"content": "x"}, timeout=10),
        "not json": httpx.post(url + "?label=ci", content=b"{", timeout=10),
        "bad json": httpx.post(
            url + "?label=ci", content=b"{", headers={"content-type": "application/json"}
        ),
        "unknown key": httpx.post(url + "?label=ci", json={"content": "x", "romo": "a"}),
        "unknown room": httpx.post(url + "?label=ci", json={"content": "x", "room": "nope"}),
        "too large": httpx.post(
            url + "?label=ci",
            content=b'{"content": "' + b"x" * (4 * 1024 * 1024) + b'"}',
            headers={"content-type": "application/json"},
            timeout=30,
        ),
        "GET": httpx.get(url + "?label=ci", timeout=10),
    }

    assert {k: r.status_code for k, r in posts.items()} == {
        "no label": 400,
        "not json": 415,
        "bad json": 400,
        "unknown key": 422,
        "unknown room": 404,
        "too large": 413,
        "GET": 405,
    }
    assert posts["unknown key"].json()["field"] == "romo"
    assert posts["GET"].headers["allow"] == "POST"
    issued = run_salon("token", "issue", "ci", env=daemon.env, cwd=daemon.cwd)
    assert issued.returncode == 0, issued.stderr
    no_token = httpx.post(url + "?label=ci", json={"content": "x"}, timeout=10)
    assert no_token.status_code == 401 and "Bearer" in no_token.headers["www-authenticate"]


# ---------------------------------------------------------------- the doorbell, with Redis


def cli_imports(stderr: str) -> set[str]:
    """The top-level packages a `python -X importtime` process imported."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@needs_redis
async def test_a_cli_send_with_sqlite_and_redis_reaches_a_stream_without_the_cli_importing_redis(
    tmp_path,
):
    env = salon_env(tmp_path, DATABASE_URL="", REDIS_URL=REDIS_URL)
    daemon = await asyncio.to_thread(Daemon(env=env, cwd=tmp_path).start)
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            reader = await RawSession(client, daemon.url, "label=reader").open()
            seat = await reader.seat()
            async with reader.stream() as stream:
                await stream.next(comments=True)
                # Started cold (its own TMPDIR: no server's local line, salond/line.py,
                # to answer it): this very process stores the entry, so its import
                # profile is the sender's.
                cold = tmp_path / "cold"
                cold.mkdir()
                cli_env = {**env, "AGENT_SALON_NAME": "cron", "TMPDIR": str(cold)}
                sent = await asyncio.to_thread(
                    run_salon,
                    "send", "salon", "QUESTION", "from cron", "--to", seat, "--json",
                    env={**cli_env, "PYTHONPROFILEIMPORTTIME": "1"}, cwd=tmp_path,
                )  # fmt: skip
                assert sent.returncode == 0, sent.stderr[-2000:]
                # The CLI did not ring: the daemon's watcher saw the row and rang Redis.
                event = await stream.next(timeout=5)
    finally:
        daemon.stop()

    assert event["message"]["params"]["content"] == "from cron"
    imported = cli_imports(sent.stderr)
    assert "django" in imported  # the import profile is really there
    assert not imported & {"redis", "channels_redis"}, imported & {"redis", "channels_redis"}


@needs_redis
async def test_with_sqlite_and_redis_and_no_daemon_a_stdio_server_hears_a_cli_send_by_its_watcher(
    tmp_path,
):
    env = sqlite_store(tmp_path, REDIS_URL=REDIS_URL)
    project = tmp_path / "worker"
    project.mkdir()
    async with stdio_session(env, project, "44444444-dddd-4000-8000-000000000004") as session:
        status = (await session.call_tool("salon_status", {})).structured_content
        seat = status["session"]["seat"]
        sent = await asyncio.to_thread(
            run_salon,
            "send", "salon", "QUESTION", "anyone there?", "--to", seat,
            env={**env, "AGENT_SALON_NAME": "cron"}, cwd=tmp_path,
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        pushed = await asyncio.wait_for(session.channel.get(), 5)

    assert pushed.content == "anyone there?"


@needs_redis
async def test_with_sqlite_and_redis_a_send_in_the_daemon_reaches_its_stream_once(tmp_path):
    # The daemon rings Redis itself and its watcher sees the same row too: one event.
    env = salon_env(tmp_path, DATABASE_URL="", REDIS_URL=REDIS_URL)
    daemon = await asyncio.to_thread(Daemon(env=env, cwd=tmp_path).start)
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            reader = await RawSession(client, daemon.url, "label=reader").open()
            seat = await reader.seat()
            async with reader.stream() as stream:
                await stream.next(comments=True)
                posted = await client.post(
                    daemon.url + "/notify?label=ci",
                    json={"content": "in the daemon", "type": "QUESTION", "to": [seat]},
                )
                assert posted.status_code == 202
                event = await stream.next(timeout=5)
                assert await stream.nothing_for(1.0)
    finally:
        daemon.stop()

    assert event["message"]["params"]["content"] == "in the daemon"
