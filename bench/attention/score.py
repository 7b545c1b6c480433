"""Attributing each model request to the telling that caused it, and scoring the day.

A recorded request is one body the stand-in model received from one session. What is new
in it — the messages after the model's last turn — says why it was made:

* `monitor`: a line of the plugin's `salon wait` monitor started the turn;
* `stop`: the Stop hook held the end of a turn;
* `wait`: the model's `wait` tool call returned;
* `start`: the session's first prompt, carrying a SessionStart context that lists claims;
* `prompt`: a person typed (the day's work: not spent on attention);
* `continuation`: a tool result inside a turn (its turn's cause is the request before).

A headless session (Codex's `codex exec`, Gemini's `gemini -p`) is started by nothing
while idle: its requests are read by `attribute_headless`, where a person's prompt that
carries tellings in its context (the hooks' claims told at the next turn) is `next`, a
prompt that carries none is `prompt`, and a request that no prompt started (the Stop /
AfterAgent hook holding the end of a turn with a claim) is `stop`.

The entries a telling names are found by their markers (`[d07]`, or a derived entry's
text). A turn is spent on attention when its cause is a telling; it is wasted when
nothing it told was owed to its session.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from bench.attention.day import client_of, entries

TELLINGS = ("monitor", "stop", "wait", "start", "next")
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


MODEL_ITEMS = ("function_call", "custom_tool_call", "tool_search_call", "reasoning")


def headless_shown(client: str, body: dict) -> tuple[list[str], list[str]]:
    """(the texts of every item the model did not write itself, those of them that came
    after its last turn) for one Codex (Responses API) or Gemini request body."""
    shown, new = [], []
    if client == "codex":
        for item in body.get("input") or []:
            kind = item.get("type", "message")
            if kind in MODEL_ITEMS or (kind == "message" and item.get("role") == "assistant"):
                new = []
                continue
            if kind == "message" or kind.endswith("_output"):
                text = _any_text(item.get("content") if kind == "message" else item.get("output"))
                shown.append(text)
                new.append(text)
        return shown, new
    for content in body.get("contents") or []:
        if content.get("role") == "model":
            new = []
            continue
        for part in content.get("parts") or []:
            if "text" in part:
                text = str(part["text"])
            elif "functionResponse" in part:
                text = json.dumps(part["functionResponse"].get("response"))
            else:
                continue
            shown.append(text)
            new.append(text)
    return shown, new


def _any_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return _any_text(content.get("content") or content.get("text") or "")
    if isinstance(content, list):
        return "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return ""


def _ends_in_a_tool_result(client: str, body: dict) -> bool:
    if client == "codex":
        items = body.get("input") or [{}]
        return str(items[-1].get("type", "")).endswith("_output")
    contents = body.get("contents") or [{}]
    return any("functionResponse" in part for part in contents[-1].get("parts") or [])


def attribute_headless(
    client: str, persona: str, session: str, bodies: list[dict], markers: list[str]
) -> tuple[list[Attributed], dict[str, int]]:
    """Each model request of one headless session, with its cause and the markers it
    told; and, per marker, the most items of one request that carry it (more than one is
    a repeat even when only one request introduced it)."""
    out: list[Attributed] = []
    most: dict[str, int] = {}
    cause = "other"
    for index, body in enumerate(bodies):
        shown, new = headless_shown(client, body)
        text = "\n".join(new)
        told = [m for m in markers if m in text]
        if PROMPT_MARK in text:
            kind = "next" if told else "prompt"
        elif _ends_in_a_tool_result(client, body):
            kind = "continuation"
        else:
            kind = "stop"
        if kind != "continuation":
            cause = kind
        if kind not in TELLINGS:
            told = []
        for marker in markers:
            most[marker] = max(most.get(marker, 0), sum(marker in t for t in shown))
        out.append(Attributed(persona, session, index, kind, cause, told, False))
    return out, most


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
    turns_by_client: dict = field(default_factory=dict)
    missed_pairs: list = field(default_factory=list)
    wasted_pairs: list = field(default_factory=list)
    repeated_pairs: list = field(default_factory=list)


def score(
    day: dict,
    attributed: list[Attributed],
    side_requests: int = 0,
    served: dict[str, str] | None = None,
    most: dict[tuple[str, str], int] | None = None,
) -> Score:
    """`served`: tag of each `ask` step → its outcome as the asker saw it. `most`:
    (marker, persona) → the most items of one request of a headless session of the
    persona that carry it (attribute_headless): above the times it was told, a repeat."""
    labelled = entries(day)
    owed_pairs = {(e["tag"], p) for e in labelled for p in e["owed"]}
    result = Score(requests=len(attributed), side_requests=side_requests, owed=len(owed_pairs))
    told = _count_turns(result, attributed, {e["marker"]: e for e in labelled}, owed_pairs)
    result.told = len(told)
    result.missed_pairs = sorted(owed_pairs - set(told))
    result.missed = len(result.missed_pairs)
    result.wasted_pairs = sorted(set(told) - owed_pairs)
    result.wasted_tellings = len(result.wasted_pairs)
    by_marker = {e["marker"]: e["tag"] for e in labelled}
    shown_twice = Counter()
    for (marker, persona), n in (most or {}).items():
        pair = (by_marker[marker], persona)
        if n > max(told.get(pair, 0), 1):
            shown_twice[pair] = n - max(told.get(pair, 0), 1)
    result.repeated_pairs = sorted({pair for pair, n in told.items() if n > 1} | set(shown_twice))
    result.repeated = sum(n - 1 for n in told.values()) + sum(shown_twice.values())
    clients = Counter()
    for request in attributed:
        if request.cause in TELLINGS:
            clients[client_of(day, day["personas"][request.persona]["agent"])] += 1
    result.turns_by_client = dict(sorted(clients.items()))
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
