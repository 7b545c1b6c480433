"""Attributing each model request to the telling that caused it, and scoring the day.

A recorded request is one body the stand-in model received from one session. What is new
in it — the messages after the model's last turn — says why it was made:

* `monitor`: a line of the plugin's `salon wait` monitor started the turn;
* `stop`: the Stop hook held the end of a turn;
* `wait`: the model's `wait` tool call returned;
* `start`: the session's first prompt, carrying a SessionStart context that lists claims;
* `prompt`: a person typed (the day's work: not spent on attention);
* `continuation`: a tool result inside a turn (its turn's cause is the request before).

The entries a telling names are found by their markers (`[d07]`, or a derived entry's
text). A turn is spent on attention when its cause is a telling; it is wasted when
nothing it told was owed to its session.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from bench.attention.day import entries

TELLINGS = ("monitor", "stop", "wait", "start")
PROMPT_MARK = "[prompt]"
CLAIM_LISTED = ("is a claim on you", "are claims on you")
HELD_BACK = "is claimed by another session of this repository"


def _blocks(content) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _text(block: dict) -> str:
    if block.get("type") == "text":
        return block.get("text", "")
    if block.get("type") == "tool_result":
        return "\n".join(_text(b) for b in _blocks(block.get("content")))
    return ""


def new_part(body: dict) -> list[dict]:
    """The content blocks that arrived after the model's last turn."""
    messages = body.get("messages", [])
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return [b for m in messages[last + 1 :] for b in _blocks(m.get("content"))]


def tool_names_called(body: dict) -> dict[str, str]:
    """tool_use id → tool name, over the whole conversation."""
    names = {}
    for message in body.get("messages", []):
        if message.get("role") == "assistant":
            for block in _blocks(message.get("content")):
                if block.get("type") == "tool_use":
                    names[block.get("id", "")] = block.get("name", "")
    return names


@dataclass
class Attributed:
    persona: str
    session: str
    index: int  # the request's place among the session's main-loop requests
    kind: str
    cause: str  # the kind of the request that started its turn
    markers: list[str] = field(default_factory=list)
    held_back: bool = False


def classify(body: dict) -> tuple[str, str, bool]:
    """(kind, new text, an edit was held back by a claim) for one request body."""
    blocks = new_part(body)
    text = "\n".join(_text(b) for b in blocks)
    names = tool_names_called(body)
    results = [b for b in blocks if b.get("type") == "tool_result"]
    held = any(b.get("is_error") and HELD_BACK in _text(b) for b in results)
    if "Stop hook" in text and ("blocking error" in text or "feedback" in text):
        return "stop", text, held
    if "Monitor event" in text:
        return "monitor", text, held
    if any(names.get(b.get("tool_use_id", ""), "").endswith("__wait") for b in results):
        return "wait", text, held
    if PROMPT_MARK in text:
        return ("start" if any(c in text for c in CLAIM_LISTED) else "prompt"), text, held
    if results:
        return "continuation", text, held
    return "other", text, held


def attribute(
    persona: str, session: str, bodies: list[dict], markers: list[str]
) -> list[Attributed]:
    """Each main-loop request of one session, with its cause and the markers it told."""
    out: list[Attributed] = []
    cause = "other"
    for index, body in enumerate(bodies):
        kind, text, held = classify(body)
        if kind != "continuation":
            cause = kind
        told = [m for m in markers if m in text] if kind in TELLINGS else []
        out.append(Attributed(persona, session, index, kind, cause, told, held))
    return out


@dataclass
class Score:
    requests: int = 0
    side_requests: int = 0
    turns: int = 0  # requests whose cause is a telling
    owed: int = 0
    told: int = 0
    missed: int = 0
    wasted_tellings: int = 0
    wasted_turns: int = 0
    repeated: int = 0
    lookups: int = 0
    lookups_without_turn: int = 0
    edits_stopped: int = 0
    by_cause: dict = field(default_factory=dict)
    missed_pairs: list = field(default_factory=list)
    wasted_pairs: list = field(default_factory=list)
    repeated_pairs: list = field(default_factory=list)


def score(
    day: dict,
    attributed: list[Attributed],
    side_requests: int = 0,
    served: dict[str, str] | None = None,
) -> Score:
    """`served`: tag of each `ask` step → its outcome as the asker saw it."""
    labelled = entries(day)
    owed_pairs = {(e["tag"], p) for e in labelled for p in e["owed"]}
    result = Score(requests=len(attributed), side_requests=side_requests, owed=len(owed_pairs))
    told = _count_turns(result, attributed, {e["marker"]: e for e in labelled}, owed_pairs)
    result.told = len(told)
    result.missed_pairs = sorted(owed_pairs - set(told))
    result.missed = len(result.missed_pairs)
    result.wasted_pairs = sorted(set(told) - owed_pairs)
    result.wasted_tellings = len(result.wasted_pairs)
    result.repeated_pairs = sorted(pair for pair, n in told.items() if n > 1)
    result.repeated = sum(n - 1 for n in told.values())
    _count_lookups(result, day, labelled, told, served or {})
    return result


def _count_turns(
    result: Score, attributed: list[Attributed], by_marker: dict, owed_pairs: set
) -> Counter:
    """Turns spent by cause and wasted turns into `result`; answers how often each
    (tag, persona) pair was told (a continuation tells nothing new)."""
    told = Counter()
    causes = Counter()
    for request in attributed:
        if request.held_back:
            result.edits_stopped += 1
        if request.cause not in TELLINGS:
            continue
        result.turns += 1
        causes[request.cause] += 1
        if request.kind == "continuation":
            continue
        pairs = {(by_marker[m]["tag"], request.persona) for m in request.markers}
        told.update(pairs)
        if not pairs & owed_pairs:
            result.wasted_turns += 1
    result.by_cause = dict(sorted(causes.items()))
    return told


def _count_lookups(
    result: Score, day: dict, labelled: list, told: Counter, served: dict[str, str]
) -> None:
    """Asks a served command answered: each counts as a lookup, and as one without a turn
    when no session of the asked agent was told of it."""
    personas = day["personas"]
    for entry in labelled:
        step = entry["step"]
        if step["op"] != "ask" or entry["marker"] != f"[{step['tag']}]":
            continue
        if step["key"] not in day["served"]:
            continue
        result.lookups += 1
        receivers = {p for p, v in personas.items() if v["agent"] == step["agent"]}
        turned = any(pair[0] == step["tag"] and pair[1] in receivers for pair in told)
        if not turned and served.get(step["tag"]) == "served":
            result.lookups_without_turn += 1


def as_json(result: Score) -> str:
    return json.dumps(result.__dict__, indent=1, default=list)
