"""A hostile relay against a real bridge: what it answers a pull may not fill the bridged
machine's memory or make the bridge fail.

The relay is a small real HTTP server in this test; the bridge is a real `salon relay
bridge` process with a store of its own and a keys file naming that server."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from relay import client, keys
from tests.support import drop_store, migrate, query_store, run_salon, salon_cmd, salon_env

pytestmark = pytest.mark.slow

HUGE_BYTES = 4 * client.MAX_ANSWER_BYTES
DEEP = b"[" * 200_000
CHUNK = b"x" * (1 << 20)


class HostileRelay(BaseHTTPRequestHandler):
    """Takes every push; answers every pull as `mode` says, and counts what it sent."""

    protocol_version = "HTTP/1.1"
    mode = "huge"
    sent: list[int] = []  # bytes of each huge answer written before the bridge hung up

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self._answer(b"{}")

    def do_GET(self) -> None:
        if self.mode == "deep":
            self._answer(DEEP)
            return
        # No Content-Length: the bridge learns the size only by reading.
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("connection", "close")
        self.end_headers()
        written = 0
        try:
            self.wfile.write(b'{"entries": [], "cursor": 0, "pad": "')
            while written < HUGE_BYTES:
                self.wfile.write(CHUNK)
                written += len(CHUNK)
            self.wfile.write(b'"}')
        except OSError:
            pass  # the bridge hung up
        self.sent.append(written)
        self.close_connection = True

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def eventually(check, timeout: float = 60, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout} s")
        time.sleep(0.1)
    return result


@pytest.fixture
def hostile_relay():
    HostileRelay.mode, HostileRelay.sent = "huge", []
    server = ThreadingHTTPServer(("127.0.0.1", 0), HostileRelay)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_hostile_relays_huge_or_deep_pull_answer_is_cut_off_and_shown_never_a_traceback(
    tmp_path, hostile_relay
):
    env = salon_env(tmp_path)
    migrate(env)
    bridge = None
    try:
        assert run_salon("rooms", "--create", "team", env=env, cwd=tmp_path).returncode == 0
        keys.save(
            keys.Keys(
                relay=hostile_relay,
                device="machineX",
                rooms={"team": keys.RoomKeys(key=os.urandom(32), token="t" * 40)},
            ),
            tmp_path / keys.FILENAME,
        )

        def last_error() -> str:
            rows = query_store(env, "SELECT last_error FROM relay_bridgedroom")
            return rows[0][0] if rows else ""

        log = (tmp_path / "bridge.err").open("w+")
        bridge = subprocess.Popen(
            salon_cmd("relay", "bridge"), env=env, cwd=tmp_path, stdout=log, stderr=log
        )
        eventually(lambda: HostileRelay.sent, what="a huge answer was cut off")
        # The bridge hung up one byte over its cap; the socket buffers held a few MB more.
        assert HostileRelay.sent[0] < client.MAX_ANSWER_BYTES + 8 * (1 << 20)
        assert peak_rss_bytes(bridge.pid) < 300 * (1 << 20)
        eventually(lambda: "over the limit" in last_error(), what="the error shown")

        HostileRelay.mode = "deep"
        eventually(lambda: "nested more than" in last_error(), what="the deep answer refused")
        assert bridge.poll() is None  # it goes on, pulling again
    finally:
        if bridge is not None:
            bridge.send_signal(signal.SIGINT)
            try:
                bridge.wait(timeout=30)
            except subprocess.TimeoutExpired:
                bridge.kill()
                raise
        drop_store(env)
    log.seek(0)
    err = log.read()
    assert "Traceback" not in err and "RecursionError" not in err, err
    assert bridge.returncode == 0, err
