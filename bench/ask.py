"""Cross-project requests: `salon ask … --wait` answered by the receiving project's code.

A real daemon on a fresh store; the project web-app (a policy whose grant serves
`status:*` with a one-line shell script, recorded by a real SessionStart hook) and the
asker consumer-b. One `salon ask web-app status:db --wait 10` at a time (1 in flight):

* ask → answer: the served ANSWER's server time minus the request's (the serve itself:
  claim, the command, the answer written), as `ask` reports it;
* the whole call: the `salon ask` process from start to exit (its own start-up, the
  request over the daemon's local line, the serve on the daemon's worker thread, the
  answer fetched) — what the asking session waits for instead of another project's turn.

Also the same call with no daemon running (the command serves it itself).

    python -m bench.ask [--quick] [--json PATH]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Figure, daemon, percentile, scenario_main, summary
from tests.claude_kit import hook_input
from tests.support import migrate, run_salon, salon_env

SESSION = "3f9c1a20-5b7e-4c1d-9a2f-0e1d2c3b4a51"
ASKER_SESSION = "5e5e5e5e-1111-4e3d-b2c1-a0f9e8d7c6b5"


def project(base: Path) -> Path:
    root = base / "web-app"
    (root / ".agent-salon").mkdir(parents=True)
    since = datetime.now(UTC).date() - timedelta(days=1)
    (root / ".agent-salon" / "policy.toml").write_text(
        f'[[grant]]\nask = "status:*"\nto = ["consumer-b"]\nsince = {since}\n'
        'serve = ["scripts/status.sh", "{2}"]\n'
    )
    (root / "scripts").mkdir()
    script = root / "scripts" / "status.sh"
    script.write_text('#!/bin/sh\necho "$1: up, 12 connections"\n')
    script.chmod(0o755)
    return root


def prepare(env: dict, base: Path) -> dict:
    root = project(base)
    started = run_salon(
        "hook",
        "session-start",
        env={**env, "AGENT_SALON_HEADLESS": "0"},
        cwd=root,
        stdin=hook_input("session-start", SESSION, root),
    )
    assert started.returncode == 0, started.stderr
    asker = {**env, "AGENT_SALON_NAME": "consumer-b", "CLAUDE_CODE_SESSION_ID": ASKER_SESSION}
    joined = run_salon("join", "salon", env=asker, cwd=base)
    assert joined.returncode == 0, joined.stderr
    return asker


def measure(asker: dict, cwd: Path, runs: int) -> tuple[list[float], list[float]]:
    served, whole = [], []
    for _ in range(runs):
        began = time.perf_counter()
        done = run_salon(
            "ask", "web-app", "status:db", "--wait", "10", "--json", env=asker, cwd=cwd
        )
        took = (time.perf_counter() - began) * 1000
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["outcome"] == "served", report
        served.append(float(report["answer"]["ms"]))
        whole.append(took)
    return served, whole


def figures_of(label: str, served: list[float], whole: list[float]) -> list[Figure]:
    return [
        Figure(
            f"ask → served answer ({label}), p50", round(statistics.median(served), 1), "ms",
            detail=summary(served),
        ),
        Figure(f"ask → served answer ({label}), p99", round(percentile(served, 99), 1), "ms"),
        Figure(
            f"`salon ask --wait` whole call ({label}), p50", round(statistics.median(whole), 1),
            "ms", detail=summary(whole),
        ),
        Figure(
            f"`salon ask --wait` whole call ({label}), p99", round(percentile(whole, 99), 1),
            "ms",
        ),
    ]  # fmt: skip


def run(quick: bool) -> list[Figure]:
    runs = 5 if quick else 100
    figures = []
    with daemon("sqlite") as salon, tempfile.TemporaryDirectory() as tmp:
        asker = prepare(salon.env, Path(tmp))
        figures += figures_of(
            "daemon running, SQLite, 1 in flight", *measure(asker, Path(tmp), runs)
        )
    with tempfile.TemporaryDirectory(prefix="salon-bench-") as tmp:
        env = salon_env(Path(tmp))
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)
        migrate(env)
        asker = prepare(env, Path(tmp))
        figures += figures_of(
            "no daemon, the command serves, SQLite, 1 in flight", *measure(asker, Path(tmp), runs)
        )
    return figures


if __name__ == "__main__":
    scenario_main(run, __doc__)
