"""Across a network link: one-way delivery through a relay between two network
namespaces (docs/RELAY.md). Needs root and `ip netns`.

The relay and machine A run in this namespace; machine B runs in a namespace of its own,
joined by a veth pair, and reaches the relay only at its address on that link (B's
127.0.0.1 is B's own). Three real daemons on fresh SQLite stores, joined by the real
handshake commands; B has one seat in the room, so every QUESTION that lands there is
decided for it, at the moment it was stored on B.

N QUESTIONs (1,000; 100 with --quick) are posted to A's /notify one after another, as
fast as one client posts: one entry's latency is the time it was stored on B minus its
time on A (one kernel, one clock); entries/s is N over the time from the first post to
the last entry stored on B. No rate limit is in the way (AGENT_SALON_RELAY_RATE is
raised), so what is measured is the path: A's bridge, the link, the relay, B's bridge.

    python -m bench.relay_netns [--quick] [--json PATH]
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Figure, percentile, scenario_main, summary
from bench.relay import SECRET, _all_stored, _env, _synced, _unix, _wait
from tests.netns_kit import inside, relay_and_two_machines, veth_link
from tests.support import Daemon, run_salon, salon_cmd

READER_SESSION = "beb0beb0-0000-4000-8000-000000000001"


@contextlib.contextmanager
def two_namespaces() -> Iterator[tuple[Daemon, Daemon, Daemon]]:
    base = Path(tempfile.mkdtemp(prefix="salon-bench-netns-"))
    tmp = tempfile.mkdtemp(prefix="sbn-", dir="/tmp")
    daemons: tuple[Daemon, ...] = ()
    with veth_link("bn", 215) as link:
        try:
            envs, cwd = {}, {}
            for name in ("relay", "a", "b"):
                cwd[name] = base / name
                cwd[name].mkdir()
                extra = {"AGENT_SALON_RELAY_RATE": "1000000"}
                if name == "relay":
                    extra["AGENT_SALON_RELAY_SECRET"] = SECRET
                envs[name] = _env(cwd[name], tmp, **extra)
            daemons = relay_and_two_machines(link, envs, cwd, wait=120)
            relay, a, b = daemons
            done = run_salon("relay", "use", relay.url, "--secret", SECRET, "--device", "machineA",
                             env=a.env, cwd=a.cwd)  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert run_salon("rooms", "--create", "team", env=a.env, cwd=a.cwd).returncode == 0
            invited = run_salon("invite", "team", "--for", "machineB", env=a.env, cwd=a.cwd)

            def on_b(*args: str, **env: str) -> subprocess.CompletedProcess:
                return subprocess.run(inside(link.namespace, *salon_cmd(*args)),
                                      env={**b.env, **env}, cwd=b.cwd, capture_output=True,
                                      text=True, timeout=120)  # fmt: skip

            joined = on_b("join", invited.stdout.strip())
            assert joined.returncode == 0, joined.stderr
            reader = {"AGENT_SALON_NAME": "reader", "CLAUDE_CODE_SESSION_ID": READER_SESSION}
            assert on_b("join", "team", **reader).returncode == 0
            _wait(lambda: _synced(a) and _synced(b), 90, "both bridges synced")
            yield relay, a, b
        finally:
            for running in daemons:
                running.stop()
            shutil.rmtree(base, ignore_errors=True)
            shutil.rmtree(tmp, ignore_errors=True)


def one_way(a: Daemon, b: Daemon, count: int) -> tuple[list[float], float]:
    """Per entry, posted on A → stored on B (ms); and entries/s over the whole run."""
    tag = f"ns-{uuid.uuid4().hex[:6]}"
    sent: dict[str, float] = {}
    started = time.time()
    with httpx.Client(timeout=30) as http:
        for n in range(count):
            answer = http.post(
                f"{a.url}/notify?label=asker",
                json={"content": f"{tag} {n}", "room": "team", "type": "QUESTION"},
            )
            assert answer.status_code == 202, answer.text
            report = answer.json()
            sent[uuid.UUID(report["id"]).hex] = _unix(report["ts"])
    stored = _all_stored(b, tag, count, 600)
    return [(stored[i] - sent[i]) * 1000 for i in sent], count / (max(stored.values()) - started)


def run(quick: bool) -> list[Figure]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        return [Figure("Relay across two network namespaces", None, "",
                       error="needs root and `ip netns`")]  # fmt: skip
    count = 100 if quick else 1000
    with two_namespaces() as (_relay, a, b):
        values, rate = one_way(a, b, count)
    where = f"{count} entries posted back to back, A and B in two network namespaces"
    return [
        Figure(f"Relay one way across a veth link, posted on A → stored on B, p50 ({where})",
               round(statistics.median(values), 1), "ms", detail=summary(values)),
        Figure("Relay one way across a veth link, p99", round(percentile(values, 99), 1), "ms"),
        Figure(f"Relay across a veth link, {count} entries A → relay → B",
               round(rate, 1), "entries/s", higher_is_better=True),
    ]  # fmt: skip


if __name__ == "__main__":
    scenario_main(run, __doc__)
