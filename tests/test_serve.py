"""`salon serve`: a real daphne process, started and stopped the way a user does it."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import sqlite3
import subprocess
import time

import httpx
import pytest

from tests.support import Daemon, drop_store, free_port, run_salon, salon_cmd, salon_env

pytestmark = pytest.mark.slow


def test_serve_answers_healthz_with_ok_and_db_ok(daemon):
    response = httpx.get(daemon.url + "/healthz", timeout=5)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {"ok": True, "db": "ok"}


def test_the_banner_names_the_address_and_where_the_admin_is(daemon):
    log = daemon.log()
    assert f"agent-salon listening on http://127.0.0.1:{daemon.port}" in log
    assert f"http://127.0.0.1:{daemon.port}/admin/" in log
    assert "Ctrl-C" in log


def test_the_admin_login_page_is_served(daemon):
    response = httpx.get(daemon.url + "/admin/login/", timeout=5)
    assert response.status_code == 200
    assert "csrfmiddlewaretoken" in response.text


def test_ctrl_c_stops_serve_with_exit_code_0_and_no_traceback(daemon):
    assert daemon.stop(signal.SIGINT) == 0
    assert "Traceback" not in daemon.log()
    with pytest.raises(httpx.ConnectError):
        httpx.get(daemon.url + "/healthz", timeout=2)


def test_sigterm_stops_serve_cleanly_too(daemon):
    # What systemd, docker and a process supervisor send.
    assert daemon.stop(signal.SIGTERM) == 0
    assert "Traceback" not in daemon.log()


def test_ctrl_c_stops_serve_even_when_started_with_sigint_ignored(tmp_path, env):
    """REGRESSION: 2026-11-30 — `salon serve &` from a shell script (no job control)
    inherits SIGINT as ignored; daphne then kept running after `kill -INT`, 5 s and
    counting. `salon serve` now takes SIGINT back."""
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(
        salon_cmd("serve", "--port", str(port)),
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        _wait_for_health(f"http://127.0.0.1:{port}", process)
        process.send_signal(signal.SIGINT)
        assert process.wait(15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


def test_serve_applies_migrations_before_it_listens(tmp_path):
    # The embedded default, on a SQLite file that does not exist yet.
    env = salon_env(tmp_path, DATABASE_URL="", REDIS_URL="")
    server = Daemon(env=env, cwd=tmp_path).start()
    try:
        with sqlite3.connect(env["AGENT_SALON_DB"]) as conn:
            rooms = [name for (name,) in conn.execute("SELECT name FROM bus_room")]
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        assert server.stop() == 0
    assert rooms == ["salon"]


@pytest.mark.parametrize("attempt", [1, 2, 3])
def test_two_serves_started_together_on_a_fresh_sqlite_store_both_come_up(tmp_path, attempt):
    """First use of a store is under a lock: the second `salon serve` waits for the first
    one's migrations instead of running them too (`table "bus_agent" already exists`)."""
    env = salon_env(tmp_path, DATABASE_URL="", REDIS_URL="")
    servers = [Daemon(env=env, cwd=tmp_path).launch() for _ in range(2)]
    try:
        for server in servers:
            server.wait_ready(timeout=90)
    finally:
        codes = [server.stop() for server in servers]
    logs = "".join(server.log() for server in servers)
    assert "already exists" not in logs and "Traceback" not in logs, logs[-3000:]
    assert codes == [0, 0], logs[-3000:]


def test_serve_listens_on_agent_salon_bind_and_port_from_the_environment(tmp_path, env):
    port = free_port()
    env = {**env, "AGENT_SALON_BIND": "127.0.0.1", "AGENT_SALON_PORT": str(port)}
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(
        salon_cmd("serve"),
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait_for_health(f"http://127.0.0.1:{port}", process)
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(15) == 0
    assert f"listening on http://127.0.0.1:{port}" in (tmp_path / "serve.log").read_text()


def test_a_port_already_in_use_is_one_line_before_any_banner_and_exit_1(tmp_path, env):
    """REGRESSION: 2026-12-01 — the banner said "listening" before the bind failed, and
    the refusal took several lines."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_salon("serve", "--port", str(port), env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 1
    assert done.stdout == ""  # no banner
    assert done.stderr.count("\n") == 1
    assert f"cannot listen on 127.0.0.1:{port}: the address is in use" in done.stderr


@pytest.mark.django_db
def test_a_non_loopback_bind_with_no_tokens_issued_prints_a_loud_warning():
    from salon.management.commands.serve import Command

    out, err = io.StringIO(), io.StringIO()
    Command(stdout=out, stderr=err).print_banner("0.0.0.0", 9315)
    assert "listening on http://0.0.0.0:9315" in out.getvalue()
    assert "WARNING" in err.getvalue()
    assert "salon token issue" in err.getvalue()


@pytest.mark.django_db
def test_a_loopback_bind_prints_no_warning():
    from salon.management.commands.serve import Command

    out, err = io.StringIO(), io.StringIO()
    Command(stdout=out, stderr=err).print_banner("127.0.0.1", 9315)
    assert err.getvalue() == ""


def _wait_for_health(url: str, process: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "salon serve exited early"
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url}/healthz did not answer within {timeout}s")


# -- writes (patches.daphne.write_soon_transport) ---------------------------------------


def test_a_connection_close_request_is_answered_and_the_connection_closed(daemon):
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        received = b""
        while chunk := conn.recv(65536):  # b"" once the daemon has closed its side
            received += chunk

    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert body == b'{"ok": true, "db": "ok"}'


def test_pushes_held_back_by_a_reader_that_stopped_reading_all_arrive_once_it_reads(daemon):
    """Far more than the sockets' buffers hold: the daemon writes what the kernel takes and
    keeps the rest until the stalled reader reads again, each push whole and in order."""
    import asyncio

    from tests.mcp_helpers import RawSession

    pushes, size = 40, 60_000

    async def scenario() -> list[str]:
        async with httpx.AsyncClient(timeout=30) as client:
            session = await RawSession(client, daemon.url, "label=slow").open()
            seat = await session.seat()
            stalled = socket.socket()
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.connect(("127.0.0.1", daemon.port))
            reader, writer = await asyncio.open_connection(sock=stalled)
            writer.write(
                f"GET /mcp?label=slow HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Accept: text/event-stream\r\nMcp-Session-Id: {session.session_id}\r\n"
                f"Mcp-Protocol-Version: 2025-11-25\r\n\r\n".encode()
            )
            await writer.drain()
            await reader.readuntil(b"\r\n\r\n")  # the stream's head; then nothing is read
            sent = []
            for n in range(pushes):
                text = f"{n:03d}" + "x" * size
                answer = await client.post(
                    f"{daemon.url}/notify?label=poster",
                    json={"content": text, "type": "QUESTION", "to": [seat]},
                )
                assert answer.status_code == 202, answer.text
                sent.append(text)
            received: list[str] = []
            body = b""
            while len(received) < pushes:  # the stream's chunks, undone
                length = int((await asyncio.wait_for(reader.readline(), 30)).strip(), 16)
                body += (await reader.readexactly(length + 2))[:-2]
                *events, body = body.split(b"\n\n")
                for event in events:
                    for line in event.split(b"\n"):
                        if line.startswith(b"data: ") and b"claude/channel" in line:
                            received.append(json.loads(line[6:])["params"]["content"])
            writer.close()
            return sent, received

    sent, received = asyncio.run(scenario())
    assert received == sent


def test_a_postgresql_store_that_was_never_migrated_is_one_line_naming_migrate(tmp_path):
    """On PostgreSQL a command does not make the tables itself: it says to migrate."""
    if not os.environ.get("DATABASE_URL"):
        pytest.skip("PostgreSQL stores are made by `salon migrate`: the PostgreSQL pass")
    (tmp_path / "fresh").mkdir()
    fresh = salon_env(tmp_path / "fresh")
    try:
        done = run_salon("inbox", "team", env={**fresh, "AGENT_SALON_NAME": "web-app"})
    finally:
        drop_store(fresh)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "salon migrate" in done.stderr
