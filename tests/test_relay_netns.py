"""Two machines that really cross a network (docs/RELAY.md), when the tests run as root.

The test makes a network namespace of its own for machine B, joined to this one by a
veth pair: B's daemon and its `salon join` run inside it and reach the relay only at
the relay's address on that link (B's 127.0.0.1 is B's own). The relay and machine A
run here. Nothing is left behind: deleting the namespace deletes the link.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass

import httpx
import pytest

from tests.netns_kit import (
    NamespacedDaemon,
    inside,
    netns_usable,
    relay_and_two_machines,
    veth_link,
)
from tests.support import Daemon, drop_store, migrate, query_store, run_salon, salon_cmd, salon_env
from tests.test_relay import SECRET, eventually

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not netns_usable(), reason="needs root and `ip netns`"),
    # Inside the namespace there is no route to the servers of a PostgreSQL/Redis run.
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL") or os.environ.get("REDIS_URL")),
        reason="the namespace cannot reach the test run's PostgreSQL or Redis",
    ),
]


@pytest.fixture
def link():
    with veth_link("b", 213) as made:
        yield made


def test_two_machines_in_two_network_namespaces_meet_through_the_relay(tmp_path, link):
    tmp = tempfile.mkdtemp(prefix="rn-", dir="/tmp")
    envs, daemons = {}, []
    try:
        for name in ("relay", "a", "b"):
            (tmp_path / name).mkdir()
            extra = {"AGENT_SALON_RELAY_SECRET": SECRET} if name == "relay" else {}
            envs[name] = salon_env(tmp_path / name, TMPDIR=tmp, **extra)
            migrate(envs[name])
        daemons = relay_and_two_machines(link, envs, {name: tmp_path / name for name in envs})
        relay, _, b = daemons

        def on_b(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                inside(link.namespace, *salon_cmd(*args)),
                env={**envs["b"], "AGENT_SALON_NAME": "web-app",
                     "CLAUDE_CODE_SESSION_ID": "b0b0b0b0-0001"},
                cwd=tmp_path / "b", capture_output=True, text=True, timeout=60,
            )  # fmt: skip

        def on_a(*args: str) -> subprocess.CompletedProcess:
            env = {**envs["a"], "AGENT_SALON_NAME": "api", "CLAUDE_CODE_SESSION_ID": "a0a0-0001"}
            return run_salon(*args, env=env, cwd=tmp_path / "a")

        # Inside the namespace, this machine's loopback is not the relay's.
        probe = subprocess.run(
            inside(link.namespace, sys.executable, "-c",
                   f"import socket; socket.create_connection(('127.0.0.1', {relay.port}), 2)"),
            capture_output=True,
        )  # fmt: skip
        assert probe.returncode != 0
        used = on_a("relay", "use", relay.url, "--secret", SECRET, "--device", "machineA")
        assert used.returncode == 0, used.stderr
        assert on_a("rooms", "--create", "team").returncode == 0
        assert on_a("join", "team").returncode == 0
        invited = on_a("invite", "team", "--for", "machineB")
        joined = on_b("join", invited.stdout.strip())
        assert joined.returncode == 0, joined.stderr
        assert on_b("join", "team").returncode == 0
        eventually(
            lambda: query_store(envs["a"], "SELECT 1 FROM bus_seat WHERE name = ?",
                                ("web-app@machineB#b0b0b0b0",)),
            what="A knows B's seat",
        )  # fmt: skip

        asked = on_a("send", "team", "QUESTION", "are you across the wire?",
                     "--to", "web-app@machineB")  # fmt: skip
        assert asked.returncode == 0, asked.stderr
        landed = eventually(
            lambda: query_store(
                envs["b"],
                "SELECT w.seat_name, w.reason FROM bus_entry e JOIN bus_wakedecision w "
                "ON w.entry_id = e.id WHERE e.content = 'are you across the wire?'",
            ),
            what="the question landed on B",
        )
        assert landed == [("web-app#b0b0b0b0", "addressed")]
        tag = uuid.uuid4().hex[:8]
        answer = httpx.post(
            f"{b.url}/notify?label=web-app",
            json={"content": f"yes {tag}", "room": "team", "type": "ANSWER"},
            headers={"host": f"127.0.0.1:{b.port}"},
        )
        assert answer.status_code == 202, answer.text
        eventually(
            lambda: query_store(envs["a"], "SELECT 1 FROM bus_entry WHERE content = ?",
                                (f"yes {tag}",)),
            what="B's answer landed on A",
        )  # fmt: skip
    finally:
        for running in daemons:
            running.stop()
        for env in envs.values():
            drop_store(env)
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- three machines, two links


@dataclass
class Across:
    """A relay (at 40 entries a minute) and machine A here, machine B in a namespace."""

    relay: Daemon
    a: Daemon
    b: NamespacedDaemon
    envs: dict
    cwd: dict
    namespace: str

    def on_a(self, *args: str, agent: str = "api", session: str = "a0a0a0a0-0001"):
        env = {**self.envs["a"], "AGENT_SALON_NAME": agent, "CLAUDE_CODE_SESSION_ID": session}
        return run_salon(*args, env=env, cwd=self.cwd["a"])

    def on_b(self, *args: str, agent: str = "web-app", session: str = "b2b2b2b2-0001"):
        return subprocess.run(
            inside(self.namespace, *salon_cmd(*args)),
            env={**self.envs["b"], "AGENT_SALON_NAME": agent, "CLAUDE_CODE_SESSION_ID": session},
            cwd=self.cwd["b"], capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    def in_b(self, code: str) -> subprocess.CompletedProcess:
        """Python run inside B's namespace (B's view of the network)."""
        return subprocess.run(
            inside(self.namespace, sys.executable, "-c", code),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    def notify(self, daemon: Daemon, label: str, content: str, **fields) -> dict:
        answer = httpx.post(f"{daemon.url}/notify?label={label}", timeout=30,
                            json={"content": content, "room": "team", **fields},
                            headers={"host": f"127.0.0.1:{daemon.port}"})  # fmt: skip
        assert answer.status_code == 202, answer.text
        return answer.json()


@pytest.fixture(scope="module")
def across(tmp_path_factory):
    base = tmp_path_factory.mktemp("across")
    tmp = tempfile.mkdtemp(prefix="rx-", dir="/tmp")
    envs, cwd, daemons = {}, {}, []
    with veth_link("x", 214, tag=os.getpid() + 7) as link:
        try:
            for name in ("relay", "a", "b"):
                cwd[name] = base / name
                cwd[name].mkdir()
                extra = (
                    {"AGENT_SALON_RELAY_SECRET": SECRET, "AGENT_SALON_RELAY_RATE": "40"}
                    if name == "relay"
                    else {}
                )
                envs[name] = salon_env(cwd[name], TMPDIR=tmp, **extra)
                migrate(envs[name])
            daemons = relay_and_two_machines(link, envs, cwd)
            made = Across(*daemons, envs, cwd, link.namespace)
            relay = made.relay
            used = made.on_a("relay", "use", relay.url, "--secret", SECRET, "--device", "machineA")
            assert used.returncode == 0, used.stderr
            assert made.on_a("rooms", "--create", "team").returncode == 0
            assert made.on_a("join", "team").returncode == 0
            invited = made.on_a("invite", "team", "--for", "machineB")
            joined = made.on_b("join", invited.stdout.strip())
            assert joined.returncode == 0, joined.stderr
            assert made.on_b("join", "team").returncode == 0
            eventually(
                lambda: query_store(envs["a"], "SELECT 1 FROM bus_seat WHERE name = ?",
                                    ("web-app@machineB#b2b2b2b2",)),
                timeout=60, what="A knows B's seat",
            )  # fmt: skip
            yield made
        finally:
            for running in daemons:
                running.stop()
            for env in envs.values():
                drop_store(env)
            shutil.rmtree(tmp, ignore_errors=True)


def test_from_another_machine_the_relay_answers_only_its_api_and_health(across):
    url = across.relay.url
    probe = across.in_b(
        "import httpx, json\n"
        "out = {}\n"
        "for method, path in (('POST', '/notify?label=evil'), ('POST', '/mcp'),\n"
        "                     ('GET', '/admin/'), ('GET', '/relay/v1/'), ('GET', '/healthz')):\n"
        f"    r = httpx.request(method, '{url}' + path, json={{'content': 'evil text'}})\n"
        "    out[path] = r.status_code\n"
        "print(json.dumps(out))\n"
    )
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout) == {
        "/notify?label=evil": 404, "/mcp": 404, "/admin/": 404, "/relay/v1/": 200, "/healthz": 200,
    }  # fmt: skip
    assert not query_store(across.envs["relay"], "SELECT 1 FROM bus_entry WHERE content = ?",
                           ("evil text",))  # fmt: skip
    banner = across.relay.log().partition("Press Ctrl-C")[0]
    assert f"{url}/relay/v1/" in banner and f"{url}/healthz" in banner
    assert not any(word in banner for word in ("/mcp", "/notify", "/admin"))


def test_across_the_wire_a_remote_seat_is_left_to_its_own_machine(across):
    # B's web-app is quiet; A asks it: A never claims it woke it, nor that it is quiet.
    assert across.on_b("quiet", "--for", "2h").returncode == 0
    seat = "web-app@machineB#b2b2b2b2"
    asked = across.on_a("send", "team", "QUESTION", "quiet over there?", "--to", seat, "--json")
    assert asked.returncode == 0, asked.stderr
    report = json.loads(asked.stdout)
    assert (report["wakes"], report["decidedThere"]) == ([], [seat])
    assert not any("quiet" in notice for notice in report["notice"])
    shown = across.on_a("send", "team", "FACT", "noted", "--to", seat)
    assert f"{seat} (decided there)" in shown.stdout
    decided = eventually(
        lambda: query_store(
            across.envs["b"],
            "SELECT w.seat_name, w.woken, w.reason FROM bus_wakedecision w JOIN bus_entry e "
            "ON e.id = w.entry_id WHERE e.content = 'quiet over there?'",
        ),
        timeout=60, what="the question landed on B",
    )  # fmt: skip
    assert decided == [("web-app#b2b2b2b2", 0, "quiet")]
    assert across.on_b("quiet", "--off").returncode == 0

    # A webhook writer of A is a writer on B, not a member nor a seat to wake.
    tag = uuid.uuid4().hex[:8]
    across.notify(across.a, "bench", f"bench run {tag}")
    eventually(
        lambda: query_store(across.envs["b"], "SELECT 1 FROM bus_entry WHERE content = ?",
                            (f"bench run {tag}",)),
        timeout=60, what="the bench entry landed on B",
    )  # fmt: skip
    assert not query_store(
        across.envs["b"],
        "SELECT 1 FROM bus_membership m JOIN bus_seat s ON s.id = m.seat_id "
        "WHERE s.name LIKE 'bench@%' AND m.left_at IS NULL",
    )
    broadcast = json.loads(across.on_b("send", "team", "QUESTION", "who is here?", "--json").stdout)
    assert not any(
        "bench" in name for name in broadcast["wakes"] + broadcast.get("decidedThere", [])
    )

    # A's stats count none of B's seats' wake-ups as untold (no false alarm); only A's own
    # (B's broadcast woke A's api seat, which nothing listens for: that one is A's).
    eventually(
        lambda: query_store(across.envs["a"], "SELECT 1 FROM bus_entry WHERE content = ?",
                            ("who is here?",)),
        timeout=60, what="B's broadcast landed on A",
    )  # fmt: skip
    remote = "seat_name LIKE '%@%'"
    untold = "woken AND listener = 'none' AND told_at IS NULL"
    [[decided_there]] = query_store(
        across.envs["a"], f"SELECT COUNT(*) FROM bus_wakedecision WHERE woken AND {remote}"
    )
    assert decided_there >= 2  # the question and the fact, decided for B's seat
    [[own]] = query_store(
        across.envs["a"],
        f"SELECT COUNT(*) FROM bus_wakedecision WHERE {untold} AND NOT {remote}",
    )
    stats = json.loads(across.on_a("stats", "--json").stdout)
    assert stats["totals"]["wakeUps"]["reachedNoSession"] == own
    per_seat = json.loads(across.on_a("stats", "--seats", "--json").stdout)
    for room in per_seat["rooms"]:
        for seat in room["seats"]:
            if "@" in seat["seat"]:
                assert seat["wakeUps"]["decided"] == 0, seat


def test_across_the_wire_a_rate_below_a_batch_paces_the_bridge_and_never_wedges_it(across):
    """Last in this module: it spends machine A's rate windows."""
    tag = uuid.uuid4().hex[:8]
    sent = [across.notify(across.a, "load", f"load {tag} {n:03d}")["id"] for n in range(100)]

    def waiting() -> int:
        rooms = json.loads(across.on_a("rooms", "--json").stdout)
        [team] = [r for r in rooms if r["room"] == "team"]
        return team["bridge"]["waiting"]

    assert eventually(waiting, timeout=60, what="A shows what waits for the relay's rate")

    def landed_on_b() -> list[str]:
        return [
            uuid.UUID(str(row[0])).hex
            for row in query_store(
                across.envs["b"],
                "SELECT id FROM bus_entry WHERE content LIKE ? ORDER BY seq",
                (f"load {tag} %",),
            )
        ]

    eventually(lambda: len(landed_on_b()) >= 100, timeout=420, what="all 100 crossed")
    assert landed_on_b() == [uuid.UUID(i).hex for i in sent]  # in order, each once
    eventually(lambda: waiting() == 0, timeout=60, what="nothing left waiting")
    status = json.loads(across.on_a("relay", "status", "--json").stdout)
    [room] = [r for r in status["rooms"] if r["room"] == "team"]
    assert room["here"]["pushed"] >= 100
    eventually(
        lambda: json.loads(across.on_a("relay", "status", "--json").stdout)["rooms"][0]["here"][
            "error"
        ]
        is None,
        timeout=90, what="the error cleared once a push and a pull worked",
    )  # fmt: skip
