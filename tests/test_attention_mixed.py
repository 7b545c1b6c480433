"""The attention benchmark's mixed fleet (Claude Code, Codex and Gemini seats), in the
parts that need no CLI: the mixed days seat each client, a headless session's recorded
requests are attributed (a prompt that carries claims, a Stop/AfterAgent hold, history
not counted twice, an item shown twice counted), turns are counted per client, and the
stub judge names a seat its CLI named. (The replay: `python -m bench.attention --only
mixed`.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.attention import day as days
from bench.attention import score
from bench.attention.replay import CONFIGS, JUDGE, attribute_any

PROMPT = f"{score.PROMPT_MARK} Carry on."


def test_the_mixed_days_seat_claude_code_codex_and_gemini_sessions():
    for day in (days.mixed_quick_day(), days.mixed_full_day()):
        clients = {days.client_of(day, agent) for agent in day["projects"]}

        assert clients == {"claude", "codex", "gemini"}
        assert days.problems(day) == []
    quick = days.mixed_quick_day()
    owed = {p for e in days.entries(quick) for p in e["owed"]}
    assert owed == set(quick["personas"])  # every session is owed something
    seated = {t["persona"] for s in quick["steps"] for t in s.get("to", []) if "persona" in t}
    assert seated == set(quick["personas"])  # and written to by its seat once at least
    assert "mixed" in CONFIGS
    assert "clients" not in days.quick_day()  # the other configurations' day is unchanged


def codex_body(*items: dict) -> dict:
    return {"input": list(items)}


def said(role: str, text: str) -> dict:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def test_a_codex_prompt_that_carries_a_claim_is_a_next_turn_telling_and_a_hold_a_stop():
    first = [said("developer", "agent-salon: this session is api#1"), said("user", PROMPT)]
    context = said("developer", 'a claim on you: "[d01] Question"')
    second = [*first, said("assistant", "Noted."), context, said("user", PROMPT)]
    hold = said("user", 'Read the inbox before you stop: "[d02] Please"')
    third = [*second, said("assistant", "Noted."), hold]
    bodies = [codex_body(*first), codex_body(*second), codex_body(*third)]

    got, most = score.attribute_headless("codex", "a", "s", bodies, ["[d01]", "[d02]"])

    assert [(r.kind, r.markers) for r in got] == [
        ("prompt", []),
        ("next", ["[d01]"]),
        ("stop", ["[d02]"]),
    ]
    assert most == {"[d01]": 1, "[d02]": 1}  # history is not a repeat


def gemini_body(*contents: tuple[str, str]) -> dict:
    return {"contents": [{"role": role, "parts": [{"text": text}]} for role, text in contents]}


def test_a_gemini_request_that_shows_a_claim_in_two_parts_is_a_repeat():
    told = f'<hook_context>"[d01] Question"</hook_context>\n\n{PROMPT}'
    again = [("user", told), ("model", "Noted."), ("user", 'again: "[d01] Question"')]
    bodies = [gemini_body(("user", told)), gemini_body(*again)]
    day = tiny_mixed_day()

    got, most = attribute_any(day, "b", "s", bodies)

    assert [(r.kind, r.markers) for r in got] == [("next", ["[d01]"]), ("stop", ["[d01]"])]
    scored = score.score(day, got, most={(m, "b"): n for m, n in most.items()})
    assert (scored.missed, scored.repeated, scored.repeated_pairs) == (0, 1, [("d01", "b")])
    alone, most = attribute_any(day, "b", "s", bodies[:1])
    once = score.score(day, alone, most={(m, "b"): n for m, n in most.items()})
    assert (once.missed, once.repeated, once.turns_by_client) == (0, 0, {"gemini": 1})


def tiny_mixed_day() -> dict:
    return {
        "personas": {
            "a": {"agent": "web-app", "focus": "", "sessions": ["aaaaaaaa-1"]},
            "b": {"agent": "billing", "focus": "", "sessions": ["bbbbbbbb-1"]},
        },
        "clients": {"billing": "gemini"},
        "served": {},
        "steps": [
            {"op": "send", "tag": "d01", "from": "a", "text": "[d01] Question", "owed": ["b"]},
        ],
    }


def test_turns_are_counted_per_client():
    day = tiny_mixed_day()
    attributed = [
        score.Attributed("a", "s", 0, "monitor", "monitor", []),
        score.Attributed("b", "s", 0, "prompt", "prompt", []),  # work, not attention
        score.Attributed("b", "s", 1, "next", "next", ["[d01]"]),
    ]

    got = score.score(day, attributed)

    assert got.turns_by_client == {"claude": 1, "gemini": 1}
    assert (got.turns, got.missed, got.wasted_turns) == (2, 0, 1)


def test_the_stub_judge_knows_a_seat_its_cli_named_from_the_seats_file(tmp_path: Path):
    day = days.mixed_quick_day()
    days.write(day, tmp_path / "day.json")
    errand = next(s for s in day["steps"] if s.get("tag") == "d01")
    [owed] = errand["owed"]
    (tmp_path / "seats.json").write_text(json.dumps({"api-service#0193aa00": owed}))
    document = {"half": "letterbox", "seat": {"name": "api-service#0193aa00"},
                "entry": {"content": errand["text"]}}  # fmt: skip

    def judge(*extra: str) -> str:
        done = subprocess.run(
            [sys.executable, str(JUDGE), str(tmp_path / "day.json"), *extra],
            input=json.dumps(document), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert judge("--seats", str(tmp_path / "seats.json")) == "yes"
    assert judge() == "no"  # without it the seat is no persona of the day
    # A seat whose first turn runs before the replay knows its name: its agent's "#?".
    (tmp_path / "seats.json").write_text(json.dumps({"api-service#?": owed}))
    assert judge("--seats", str(tmp_path / "seats.json")) == "yes"
