"""`python -m bench.attention [--quick] [--only CONFIG,…] [--json PATH] [--write]`

Writes the day (bench/attention/day.py) to a file, replays it once per configuration with
the real Claude Code (bench/attention/replay.py) and prints the table: turns spent, owed,
missed, wasted, repeated, lookups served with no turn, edits a claim stopped. --write puts
the table at the top of bench/RESULTS.md. --quick is the short day (one project pair, ten
entries), the full configuration only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.attention import day as days
from bench.attention.replay import CONFIGS, Replay, rescore, stop_all
from bench.common import Figure, loadavg, machine, now_utc, write_json
from tests.claude_cli.harness import claude_binary

NAMES = {
    "push": "push-everything",
    "rule": "wake rule alone",
    "full": "rule + letterbox + net + policy",
    "full-wrong": "the same, judge wrong 10 %",
    "full-failing": "the same, judge failing 10 %",
}
COLUMNS = (
    "turns spent",
    "owed",
    "missed",
    "wasted turns",
    "wasted tellings",
    "repeated",
    "lookups served, no turn",
    "edits a claim stopped",
    "s",
)


def row(result: dict) -> list:
    s = result["score"]
    return [
        s.turns,
        s.owed,
        s.missed,
        s.wasted_turns,
        s.wasted_tellings,
        s.repeated,
        f"{s.lookups_without_turn}/{s.lookups}",
        s.edits_stopped,
        result["seconds"],
    ]


def table(results: list[dict]) -> str:
    lines = ["| configuration | " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
    for result in results:
        if "error" in result:
            lines.append(f"| {NAMES[result['config']]} | failed: {result['error'][:200]} |")
            continue
        cells = [NAMES[result["config"]], *map(str, row(result))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pairs(found: list, shown: int = 12) -> str:
    """(entry, persona) pairs, the first `shown` of them."""
    words = [f"{tag}→{persona}" for tag, persona in found[:shown]]
    if len(found) > shown:
        words.append(f"… {len(found) - shown} more")
    return ", ".join(words) or "none"


def detail(result: dict) -> str:
    if "error" in result:
        return f"{NAMES[result['config']]}: failed ({result['error']})"
    s = result["score"]
    causes = ", ".join(f"{cause} {n}" for cause, n in s.by_cause.items())
    return (
        f"{NAMES[result['config']]}: turns by cause: {causes}; missed: "
        f"{pairs(s.missed_pairs)}; wasted: {pairs(s.wasted_pairs)}; repeated: "
        f"{pairs(s.repeated_pairs)}; {s.requests} model requests in all"
    )


def figures(results: list[dict]) -> list[Figure]:
    out = []
    by = {r["config"]: r["score"] for r in results if "score" in r}
    for result in results:
        if "error" in result:
            out.append(
                Figure(f"attention, {NAMES[result['config']]}", None, "", error=result["error"])
            )
            continue
        s, name = result["score"], NAMES[result["config"]]
        out += [
            Figure(f"attention, {name}: turns spent", s.turns, "turns", detail=detail(result)),
            Figure(f"attention, {name}: missed", s.missed, "", target=0),
            Figure(f"attention, {name}: wasted turns", s.wasted_turns, "turns"),
            Figure(
                f"attention, {name}: repeated",
                s.repeated,
                "",
                target=0 if result["config"] == "full" else None,
            ),
        ]
    if "push" in by and "full" in by and by["push"].wasted_turns:
        cut = 100 * (1 - by["full"].wasted_turns / by["push"].wasted_turns)
        out.append(
            Figure(
                "attention: wasted turns below push-everything (full)",
                round(cut, 1),
                "%",
                target=90,
                higher_is_better=True,
            )
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the short day")
    parser.add_argument("--only", help=f"comma-separated, of: {', '.join(CONFIGS)}")
    parser.add_argument("--json", type=Path, help="write the figures as JSON to this file")
    parser.add_argument("--write", action="store_true", help="put the table in RESULTS.md")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--rescore", type=Path, help="score a kept run's directory again (nothing is replayed)"
    )
    parser.add_argument(
        "--parallel", type=int, default=4, help="configurations replayed at once (default 4)"
    )
    args = parser.parse_args()
    claude = claude_binary()
    if claude is None:
        print(
            "Claude Code CLI not found: run tests/claude_cli/install_claude.sh or set "
            "SALON_CLAUDE_BIN",
            file=sys.stderr,
        )
        return 2
    if args.rescore:
        return rescored(args.rescore, args.write)
    default = ("full",) if args.quick else CONFIGS
    configs = [c.strip() for c in args.only.split(",")] if args.only else list(default)
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration {', '.join(unknown)}; one of {', '.join(CONFIGS)}")
    document = days.quick_day() if args.quick else days.full_day()
    wrong = days.problems(document)
    if wrong:
        raise SystemExit("the day's labels are inconsistent:\n" + "\n".join(wrong))
    work = Path(tempfile.mkdtemp(prefix="salon-attention-"))
    day_path = work / f"day-{'quick' if args.quick else 'full'}.json"
    sha = days.write(document, day_path)
    load_before, began = loadavg(), time.monotonic()
    print(f"the day: {day_path}, sha256 {sha}", file=sys.stderr, flush=True)

    def one(config: str) -> dict:
        started = time.monotonic()
        replay = Replay(document, day_path, config, work / config, claude)
        try:
            return replay.run()
        except Exception as exc:  # one configuration failing must not hide the others
            return {"config": config, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            (work / f"{config}.log").write_text("\n".join(replay.log))
            took = time.monotonic() - started
            print(f"  {config}: {took:.0f} s (load average {loadavg()})", file=sys.stderr)

    # Each configuration has its own store, HOME, models and terminals: they may overlap.
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        results = list(pool.map(one, configs))
    took = time.monotonic() - began
    text = table(results)
    print(text)
    for result in results:
        print(detail(result))
    if args.json:
        write_json(figures(results), args.json)
    if args.write:
        write_results(document, sha, text, results, took, load_before)
    if not args.keep:
        # Claude Code writes its session files as it exits, after its terminal closed.
        for _ in range(10):
            shutil.rmtree(work, ignore_errors=True)
            if not work.exists():
                break
            time.sleep(1)
    else:
        print(f"kept {work}", file=sys.stderr)
    return 0


def write_results(document, sha, text, results, took, load_before) -> None:
    from bench.common import RESULTS

    kind = "short day" if document["quick"] else "the day"
    section = "\n".join(
        [
            f"## Attention: model turns over a day of traffic ({now_utc()}, {kind})",
            "",
            f"`python -m bench.attention{' --quick' if document['quick'] else ''}`, "
            f"{took:.0f} s. The day: seed {document['seed']}, sha256 `{sha}`, "
            f"{len(document['projects'])} projects, {len(document['personas'])} sessions, "
            f"{len(days.entries(document))} labelled entries. Machine: {machine()}. Load "
            f"average (1/5/15 min) {load_before} at the start, {loadavg()} at the end.",
            "",
            text,
            "",
            *(f"* {detail(r)}" for r in results),
            "",
        ]
    )
    body = RESULTS.read_text()
    title, _, rest = body.partition("\n")
    RESULTS.write_text(f"{title}\n\n{section}\n{rest.lstrip(chr(10))}")


def rescored(directory: Path, write: bool) -> int:
    [day_path] = directory.glob("day-*.json")
    document = json.loads(day_path.read_text())
    results = [rescore(document, directory / c, c) for c in CONFIGS if (directory / c).is_dir()]
    text = table(results)
    print(text)
    for result in results:
        print(detail(result))
    if write:
        write_results(document, days.digest(document), text, results, None, loadavg())
    return 0


def interrupted(signum, frame) -> None:
    stop_all()
    raise SystemExit(f"interrupted by signal {signum}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    signal.signal(signal.SIGTERM, interrupted)
    try:
        sys.exit(main())
    finally:
        stop_all()
