"""Shared pieces of the benchmark suite: figures, the machine, the table, RESULTS.md.

A scenario module (bench/push_latency.py, bench/throughput.py …) exposes
`run(quick: bool) -> list[Figure]`; `python -m bench.<module>` runs it alone and prints
its table, `python -m bench` runs them all (bench/__main__.py). Real daemons are started
with the test suite's own helpers (tests.support.Daemon / salon_env / migrate) and spoken
to with its raw MCP client (tests.mcp_helpers.RawSession / SseStream).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "RESULTS.md"
PG_URL = "postgres://postgres@127.0.0.1:5432/test"
# A Redis database of the suite's own: other runs (the test suite) use /0 on the same
# server, and channel-layer group names (seat.<id>) would otherwise collide.
REDIS_URL = "redis://127.0.0.1:6379/13"

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


INITIALIZE_LINE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
    b'"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}\n'
)


@contextlib.contextmanager
def served(env: dict[str, str], cwd: Path) -> Iterator[subprocess.Popen]:
    """A `salon mcp` of another Claude Code session on the store of `env`, as Claude Code
    keeps one per session with the default (stdio) setup; with it comes the store's local
    line (salond/line.py), which answers hooks and bus commands. Yields once it listens;
    stops it afterwards (it removes its socket)."""
    tmp = Path(env.get("TMPDIR") or tempfile.gettempdir())
    runtime = tmp / f"agent-salon-{os.getuid()}"
    other = cwd.parent / "served-by-another-session"
    other.mkdir(exist_ok=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "salon.cli", "mcp"],
        env=dict(env, CLAUDE_CODE_SESSION_ID="0the0000-0000", AGENT_SALON_NAME="other"),
        cwd=other,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    # As Claude Code does: `initialize` first (the local line opens after it).
    process.stdin.write(INITIALIZE_LINE)
    process.stdin.flush()
    try:
        deadline = time.monotonic() + 60
        while not list(runtime.glob(f"line-*-{process.pid}.sock")):
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("salon mcp did not open its local line")
            time.sleep(0.05)
        yield process
    finally:
        process.stdin.close()
        process.wait(15)


@dataclass
class Figure:
    """One measured number, its target, and the load average it was measured at."""

    name: str
    value: float | None
    unit: str
    target: float | None = None  # None: reported, no target
    higher_is_better: bool = False
    detail: str = ""
    load: float = field(default_factory=lambda: os.getloadavg()[0])
    error: str = ""

    @property
    def met(self) -> bool | None:
        if self.value is None or self.target is None:
            return None
        if self.higher_is_better:
            return self.value >= self.target
        return self.value <= self.target

    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        return {True: "met", False: "**MISSED**", None: "—"}[self.met]

    def shown_value(self) -> str:
        if self.error:
            return f"error: {self.error}"
        return f"{fmt(self.value)} {self.unit}".strip() if self.value is not None else "—"

    def shown_target(self) -> str:
        if self.target is None:
            return "—"
        return f"{'≥' if self.higher_is_better else '≤'} {fmt(self.target)} {self.unit}".strip()


def fmt(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary(values: list[float]) -> str:
    """'n=200 p50 3.1 p90 4.0 p99 9.9 max 12' (milliseconds)."""
    return (
        f"n={len(values)} p50 {fmt(statistics.median(values))} "
        f"p90 {fmt(percentile(values, 90))} p99 {fmt(percentile(values, 99))} "
        f"max {fmt(max(values))}"
    )


def loadavg() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


# ------------------------------------------------------------------ the machine


def _ram() -> str:
    try:
        with open("/proc/meminfo") as meminfo:
            kib = int(next(line for line in meminfo if line.startswith("MemTotal")).split()[1])
        return f"{kib / 1024 / 1024:.1f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        return "RAM unknown"


def postgres_version() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_URL, connect_timeout=2) as connection:
            version = connection.execute("SHOW server_version").fetchone()[0]
        return version.split()[0]
    except Exception:
        return None


def redis_version() -> str | None:
    try:
        import redis

        return redis.Redis.from_url(REDIS_URL, socket_timeout=2).info("server")["redis_version"]
    except Exception:
        return None


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError, StopIteration), open("/proc/cpuinfo") as cpuinfo:
        cpu = next(line for line in cpuinfo if line.startswith("model name"))
        cpu = cpu.split(":", 1)[1].strip()
    parts = [
        f"{os.cpu_count()} cores ({cpu})",
        _ram(),
        platform.platform(),
        f"Python {platform.python_version()}",
        f"SQLite {sqlite3.sqlite_version}",
        f"PostgreSQL {postgres_version() or 'not reachable'}",
        f"Redis {redis_version() or 'not reachable'}",
    ]
    return ", ".join(parts)


# ------------------------------------------------------------------ processes and stores


def raise_nofile() -> int:
    """Raise this process's open-file limit to the hard limit (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def own_environment() -> None:
    """The suite chooses its stores itself: a DATABASE_URL / REDIS_URL in the caller's
    environment must not leak into the embedded-default measurements."""
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)


def postgres_available() -> bool:
    return postgres_version() is not None


def redis_available() -> bool:
    return redis_version() is not None


def fresh_postgres() -> str:
    import psycopg

    name = f"salon_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return PG_URL.rsplit("/", 1)[0] + "/" + name


def drop_postgres(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[-1]
    if not name.startswith("salon_bench_"):
        return
    with psycopg.connect(PG_URL, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


STORES = {
    "sqlite": "embedded default (SQLite, synchronous=FULL as shipped, in-process layer)",
    "sqlite-normal": "SQLite with synchronous=NORMAL (bench/settings_sync_normal.py)",
    "sqlite-redis": "SQLite + Redis channel layer",
    "postgres": "PostgreSQL, no Redis (LISTEN/NOTIFY doorbell)",
    "postgres-redis": "PostgreSQL + Redis channel layer",
}


@contextlib.contextmanager
def daemon(store: str = "sqlite", *, workers: int = 1, **extra: str) -> Iterator:
    """A real `salon serve` (one daphne process, or `workers` of them on one socket) on
    a fresh store, stopped afterwards.

    Yields the tests.support.Daemon; its .env is what a CLI process needs to reach the
    same store."""
    from tests.support import Daemon, migrate, salon_env

    if store not in STORES:
        raise ValueError(f"unknown store {store!r}; one of {', '.join(STORES)}")
    with tempfile.TemporaryDirectory(prefix="salon-bench-") as tmp:
        workdir = Path(tmp)
        # Every benchmark client comes from 127.0.0.1: no cap on one address's connections.
        env = salon_env(workdir, **{"AGENT_SALON_CONNECTIONS_PER_ADDRESS": "0", **extra})
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)
        pg = fresh_postgres() if store.startswith("postgres") else None
        if pg:
            env["DATABASE_URL"] = pg  # `salon serve` migrates it
        else:
            migrate(env)
        if "redis" in store:
            env["REDIS_URL"] = REDIS_URL
            with contextlib.suppress(Exception):
                import redis

                redis.Redis.from_url(REDIS_URL).flushdb()
        if store == "sqlite-normal":
            env["DJANGO_SETTINGS_MODULE"] = "bench.settings_sync_normal"
        command = ("serve",) if workers == 1 else ("serve", "--workers", str(workers))
        running = Daemon(env=env, cwd=workdir, command=command).start(timeout=120)
        try:
            yield running
        finally:
            running.stop()
            if pg:
                drop_postgres(pg)
            kept = Path(tempfile.gettempdir()) / f"salon-bench-daemon-{store}-{running.port}.log"
            log = running.log()
            if "Traceback" in log or "ERROR" in log:
                kept.write_text(log)
                print(f"  the daemon logged errors: kept in {kept}", file=sys.stderr)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of a process so far (from /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


@contextlib.contextmanager
def profiled(salon, name: str) -> Iterator[None]:
    """With BENCH_PROFILE=1 (and py-spy installed): record the daemon (with its worker
    processes, if any) with py-spy while the block runs, as collapsed stacks per thread
    (`--format raw --threads`, readable by speedscope or flamegraph.pl) in
    /tmp/salon-bench-profile-NAME.txt."""
    spy = Path(sys.executable).parent / "py-spy"
    if not os.environ.get("BENCH_PROFILE") or not spy.exists():
        yield
        return
    path = Path(tempfile.gettempdir()) / f"salon-bench-profile-{name}.txt"
    command = [str(spy), "record", "--pid", str(salon.process.pid), "--output", str(path),
               "--format", "raw", "--threads", "--rate", "250", "--subprocesses"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        process.send_signal(2)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(30)
        print(f"  py-spy profile of the daemon: {path}", file=sys.stderr)


# ------------------------------------------------------------------ output


def table(figures: list[Figure]) -> str:
    lines = [
        "| figure | value | target | met? | load avg | detail |",
        "|---|---:|---:|---|---:|---|",
    ]
    for f in figures:
        lines.append(
            f"| {f.name} | {f.shown_value()} | {f.shown_target()} | {f.verdict()} | "
            f"{f.load:.2f} | {f.detail} |"
        )
    return "\n".join(lines)


def write_json(figures: list[Figure], path: Path) -> None:
    path.write_text(json.dumps([asdict(f) for f in figures], indent=1))


def read_json(path: Path) -> list[Figure]:
    return [Figure(**row) for row in json.loads(path.read_text())]


def append_results(section: str) -> None:
    """Append a dated section to bench/RESULTS.md, keeping every existing section."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    RESULTS.write_text(text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n")


def replace_section(heading: str, section: str) -> None:
    """Put `section` in place of the `## heading` section (or append it)."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"^## {re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section.rstrip("\n") + "\n\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text.rstrip("\n") + "\n")


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def scenario_main(run: Callable[[bool], list[Figure]], doc: str) -> None:
    """The command line of one scenario module: --quick, --json PATH."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the smoke-sized version")
    parser.add_argument("--json", type=Path, help="write the figures as JSON to this file")
    args = parser.parse_args()
    own_environment()
    raise_nofile()
    started = time.monotonic()
    figures = run(args.quick)
    if args.json:
        write_json(figures, args.json)
    print(table(figures))
    print(f"\n({time.monotonic() - started:.0f} s; load average now {loadavg()})")


# ------------------------------------------------------------------ MCP clients


def http_client(timeout: float = 30):
    """One httpx client for many concurrent streams (no pool limit)."""
    import httpx

    return httpx.AsyncClient(
        timeout=timeout,
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
    )


async def listener(stack: contextlib.AsyncExitStack, client, base: str, label: str):
    """A connected MCP session: initialized, GET stream open (its first comment read).

    Returns (RawSession, seat name, SseStream); the stream closes with `stack`."""
    from tests.mcp_helpers import RawSession

    session = await RawSession(client, base, f"label={label}").open()
    # A session becomes a seat at its first tool call (a stream alone makes none).
    await session.result("rooms")
    stream = await stack.enter_async_context(session.stream())
    first = await stream.next(timeout=60, comments=True)
    assert first.get("comment", "").startswith("agent-salon stream open"), first
    # docs/MCP.md: the seat is label#<first 8 of the MCP session id> (the labels here are
    # unique, so no longer form is needed). Not asked of salon_status: that tool lists
    # every seat with its rooms, one query per seat, which made connecting N sessions
    # cost O(N²) (see RESULTS.md).
    seat = f"{label}#{session.session_id[:8]}"
    return session, seat, stream


async def listeners(
    stack: contextlib.AsyncExitStack, client, base: str, prefix: str, count: int, parallel: int = 8
) -> list:
    """`count` connected sessions labeled prefix-0 … (each its own agent and seat)."""
    import asyncio

    gate = asyncio.Semaphore(parallel)
    done = 0

    async def one(index: int):
        nonlocal done
        async with gate:
            connected = await listener(stack, client, base, f"{prefix}-{index}")
        done += 1
        if count >= 200 and done % 200 == 0:
            print(f"  {done}/{count} sessions connected", file=sys.stderr, flush=True)
        return connected

    return list(await asyncio.gather(*(one(i) for i in range(count))))
