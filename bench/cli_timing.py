"""Wall time of `salon send` and `salon inbox` as hooks and cron run them.

Each command is spawned as a real process against a fresh migrated SQLite file, RUNS
times (round-robin over the commands, so a busy machine weighs on each alike); the
median wall time and the median CPU time of the child (which a busy machine disturbs
less) are printed, with the interpreter's own floor (`python -c pass`), Django's
(importing django.conf and the ORM), and the machine.

Two start-ups are compared on the same command classes:
* `full`: what salon/cli.py did before the lean start-up — django.setup() with every
  INSTALLED_APPS entry (daphne, admin, auth, channels …), then Django's dispatcher
  (system checks are skipped by the bus commands in both);
* `salon`: `python -m salon.cli …` as it is now (the `salon` console script).

Byte-code is cached (in a temporary PYTHONPYCACHEPREFIX), as for an installed package,
even where PYTHONDONTWRITEBYTECODE is set; `--no-bytecode` measures without the cache.
Run by hand and copy the table into bench/RESULTS.md (section "CLI"):

    /work/venv/bin/python bench/cli_timing.py [--runs 20] [--no-bytecode]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: bench/ is on the path, not the checkout
    sys.path.insert(0, str(REPO))

from bench.common import machine  # noqa: E402

# The start-up of salon/cli.py before the lean path (the skeleton's main()).
FULL_STARTUP = (
    "import os, sys, django\n"
    "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'salon.settings')\n"
    "django.setup()\n"
    "from django.core.management import execute_from_command_line\n"
    "execute_from_command_line(['salon', *sys.argv[1:]])\n"
)


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall * 1000, cpu * 1000


def interleaved(rows, env: dict[str, str], cwd: Path, runs: int) -> list[tuple[float, ...]]:
    """Round-robin over the rows, so that each row sees the same machine load."""
    for _, argv in rows:
        timed(argv, env, cwd)  # warm the page cache and the byte-code cache
    samples: list[list[tuple[float, float]]] = [[] for _ in rows]
    for _ in range(runs):
        for index, (_, argv) in enumerate(rows):
            samples[index].append(timed(argv, env, cwd))
    result = []
    for row in samples:
        walls = [wall for wall, _ in row]
        result.append((statistics.median(walls), min(walls), statistics.median(c for _, c in row)))
    return result


def environment(tmp: Path, no_bytecode: bool = False) -> tuple[dict[str, str], Path]:
    """A migrated store in tmp, one seat in room `team`; the env and cwd of the commands."""
    cwd = tmp / "bench-agent"
    cwd.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGENT_SALON_", "CLAUDE_CODE_", "DJANGO_", "PYTHON"))
        and k not in ("DATABASE_URL", "REDIS_URL")
    }
    env.update(
        AGENT_SALON_DB=str(tmp / "salon.db"),
        PYTHONPATH=str(REPO),
        CLAUDE_CODE_SESSION_ID="bench0000-session",
    )
    if no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    salon = [sys.executable, "-m", "salon.cli"]
    subprocess.run([*salon, "migrate", "--verbosity", "0"], env=env, check=True)
    subprocess.run(
        [*salon, "join", "team", "--create"], env=env, cwd=cwd, check=True, capture_output=True
    )
    return env, cwd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-bytecode", action="store_true")
    options = parser.parse_args()
    python = sys.executable
    salon = [python, "-m", "salon.cli"]
    full = [python, "-c", FULL_STARTUP]
    with tempfile.TemporaryDirectory() as tmp:
        env, cwd = environment(Path(tmp), options.no_bytecode)
        send = ["send", "team", "FACT", "bench entry"]
        rows = [
            ("python -c pass (interpreter floor)", [python, "-c", "pass"]),
            (
                "import django.conf + django.db.models (Django floor)",
                [python, "-c", "import django.conf, django.db.models"],
            ),
            ('full start-up: send team FACT "…"', [*full, *send]),
            ("full start-up: inbox team", [*full, "inbox", "team"]),
            ('salon send team FACT "…"', [*salon, *send]),
            ("salon inbox team", [*salon, "inbox", "team"]),
            ("salon peek team --json", [*salon, "peek", "team", "--json"]),
        ]
        cache = "no byte-code cache" if options.no_bytecode else "byte-code cached"
        print(
            f"{date.today().isoformat()} — {machine()}; load average "
            f"{os.getloadavg()[0]:.2f}; {cache}; {options.runs} runs each\n"
        )
        print("| command | median wall ms | min wall ms | median CPU ms |")
        print("|---|---:|---:|---:|")
        for (label, _), (wall, low, cpu) in zip(
            rows, interleaved(rows, env, cwd, options.runs), strict=True
        ):
            print(f"| `{label}` | {wall:.0f} | {low:.0f} | {cpu:.0f} |")


if __name__ == "__main__":
    main()
