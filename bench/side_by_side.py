"""Side by side: agent-salon and a plain MCP push server, driven by the same clients.

The peer (bench/peer_server.py) is the `mcp` SDK's own low-level server under uvicorn:
the same `send` tool and the same `notifications/claude/channel` push, storing nothing.
agent-salon is started as a user starts it (`python -m salon.cli serve` on a fresh
SQLite store in a temporary directory, one daphne process). Both run at once, each in
its own process on a free loopback port, and every measurement that applies to both is
taken in rounds that alternate between them (agent-salon, peer, agent-salon, peer …),
so that whatever else loads the machine weighs on both alike.

The clients are real `mcp` SDK clients (`mcp.client.streamable_http` + `ClientSession`),
one per session, each with its own `?label=` and an open GET stream; the push is
received by a handler bound to `notifications/claude/channel` (the SDK drops
notifications it does not know unless a handler is bound), which timestamps it. On
agent-salon every session is a seat in the default room, so `to: [label]` wakes exactly
that seat.

Measured (sizes of the full run; --quick is the smoke version):

* send → push latency, 1 send in flight: one sender calls `send` (a QUESTION to one of
  100 receivers, round robin) and waits for the push before the next call (5 ms apart);
  time from the call to the receiver's handler;
* sends/s with 1 and with 8 sends in flight (1 or 8 sender sessions, each calling again
  as soon as its previous push arrived), with that latency's p50/p99;
* server CPU per send+push: utime+stime of the server process and its children (from
  /proc) over the sends of a round, divided by the sends;
* /notify, agent-salon only: entries stored and pushed per second with 1 and 8 posters
  (raw HTTP POSTs, QUESTIONs to one receiver each, posters not waiting for the push);
* /healthz: server CPU per request over sequential GETs (the peer's /healthz is a
  plain Starlette JSON route: the floor of the HTTP stack);
* fan-out: one broadcast QUESTION from a sender to 1,000 live SDK sessions (fresh
  servers; the receiving sessions in 4 client processes, so that reading the pushes is
  not one process's work): time from the send's answer to the last push;
* idle: 10,000 open GET streams (fresh servers, one after the other) held 30 s: RSS and
  CPU of the server. Ten thousand SDK sessions are too heavy for this machine's client
  side (about 200 KB and 11 ms of client CPU each), so this test alone opens its
  sessions by hand on raw asyncio connections (initialize, notifications/initialized,
  GET) from 4 client processes.

    python -m bench.side_by_side [--quick] [--only main,notify,healthz,fanout,idle]
                                 [--markdown FILE] [--json FILE]
    python -m bench.side_by_side --only idle --idle-streams 2000
    python -m bench.side_by_side --profile   # py-spy of agent-salon: 1 in flight, /notify
    python -m bench.side_by_side --sql [--full-sql]   # the SQL of one send + push
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from bench.common import (
    REPO,
    Figure,
    daemon,
    fmt,
    loadavg,
    machine,
    now_utc,
    own_environment,
    percentile,
    raise_nofile,
    rss_kib,
    table,
    write_json,
)

SALON, PEER = "agent-salon", "peer"
CHANNEL = "notifications/claude/channel"
PUSH_TIMEOUT = 30.0
LATENCY_GAP = 0.005  # between two isolated sends, so the next never overlaps the last
IDLE_WORKERS = 4  # client processes of the idle test (1 below 2,000 streams)
FANOUT_WORKERS = 4  # client processes of the fan-out's receivers (1 below 200 streams)
P50_TARGET_MS, P99_TARGET_MS, NOTIFY_TARGET = 5, 25, 1000


@dataclass(frozen=True)
class Sizes:
    receivers: int
    rounds: int
    latency_sends: int  # per round, 1 in flight
    rate_sends: int  # per sender per round
    notify_seconds: float
    healthz_requests: int
    fanout_streams: int
    fanout_rounds: int
    idle_streams: int
    idle_seconds: float
    fanout_pause: float = 1.0  # before each broadcast, so the last one's work is done
    senders: int = 8
    judged: bool = True  # targets judged (the full sizes)


FULL = Sizes(receivers=100, rounds=6, latency_sends=100, rate_sends=40, notify_seconds=15,
             healthz_requests=2000, fanout_streams=1000, fanout_rounds=5,
             idle_streams=10_000, idle_seconds=30)  # fmt: skip
QUICK = Sizes(receivers=10, rounds=2, latency_sends=10, rate_sends=3, notify_seconds=1,
              healthz_requests=100, fanout_streams=30, fanout_rounds=1, idle_streams=60,
              idle_seconds=1, fanout_pause=0.2, judged=False)  # fmt: skip
PHASES = ("main", "notify", "healthz", "fanout", "idle")


# ------------------------------------------------------------------ processes


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def tree_cpu_seconds(pid: int) -> float:
    """CPU (user + system) of a process, of its children still running, and of the
    children it has waited for (cutime/cstime), in seconds."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(entry)] = int(_stat_fields(int(entry))[1])
    family, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        family.update(children)
        frontier.extend(children)
    total = 0
    for member in family:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = _stat_fields(member)
            total += int(fields[11]) + int(fields[12])
            if member == pid:
                total += int(fields[13]) + int(fields[14])
    return total / ticks


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Server:
    """A server process under test: its name, base URL and process."""

    name: str
    url: str
    process: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu(self) -> float:
        return tree_cpu_seconds(self.pid)

    def rss_mib(self) -> float:
        return rss_kib(self.pid) / 1024


@contextlib.contextmanager
def salon_server(**env: str) -> Iterator[Server]:
    """`python -m salon.cli serve` on a fresh SQLite store (bench.common.daemon)."""
    with daemon("sqlite", **env) as salon:
        yield Server(SALON, salon.url, salon.process)


@contextlib.contextmanager
def peer_server(*, store: Path | None = None) -> Iterator[Server]:
    """`python -m bench.peer_server` on a free loopback port; with `store`, each message
    kept in that SQLite file before its push (--store)."""
    import httpx

    from tests.support import free_port

    port = free_port()
    keep = ["--store", str(store)] if store else []
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.peer_server", "--port", str(port), *keep],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"the peer server did not start:\n{log.read().decode()}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                time.sleep(0.1)
            yield Server(PEER, url, process)
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


# ------------------------------------------------------------------ SDK clients


class Arrivals:
    """When each push arrived (perf_counter), by its content; one instance per run."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = collections.defaultdict(list)
        self.wanted: dict[str, tuple[int, asyncio.Future]] = {}

    def record(self, key: str, at: float) -> None:
        times = self.times[key]
        times.append(at)
        wanted = self.wanted.get(key)
        if wanted is not None and len(times) >= wanted[0] and not wanted[1].done():
            wanted[1].set_result(None)

    def expect(self, key: str, count: int = 1) -> None:
        """Before sending `key`: wait() will return once `count` pushes of it arrived."""
        self.wanted[key] = (count, asyncio.get_running_loop().create_future())

    async def wait(self, key: str, timeout: float = PUSH_TIMEOUT) -> list[float]:
        """The arrival times of `key` (fewer than expected if `timeout` passed first)."""
        count, done = self.wanted[key]
        if len(self.times[key]) < count:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done, timeout)
        del self.wanted[key]
        return self.times.pop(key, [])


def channel_binding(arrivals: Arrivals):
    """The SDK's hook for a notification it does not know: a binding of the method to a
    params model and a handler. Meta values must be strings (as Claude Code requires):
    a push with another value fails validation, is dropped by the SDK, and shows up here
    as a lost push."""
    from mcp.client.extension import NotificationBinding
    from pydantic import BaseModel, ConfigDict

    class ChannelParams(BaseModel):
        model_config = ConfigDict(extra="allow")
        content: str
        meta: dict[str, str]

    async def pushed(params: ChannelParams) -> None:
        arrivals.record(params.content, time.perf_counter())

    return NotificationBinding(method=CHANNEL, params_type=ChannelParams, handler=pushed)


@dataclass
class Client:
    label: str
    session: object  # mcp.client.session.ClientSession


class Fleet:
    """SDK client sessions on one server, sharing one HTTP client (an unbounded pool; the
    GET streams each hold a connection). Each session lives in a task of its own: the
    SDK's transport and session are anyio task groups, which must be left by the task
    that entered them. A session counts as connected once its GET stream answered 200
    (seen by an httpx response hook): the SDK opens it by itself after initialize."""

    def __init__(self, server: Server, arrivals: Arrivals) -> None:
        import httpx2

        self.server = server
        self.binding = channel_binding(arrivals)
        self.opened: dict[str, asyncio.Event] = {}
        self.clients: list[Client] = []
        self.tasks: list[asyncio.Task] = []
        self.failures: list[str] = []
        self.stop = asyncio.Event()
        self.http = httpx2.AsyncClient(
            # No read timeout: a GET stream may stay silent for a long time (the peer
            # sends no keep-alives), and a reconnect could lose a push.
            timeout=httpx2.Timeout(30, read=None),
            limits=httpx2.Limits(max_connections=None, max_keepalive_connections=None),
            event_hooks={"response": [self._saw_response]},
        )

    async def _saw_response(self, response) -> None:
        if response.request.method == "GET" and response.status_code == 200:
            label = response.request.url.params.get("label", "")
            if label in self.opened:
                self.opened[label].set()

    async def connect(self, labels: list[str], parallel: int = 16) -> list[Client]:
        gate = asyncio.Semaphore(parallel)
        done = 0

        async def one(label: str) -> Client:
            nonlocal done
            async with gate:
                self.opened[label] = asyncio.Event()
                ready: asyncio.Future = asyncio.get_running_loop().create_future()
                self.tasks.append(asyncio.create_task(self._live(label, ready)))
                session = await ready
                await asyncio.wait_for(self.opened[label].wait(), 60)
            done += 1
            if len(labels) >= 500 and done % 250 == 0:
                say(f"  {self.server.name}: {done}/{len(labels)} SDK sessions connected")
            return Client(label, session)

        clients = list(await asyncio.gather(*(one(label) for label in labels)))
        self.clients.extend(clients)
        return clients

    async def _live(self, label: str, ready: asyncio.Future) -> None:
        from mcp.client.session import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        url = f"{self.server.url}/mcp?label={label}"
        try:
            # No DELETE at the end: the servers are thrown away after each phase.
            async with (
                streamable_http_client(url, http_client=self.http, terminate_on_close=False) as (
                    read,
                    write,
                ),
                ClientSession(read, write, notification_bindings=[self.binding]) as session,
            ):
                await session.initialize()
                if self.server.name == SALON:
                    # A session becomes a seat at its first tool call (docs/MCP.md).
                    await session.call_tool("rooms", {})
                ready.set_result(session)
                await self.stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                self.failures.append(f"{label}: {type(exc).__name__}: {exc}")

    async def close(self) -> None:
        self.stop.set()
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=60)
        await self.http.aclose()


@dataclass
class Side:
    """One server with its sessions for a phase."""

    server: Server
    receivers: list[Client]
    senders: list[Client]


async def open_side(
    stack: contextlib.AsyncExitStack, server: Server, arrivals: Arrivals, receivers: int,
    senders: int, prefix: str,
) -> Side:  # fmt: skip
    """`receivers` sessions on their own HTTP client and `senders` on another, so that
    the measured calls never wait behind the receivers' pool."""
    listening = Fleet(server, arrivals)
    stack.push_async_callback(listening.close)
    sending = Fleet(server, arrivals)
    stack.push_async_callback(sending.close)
    started = time.monotonic()
    side = Side(
        server,
        await listening.connect([f"{prefix}-r{i}" for i in range(receivers)]),
        await sending.connect([f"{prefix}-s{i}" for i in range(senders)]),
    )
    say(f"  {server.name}: {receivers} + {senders} SDK sessions in "
        f"{time.monotonic() - started:.0f} s")  # fmt: skip
    return side


async def send(client: Client, text: str, to: list[str] | None, kind: str = "QUESTION") -> str:
    """One `send` tool call; returns '' or the error text."""
    arguments: dict = {"text": text, "type": kind}
    if to:
        arguments["to"] = to
    result = await client.session.call_tool("send", arguments)
    if result.is_error:
        return " ".join(getattr(part, "text", "") for part in result.content)[:200]
    return ""


async def warm_up(side: Side, arrivals: Arrivals) -> None:
    """Every receiver gets one push and every sender sends once (the SDK lists the tools
    on a session's first call): streams and sessions proven before anything is timed."""
    for n, receiver in enumerate(side.receivers):
        sender = side.senders[n % len(side.senders)]
        key = f"warm {side.server.name} {receiver.label}"
        arrivals.expect(key)
        error = await send(sender, key, [receiver.label])
        if error:
            raise RuntimeError(f"{side.server.name}: warm-up send failed: {error}")
        if not await arrivals.wait(key, timeout=60):
            raise RuntimeError(f"{side.server.name}: no push reached {receiver.label}")


# ------------------------------------------------------------------ measurements


@dataclass
class Run:
    """The sends of one round on one server."""

    latencies: list[float] = field(default_factory=list)  # ms, call → push
    answers: list[float] = field(default_factory=list)  # ms, call → tool answer
    sent: int = 0
    lost: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0


async def closed_loop(
    side: Side, arrivals: Arrivals, senders: int, per_sender: int, gap: float, tag: str
) -> Run:
    """`senders` senders, each sending `per_sender` QUESTIONs one after the other (the next
    once the push of the last arrived), addressed round robin over the receivers."""
    run = Run()
    receivers = side.receivers

    async def sender_loop(k: int, sender: Client) -> None:
        for n in range(per_sender):
            target = receivers[(k * 13 + n) % len(receivers)]
            key = f"{tag} {k}-{n}"
            arrivals.expect(key)
            started = time.perf_counter()
            error = await send(sender, key, [target.label])
            answered = time.perf_counter()
            run.sent += 1
            if error:
                run.errors.append(error)
                await arrivals.wait(key, timeout=0)
                continue
            times = await arrivals.wait(key)
            if not times:
                run.lost += 1
                continue
            run.latencies.append((times[0] - started) * 1000)
            run.answers.append((answered - started) * 1000)
            if gap:
                await asyncio.sleep(gap)

    cpu, client_cpu, started = side.server.cpu(), own_cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(sender_loop(k, s) for k, s in enumerate(side.senders[:senders])))
    run.seconds = time.perf_counter() - started
    run.server_cpu = side.server.cpu() - cpu
    run.client_cpu = own_cpu_seconds() - client_cpu
    return run


async def ping_loop(side: Side, count: int, gap: float, tag: str) -> Run:
    """`count` MCP pings from the first sender, one after the other: a request through the
    whole of a server's HTTP and MCP layers and its session check, nothing stored, nothing
    pushed. Set against a send, it splits a send's cost into the transport's and the rest."""
    run = Run()
    session = side.senders[0].session
    cpu, started = side.server.cpu(), time.perf_counter()
    for _ in range(count):
        begun = time.perf_counter()
        await session.send_ping()
        run.answers.append((time.perf_counter() - begun) * 1000)
        run.sent += 1
        if gap:
            await asyncio.sleep(gap)
    run.seconds = time.perf_counter() - started
    run.server_cpu = side.server.cpu() - cpu
    return run


@dataclass
class Combined:
    """The rounds of one measurement on one server, taken together."""

    runs: list[Run]

    @property
    def latencies(self) -> list[float]:
        return [v for run in self.runs for v in run.latencies]

    @property
    def answers(self) -> list[float]:
        return [v for run in self.runs for v in run.answers]

    @property
    def sent(self) -> int:
        return sum(run.sent for run in self.runs)

    @property
    def lost(self) -> int:
        return sum(run.lost for run in self.runs)

    @property
    def errors(self) -> list[str]:
        return [e for run in self.runs for e in run.errors]

    def rate(self) -> float:
        return self.sent / sum(run.seconds for run in self.runs)

    def cpu_ms(self) -> float:
        return sum(run.server_cpu for run in self.runs) / max(self.sent, 1) * 1000

    def client_cpu_ms(self) -> float:
        return sum(run.client_cpu for run in self.runs) / max(self.sent, 1) * 1000

    def p(self, q: float) -> float | None:
        values = self.latencies
        return percentile(values, q) if values else None

    def note(self) -> str:
        text = f"{self.sent} sends in {len(self.runs)} rounds"
        if self.lost:
            text += f", **{self.lost} pushes lost**"
        if self.errors:
            text += f", **{len(self.errors)} errors**, first: {self.errors[0]}"
        return text


@dataclass
class Row:
    """One line of the side-by-side table: agent-salon's value and the peer's."""

    measure: str
    unit: str
    salon: float | None
    peer: float | None = None
    detail: str = ""
    target: float | None = None  # for agent-salon, judged only at full size
    higher_is_better: bool = False
    load: float = field(default_factory=lambda: os.getloadavg()[0])

    @property
    def ratio(self) -> float | None:
        if self.salon is None or self.peer is None or self.peer == 0:
            return None
        return self.salon / self.peer


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def main_phase(sides: list[Side], arrivals: Arrivals, sizes: Sizes) -> list[Row]:
    """Latency with 1 in flight, then rates with 1 and 8 in flight, in alternating rounds."""
    results: dict[tuple[str, str], list[Run]] = collections.defaultdict(list)
    for side in sides:
        await warm_up(side, arrivals)
    for r in range(sizes.rounds):
        for side in sides:
            name = side.server.name
            sends = sizes.latency_sends
            results[name, "latency"].append(
                await closed_loop(side, arrivals, 1, sends, LATENCY_GAP, f"lat {r}")
            )
        for side in sides:
            name = side.server.name
            results[name, "ping"].append(
                await ping_loop(side, sizes.latency_sends, LATENCY_GAP, f"ping {r}")
            )
        for side in sides:
            name = side.server.name
            results[name, "rate1"].append(
                await closed_loop(side, arrivals, 1, sizes.latency_sends, 0, f"r1 {r}")
            )
        for side in sides:
            name = side.server.name
            results[name, "rate8"].append(
                await closed_loop(side, arrivals, sizes.senders, sizes.rate_sends, 0, f"r8 {r}")
            )
        say(f"  round {r + 1}/{sizes.rounds} done (load {loadavg()})")

    def pair(kind: str) -> tuple[Combined, Combined | None]:
        peer = results.get((PEER, kind))
        return Combined(results[SALON, kind]), Combined(peer) if peer else None

    return _latency_rows(pair, sizes) + _rate_rows(pair, sizes)


def _latency_rows(pair, sizes: Sizes) -> list[Row]:
    """Send → push latency with 1 in flight, and the server's CPU per send and per ping."""
    full = sizes.judged
    rows = []
    salon, peer = pair("latency")
    n = sizes.receivers
    for q, target in ((50, P50_TARGET_MS), (99, P99_TARGET_MS)):
        rows.append(Row(
            f"send → push latency p{q}, 1 in flight, {n} receivers", "ms", salon.p(q),
            peer.p(q) if peer else None,
            f"agent-salon: {salon.note()}, tool answer p50 "
            f"{fmt(statistics.median(salon.answers)) if salon.answers else '—'} ms; peer: "
            f"{peer.note() if peer else '—'}", target if full else None,
        ))  # fmt: skip
    rows.append(Row(
        "server CPU per send+push (isolated sends)", "ms", salon.cpu_ms(),
        peer.cpu_ms() if peer else None,
        f"client process CPU per send: agent-salon {fmt(salon.client_cpu_ms())} ms, peer "
        f"{fmt(peer.client_cpu_ms()) if peer else '—'} ms",
    ))  # fmt: skip
    sends = (salon, peer)
    salon, peer = pair("ping")
    beyond = [
        fmt(send.cpu_ms() - ping.cpu_ms()) if send and ping else "—"
        for send, ping in zip(sends, (salon, peer), strict=True)
    ]
    rows.append(Row(
        "server CPU per MCP ping (isolated: the transport, MCP and the session, no storage)",
        "ms", salon.cpu_ms(), peer.cpu_ms() if peer else None,
        f"{salon.sent} pings each; a send+push costs beyond a ping: agent-salon {beyond[0]} "
        f"ms, peer {beyond[1]} ms; ping answer p50 {fmt(statistics.median(salon.answers))} / "
        f"{fmt(statistics.median(peer.answers)) if peer else '—'} ms",
    ))  # fmt: skip
    return rows


def _rate_rows(pair, sizes: Sizes) -> list[Row]:
    """Sends per second, their latency and the server's CPU, with 1 and with the
    senders in flight."""
    rows = []
    for kind, label in (("rate1", "1 in flight"), ("rate8", f"{sizes.senders} in flight")):
        salon, peer = pair(kind)
        rows.append(Row(
            f"sends/s, {label}", "sends/s", salon.rate(), peer.rate() if peer else None,
            f"agent-salon: {salon.note()}; peer: {peer.note() if peer else '—'}",
            higher_is_better=True,
        ))  # fmt: skip
        for q in (50, 99):
            rows.append(Row(f"send → push latency p{q}, {label}", "ms", salon.p(q),
                            peer.p(q) if peer else None))  # fmt: skip
        rows.append(Row(
            f"server CPU per send+push, {label}", "ms", salon.cpu_ms(),
            peer.cpu_ms() if peer else None,
            f"server busy {fmt(salon.cpu_ms() * salon.rate() / 10)} % of a core (agent-salon), "
            f"{fmt(peer.cpu_ms() * peer.rate() / 10) if peer else '—'} % (peer); client "
            f"process CPU per send {fmt(salon.client_cpu_ms())} / "
            f"{fmt(peer.client_cpu_ms()) if peer else '—'} ms",
        ))  # fmt: skip
    return rows


async def notify_run(side: Side, arrivals: Arrivals, posters: int, seconds: float) -> dict:
    """POST /notify for `seconds` from `posters` concurrent posters, each posting again as
    soon as its 202 came (not waiting for the push); the pushes are counted as they come."""
    import httpx

    from bench.common import http_client

    receivers = side.receivers
    url = f"{side.server.url}/notify?label=bench-poster"
    sent: dict[str, float] = {}
    stored = 0
    errors: list[str] = []
    async with http_client() as client:
        cpu, client_cpu = side.server.cpu(), own_cpu_seconds()
        started = time.perf_counter()
        deadline = started + seconds

        async def poster(k: int) -> None:
            nonlocal stored
            n = 0
            while time.perf_counter() < deadline:
                key = f"notify {posters} {k}-{n}"
                target = receivers[(k * 13 + n) % len(receivers)]
                n += 1
                arrivals.expect(key)
                sent[key] = time.perf_counter()
                try:
                    response = await client.post(
                        url, json={"content": key, "type": "QUESTION", "to": [target.label]}
                    )
                except httpx.HTTPError as exc:
                    response, problem = None, f"{type(exc).__name__}: {exc}"
                if response is None or response.status_code != 202:
                    if response is not None:
                        problem = f"{response.status_code} {response.text[:120]}"
                    errors.append(problem)
                    del sent[key]
                    await arrivals.wait(key, timeout=0)
                    continue
                if time.perf_counter() <= deadline:
                    stored += 1

        await asyncio.gather(*(poster(k) for k in range(posters)))
        posted_until = time.perf_counter()
        latencies, last = [], started
        for key, at in sent.items():
            left = max(0.0, posted_until + PUSH_TIMEOUT - time.perf_counter())
            times = await arrivals.wait(key, timeout=left)
            if times:
                latencies.append((times[0] - at) * 1000)
                last = max(last, times[0])
        cpu = side.server.cpu() - cpu
        client_cpu = own_cpu_seconds() - client_cpu
        elapsed = time.perf_counter() - started
    return {
        "stored_per_s": stored / seconds,
        "pushed_per_s": len(latencies) / (last - started) if last > started else 0.0,
        "sent": len(sent),
        "pushed": len(latencies),
        "latencies": latencies,
        "errors": errors,
        "cpu_ms": cpu / max(len(sent), 1) * 1000,
        # This process posts and receives every push: its own ceiling, on the other core.
        "client_cpu_ms": client_cpu / max(len(sent), 1) * 1000,
        "client_busy": client_cpu / elapsed,
        "server_busy": cpu / elapsed,
    }


async def notify_phase(salon: Side, arrivals: Arrivals, sizes: Sizes) -> list[Row]:
    rows = []
    full = sizes.judged
    for posters in (1, sizes.senders):
        result = await notify_run(salon, arrivals, posters, sizes.notify_seconds)
        rate = min(result["stored_per_s"], result["pushed_per_s"])
        lat = result["latencies"]
        detail = (
            f"{sizes.notify_seconds:.0f} s; {result['sent']} posted, {result['pushed']} pushed "
            f"(stored {fmt(result['stored_per_s'])}/s, pushed {fmt(result['pushed_per_s'])}/s); "
            f"POST → push p50 {fmt(statistics.median(lat)) if lat else '—'} / p99 "
            f"{fmt(percentile(lat, 99)) if lat else '—'} ms; server CPU per entry "
            f"{fmt(result['cpu_ms'])} ms, busy {result['server_busy'] * 100:.0f} % of a core; "
            f"the posting and receiving client process {fmt(result['client_cpu_ms'])} ms per "
            f"entry, busy {result['client_busy'] * 100:.0f} %"
        )
        if result["errors"]:
            detail += f"; **{len(result['errors'])} failed**, first: {result['errors'][0]}"
        rows.append(Row(f"/notify stored and pushed, {posters} poster(s) (agent-salon only)",
                        "entries/s", rate, None, detail, NOTIFY_TARGET if full else None,
                        higher_is_better=True))  # fmt: skip
        say(f"  /notify with {posters} poster(s): {rate:.0f}/s")
    return rows


async def healthz_phase(servers: list[Server], sizes: Sizes) -> list[Row]:
    from bench.common import http_client

    cpu: dict[str, float] = collections.defaultdict(float)
    wall: dict[str, float] = collections.defaultdict(float)
    rounds = 2
    per_round = sizes.healthz_requests // rounds
    async with http_client() as client:
        for server in servers:  # warm-up: connection and first-request costs
            for _ in range(20):
                (await client.get(f"{server.url}/healthz")).raise_for_status()
        for _ in range(rounds):
            for server in servers:
                before, started = server.cpu(), time.perf_counter()
                for _ in range(per_round):
                    response = await client.get(f"{server.url}/healthz")
                    response.raise_for_status()
                wall[server.name] += time.perf_counter() - started
                cpu[server.name] += server.cpu() - before
    total = per_round * rounds
    peer = cpu[PEER] / total * 1000 if PEER in cpu else None
    detail = (
        f"{total} sequential GETs each; wall per request {fmt(wall[SALON] / total * 1000)} ms "
        f"(agent-salon), {fmt(wall[PEER] / total * 1000) if PEER in wall else '—'} ms (peer)"
    )
    return [Row("/healthz server CPU per request", "ms", cpu[SALON] / total * 1000, peer, detail)]


class FanoutReceivers:
    """`count` receiving SDK sessions on one server, spread over FANOUT_WORKERS client
    processes (`--fanout-worker`), so that reading 1,000 pushes is not one process's
    work: with a single client process its CPU, not the server, set the last push's time.
    Arrival times are time.perf_counter() values, one clock (CLOCK_MONOTONIC) for every
    process of the machine."""

    def __init__(self, server: Server, count: int, workers: int) -> None:
        shares = [count // workers + (1 if i < count % workers else 0) for i in range(workers)]
        self.processes = [
            subprocess.Popen(
                [sys.executable, "-m", "bench.side_by_side", "--fanout-worker", server.url,
                 str(share), f"fan-{server.name}-{i}"],
                cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )
            for i, share in enumerate(shares) if share
        ]  # fmt: skip
        self.shares = [share for share in shares if share]

    def wait_ready(self) -> None:
        for process in self.processes:
            line = process.stdout.readline().split()
            if line[:1] != ["ready"]:
                raise RuntimeError(f"a fan-out client process failed: {line}")

    def collect(self, key: str, timeout: float) -> tuple[list[float], float]:
        """Every process's arrival times of `key`, and their CPU seconds since the last."""
        for process, share in zip(self.processes, self.shares, strict=True):
            process.stdin.write(f"{share} {timeout} {key}\n")
            process.stdin.flush()
        times, cpu = [], 0.0
        for process in self.processes:
            answer = json.loads(process.stdout.readline())
            times += answer["times"]
            cpu += answer["cpu"]
        return sorted(times), cpu

    def close(self) -> None:
        for process in self.processes:
            with contextlib.suppress(OSError):
                process.stdin.close()
        for process in self.processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()


async def fanout_worker(url: str, count: int, prefix: str) -> None:
    """A fan-out client process: `count` SDK sessions; then, per line `N TIMEOUT KEY` on
    stdin, the arrival times of N pushes of KEY (fewer if TIMEOUT passed) as JSON."""
    server = Server(SALON if SALON in prefix else PEER, url, None)
    arrivals = Arrivals()
    fleet = Fleet(server, arrivals)
    await fleet.connect([f"{prefix}-r{i}" for i in range(count)])
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    cpu = own_cpu_seconds()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        wanted, timeout, key = line.rstrip("\n").split(" ", 2)
        if key not in arrivals.wanted:
            arrivals.expect(key, int(wanted))
        times = await arrivals.wait(key, timeout=float(timeout))
        now = own_cpu_seconds()
        print(json.dumps({"times": times, "cpu": now - cpu}), flush=True)
        cpu = now
    await fleet.close()


async def fanout_phase(arrivals: Arrivals, sizes: Sizes, servers: list[Server]) -> list[Row]:
    """One broadcast QUESTION to `fanout_streams` live SDK sessions, alternating servers.

    Times are from the call: its answer, and the first, median and last push. agent-salon
    answers once the entry is stored and pushes after; the peer pushes, then answers. The
    receivers live in FANOUT_WORKERS client processes (FanoutReceivers)."""
    n = sizes.fanout_streams
    results: dict[str, list[dict]] = collections.defaultdict(list)
    workers = FANOUT_WORKERS if n >= 200 else 1
    receivers = {server.name: FanoutReceivers(server, n, workers) for server in servers}
    try:
        for fleet in receivers.values():
            fleet.wait_ready()
        say(f"  fan-out: {n} receiving sessions on each server, in {workers} processes")
        async with contextlib.AsyncExitStack() as stack:
            sides = [await open_side(stack, server, arrivals, 0, 1, f"fan-{server.name}")
                     for server in servers]  # fmt: skip
            for r in range(-1, sizes.fanout_rounds):  # round -1 warms up
                for side in sides:
                    await asyncio.sleep(sizes.fanout_pause)
                    key = f"all hands {side.server.name} {r}"
                    cpu = side.server.cpu()
                    started = time.perf_counter()
                    error = await send(side.senders[0], key, None)
                    answered = time.perf_counter()
                    times, client_cpu = await asyncio.to_thread(
                        receivers[side.server.name].collect, key, 120
                    )
                    if r < 0:
                        continue
                    results[side.server.name].append({
                        "answer": (answered - started) * 1000,
                        "first": (times[0] - started) * 1000 if times else None,
                        "median": (statistics.median(times) - started) * 1000 if times else None,
                        "last": (times[-1] - started) * 1000 if times else None,
                        "received": len(times),
                        "error": error,
                        "cpu": (side.server.cpu() - cpu) * 1000,
                        "client_cpu": client_cpu,
                    })  # fmt: skip
                say(f"  fan-out round {r + 1}/{sizes.fanout_rounds} done")
    finally:
        for fleet in receivers.values():
            fleet.close()

    def median(name: str, key: str) -> float | None:
        values = [x[key] for x in results.get(name, []) if x[key] is not None]
        return statistics.median(values) if values else None

    def describe(name: str) -> str:
        runs = results.get(name, [])
        if not runs:
            return "—"
        parts = [f"answer {fmt(x['answer'])}, first {fmt(x['first'])}, median "
                 f"{fmt(x['median'])}, last {fmt(x['last'])} ms ({x['received']}/{n})"
                 for x in runs]  # fmt: skip
        errors = [x["error"] for x in runs if x["error"]]
        cpu = statistics.median(x["cpu"] for x in runs)
        client = statistics.median(x["client_cpu"] for x in runs) * 1000
        text = (f"{name}, from the call: " + "; ".join(parts) + f"; server CPU per broadcast "
                f"{fmt(cpu)} ms, receiving client processes {fmt(client)} ms in all")  # fmt: skip
        if errors:
            text += f"; **errors**: {errors[0]}"
        return text

    salon_tail = None
    if median(SALON, "last") is not None:
        tails = [x["last"] - x["answer"] for x in results[SALON] if x["last"] is not None]
        salon_tail = statistics.median(tails)
    rounds = sizes.fanout_rounds
    return [
        Row(f"fan-out: broadcast QUESTION to {n} live streams, send's answer → last push "
            f"(median of {rounds})", "ms", salon_tail, None,
            "agent-salon only: the peer pushes before it answers"),
        Row(f"fan-out: broadcast QUESTION to {n} live streams, call → last push "
            f"(median of {rounds})", "ms", median(SALON, "last"), median(PEER, "last"),
            f"{describe(SALON)}. {describe(PEER)}"),
        Row(f"fan-out: call → the send's answer, {n} streams", "ms", median(SALON, "answer"),
            median(PEER, "answer")),
        Row(f"fan-out: server CPU per broadcast to {n} streams", "ms", median(SALON, "cpu"),
            median(PEER, "cpu"), f"receivers in {workers} client processes; their CPU per "
            "broadcast is in the detail of the call → last push row"),
    ]  # fmt: skip


# ------------------------------------------------------------------ idle streams


async def _http(
    host: str, port: int, method: str, target: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, dict[str, str], asyncio.StreamReader, asyncio.StreamWriter]:
    """One HTTP/1.1 request on a connection of its own; returns once the response's head
    is read (status, headers with lower-case names, and the connection)."""
    reader, writer = await asyncio.open_connection(host, port)
    head = [f"{method} {target} HTTP/1.1", f"host: {host}:{port}",
            *(f"{name}: {value}" for name, value in headers.items())]  # fmt: skip
    if method == "POST":
        head += [f"content-length: {len(body)}", "connection: close"]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    raw = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(raw[0].split(" ", 2)[1])
    fields = {}
    for line in raw[1:]:
        name, _, value = line.partition(":")
        if name:
            fields[name.strip().lower()] = value.strip()
    return status, fields, reader, writer


async def _post(host: str, port: int, target: str, headers: dict[str, str], message: dict) -> dict:
    """POST one JSON-RPC message; read the whole answer; returns its headers."""
    status, fields, reader, writer = await _http(
        host, port, "POST", target, headers, json.dumps(message).encode()
    )
    try:
        if status >= 300:
            raise RuntimeError(f"POST answered {status}")
        if "content-length" in fields:
            await reader.readexactly(int(fields["content-length"]))
        elif fields.get("transfer-encoding") == "chunked":
            await reader.readuntil(b"0\r\n\r\n")
        return fields
    finally:
        writer.close()


async def idle_worker(url: str, count: int, prefix: str) -> None:
    """A client process of the idle test: `count` sessions opened by hand (initialize,
    notifications/initialized, each POST on a connection of its own, then a GET held
    open and read), on raw asyncio connections: an HTTP client's connection pool scans
    its connections on every request, which made opening thousands of streams from one
    process quadratic. Held until stdin closes. Prints one line, 'ready OPEN FAILED
    [first failure]', when all are open."""
    raise_nofile()
    address = urlsplit(url)
    host, port = address.hostname or "127.0.0.1", address.port or 80
    stop = asyncio.Event()
    opened = 0
    failed: list[str] = []
    gate = asyncio.Semaphore(16)
    base = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench-idle", "version": "0"}}}  # fmt: skip
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    # inbox: its answer stays small however many seats there are (rooms lists them all,
    # past what one read of this raw client takes once a room has ~1,000 seats).
    first_call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "inbox", "arguments": {"limit": 1}}}  # fmt: skip

    async def hold(label: str, ready: asyncio.Future) -> None:
        nonlocal opened
        target = f"/mcp?label={label}"
        writer = None
        try:
            async with gate:
                answer = await _post(host, port, target, base, initialize)
                session = {"mcp-session-id": answer["mcp-session-id"],
                           "mcp-protocol-version": "2025-11-25"}  # fmt: skip
                await _post(host, port, target, {**base, **session}, initialized)
                # agent-salon makes the seat at the first tool call (the peer answers
                # this unknown tool with an error: the same round trip).
                await _post(host, port, target, {**base, **session}, first_call)
                status, _, reader, writer = await _http(
                    host, port, "GET", target, {**session, "accept": "text/event-stream"}
                )
                if status != 200:
                    raise RuntimeError(f"GET answered {status}")
            opened += 1
            ready.set_result(None)
            drain = asyncio.ensure_future(_drain(reader))
            await stop.wait()
            drain.cancel()
        except Exception as exc:
            if not ready.done():
                failed.append(f"{type(exc).__name__}: {exc}")
                ready.set_result(None)
        finally:
            if writer is not None:
                writer.close()

    readies = [asyncio.get_running_loop().create_future() for _ in range(count)]
    tasks = [asyncio.create_task(hold(f"{prefix}-{i}", readies[i])) for i in range(count)]
    await asyncio.gather(*readies)
    print(f"ready {opened} {len(failed)} {failed[0] if failed else ''}", flush=True)
    await asyncio.to_thread(sys.stdin.read)
    stop.set()
    await asyncio.wait(tasks, timeout=60)


async def _drain(reader: asyncio.StreamReader) -> None:
    while await reader.read(65536):
        pass


def idle_measure(server: Server, streams: int, seconds: float) -> dict:
    before = server.rss_mib()
    started = time.monotonic()
    processes = IDLE_WORKERS if streams >= 2000 else 1
    per = [streams // processes + (1 if i < streams % processes else 0)
           for i in range(processes)]  # fmt: skip
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.side_by_side", "--idle-worker", server.url, str(count),
             f"idle{i}"],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        for i, count in enumerate(per) if count
    ]  # fmt: skip
    try:
        opened, failures = 0, []
        for worker in workers:
            line = worker.stdout.readline().split(maxsplit=3)
            if not line or line[0] != "ready":
                raise RuntimeError(f"an idle client process failed: {line}")
            opened += int(line[1])
            if int(line[2]):
                failures.append(f"{line[2]} failed ({line[3] if len(line) > 3 else ''})")
        connect_s = time.monotonic() - started
        time.sleep(2)
        rss_open = server.rss_mib()
        cpu, held_from = server.cpu(), time.monotonic()
        time.sleep(seconds)
        held = time.monotonic() - held_from
        cpu = server.cpu() - cpu
        rss_held = server.rss_mib()
    finally:
        for worker in workers:
            with contextlib.suppress(OSError):
                worker.stdin.close()
        for worker in workers:
            try:
                worker.wait(90)
            except subprocess.TimeoutExpired:
                worker.kill()
    return {
        "opened": opened,
        "failures": failures,
        "connect_s": connect_s,
        "rss_before": before,
        "rss": max(rss_open, rss_held),
        "cpu_percent": cpu / held * 100,
        "held": held,
    }


def idle_phase(sizes: Sizes) -> list[Row]:
    results = {}
    for start in (salon_server, peer_server):
        with start() as server:
            say(f"  idle: opening {sizes.idle_streams} streams on {server.name}")
            results[server.name] = idle_measure(server, sizes.idle_streams, sizes.idle_seconds)
            say(f"  idle {server.name}: {results[server.name]}")

    def describe(name: str) -> str:
        x = results[name]
        text = (f"{name}: {x['opened']} open, connected in {x['connect_s']:.0f} s, RSS "
                f"{x['rss_before']:.0f} MiB before → {x['rss']:.0f} MiB")  # fmt: skip
        if x["failures"]:
            text += f", **{'; '.join(x['failures'])}**"
        return text

    n = sizes.idle_streams
    s, p = results[SALON], results[PEER]
    processes = IDLE_WORKERS if n >= 2000 else 1
    note = (f"{describe(SALON)}; {describe(PEER)}; sessions opened by hand on raw connections from "
            f"{processes} client process(es), not the SDK")  # fmt: skip
    return [
        Row(f"idle: RSS with {n} open streams", "MiB", s["rss"], p["rss"], note),
        Row(f"idle: memory per stream, {n} streams", "KiB",
            (s["rss"] - s["rss_before"]) * 1024 / n, (p["rss"] - p["rss_before"]) * 1024 / n),
        Row(f"idle: server CPU with {n} streams open, over {sizes.idle_seconds:.0f} s",
            "% of a core", s["cpu_percent"], p["cpu_percent"]),
        Row(f"idle: opening {n} sessions (initialize, initialized, GET), wall per session",
            "ms", s["connect_s"] / n * 1000, p["connect_s"] / n * 1000,
            "16 at a time per client process"),
    ]  # fmt: skip


# ------------------------------------------------------------------ the run


async def streams_phases(sizes: Sizes, only: set[str]) -> list[Row]:
    """main, notify and healthz on one pair of servers."""
    rows: list[Row] = []
    arrivals = Arrivals()
    with salon_server() as salon, peer_server() as peer:
        async with contextlib.AsyncExitStack() as stack:
            n, senders = sizes.receivers, sizes.senders
            sides = [
                await open_side(stack, server, arrivals, n, senders, server.name)
                for server in (salon, peer)
            ]
            if "main" in only:
                rows += await main_phase(sides, arrivals, sizes)
            if "notify" in only:
                if "main" not in only:
                    await warm_up(sides[0], arrivals)
                rows += await notify_phase(sides[0], arrivals, sizes)
        if "healthz" in only:
            rows += await healthz_phase([salon, peer], sizes)
    return rows


async def fanout_servers(sizes: Sizes) -> list[Row]:
    with salon_server() as salon, peer_server() as peer:
        return await fanout_phase(Arrivals(), sizes, [salon, peer])


def run_all(sizes: Sizes, only: set[str]) -> list[Row]:
    rows: list[Row] = []
    started = time.monotonic()
    if only & {"main", "notify", "healthz"}:
        say(f"streams: {sizes.receivers} receivers + {sizes.senders} senders per server")
        rows += asyncio.run(streams_phases(sizes, only))
        say(f"  ({time.monotonic() - started:.0f} s so far)")
    if "fanout" in only:
        say(f"fan-out: {sizes.fanout_streams} streams per server")
        rows += asyncio.run(fanout_servers(sizes))
        say(f"  ({time.monotonic() - started:.0f} s so far)")
    if "idle" in only:
        rows += idle_phase(sizes)
        say(f"  ({time.monotonic() - started:.0f} s so far)")
    return rows


def ratio_text(row: Row) -> str:
    if row.ratio is None:
        return "—"
    times = "\u00d7"  # the multiplication sign
    return f"{row.ratio:.1f}{times}" if row.ratio < 100 else f"{row.ratio:,.0f}{times}"


def markdown(rows: list[Row], header: str) -> str:
    lines = [
        header,
        "",
        "| measure | agent-salon | peer (SDK low-level) | agent-salon / peer | target | load | "
        "detail |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        target = "—"
        if row.target is not None:
            sign = "≥" if row.higher_is_better else "≤"
            met = (row.salon is not None and (row.salon >= row.target if row.higher_is_better
                                              else row.salon <= row.target))  # fmt: skip
            target = f"{sign} {fmt(row.target)} ({'met' if met else '**missed**'})"
        peer = f"{fmt(row.peer)} {row.unit}" if row.peer is not None else "—"
        salon = f"{fmt(row.salon)} {row.unit}" if row.salon is not None else "—"
        lines.append(f"| {row.measure} | {salon} | {peer} | {ratio_text(row)} | {target} | "
                     f"{row.load:.2f} | {row.detail} |")  # fmt: skip
    return "\n".join(lines)


def figures(rows: list[Row]) -> list[Figure]:
    """The rows as the suite's figures (agent-salon's value; the peer's in the detail)."""
    out = []
    for row in rows:
        detail = row.detail
        if row.peer is not None:
            detail = f"peer {fmt(row.peer)} {row.unit}, agent-salon/peer {ratio_text(row)}" + (
                f"; {detail}" if detail else ""
            )
        value = round(row.salon, 2) if row.salon is not None else None
        out.append(Figure(f"Side by side: {row.measure}", value, row.unit, row.target,
                          row.higher_is_better, detail, row.load))  # fmt: skip
    return out


def run(quick: bool, only: set[str] | None = None) -> list[Figure]:
    """The suite's entry (bench/__main__.py)."""
    return figures(run_all(QUICK if quick else FULL, only or set(PHASES)))


# ------------------------------------------------------------------ profile and SQL


PROFILE_RATE = 200  # samples per second


@contextlib.contextmanager
def spied(server: Server, path: Path, *, gil: bool) -> Iterator[None]:
    """py-spy records the server while the block runs, as raw collapsed stacks per thread.
    --nonblocking: the server is not paused for each sample (paused, it spent about twice
    the CPU per send). With --gil only the thread holding the GIL is sampled: Python's CPU,
    without the waits in fsync or SQLite (which release the GIL)."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        raise SystemExit(f"no {spy}: pip install py-spy")
    command = [
        str(spy),
        "record",
        "--pid",
        str(server.pid),
        "--output",
        str(path),
        "--format",
        "raw",
        "--threads",
        "--nonblocking",
        "--rate",
        str(PROFILE_RATE),
    ]
    if gil:
        command.append("--gil")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)  # attached before the first request
    try:
        yield
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        if not path.exists():
            raise RuntimeError(f"py-spy wrote nothing: {process.stderr.read().decode()[-500:]}")


async def profile_run(sizes: Sizes, sends: int) -> None:
    """agent-salon alone, recorded by py-spy during 1-in-flight sends and during /notify
    with 8 posters, each twice: --gil (the CPU map) and without (wall time in each
    thread, waits on fsync included); then (--gil) during broadcasts to every stream.
    Prints where the samples went, in ms per send (per broadcast)."""
    from bench.profile_summary import cumulative, summarize

    arrivals = Arrivals()
    out = Path(tempfile.gettempdir())
    done: list[tuple[Path, int, str]] = []
    with salon_server() as salon:
        async with contextlib.AsyncExitStack() as stack:
            side = await open_side(stack, salon, arrivals, sizes.receivers, sizes.senders, "prof")
            await warm_up(side, arrivals)
            for gil in (True, False):
                kind = "gil" if gil else "wall"
                path = out / f"salon-side-profile-send-1-{kind}.txt"
                with spied(salon, path, gil=gil):
                    run = await closed_loop(side, arrivals, 1, sends, LATENCY_GAP, f"prof {kind}")
                cpu = Combined([run]).cpu_ms()
                done.append((path, run.sent, f"MCP send, 1 in flight: {cpu:.1f} ms CPU per send"))
                path = out / f"salon-side-profile-notify-8-{kind}.txt"
                with spied(salon, path, gil=gil):
                    result = await notify_run(side, arrivals, sizes.senders, sizes.notify_seconds)
                cpu = result["cpu_ms"]
                done.append(
                    (path, result["sent"], f"/notify, 8 posters: {cpu:.1f} ms CPU per entry")
                )
            path = out / "salon-side-profile-broadcast-gil.txt"
            rounds, woken = 10, len(side.receivers) + len(side.senders) - 1
            cpu = salon.cpu()
            with spied(salon, path, gil=True):
                for r in range(rounds):
                    key = f"prof broadcast {r}"
                    arrivals.expect(key, woken)
                    assert not await send(side.senders[0], key, None)
                    await arrivals.wait(key, timeout=60)
                    await asyncio.sleep(0.5)
            cpu = (salon.cpu() - cpu) / rounds * 1000
            what = f"broadcast QUESTION to {woken} streams: {cpu:.0f} ms CPU per broadcast"
            done.append((path, rounds, what))
    for path, units, what in done:
        print(f"\n## {path.name}: {what}; {units} sends\n")
        print(summarize(path, 20))
        print(cumulative(path, 50, per_unit=(PROFILE_RATE, units)))


async def sql_run(width: int | None) -> None:
    """Every SQL statement the daemon runs for one `send` + push, one /notify + push, and
    the opening of one MCP session by an SDK client, from SQLite's own trace
    (bench/settings_sql_log.py), between two /healthz markers (their `SELECT 1`).
    Statements are cut at `width` characters (None: in full)."""
    from bench.common import http_client

    log = Path(tempfile.mkdtemp(prefix="salon-sql-")) / "sql.log"
    arrivals = Arrivals()
    extra = {"DJANGO_SETTINGS_MODULE": "bench.settings_sql_log", "SALON_BENCH_SQL_LOG": str(log)}
    with salon_server(**extra) as salon:
        async with contextlib.AsyncExitStack() as stack, http_client() as client:
            side = await open_side(stack, salon, arrivals, 2, 1, "sql")
            await warm_up(side, arrivals)
            target = side.receivers[0].label

            async def one_send() -> None:
                arrivals.expect("sql send")
                assert not await send(side.senders[0], "sql send", [target])
                assert await arrivals.wait("sql send")

            async def one_notify() -> None:
                arrivals.expect("sql notify")
                response = await client.post(
                    f"{salon.url}/notify?label=sql-poster",
                    json={"content": "sql notify", "type": "QUESTION", "to": [target]},
                )
                assert response.status_code == 202, response.text
                assert await arrivals.wait("sql notify")

            opener = Fleet(salon, arrivals)
            stack.push_async_callback(opener.close)
            opened = 0

            async def one_session() -> None:
                nonlocal opened
                opened += 1
                await opener.connect([f"sql-new{opened}"])

            actions = (("MCP send tool", one_send), ("/notify", one_notify),
                       ("a new session (initialize, initialized, GET)", one_session))  # fmt: skip
            for name, action in actions:
                for _ in range(2):  # warm (the first /notify of a label creates its seat)
                    await action()
                await client.get(f"{salon.url}/healthz")
                await asyncio.sleep(0.3)
                mark = log.stat().st_size
                await action()
                await asyncio.sleep(0.5)  # the delivery record is written up to 0.2 s later
                await client.get(f"{salon.url}/healthz")
                lines = log.read_text()[mark:].splitlines()
                statements = [line for line in lines if not line.endswith(" SELECT 1")]
                print(f"\n### {name}: {len(statements)} statements\n")
                for n, line in enumerate(statements, 1):
                    _at, thread, sql = line.split(" ", 2)
                    print(f"{n:3}. [{thread}] {sql[:width]}")


# ------------------------------------------------------------------ command line


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--idle-worker":
        url, count, prefix = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        asyncio.run(idle_worker(url, count, prefix))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--fanout-worker":
        url, count, prefix = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        raise_nofile()
        asyncio.run(fanout_worker(url, count, prefix))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the smoke-sized version")
    parser.add_argument("--only", help=f"comma-separated, of: {', '.join(PHASES)}")
    parser.add_argument("--json", type=Path, help="write the figures as JSON to this file")
    parser.add_argument("--markdown", type=Path, help="write the markdown section to this file")
    parser.add_argument("--idle-streams", type=int, help="streams of the idle test (10,000)")
    parser.add_argument("--profile", action="store_true", help="py-spy of agent-salon instead")
    parser.add_argument("--sql", action="store_true", help="list the SQL of one send instead")
    parser.add_argument("--full-sql", action="store_true", help="with --sql: statements uncut")
    args = parser.parse_args()
    only = {p.strip() for p in args.only.split(",")} if args.only else set(PHASES)
    if only - set(PHASES):
        parser.error(f"unknown phase {', '.join(only - set(PHASES))}; one of {', '.join(PHASES)}")
    own_environment()
    raise_nofile()
    sizes = QUICK if args.quick else FULL
    if args.idle_streams:
        sizes = dataclasses.replace(sizes, idle_streams=args.idle_streams)
    if args.profile:
        asyncio.run(profile_run(sizes, 60 if args.quick else 400))
        return
    if args.sql:
        asyncio.run(sql_run(None if args.full_sql else 300))
        return
    where, load_before, started = machine(), loadavg(), time.monotonic()
    rows = run_all(sizes, only)
    took = time.monotonic() - started
    command = "python -m bench.side_by_side" + (" --quick" if args.quick else "")
    if args.only:
        command += f" --only {args.only}"
    header = "\n".join([
        f"## Side by side: agent-salon and a plain MCP push server, {now_utc()}"
        f"{' (quick)' if args.quick else ''}",
        "",
        f"`{command}`, {took:.0f} s. Machine: {where}. Load average (1/5/15 min) "
        f"{load_before} at the start, {loadavg()} at the end; each row carries the 1-minute "
        "load average when it was taken. Peer: bench/peer_server.py (mcp SDK "
        f"{_version('mcp')} low-level Server + StreamableHTTPSessionManager, uvicorn "
        f"{_version('uvicorn')}); agent-salon: `python -m salon.cli serve`, one daphne "
        "process, fresh SQLite store (synchronous=FULL as shipped).",
    ])  # fmt: skip
    text = markdown(rows, header)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.json:
        write_json(figures(rows), args.json)
    print("\n" + table(figures(rows)), file=sys.stderr)


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


if __name__ == "__main__":
    main()
