"""Helpers for the live view's tests: a seeded store, a logged-in staff client, a
reader of the live stream's server-sent events, and a running `salon watch`."""

from __future__ import annotations

import contextlib
import json
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx

from tests.claude_kit import API_SESSION, WEB_SESSION
from tests.support import run_django_script, salon_cmd, stretched

PASSWORD = "salon-staff-pw-9315"
DOCS_SESSION = "77aa0012-aaaa-4bbb-8ccc-000000000003"
OLD_SESSION = "01d5e470-aaaa-4bbb-8ccc-000000000004"
DOCS_SEAT = "docs#77aa0012"
OLD_SEAT = "old-tool#01d5e470"

SESSIONS = {
    "web-app": WEB_SESSION,
    "api-service": API_SESSION,
    "docs": DOCS_SESSION,
    "old-tool": OLD_SESSION,
}


def seed_rows() -> None:
    """team: web-app (live, a focus, has read everything), api-service (live, has read
    nothing), docs (unknown: seen 10 minutes ago, quiet for an hour), old-tool (gone);
    two entries; an empty room `ops`; a superuser `staff`. Needs Django set up."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from bus import services
    from bus.models import Seat

    services.rooms.create_room(name="team")
    services.rooms.create_room(name="ops")
    seats = {}
    for agent, session in SESSIONS.items():
        seats[agent] = services.seats.check_in(agent=agent, session_id=session)
        services.rooms.join_room(seat=seats[agent], room="team")
    services.seats.declare_focus(seat=seats["web-app"], text="the login form", phase="apply")
    services.seats.set_quiet(seat=seats["docs"], duration="1h")
    services.entries.send_entry(
        seat=seats["web-app"],
        room="team",
        type="QUESTION",
        to=["api-service"],
        text="Who owns the session-cookie refresh?",
    )
    services.entries.send_entry(
        seat=seats["old-tool"], room="team", type="REQUEST", text="Please rotate the staging keys."
    )
    services.reading.read_inbox(seat=seats["web-app"], room="team")
    User.objects.create_superuser("staff", "staff@example.com", PASSWORD)
    now = timezone.now()
    Seat.objects.filter(pk=seats["docs"].pk).update(last_seen=now - timedelta(minutes=10))
    Seat.objects.filter(pk=seats["old-tool"].pk).update(last_seen=now - timedelta(hours=2))


def seed(env: dict[str, str], cwd: Path) -> None:
    """seed_rows() in a process of its own on the store of `env` (one Django start)."""
    script = "import django\ndjango.setup()\nfrom tests.live_kit import seed_rows\nseed_rows()\n"
    run_django_script(env, script, cwd)


def log_in(client: httpx.Client, username: str, password: str) -> httpx.Response:
    """Log in through the admin's own login form."""
    form = client.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    return client.post(
        "/admin/login/?next=/admin/",
        data={"csrfmiddlewaretoken": token, "username": username, "password": password},
    )


@contextmanager
def staff_client(base_url: str) -> Iterator[httpx.Client]:
    """An httpx client logged in as the seeded staff user."""
    with httpx.Client(base_url=base_url, timeout=10) as client:
        done = log_in(client, "staff", PASSWORD)
        assert done.status_code == 302, done.text[:500]
        yield client


@dataclass
class Event:
    name: str
    data: dict
    id: str | None


def events(response: httpx.Response) -> Iterator[Event | str]:
    """The events of an open SSE response, and its comments (as their text)."""
    name, data, event_id = "message", [], None
    for line in response.iter_lines():
        if line.startswith(":"):
            yield line[1:].strip()
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            yield Event(name, json.loads("\n".join(data)), event_id)
            name, data, event_id = "message", [], None


def read_until(stream: Iterator[Event | str], done, seconds: float = 10) -> list[Event]:
    """Events until `done(events so far)` holds; fails after `seconds` (the stream's read
    timeout ends a silent wait sooner)."""
    got: list[Event] = []
    deadline = time.monotonic() + seconds
    for item in stream:
        if isinstance(item, Event):
            got.append(item)
            if done(got):
                return got
        assert time.monotonic() < deadline, f"not done in {seconds}s: {got}"
    raise AssertionError(f"the stream ended: {got}")


def stream_timeout() -> httpx.Timeout:
    return httpx.Timeout(10, read=12)  # a keep-alive comes every 15 s at the latest


class Watch:
    """A running `salon watch`, its stdout read line by line in a thread."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.process = subprocess.Popen(
            salon_cmd("watch", *args),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        banner = self.process.stderr.readline()  # printed once it listens
        assert banner.startswith("salon watch: watching"), banner

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def next_lines(self, count: int, seconds: float = 5) -> list[str]:
        seconds = stretched(seconds)
        deadline = time.monotonic() + seconds
        got = []
        while len(got) < count:
            left = deadline - time.monotonic()
            assert left > 0, f"only {got} in {seconds}s"
            with contextlib.suppress(queue.Empty):
                got.append(self.lines.get(timeout=left))
        return got

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C: its exit status and what it said on stderr meanwhile."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(stretched(10))
        return code, self.process.stderr.read()
