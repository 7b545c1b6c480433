# ruff: noqa: F811 - the fixture `salons` comes from tests.test_relay
"""Cross-project requests across the relay: two machines with stores of their own and a
relay, as real processes (the set-up of tests/test_relay.py). A request is evaluated on
the machine where it lands, by the receiving project's policy there, and a remote writer
matches only the grants that name its device.

In-process at the end: what landing does with a request whose key no local writer could
have written (a hostile key from elsewhere falls to wake).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from bus import services
from bus.models import Request, WakeDecision
from bus.rules import RuleError
from tests.claude_kit import hook, hook_json
from tests.factories import make_room
from tests.test_relay import eventually, salons  # noqa: F401 - the shared machines

pytestmark = pytest.mark.slow

SINCE = datetime.now(UTC).date() - timedelta(days=1)
CONSUMER = "5e5e5e5e-0004"
WEB = "3f9c1a20-0005"
POLICY = f"""\
[[grant]]
ask = "status:*"
to = ["consumer-b"]
since = {SINCE}
serve = ["scripts/status.sh", "{{2}}"]

[[grant]]
ask = "port:*"
to = ["consumer-b@machineA"]
since = {SINCE}
serve = ["scripts/status.sh", "{{2}}"]
"""


def receiving_project(base: Path) -> Path:
    root = base / "web-app"
    (root / ".agent-salon").mkdir(parents=True)
    (root / ".agent-salon" / "policy.toml").write_text(POLICY)
    (root / "scripts").mkdir()
    script = root / "scripts" / "status.sh"
    script.write_text(
        f'#!/bin/sh\necho run >> "{root}/runs"\necho "$1: 8443 ($AGENT_SALON_ASKER)"\n'
    )
    script.chmod(0o755)
    return root


def runs(root: Path) -> int:
    path = root / "runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture(scope="module")
def web_on_b(salons):
    """web-app on machine B: its project (a policy, a script) and a session there."""
    a, b = salons.a, salons.b
    root = receiving_project(salons.base)
    env = {**b.env, "AGENT_SALON_ROOM": "team"}
    hook_json(hook(env, "session-start", WEB, root))
    assert a.salon("join", "team", agent="consumer-b", session=CONSUMER).returncode == 0
    seat = "web-app#3f9c1a20"
    eventually(
        lambda: a.rows("SELECT 1 FROM bus_seat WHERE name = ?", (f"web-app@machineB#{seat[8:]}",)),
        what="A knows web-app's seat on B",
    )
    return root, seat


def ask_from_a(salons, key: str, *flags: str) -> dict:
    done = salons.a.salon(
        "ask", "web-app@machineB", key, *flags, "--json", agent="consumer-b", session=CONSUMER
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_grant_naming_the_device_serves_an_ask_from_that_device_across_the_relay(
    salons, web_on_b
):
    root, _ = web_on_b
    report = ask_from_a(salons, "port:staging", "--wait", "60")
    # Decided where it lands, not here.
    assert report["verdict"] is None
    assert report["reason"] == "decided on machineB, where the request lands, by its policy"
    assert report["answer"]["text"] == "staging: 8443 (consumer-b@machineA#5e5e5e5e)\n"
    assert report["answer"]["from"] == "web-app@machineB"
    assert runs(root) == 1
    hex_id = uuid.UUID(report["id"]).hex
    assert salons.b.rows(
        "SELECT verdict, outcome, writer FROM bus_request WHERE entry_id = ?", (hex_id,)
    ) == [("serve", "served", "consumer-b@machineA#5e5e5e5e")]
    # Nobody on B was woken for it.
    assert salons.b.rows(
        "SELECT count(*) FROM bus_wakedecision WHERE entry_id = ? AND woken", (hex_id,)
    ) == [(0,)]


def test_a_bare_name_grant_never_reaches_a_writer_of_another_device(salons, web_on_b):
    root, _ = web_on_b
    before = runs(root)
    report = ask_from_a(salons, "status:db", "--wait", "60")
    assert report["answer"]["text"] == (
        'denied: no grant reaches "status:db" for consumer-b@machineA#5e5e5e5e'
    )
    assert runs(root) == before
    hex_id = uuid.UUID(report["id"]).hex
    assert salons.b.rows(
        "SELECT verdict, outcome FROM bus_request WHERE entry_id = ?", (hex_id,)
    ) == [("deny", "denied")]


# ---------------------------------------------------------------- landing, in-process


@pytest.fixture
def landing_store(transactional_db, tmp_path):
    root = receiving_project(tmp_path)
    make_room("team")
    web = services.seats.check_in(agent="web-app", session_id="aaaa1111")
    services.rooms.join_room(seat=web, room="team")
    services.seats.record_root(agent="web-app", root=str(root))
    return root, web


def land(key, sender="consumer-b@machineA#5e5e5e5e"):
    entry_id = uuid.uuid4()
    services.entries.land_entry(
        id=entry_id,
        room="team",
        ts=timezone.now(),
        sender=sender,
        type="REQUEST",
        to=["web-app"],
        content="?",
        meta={"ask": key},
    )
    return entry_id


@pytest.mark.parametrize(
    "key", ["status:../../etc/passwd", "status:db;rm -rf", "status:a/b", "STATUS:db", "a\x00b"]
)
def test_a_hostile_key_landed_from_a_relay_falls_to_wake_and_runs_nothing(landing_store, key):
    root, web = landing_store
    if "\x00" in key:
        with pytest.raises(RuleError):
            land(key)  # no store keeps a NUL: refused at landing, counted by the bridge
        return
    entry_id = land(key)
    request = Request.objects.get(pk=entry_id)
    assert request.verdict == "wake"
    assert request.reason.startswith("nothing in the policy covers ")
    assert runs(root) == 0
    assert list(
        WakeDecision.objects.filter(entry_id=entry_id).values_list("seat_name", "woken")
    ) == [(web.name, True)]


def test_a_landed_ask_on_a_device_grant_is_served_there_and_wakes_nobody(landing_store):
    root, _ = landing_store
    entry_id = land("port:staging")
    request = Request.objects.get(pk=entry_id)
    assert (request.verdict, request.outcome) == ("serve", "served")
    assert runs(root) == 1
    assert not WakeDecision.objects.filter(entry_id=entry_id, woken=True).exists()
