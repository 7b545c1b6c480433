"""A network link to cross, for the tests and the benchmark that put a machine behind one
(needs root and `ip netns`): a network namespace of its own joined to this one by a veth
pair, and a daemon listening on an address of that link, inside the namespace or here.
Leaving the link deletes the namespace, which deletes the pair."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support import Daemon, salon_cmd


def netns_usable() -> bool:
    """Root, `ip`, and a namespace that can really be made here."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        return False
    name = f"salon-probe-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode != 0:
        return False
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return True


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def inside(namespace: str, *command: str) -> list[str]:
    """`command` run inside `namespace` (this one when it is empty)."""
    return ["ip", "netns", "exec", namespace, *command] if namespace else list(command)


@dataclass(frozen=True)
class Link:
    namespace: str
    here: str  # this side's address
    there: str  # the address inside the namespace


@contextlib.contextmanager
def veth_link(letter: str, subnet: int, tag: int | None = None) -> Iterator[Link]:
    """Namespace `salon-<letter>-<tag>` and the veth pair `v<letter>a<tag>` (here) /
    `v<letter>b<tag>` (inside), a /30 in 10.<subnet>.x.0 between them. `tag`: this
    process's by default; users running side by side take their own letter and subnet."""
    tag = os.getpid() % 100000 if tag is None else tag % 100000
    namespace, outer, inner = f"salon-{letter}-{tag}", f"v{letter}a{tag}", f"v{letter}b{tag}"
    octet = 1 + tag % 250
    here, there = f"10.{subnet}.{octet}.1", f"10.{subnet}.{octet}.2"
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
    """A daemon listening on `address`, inside `namespace` when one is given; reached at
    `address` from here."""

    namespace: str = ""
    address: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def launch(self) -> Daemon:
        self.log_path = self.cwd / f"daemon-{self.port}.log"
        self.process = subprocess.Popen(
            inside(
                self.namespace,
                *salon_cmd(*self.command, "--bind", self.address, "--port", str(self.port)),
            ),
            env=self.env,
            cwd=self.cwd,
            stdout=self.log_path.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self


def relay_and_two_machines(
    link: Link, envs: Mapping[str, dict[str, str]], cwd: Mapping[str, Path], wait: float = 90
) -> tuple[Daemon, Daemon, Daemon]:
    """Three daemons started side by side and answering: the relay (`envs["relay"]`, in
    relay mode) on this side's address of the link, machine A here on loopback, machine B
    inside the namespace on its address of the link. Any that started are stopped again
    when one does not answer."""
    relay = NamespacedDaemon(env=envs["relay"], cwd=cwd["relay"], command=("relay", "serve"))
    relay.address = link.here
    a = Daemon(env=envs["a"], cwd=cwd["a"])
    b = NamespacedDaemon(env=envs["b"], cwd=cwd["b"])
    b.namespace, b.address = link.namespace, link.there
    try:
        for running in (relay, a, b):
            running.launch()
        for running in (relay, a, b):
            running.wait_ready(wait)
    except BaseException:
        for running in (relay, a, b):
            running.stop()
        raise
    return relay, a, b
