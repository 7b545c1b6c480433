"""The attention benchmark's parts that do not depend on timing: the day is the same for
a seed and its labels hold together; a recorded model request is attributed to the
telling that caused it; the scoring counts missed, wasted and repeated tellings; the stub
judge answers from the labels. (The replay itself runs real Claude Code sessions:
`python -m bench.attention`.)"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

from bench.attention import day as days
from bench.attention import score
from bench.attention.replay import JUDGE, remote_name

# ------------------------------------------------------------------ the day


def test_the_same_seed_writes_the_same_file_and_its_hash_names_it(tmp_path: Path):
    first = days.write(days.full_day(), tmp_path / "a.json")
    second = days.write(days.full_day(), tmp_path / "b.json")

    assert first == second
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    import hashlib

    assert hashlib.sha256((tmp_path / "a.json").read_bytes()).hexdigest() == first
    assert days.digest(days.full_day(seed=40)) != first


def test_the_full_day_holds_four_projects_seven_sessions_and_the_whole_vocabulary():
    day = days.full_day()
    ops = [step["op"] for step in day["steps"]]
    sends = [step for step in day["steps"] if step["op"] == "send"]

    assert len(day["projects"]) == 4 and len(day["personas"]) == 7
    assert {"start", "end", "resume", "focus", "quiet", "claim", "edit", "ask"} <= set(ops)
    resumed = next(s["persona"] for s in day["steps"] if s["op"] == "resume")
    sessions = day["personas"][resumed]["sessions"]
    assert len(sessions) == 2 and sessions[0] != sessions[1]  # a new session id
    assert {s["type"] for s in sends} == {"QUESTION", "REQUEST", "ANSWER", "FACT"}
    addressed = {("agent" if t.get("agent") else "seat") for s in sends for t in s["to"]}
    assert addressed == {"agent", "seat"} and any(not s["to"] for s in sends)
    assert any(len(s["text"]) > 1500 for s in sends)  # long facts
    keys = {s["key"] for s in day["steps"] if s["op"] == "ask"}
    assert {"status:db", "port:staging", days.DENIED_KEY, *days.GATED_KEYS} <= keys


def test_the_labels_of_both_days_are_consistent():
    assert days.problems(days.full_day()) == []
    assert days.problems(days.quick_day()) == []


def test_the_short_day_is_one_project_pair_and_ten_entries():
    day = days.quick_day()

    assert len(day["projects"]) == 2 and len(day["personas"]) == 2
    assert len([s for s in day["steps"] if "tag" in s]) == 10


def test_a_label_that_contradicts_the_day_is_found():
    day = days.full_day()
    broken = copy.deepcopy(day)
    answer = next(s for s in broken["steps"] if s.get("re"))
    answer["owed"] = [answer["from"]]
    dangling = next(s for s in broken["steps"] if s.get("re") and s is not answer)
    dangling["re"] = "d99"

    found = days.problems(broken)

    assert f"{answer['tag']}: owed to its own writer" in found
    assert f"{dangling['tag']}: re d99 names no earlier entry" in found


def test_a_persona_that_is_quiet_is_owed_nothing():
    day = copy.deepcopy(days.full_day())
    quiet = next(s for s in day["steps"] if s["op"] == "quiet")["persona"]
    later = next(s for s in day["steps"][::-1] if s["op"] == "send" and s["from"] != quiet)
    later["owed"] = [quiet]

    assert f"{later['tag']}: owed to {quiet}, which is quiet" in days.problems(day)


# ------------------------------------------------------------ attribution


def user(*blocks) -> dict:
    return {"role": "user", "content": list(blocks)}


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def said(value: str) -> dict:
    return {"role": "assistant", "content": [text(value)]}


def tool_use(use_id: str, name: str) -> dict:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": use_id, "name": name}]}


def result(use_id: str, value: str, error: bool = False) -> dict:
    return {"type": "tool_result", "tool_use_id": use_id, "content": value, "is_error": error}


START = (
    "SessionStart:startup hook additional context: agent-salon: 1 entry on the bus is a claim "
    "on you (web-app#06a3f5be) and is still unread:\n- REQUEST from api-service#ba9468ff in "
    '"team": "[d05] Please add an index"'
)
MONITOR = (
    '<task-notification><summary>Monitor event: "salon"</summary>[salon] QUESTION from '
    'web-app#06a3f5be in "team": "[d07] Question for whoever owns the cart totals"'
)
STOP = (
    "Stop hook blocking error from command: agent-salon: 1 entry on the bus is a claim on you "
    '...:\n- ANSWER from api-service#ba9468ff in "team": "[d02] Answer: it is handled"'
)


def conversation() -> list[dict]:
    """The bodies one session sent, in order, as Claude Code grows the conversation."""
    first = [user(text(START), text(f"{score.PROMPT_MARK} A new session."))]
    monitor = [*first, said("Noted."), user(text(MONITOR))]
    stop = [*monitor, said("Noted."), user(text(STOP))]
    edit = [*stop, said("Noted."), user(text(f"{score.PROMPT_MARK} Edit src/cart.py"))]
    read = [*edit, tool_use("t1", "Read"), user(result("t1", "TOTAL = 1"))]
    held = "agent-salon: src/cart.py is claimed by another session of this repository (…)"
    edited = [*read, tool_use("t2", "Edit"), user(result("t2", held, error=True))]
    waited = [*edited, tool_use("t3", "mcp__plugin_agent-salon_agent-salon__wait"),
              user(result("t3", '{"entries": [{"content": "[d08] Answer"}]}'))]  # fmt: skip
    return [{"messages": m} for m in (first, monitor, stop, edit, read, edited, waited)]


def test_each_request_is_attributed_to_what_is_new_in_it():
    markers = ["[d02]", "[d05]", "[d07]", "[d08]"]

    got = score.attribute("web.cart", "06a3f5be", conversation(), markers)

    assert [(a.kind, a.cause, a.markers) for a in got] == [
        ("start", "start", ["[d05]"]),
        ("monitor", "monitor", ["[d07]"]),
        ("stop", "stop", ["[d02]"]),
        ("prompt", "prompt", []),
        ("continuation", "prompt", []),
        ("continuation", "prompt", []),
        ("wait", "wait", ["[d08]"]),
    ]
    assert [a.held_back for a in got] == [False] * 5 + [True, False]


def test_a_first_prompt_with_no_claim_listed_is_work_not_a_telling():
    body = {"messages": [user(text("SessionStart: 0 unread"), text(f"{score.PROMPT_MARK} Hi"))]}

    [got] = score.attribute("web.ui", "x", [body], ["[d01]"])

    assert (got.kind, got.markers) == ("prompt", [])


# ---------------------------------------------------------------- scoring


def tiny_day() -> dict:
    """Two entries: d01 owed to b, d02 owed to nobody; d03 a served lookup."""
    return {
        "personas": {
            "a": {"agent": "one", "sessions": ["a" * 36]},
            "b": {"agent": "two", "sessions": ["b" * 36]},
        },
        "served": {"status:db": "db status: up"},
        "steps": [
            {"op": "send", "tag": "d01", "from": "a", "owed": ["b"], "text": "[d01] q"},
            {"op": "send", "tag": "d02", "from": "b", "owed": [], "text": "[d02] fact"},
            {"op": "ask", "tag": "d03", "from": "a", "agent": "two", "key": "status:db",
             "owed": [], "text": "[d03] lookup",
             "derived": {"marker": "db status: up", "owed": []}},
        ],
    }  # fmt: skip


def told(persona: str, kind: str, *markers: str) -> score.Attributed:
    return score.Attributed(persona, "s", 0, kind, kind, list(markers))


def test_scoring_counts_owed_missed_wasted_and_repeated_tellings():
    attributed = [
        told("a", "prompt"),  # work: no turn spent on attention
        told("a", "monitor", "[d02]"),  # not owed: a wasted turn
        told("b", "stop", "[d02]"),  # not owed either
        told("b", "monitor", "[d02]"),  # told again: repeated, and wasted
    ]

    got = score.score(tiny_day(), attributed, served={"d03": "served"})

    assert (got.turns, got.owed, got.missed, got.wasted_turns) == (3, 1, 1, 3)
    assert got.missed_pairs == [("d01", "b")]
    assert got.wasted_pairs == [("d02", "a"), ("d02", "b")]
    assert (got.repeated, got.repeated_pairs) == (1, [("d02", "b")])
    assert (got.lookups, got.lookups_without_turn) == (1, 1)
    assert got.by_cause == {"monitor": 2, "stop": 1}


def test_a_turn_that_told_an_owed_entry_is_not_wasted_and_a_lookup_that_woke_is_counted():
    attributed = [told("b", "monitor", "[d01]", "[d02]"), told("b", "monitor", "[d03]")]

    got = score.score(tiny_day(), attributed, served={"d03": "serve"})

    assert (got.missed, got.wasted_turns, got.wasted_tellings) == (0, 1, 2)
    assert (got.lookups, got.lookups_without_turn) == (1, 0)


# ------------------------------------------------------------------ judge


def judge(day_path: Path, document: dict, *extra: str) -> str:
    done = subprocess.run(
        [sys.executable, str(JUDGE), str(day_path), *extra],
        input=json.dumps(document), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def letterbox(seat: str, content: str) -> dict:
    return {"half": "letterbox", "seat": {"name": seat}, "entry": {"content": content}}


def test_the_stub_judge_answers_from_the_labels(tmp_path: Path):
    day = days.full_day()
    days.write(day, tmp_path / "day.json")
    errand = next(s for s in day["steps"] if s["op"] == "send" and s.get("to")
                  and "agent" in s["to"][0])  # fmt: skip
    [owed] = errand["owed"]
    agent = day["personas"][owed]["agent"]
    other = next(p for p, v in day["personas"].items() if v["agent"] == agent and p != owed)
    seat = {p: f"{agent}#{day['personas'][p]['sessions'][0][:8]}" for p in (owed, other)}
    fenced = f"BEGIN ENTRY x\n{errand['text']}\nEND ENTRY x"

    assert judge(tmp_path / "day.json", letterbox(seat[owed], fenced)) == "yes"
    assert judge(tmp_path / "day.json", letterbox(seat[other], fenced)) == "no"
    gated = next(s for s in day["steps"] if s.get("key") == days.GATED_KEYS[1])
    gate = {"half": "gate", "request": {"content": gated["text"]}}
    assert judge(tmp_path / "day.json", gate) == "no"  # owed to nobody: declined


def test_the_wrong_judge_flips_a_tenth_of_its_answers_the_same_way_every_run():
    from bench.attention import judge as stub

    documents = [letterbox(f"web-app#{n:08d}", f"[d{n % 40:02d}] x") for n in range(2000)]
    flipped = [stub.wrong(d, 0.1) for d in documents]

    assert 150 < sum(flipped) < 250
    assert flipped == [stub.wrong(d, 0.1) for d in documents]
    assert not any(stub.wrong(d, 0.0) for d in documents)


def test_the_failing_judge_gives_no_clear_answer_for_its_tenth(tmp_path: Path):
    from bench.attention import judge as stub

    day = days.full_day()
    days.write(day, tmp_path / "day.json")
    documents = [letterbox(f"web-app#{n:08d}", f"[d{n:02d}] x") for n in range(1, 40)]
    failing = next(d for d in documents if stub.wrong(d, 0.1))
    sound = next(d for d in documents if not stub.wrong(d, 0.1))

    assert judge(tmp_path / "day.json", failing, "--fail", "0.1") == "maybe"
    assert judge(tmp_path / "day.json", sound, "--fail", "0.1") in ("yes", "no")


def test_the_full_day_puts_docs_site_on_a_second_store_named_as_its_seats_read_there():
    day = days.full_day()

    assert day["relay"]["b"] == ["docs-site"]
    assert remote_name("docs-site#06f0947b", "docs-box") == "docs-site@docs-box#06f0947b"
    asks_from_b = [s for s in day["steps"] if s["op"] == "ask" and s["from"].startswith("docs")]
    assert asks_from_b  # a lookup and a gate cross the relay


def test_a_kept_run_is_scored_again_from_the_requests_it_recorded(tmp_path: Path):
    from bench.attention.replay import rescore

    day = days.quick_day()
    owed = next(s for s in day["steps"] if s.get("tag") == "d01")
    [persona] = owed["owed"]
    session = day["personas"][persona]["sessions"][0]
    other = next(p for p in day["personas"] if p != persona)
    line = f'<summary>Monitor event: "salon"</summary>[salon] QUESTION: "{owed["text"][:40]}"'
    told = [{"messages": [user(text(line))]}]
    (tmp_path / "push").mkdir()
    (tmp_path / "push" / f"requests-{persona}-{session[:8]}.json").write_text(json.dumps(told))
    wasted = [{"messages": [user(text(line))]}]
    other_session = day["personas"][other]["sessions"][0]
    (tmp_path / "push" / f"requests-{other}-{other_session[:8]}.json").write_text(
        json.dumps(wasted)
    )

    got = rescore(day, tmp_path / "push", "push")["score"]

    assert (got.turns, got.wasted_turns) == (2, 1)
    assert ("d01", persona) not in got.missed_pairs
    assert got.wasted_pairs == [("d01", other)]
