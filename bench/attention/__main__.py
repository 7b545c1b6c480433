"""`python -m bench.attention [--quick] [--only CONFIG,…] [--json PATH] [--write]`

Writes the day (bench/attention/day.py) to a file, replays it once per configuration with
the real Claude Code (bench/attention/replay.py) and prints the table: turns spent (and
by client), owed, missed, wasted, repeated, lookups served with no turn, edits a claim
stopped. --write puts the table at the top of bench/RESULTS.md. --quick is the short day
(one project pair, ten entries) in the full configuration, and the mixed fleet's short
day.

`mixed` is the full configuration with a mixed fleet: the day's api-service sessions are
the real Codex CLI, billing's the real Gemini CLI, the others Claude Code (day.py,
`mixed_quick_day` / `mixed_full_day`). Codex and Gemini are headless and turn-based:
nothing starts a turn in an idle session, and a claim is told at its next turn. The
replay's rule for them: a headless session gets a turn (its session resumed with a
prompt) at each step where the day's person types to it — its first prompt when it
starts or resumes (an edit prompt: the day gives them none) — and one last "carry on"
turn when the day ends it, or at the close of the day if it is still on, so that what is
owed to it has a next turn to be told at. Its turns spent are its requests that told
something (`next`: a prompt carrying claims in its context; `stop`: a Stop/AfterAgent
hold). Expected: 0 missed, 0 repeated. It needs the Codex and Gemini CLIs
(tests/codex_cli/install_codex.sh, tests/gemini_cli/install_gemini.sh); --quick leaves it
out, saying so, when they are not installed.
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
from bench.attention.headless import binaries
from bench.attention.replay import CONFIGS, Replay, rescore, stop_all
from bench.common import Figure, loadavg, machine, now_utc, write_json
from tests.claude_cli.harness import claude_binary

NAMES = {
    "push": "push-everything",
    "rule": "wake rule alone",
    "full": "rule + letterbox + net + policy",
    "full-wrong": "the same, judge wrong 10 %",
    "full-failing": "the same, judge failing 10 %",
    "mixed": "mixed fleet: Claude Code + Codex + Gemini, rule + letterbox + net + policy",
}
CLIENTS = ("claude", "codex", "gemini")
COLUMNS = (
    "turns spent",
    "turns: claude / codex / gemini",
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
    by = s.turns_by_client
    clients = " / ".join(
        str(by.get(c, 0)) if c in result.get("fleet", ("claude",)) else "-" for c in CLIENTS
    )
    return [
        s.turns,
        clients,
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
    by_client = ", ".join(f"{c} {s.turns_by_client.get(c, 0)}" for c in result.get("fleet", ()))
    return (
        f"{NAMES[result['config']]}: turns by cause: {causes}; missed: "
        f"{pairs(s.missed_pairs)}; wasted: {pairs(s.wasted_pairs)}; repeated: "
        f"{pairs(s.repeated_pairs)}; {s.requests} model requests in all"
        + (f"; turns spent by client: {by_client}" if len(result.get("fleet", ())) > 1 else "")
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
                target=0 if result["config"] in ("full", "mixed") else None,
            ),
        ]
        if result["config"] == "mixed":
            out += [
                Figure(
                    f"attention, mixed fleet: turns spent, {c}",
                    s.turns_by_client.get(c, 0),
                    "turns",
                )
                for c in CLIENTS
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
    configs = chosen_configs(args, parser)
    work = Path(tempfile.mkdtemp(prefix="salon-attention-"))
    plays = written_days(configs, args.quick, work)
    load_before, began = loadavg(), time.monotonic()
    results = replayed(configs, plays, work, claude, args.parallel)
    took = time.monotonic() - began
    text = table(results)
    print(text)
    for result in results:
        print(detail(result))
    if args.json:
        write_json(figures(results), args.json)
    if args.write:
        write_results(plays, args.quick, text, results, took, load_before)
    if args.keep:
        print(f"kept {work}", file=sys.stderr)
    else:
        remove(work)
    return 0


def chosen_configs(args, parser) -> list[str]:
    """--only's configurations, else the default ones (the mixed fleet left out, with a
    word, where the Codex or Gemini CLI is missing)."""
    default = ["full", "mixed"] if args.quick else list(CONFIGS)
    missing = [c for c, path in binaries().items() if path is None]
    if missing and not args.only:
        print(
            f"not replaying the mixed fleet: no {' or '.join(missing)} CLI "
            "(tests/codex_cli/install_codex.sh, tests/gemini_cli/install_gemini.sh)",
            file=sys.stderr,
        )
        default.remove("mixed")
    configs = [c.strip() for c in args.only.split(",")] if args.only else default
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration {', '.join(unknown)}; one of {', '.join(CONFIGS)}")
    return configs


def written_days(configs: list[str], quick: bool, work: Path) -> dict:
    """config → (its day, the day's file in `work`, its sha256); a day whose labels
    disagree stops the run."""
    plays = {}
    for config in configs:
        document = day_for(config, quick)
        wrong = days.problems(document)
        if wrong:
            raise SystemExit("the day's labels are inconsistent:\n" + "\n".join(wrong))
        day_path = work / day_name(config, quick)
        if not day_path.exists():
            print(f"the day: {day_path}, sha256 {days.digest(document)}", file=sys.stderr)
        plays[config] = (document, day_path, days.write(document, day_path))
    return plays


def replayed(configs, plays, work: Path, claude, parallel: int) -> list[dict]:
    """Each configuration replayed (its own store, HOME, models and terminals: they may
    overlap); one failing must not hide the others."""

    def one(config: str) -> dict:
        started = time.monotonic()
        document, day_path, _sha = plays[config]
        replay = Replay(document, day_path, config, work / config, claude)
        try:
            return {**replay.run(), "fleet": fleet(document)}
        except Exception as exc:
            return {"config": config, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            (work / f"{config}.log").write_text("\n".join(replay.log))
            took = time.monotonic() - started
            print(f"  {config}: {took:.0f} s (load average {loadavg()})", file=sys.stderr)

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return list(pool.map(one, configs))


def remove(work: Path) -> None:
    # Claude Code writes its session files as it exits, after its terminal closed.
    for _ in range(10):
        shutil.rmtree(work, ignore_errors=True)
        if not work.exists():
            break
        time.sleep(1)


def day_for(config: str, quick: bool) -> dict:
    if config == "mixed":
        return days.mixed_quick_day() if quick else days.mixed_full_day()
    return days.quick_day() if quick else days.full_day()


def day_name(config: str, quick: bool) -> str:
    return f"day-{'mixed-' if config == 'mixed' else ''}{'quick' if quick else 'full'}.json"


def fleet(document: dict) -> tuple[str, ...]:
    """The clients the day's sessions run in."""
    return tuple(sorted({days.client_of(document, a) for a in document["projects"]}))


def describe(document: dict, sha: str) -> str:
    clients = document.get("clients") or {}
    seated = "; ".join(
        f"{agent}: {days.client_of(document, agent)}" for agent in document["projects"]
    )
    return (
        f"seed {document['seed']}, sha256 `{sha}`, {len(document['projects'])} projects, "
        f"{len(document['personas'])} sessions, {len(days.entries(document))} labelled "
        f"entries" + (f" ({seated})" if clients else "")
    )


def write_results(plays, quick, text, results, took, load_before) -> None:
    from bench.common import RESULTS

    kind = "short day" if quick else "the day"
    configs = [r["config"] for r in results]
    only = f" --only {','.join(configs)}" if configs != list(CONFIGS) else ""
    seen, described = set(), []
    for config in configs:
        document, day_path, sha = plays[config]
        if day_path not in seen:
            seen.add(day_path)
            described.append(f"{day_path.name}: {describe(document, sha)}")
    took = f"{took:.0f} s" if took is not None else "rescored"
    section = "\n".join(
        [
            f"## Attention: model turns over a day of traffic ({now_utc()}, {kind})",
            "",
            f"`python -m bench.attention{' --quick' if quick else ''}{only}`, "
            f"{took}. The day: {'; '.join(described)}. Machine: {machine()}. Load "
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
    plays, results = {}, []
    for config in CONFIGS:
        if not (directory / config).is_dir():
            continue
        mixed = "mixed-" if config == "mixed" else ""
        found = directory.glob(f"day-{mixed}*.json")
        [day_path] = [p for p in found if mixed or "mixed" not in p.name]
        document = json.loads(day_path.read_text())
        plays[config] = (document, day_path, days.digest(document))
        results.append({**rescore(document, directory / config, config), "fleet": fleet(document)})
    text = table(results)
    print(text)
    for result in results:
        print(detail(result))
    if write:
        quick = next(iter(plays.values()))[0]["quick"]
        write_results(plays, quick, text, results, None, loadavg())
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
