"""What the hooks and `salon send` import, and what `salon top`'s terminal library costs.

`salon top` is built on Textual (with Rich under it), a large import. Only `salon top`
loads it (salon.top.run); this measures that the commands that run on every turn did
not start paying for it: each is run as a real process with PYTHONPROFILEIMPORTTIME=1,
cold (no server of the store running: the process loads Django itself, the heaviest
case), and the modules it imported are counted and their import times summed (the
`self` column, µs). `--against PATH` runs the same with another checkout first on the
path (e.g. `git archive int | tar -x -C /tmp/int`), interleaved run by run, so the two
columns share the machine's load.

    python -m bench.top_imports [--runs 5] [--against /tmp/int]

Also: Textual's own import (`import salon.top.app` after Django), what `salon top`
adds to its start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WEB_SESSION = "3f9c1a20-5b7e-4c1d-9a2f-0e1d2c3b4a51"


def hook_json(kind: str, cwd: Path) -> str:
    event = {"session-start": "SessionStart", "stop": "Stop", "heartbeat": "PostToolUse"}[kind]
    payload = {
        "session_id": WEB_SESSION,
        "transcript_path": str(cwd / "t.jsonl"),
        "cwd": str(cwd),
        "hook_event_name": event,
    }
    if kind == "session-start":
        payload["source"] = "startup"
    if kind == "stop":
        payload["stop_hook_active"] = False
    if kind == "heartbeat":
        payload.update(tool_name="Bash", tool_input={"command": "ls"}, tool_response={})
    return json.dumps(payload)


def profile(
    argv: list[str], env: dict[str, str], cwd: Path, stdin: str = ""
) -> tuple[int, int, set]:
    """(modules imported, µs importing them, top-level names) of one run."""
    done = subprocess.run(
        [sys.executable, "-m", "salon.cli", *argv],
        env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    modules, micros, names = 0, 0, set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            self_us, _cumulative, name = (part.strip() for part in line[12:].split("|"))
            if self_us.isdigit():
                modules += 1
                micros += int(self_us)
                names.add(name.split(".")[0])
    return modules, micros, names


def environment(repo: Path, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SALON_", "DJANGO_"))}
    env.update(
        AGENT_SALON_DB=str(data / "salon.db"),
        PYTHONPATH=str(repo),
        AGENT_SALON_NAME="web-app",
        CLAUDE_CODE_SESSION_ID=WEB_SESSION,
        AGENT_SALON_HEADLESS="0",
    )
    return env


def textual_import(repo: Path, data: Path) -> int:
    code = (
        "import os, time; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'salon.settings')\n"
        "from salon import config, store; store.prepare(config.merged_environment())\n"
        "import django; django.setup()\n"
        "t = time.perf_counter(); import salon.top.app; print(int((time.perf_counter() - t) * 1e6))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=environment(repo, data),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return int(done.stdout.strip() or 0)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.top_imports")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", type=Path, help="another checkout, measured alongside")
    args = parser.parse_args()
    repos = {"this checkout": REPO}
    if args.against:
        repos = {f"{args.against}": args.against, **repos}
    commands = {
        "salon send (cold)": (["send", "team", "FACT", "bench"], None),
        "hook session-start (cold)": (["hook", "session-start"], "session-start"),
        "hook heartbeat (cold)": (["hook", "heartbeat"], "heartbeat"),
        "hook stop (cold)": (["hook", "stop"], "stop"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        cwd = data / "web-app"
        cwd.mkdir()
        env = environment(REPO, data)
        subprocess.run([sys.executable, "-m", "salon.cli", "migrate", "-v0"], env=env, check=True)
        results: dict[tuple[str, str], list[tuple[int, int, set]]] = {}
        for _ in range(args.runs):
            for label, (argv, kind) in commands.items():
                for name, repo in repos.items():
                    stdin = hook_json(kind, cwd) if kind else ""
                    run = profile(argv, environment(repo, data), cwd, stdin)
                    results.setdefault((label, name), []).append(run)
        runs = f"median of {args.runs}"
        print(f"| command | checkout | modules | import µs ({runs}) | textual, rich |")
        print("|---|---|---:|---:|---|")
        for (label, name), runs in results.items():
            modules = statistics.median(r[0] for r in runs)
            micros = statistics.median(r[1] for r in runs)
            heavy = any({"textual", "rich"} & r[2] for r in runs)
            print(
                f"| {label} | {name} | {modules:.0f} | {micros:,.0f} | {'yes' if heavy else 'no'} |"
            )
        took = statistics.median(textual_import(REPO, data) for _ in range(args.runs))
        print(
            f"\n`import salon.top.app` after Django (salon top only): {took / 1000:.0f} ms median"
        )


if __name__ == "__main__":
    main()
