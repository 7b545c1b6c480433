"""A daemon killed with SIGKILL in the middle of traffic (security review of 2026-12-01).

The promise: an entry that got a 202 or a successful tool result is durably stored; a daemon
killed at any moment loses no acknowledged entry. Several clients post to /notify and
call the MCP `send` tool at once, the daemon is killed under them, started again on the
same store, and the store is read back. Runs on SQLite, and on PostgreSQL when
DATABASE_URL is set (tests.support.salon_env makes the database).
"""

from __future__ import annotations

import random
import threading

import httpx
import pytest

from tests.security_kit import Mcp, private_env, wait_until
from tests.support import Daemon, drop_store, query_store

NOTIFIERS = 4
SENDERS = 2
ROOM = "crash"


def _post_until(stop: threading.Event, url: str, label: str, acked: list, attempted: list):
    with httpx.Client(timeout=10) as client:
        number = 0
        while not stop.is_set():
            content = f"{label}-{number}"
            number += 1
            attempted.append(content)
            try:
                response = client.post(
                    f"{url}/notify?label={label}", json={"content": content, "room": ROOM}
                )
            except httpx.HTTPError:
                continue
            if response.status_code == 202:
                acked.append((response.json()["id"], content))


def _send_until(stop: threading.Event, session: Mcp, acked: list, attempted: list):
    number = 0
    while not stop.is_set():
        content = f"{session.label}-{number}"
        number += 1
        attempted.append(content)
        message = {
            "jsonrpc": "2.0",
            "id": number,
            "method": "tools/call",
            "params": {"name": "send", "arguments": {"text": content, "room": ROOM}},
        }
        try:
            response = session.post(message, timeout=10)
        except httpx.HTTPError:
            continue
        if response.status_code != 200:
            continue
        result = response.json().get("result", {})
        if not result.get("isError") and "structuredContent" in result:
            acked.append((result["structuredContent"]["id"], content))


def _key(entry_id: str) -> str:
    return str(entry_id).replace("-", "").lower()


@pytest.mark.slow
def test_a_daemon_killed_mid_traffic_loses_no_acknowledged_entry_and_duplicates_none(tmp_path):
    """Measured on 2026-12-01 (holds today, SQLite and PostgreSQL): `salon serve` killed
    with SIGKILL while 4 /notify posters and 2 MCP `send` callers ran, then started again
    on the same store — every acknowledged id is stored exactly once, with its own
    content, and no content is stored twice."""
    env = private_env(tmp_path)
    daemon = Daemon(env=env, cwd=tmp_path).start()
    restarted = None
    try:
        owner = Mcp(daemon.url, label="crash-owner").open()
        owner.result("join", {"room": ROOM, "create": True})
        senders = []
        for n in range(SENDERS):
            session = Mcp(daemon.url, label=f"crash-m{n}").open()
            session.result("join", {"room": ROOM})
            senders.append(session)
        acked: list[tuple[str, str]] = []
        attempted: list[str] = []
        stop = threading.Event()
        threads = [
            threading.Thread(
                target=_post_until, args=(stop, daemon.url, f"crash-n{n}", acked, attempted)
            )
            for n in range(NOTIFIERS)
        ] + [
            threading.Thread(target=_send_until, args=(stop, session, acked, attempted))
            for session in senders
        ]
        for thread in threads:
            thread.start()
        try:
            wanted = random.randint(40, 120)
            reached = wait_until(lambda: len(acked) >= wanted, timeout=60, interval=0.01)
            assert reached, f"only {len(acked)} entries acknowledged in 60 s"
            daemon.kill()  # SIGKILL, mid-traffic; answers already on the wire still count
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)

        restarted = Daemon(env=env, cwd=tmp_path).start()
        rows = query_store(
            env,
            "SELECT e.id, e.content FROM bus_entry e JOIN bus_room r ON r.id = e.room_id "
            "WHERE r.name = ?",
            (ROOM,),
        )
        stored = {_key(entry_id): content for entry_id, content in rows}
        contents = [content for _, content in rows]
        missing = [(i, c) for i, c in acked if stored.get(_key(i)) != c]
        duplicated = sorted({c for c in contents if contents.count(c) > 1})
        assert missing == [], f"{len(missing)} acknowledged entries lost: {missing[:5]}"
        assert duplicated == [], f"stored twice: {duplicated[:5]}"
        assert set(contents) <= set(attempted)
        # The restarted daemon serves the same history.
        reader = Mcp(restarted.url, label="crash-reader").open()
        reader.result("join", {"room": ROOM})
        history = reader.result("history", {"room": ROOM, "limit": 200})
        assert {_key(e["id"]) for e in history["entries"]} <= set(stored)
    finally:
        daemon.stop()
        if restarted is not None:
            restarted.stop()
        drop_store(env)
