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
from bench.common import Figure, scenario_main

TARGET_MS = 100


def cli(runs: int) -> list[Figure]:
    salon = [sys.executable, "-m", "salon.cli"]
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ('salon send team FACT "…"', [*salon, "send", "team", "FACT", "bench entry"]),
        ("salon inbox team", [*salon, "inbox", "team"]),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        env, cwd = cli_timing.environment(Path(tmp))
        results = cli_timing.interleaved(rows, env, cwd, runs)
    floor = results[0][0]
    figures = []
    for (label, _), (wall, low, cpu) in zip(rows[1:], results[1:], strict=True):
        figures.append(
            Figure(
                f"CLI: `{label}` wall time (median of {runs})",
                round(wall),
                "ms",
                TARGET_MS,
                detail=f"min {low:.0f} ms, CPU {cpu:.0f} ms; interpreter floor {floor:.0f} ms",
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
        rows = [("nothing waiting", bench.series("stop", expect_output=False))]
        if runs > 2:  # the smoke run skips the blocking case (an untimed send per run)
            blocking = bench.series("stop", before=bench.send_question, expect_output=True)
            rows.append(("one waking entry (blocks)", blocking))
    figures = []
    for label, result in rows:
        figures.append(
            Figure(
                f"Hooks: `salon hook stop`, {label} (median of {runs})",
                round(result["median"]),
                "ms",
                TARGET_MS,
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
