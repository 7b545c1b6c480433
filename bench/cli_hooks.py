"""CLI and hooks: wall time of `salon send`, `salon inbox` and `salon hook stop`.

Each spawned as a real process (`python -m salon.cli …`, what the `salon` script and
the hooks `salon install` writes run) on a fresh migrated SQLite file, byte-code cached
as for an installed package; median of RUNS runs after a warm-up. Reuses
bench/cli_timing.py (round-robin over the commands) and bench/hooks_timing.py (real
hook JSON on stdin). `salon hook stop` is measured as Claude Code runs it at the end of
every turn: nothing waiting, and (a second row) one waking entry that blocks the turn.

    python -m bench.cli_hooks [--quick]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench import cli_timing, hooks_timing
from bench.common import Figure, scenario_main, served

TARGET_MS = 100


def cli(runs: int) -> list[Figure]:
    """Each command with a server of the store up (its fork server runs the command) and
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
                f"command runs in a child of the fork server); interpreter floor {floor:.0f} ms",
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


def hooks(runs: int) -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        bench = hooks_timing.Bench(Path(tmp), runs)
        bench.salon("migrate", "--verbosity", "0")
        bench.salon("rooms", "--create", "team")
        bench.salon("join", "team", session="api00000", agent="api")
        bench.hook("session-start")
        bench.salon("focus", "benchmarking the hooks", session=hooks_timing.SESSION)
        rows = [("nothing waiting", bench.series("stop", expect_output=False), TARGET_MS)]
        if runs > 2:  # the smoke run skips the blocking case (an untimed send per run)
            with served(bench.env, bench.project):
                blocking = bench.series("stop", before=bench.send_question, expect_output=True)
            rows.append(
                ("one waking entry (blocks), a server of the store up", blocking, TARGET_MS)
            )
            blocking = bench.series("stop", before=bench.send_question, expect_output=True)
            rows.append(("one waking entry (blocks), cold", blocking, None))
    figures = []
    for label, result, target in rows:
        figures.append(
            Figure(
                f"Hooks: `salon hook stop`, {label} (median of {runs})",
                round(result["median"]),
                "ms",
                target,
                detail=f"min {result['min']:.0f}, max {result['max']:.0f} ms, "
                f"CPU {result['cpu']:.0f} ms",
            )
        )
    return figures


def run(quick: bool) -> list[Figure]:
    runs = 2 if quick else 20
    return cli(runs) + hooks(runs)


if __name__ == "__main__":
    scenario_main(run, __doc__)
