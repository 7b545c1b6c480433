"""Two machines that really cross a network (docs/RELAY.md), when the tests run as root.

The test makes a network namespace of its own for machine B, joined to this one by a
veth pair: B's daemon and its `salon join` run inside it and reach the relay only at
the relay's address on that link (B's 127.0.0.1 is B's own). The relay and machine A
run here. Nothing is left behind: deleting the namespace deletes the link.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass

import httpx
import pytest

from tests.support import Daemon, drop_store, migrate, query_store, run_salon, salon_cmd, salon_env
from tests.test_relay import SECRET, eventually


def _netns_usable() -> bool:
    if os.geteuid() != 0 or not shutil.which("ip"):
        return False
    name = f"salon-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True)
    if made.returncode != 0:
        return False
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return True


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _netns_usable(), reason="needs root and `ip netns`"),
    # Inside the namespace there is no route to the servers of a PostgreSQL/Redis run.
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL") or os.environ.get("REDIS_URL")),
        reason="the namespace cannot reach the test run's PostgreSQL or Redis",
    ),
]


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr}"


@dataclass
class Link:
    namespace: str
    here: str  # this side's address
    there: str  # B's address, inside the namespace


@pytest.fixture
def link():
    tag = os.getpid() % 100000
    namespace, outer, inner = f"salon-b-{tag}", f"vsa{tag}", f"vsb{tag}"
    octet = 1 + tag % 250
    here, there = f"10.213.{octet}.1", f"10.213.{octet}.2"
    ip("netns", "add", namespace)
    try:
        ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        ip("link", "set", inner, "netns", namespace)
        ip("addr", "add", f"{here}/30", "dev", outer)
        ip("link", "set", outer, "up")
        ip("-n", namespace, "addr", "add", f"{there}/30", "dev", inner)
        ip("-n", namespace, "link", "set", inner, "up")
        ip("-n", namespace, "link", "set", "lo", "up")
        yield Link(namespace, here, there)
    finally:
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        subprocess.run(["ip", "link", "del", outer], capture_output=True)


class NamespacedDaemon(Daemon):
    """A daemon inside a network namespace, reached at `address` from here."""

    namespace: str = ""
    address: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def launch(self) -> Daemon:
        self.log_path = self.cwd / f"daemon-{self.port}.log"
        prefix = ["ip", "netns", "exec", self.namespace] if self.namespace else []
        self.process = subprocess.Popen(
            [*prefix, *salon_cmd(*self.command, "--bind", self.address, "--port", str(self.port))],
            env=self.env,
            cwd=self.cwd,
            stdout=self.log_path.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self


def test_two_machines_in_two_network_namespaces_meet_through_the_relay(tmp_path, link):
    tmp = tempfile.mkdtemp(prefix="rn-", dir="/tmp")
    envs, daemons = {}, []
    try:
        for name in ("relay", "a", "b"):
            (tmp_path / name).mkdir()
            extra = {"AGENT_SALON_RELAY_SECRET": SECRET} if name == "relay" else {}
            envs[name] = salon_env(tmp_path / name, TMPDIR=tmp, **extra)
            migrate(envs[name])
        relay = NamespacedDaemon(env=envs["relay"], cwd=tmp_path / "relay",
                                 command=("relay", "serve"))  # fmt: skip
        relay.address = link.here
        a = Daemon(env=envs["a"], cwd=tmp_path / "a")
        b = NamespacedDaemon(env=envs["b"], cwd=tmp_path / "b")
        b.namespace, b.address = link.namespace, link.there
        daemons = [relay, a, b]
        for running in daemons:
            running.launch()
        for running in daemons:
            running.wait_ready(90)

        def on_b(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                ["ip", "netns", "exec", link.namespace, *salon_cmd(*args)],
                env={**envs["b"], "AGENT_SALON_NAME": "web-app",
                     "CLAUDE_CODE_SESSION_ID": "b0b0b0b0-0001"},
                cwd=tmp_path / "b", capture_output=True, text=True, timeout=60,
            )  # fmt: skip

        def on_a(*args: str) -> subprocess.CompletedProcess:
            env = {**envs["a"], "AGENT_SALON_NAME": "api", "CLAUDE_CODE_SESSION_ID": "a0a0-0001"}
            return run_salon(*args, env=env, cwd=tmp_path / "a")

        # Inside the namespace, this machine's loopback is not the relay's.
        probe = subprocess.run(
            ["ip", "netns", "exec", link.namespace, sys.executable, "-c",
             f"import socket; socket.create_connection(('127.0.0.1', {relay.port}), 2)"],
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
