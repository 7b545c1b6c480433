"""The benchmark suite: `python -m bench [--quick] [--only NAME,…] [--no-write]`.

Runs every scenario module in a process of its own (a real daemon on loopback, real MCP
clients; see each module's docstring), prints one table (figure, value, target, met?,
load average) and appends it, dated, with the machine, to bench/RESULTS.md.

--quick is the smoke version (two to four minutes on 2 cores, small sizes, no targets
judged where the size differs from the target's): it checks that every scenario still
runs, and does not write RESULTS.md unless --write is given. Exit status: 1 if a
scenario failed to run (a missed target is a finding, not a failure).

--seconds S gives the run a time budget (CI's, what its 30 minutes leave after the
suites): a scenario is started only while the budget lasts and those left are named as
not run, which is no failure. So that no scenario is always the one left out, a budgeted
run starts at a different scenario each day (the day of the year picks it) and goes
round.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import (
    REPO,
    Figure,
    append_results,
    loadavg,
    machine,
    now_utc,
    own_environment,
    raise_nofile,
    read_json,
    table,
)

# name → (module, extra arguments, time limit in seconds for the full run)
# A smoke run's time limit per scenario: two minutes, but the attention's short days drive
# real agent CLIs (Claude Code beside Codex and Gemini), a minute or two on a loaded box.
QUICK_SECONDS = {"attention": 360}
QUICK_DEFAULT_SECONDS = 120
SCENARIOS = {
    "push_latency": ("bench.push_latency", [], 900),
    "cross_process": ("bench.cross_process", ["--suite"], 600),
    "throughput": ("bench.throughput", [], 900),
    "fanout": ("bench.fanout", [], 900),
    "idle": ("bench.idle", [], 1200),
    "scale": ("bench.scale", [], 2400),
    "cli_hooks": ("bench.cli_hooks", [], 900),
    "claim_hooks": ("bench.claim_hooks", [], 600),
    "admin": ("bench.admin_page", [], 1800),
    "relay": ("bench.relay", [], 900),
    "relay_netns": ("bench.relay_netns", [], 900),
    "side_by_side": ("bench.side_by_side", [], 2400),
    "workers": ("bench.workers", [], 600),
    "ask": ("bench.ask", [], 600),
    "attention": ("bench.attention", [], 1800),
    "fuzz": ("bench.fuzz", [], 1200),
}


def run_scenario(name: str, quick: bool, log: Path) -> list[Figure]:
    module, extra, limit = SCENARIOS[name]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{name}.json"
        command = [sys.executable, "-m", module, *extra, "--json", str(out)]
        if quick:
            command.append("--quick")
        started = time.monotonic()
        with log.open("ab") as sink:
            sink.write(f"\n===== {name}: {' '.join(command)}\n".encode())
            sink.flush()
            try:
                done = subprocess.run(
                    command,
                    cwd=REPO,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    timeout=QUICK_SECONDS.get(name, QUICK_DEFAULT_SECONDS) if quick else limit,
                )
                code = done.returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        took = time.monotonic() - started
        print(f"  {name}: {took:.0f} s (load average {loadavg()})", file=sys.stderr, flush=True)
        if code != 0 or not out.exists():
            return [Figure(name, None, "", error=f"exit {code}; see {log}")]
        return read_json(out)


def in_todays_order(names: list[str]) -> list[str]:
    """The same scenarios, starting at the one the day of the year picks, round."""
    start = time.gmtime().tm_yday % len(names)
    return names[start:] + names[:start]


def run_all(
    names: list[str], quick: bool, seconds: float | None, log: Path
) -> tuple[list[Figure], list[str]]:
    """(the figures of the scenarios run, the names of those the budget left out)."""
    started = time.monotonic()
    figures: list[Figure] = []
    not_run: list[str] = []
    for name in in_todays_order(names) if seconds else names:
        # A scenario may end at most one default limit after the budget (the caller's
        # margin): a longer one starts only early enough.
        overrun = QUICK_SECONDS.get(name, QUICK_DEFAULT_SECONDS) - QUICK_DEFAULT_SECONDS
        if seconds and time.monotonic() - started + overrun > seconds:
            not_run.append(name)
            continue
        figures.extend(run_scenario(name, quick, log))
    return figures, not_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the smoke version (small sizes)")
    parser.add_argument("--only", help=f"comma-separated, of: {', '.join(SCENARIOS)}")
    parser.add_argument("--write", action="store_true", help="write RESULTS.md (also --quick)")
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    parser.add_argument(
        "--seconds", type=float, help="start no scenario after this many seconds (see above)"
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",")] if args.only else list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; one of {', '.join(SCENARIOS)}")
    own_environment()
    raise_nofile()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    log = Path(tempfile.gettempdir()) / f"salon-bench-{os.getpid()}.log"
    where = machine()
    load_before = loadavg()
    started = time.monotonic()
    kind = ("quick" if args.quick else "full") + (f", only {args.only}" if args.only else "")
    print(f"agent-salon benchmarks ({kind}), log in {log}", file=sys.stderr, flush=True)
    figures, not_run = run_all(names, args.quick, args.seconds, log)
    took = time.monotonic() - started
    command = "python -m bench" + (" --quick" if args.quick else "")
    if args.only:
        command += f" --only {args.only}"
    section = "\n".join(
        [
            f"## Suite run {now_utc()} ({kind})",
            "",
            f"`{command}`, {took:.0f} s. Machine: {where}. Load average (1/5/15 min) "
            f"{load_before} at the start, {loadavg()} at the end; each figure carries the "
            "1-minute load average when it was taken. Medians and percentiles are over the "
            "samples named in the detail column.",
            "",
            table(figures),
            "",
            *(
                [f"Not run, out of the {args.seconds:.0f} s budget: {', '.join(not_run)}.", ""]
                if not_run
                else []
            ),
        ]
    )
    print(section)
    if (args.write or not args.quick) and not args.no_write:
        append_results(section)
        print(f"appended to {REPO / 'bench' / 'RESULTS.md'}", file=sys.stderr)
    failed = [f.name for f in figures if f.error]
    if failed:
        print(f"FAILED to run: {', '.join(failed)} (log: {log})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
