"""Helpers for the security regression tests: real daemons, real processes, real sockets.

Everything here reaches agent-salon from the outside only — HTTP to a `salon serve`,
`python -m salon.cli` processes, the files of the store, SQL on the store — so the tests
built on it keep their meaning when the code behind those surfaces moves.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support import Daemon, drop_store, migrate, salon_cmd, salon_env, stretched

ACCEPT_BOTH = "application/json, text/event-stream"
TRACEBACK = "Traceback (most recent call last)"
PROTOCOL_VERSION = "2025-11-25"


def fuzz_examples(default: int = 200) -> int:
    """How many cases a fuzz test runs: SALON_FUZZ_EXAMPLES, else `default`."""
    return int(os.environ.get("SALON_FUZZ_EXAMPLES") or default)


def claude_session_id() -> str:
    """A Claude Code style session id (a UUID, 36 characters)."""
    return str(uuid.uuid4())


def unique(prefix: str) -> str:
    """A name no other test uses (rooms, labels): prefix + 8 hex characters."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- stores and daemons


def private_env(base: Path, *, migrated: bool = True, **extra: str) -> dict[str, str]:
    """salon_env for a store in base/data, with a TMPDIR of its own (base/tmp), so the
    local sockets, stamps and fallback logs of these tests meet no other run's."""
    data = base / "data"
    data.mkdir(parents=True, exist_ok=True)
    tmp = base / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env = salon_env(data, TMPDIR=str(tmp), **extra)
    if migrated:
        migrate(env)
    return env


@contextlib.contextmanager
def running_daemon(base: Path, env: dict[str, str] | None = None, **extra: str):
    """A real `salon serve` on its own store (or on `env`), stopped and dropped after."""
    own = env is None
    env = private_env(base, **extra) if own else env
    server = Daemon(env=env, cwd=base).start()
    try:
        yield server
    finally:
        server.stop()
        if own:
            drop_store(env)


def cli(
    *args: str,
    env: dict[str, str],
    agent: str | None = None,
    session: str | None = None,
    cwd: Path | None = None,
    stdin: str = "",
    timeout: float = 60,
    umask: int | None = None,
) -> subprocess.CompletedProcess:
    """`salon ARGS` as a real process; identity as hooks and cron have it."""
    environment = dict(env)
    if agent:
        environment["AGENT_SALON_NAME"] = agent
    if session:
        environment["CLAUDE_CODE_SESSION_ID"] = session
    return subprocess.run(
        salon_cmd(*args),
        env=environment,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=stretched(timeout),
        preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
    )


def cli_json(*args: str, env: dict[str, str], **kw) -> dict:
    done = cli(*args, env=env, **kw)
    assert done.returncode == 0, f"salon {' '.join(args)}: exit {done.returncode}: {done.stderr}"
    assert TRACEBACK not in done.stderr, done.stderr
    return json.loads(done.stdout)


def descendants(pid: int) -> list[int]:
    """Every process started below `pid` (Linux /proc), nearest first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                stat = stat_file.read().decode("utf-8", "replace")
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


def wait_until(condition, timeout: float = 10, interval: float = 0.05):
    """Poll `condition` until it returns something true; that value, or None on timeout."""
    deadline = time.monotonic() + stretched(timeout)
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value or None
        time.sleep(interval)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


# ---------------------------------------------------------------- HTTP: /notify


def notify(
    base: str,
    body: object,
    *,
    label: str | None = "ci",
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
    query: str = "",
    timeout: float = 30,
) -> httpx.Response:
    url = f"{base}/notify" + (f"?label={label}" if label is not None else "")
    if query:
        url += ("&" if "?" in url else "?") + query
    data = raw if raw is not None else json.dumps(body).encode()
    return httpx.post(
        url,
        content=data,
        headers={"content-type": "application/json", **(headers or {})},
        timeout=timeout,
    )


# ---------------------------------------------------------------- HTTP: /mcp


@dataclass
class Mcp:
    """One MCP session over Streamable HTTP, spoken by hand (sync)."""

    base: str
    label: str | None = None
    rooms: str | None = None
    token: str | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)
    session_id: str | None = None
    initialized: httpx.Response | None = None
    next_id: int = 1

    @property
    def url(self) -> str:
        query = []
        if self.label is not None:
            query.append(f"label={self.label}")
        if self.rooms:
            query.append(f"room={self.rooms}")
        return f"{self.base}/mcp" + ("?" + "&".join(query) if query else "")

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"accept": ACCEPT_BOTH, "content-type": "application/json"}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
        headers.update(self.extra_headers)
        headers.update(extra)
        return headers

    def post(self, message: dict, timeout: float = 30) -> httpx.Response:
        return httpx.post(self.url, json=message, headers=self.headers(), timeout=timeout)

    def open(self) -> Mcp:
        """initialize + notifications/initialized; `initialized` keeps the first answer."""
        response = self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "salon-security-tests", "version": "0"},
                },
            }
        )
        self.initialized = response
        if response.status_code == 200:
            self.session_id = response.headers["mcp-session-id"]
            done = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert done.status_code == 202, done.text
        return self

    def call(self, tool: str, arguments: dict | None = None, timeout: float = 30) -> dict:
        """A tools/call: the JSON-RPC answer (HTTP 200 asserted, no traceback)."""
        self.next_id += 1
        response = self.post(
            {
                "jsonrpc": "2.0",
                "id": self.next_id,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments or {}},
            },
            timeout=timeout,
        )
        assert response.status_code == 200, f"{tool}: HTTP {response.status_code} {response.text}"
        assert TRACEBACK not in response.text, response.text
        if response.headers["content-type"].startswith("text/event-stream"):
            data = [
                line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")
            ]
            return json.loads(data[-1])
        return response.json()

    def result(self, tool: str, arguments: dict | None = None) -> dict:
        """A tool's structured result; the call must have succeeded."""
        message = self.call(tool, arguments)
        assert "result" in message, message
        assert not message["result"].get("isError"), message["result"]
        return message["result"]["structuredContent"]

    def seat(self) -> str:
        return self.result("salon_status")["session"]["seat"]


def tool_text(message: dict) -> str:
    """The text of a tool result or the message of a JSON-RPC error."""
    if "error" in message:
        return message["error"].get("message", "")
    return " ".join(part.get("text", "") for part in message["result"].get("content", []))


def refused(message: dict) -> bool:
    """Did the tool refuse (a JSON-RPC error or an isError result)?"""
    return "error" in message or bool(message.get("result", {}).get("isError"))


# ---------------------------------------------------------------- raw sockets


def raw_request(port: int, head: bytes, body: bytes = b"", timeout: float = 10) -> bytes:
    """Send bytes as they are (headers no HTTP client would send) and read to the end."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
        connection.sendall(head + body)
        chunks = []
        with contextlib.suppress(TimeoutError, ConnectionError):
            while chunk := connection.recv(65536):
                chunks.append(chunk)
    return b"".join(chunks)


# ---------------------------------------------------------------- the admin


def admin_client(base: str, username: str, password: str) -> httpx.Client:
    """An httpx client logged in to the admin through its login form."""
    client = httpx.Client(base_url=base, timeout=30, follow_redirects=False)
    page = client.get("/admin/login/?next=/admin/")
    assert page.status_code == 200, page.status_code
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    done = client.post(
        "/admin/login/?next=/admin/",
        data={
            "csrfmiddlewaretoken": token,
            "username": username,
            "password": password,
            "next": "/admin/",
        },
    )
    assert done.status_code == 302, f"login failed: {done.status_code} {done.text[:500]}"
    return client


# ---------------------------------------------------------------- hooks


def run_hook(
    env: dict[str, str], kind: str, stdin: str | bytes, *, cwd: Path | None = None, **extra: str
) -> subprocess.CompletedProcess:
    """`salon hook KIND` with `stdin` as Claude Code would pipe it (bytes kept as they are)."""
    data = stdin.encode("utf-8", "surrogatepass") if isinstance(stdin, str) else stdin
    return subprocess.run(
        salon_cmd("hook", kind),
        env={**env, **extra},
        cwd=cwd,
        input=data,
        capture_output=True,
        timeout=60,
    )


def hook_payload(kind: str, session: str, cwd: str, **fields) -> str:
    event = {"session-start": "SessionStart", "stop": "Stop", "heartbeat": "PostToolUse"}[kind]
    payload = {
        "session_id": session,
        "transcript_path": f"{cwd}/transcript.jsonl",
        "cwd": cwd,
        "hook_event_name": event,
    }
    if kind == "stop":
        payload["stop_hook_active"] = False
    payload.update(fields)
    return json.dumps(payload)


def strict_json(text: str):
    """json.loads that refuses NaN/Infinity (not JSON) and keeps duplicate keys as pairs."""

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse, object_pairs_hook=list)


def python() -> str:
    return sys.executable
