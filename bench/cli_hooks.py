"""CLI, hooks and the stdio server: wall times as Claude Code and a person meet them.

Each spawned as a real process (`python -m salon.cli …`, what the `salon` script and
the hooks `salon install` writes run) on a fresh migrated SQLite file, byte-code cached
as for an installed package; median of RUNS runs after a warm-up. Reuses
bench/cli_timing.py (round-robin over the commands) and bench/hooks_timing.py (real
hook JSON on stdin).

* `salon send` / `salon inbox`, with a server of the store up and cold;
* every hook Claude Code runs (session-start, stop, heartbeat, session-end, and the HTTP
  server's headersHelper mcp-headers), with a server of the store up and cold; `stop` also
  with one waking entry that blocks the turn (full runs only);
* `salon mcp`: `initialize` answered, `tools/list` answered, and the exit after SIGINT,
  timed from the process's start as Claude Code connects it.

    python -m bench.cli_hooks [--quick]
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import cli_timing, hooks_timing
from bench.common import Figure, scenario_main, served

# Commands and hooks: median ≤ 60 ms with a server of the store up, ≤ 250 ms cold.
TARGET_MS = 60
COLD_TARGET_MS = 250
INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
    b'"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}\n'
)
TOOLS_LIST = b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n'


def cli(runs: int) -> list[Figure]:
    """Each command with a server of the store up (it answers the command over its local line) and
    cold (nothing running: the command loads Django itself)."""
    salon = [sys.executable, "-m", "salon.cli"]
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ('salon send team FACT "…"', [*salon, "send", "team", "FACT", "bench entry"]),
        ("salon inbox team", [*salon, "inbox", "team"]),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        env, cwd = cli_timing.environment(Path(tmp))
        env["TMPDIR"] = tmp
        with served(env, cwd):
            warm = cli_timing.interleaved(rows, env, cwd, runs)
        cold = cli_timing.interleaved(rows, env, cwd, runs)
    floor = warm[0][0]
    figures = []
    for (label, _), (wall, low, cpu), (cold_wall, _, cold_cpu) in zip(
        rows[1:], warm[1:], cold[1:], strict=True
    ):
        figures.append(
            Figure(
                f"CLI: `{label}` wall time, a server of the store up (median of {runs})",
                round(wall),
                "ms",
                TARGET_MS,
                detail=f"min {low:.0f} ms, CPU {cpu:.0f} ms of the `salon` process (the "
                f"server answers over its local line); interpreter floor {floor:.0f} ms",
            )
        )
        figures.append(
            Figure(
                f"CLI: `{label}` wall time, cold: no agent-salon process running "
                f"(median of {runs})",
                round(cold_wall),
                "ms",
                detail=f"CPU {cold_cpu:.0f} ms (loads Django itself)",
            )
        )
    return figures


# (hook, what it prints when all is quiet: True, False, or None for "either")
HOOKS = (
    ("session-start", True),
    ("stop", False),
    ("heartbeat", False),
    ("session-end", False),
    ("mcp-headers", True),
)


def hooks(runs: int) -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        bench = hooks_timing.Bench(Path(tmp), runs)
        bench.salon("migrate", "--verbosity", "0")
        bench.salon("rooms", "--create", "team")
        bench.salon("join", "team", session="api00000", agent="api")
        bench.hook("session-start")
        bench.salon("focus", "benchmarking the hooks", session=hooks_timing.SESSION)
        rows = []
        with served(bench.env, bench.project):
            up = {kind: bench.series(kind, expect_output=out) for kind, out in HOOKS}
        for kind, out in HOOKS:
            rows.append((f"`salon hook {kind}`, a server of the store up", up[kind], TARGET_MS))
            cold = bench.series(kind, expect_output=out)
            rows.append((f"`salon hook {kind}`, cold", cold, COLD_TARGET_MS))
        if runs > 2:  # the smoke run skips the blocking case (an untimed send per run)
            with served(bench.env, bench.project):
                blocking = bench.series("stop", before=bench.send_question, expect_output=True)
            rows.append(
                (
                    "`salon hook stop`, one waking entry (blocks), a server of the store up",
                    blocking,
                    TARGET_MS,
                )
            )
            blocking = bench.series("stop", before=bench.send_question, expect_output=True)
            rows.append(
                ("`salon hook stop`, one waking entry (blocks), cold", blocking, COLD_TARGET_MS)
            )
    figures = []
    for label, result, target in rows:
        figures.append(
            Figure(
                f"Hooks: {label} (median of {runs})",
                round(result["median"]),
                "ms",
                target,
                detail=f"min {result['min']:.0f}, max {result['max']:.0f} ms, "
                f"CPU {result['cpu']:.0f} ms",
            )
        )
    return figures


def stdio_connect(runs: int) -> list[Figure]:
    """`salon mcp` as Claude Code starts it: ms from spawn to the `initialize` answer, to
    the `tools/list` answer, and from SIGINT to the exit."""
    samples: dict[str, list[float]] = {"initialize": [], "tools/list": [], "SIGINT": []}
    with tempfile.TemporaryDirectory() as tmp:
        env, cwd = cli_timing.environment(Path(tmp))
        env.update(TMPDIR=tmp, CLAUDE_CODE_SESSION_ID="5e55104a-bench-4000-8000-000000000001")
        for i in range(runs + 1):  # the first warms the page cache and the .pyc files
            start = time.perf_counter()
            process = subprocess.Popen(
                [sys.executable, "-m", "salon.cli", "mcp"], env=env, cwd=cwd,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            process.stdin.write(INITIALIZE)
            process.stdin.flush()
            process.stdout.readline()
            initialized = time.perf_counter()
            process.stdin.write(TOOLS_LIST)
            process.stdin.flush()
            process.stdout.readline()
            listed = time.perf_counter()
            process.send_signal(signal.SIGINT)
            code = process.wait(30)
            ended = time.perf_counter()
            if code != 0:
                raise SystemExit(f"salon mcp exited {code} after SIGINT")
            if i:
                samples["initialize"].append((initialized - start) * 1000)
                samples["tools/list"].append((listed - start) * 1000)
                samples["SIGINT"].append((ended - listed) * 1000)
    what = {
        "initialize": ("spawn → `initialize` answered", 1000),
        "tools/list": ("spawn → `tools/list` answered", 1000),
        "SIGINT": ("SIGINT → exit", None),
    }
    return [
        Figure(
            f"stdio: `salon mcp`, {what[key][0]} (median of {runs})",
            round(statistics.median(values)),
            "ms",
            what[key][1],
            detail=f"min {min(values):.0f}, max {max(values):.0f} ms",
        )
        for key, values in samples.items()
    ]


def run(quick: bool) -> list[Figure]:
    runs = 2 if quick else 20
    return cli(runs) + hooks(runs) + stdio_connect(3 if quick else 20)


if __name__ == "__main__":
    scenario_main(run, __doc__)
