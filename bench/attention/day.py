"""The scripted day: written from a seed, the same every run, each entry labelled.

A day is a list of steps played in order. Session steps (`start`, `end`, `resume`,
`focus`, `quiet`) change who is there; entry steps (`send`, `ask`) put an entry on the
bus; `claim` and `edit` are the two sessions working on one file. Each entry step carries
`tag` (written at the head of its text, so that wherever it is shown it names itself) and
`owed`: the sessions (personas) that truly need a turn for it. What the day writes that
the replay does not type itself — a policy's served answer, a denial, a declined gate,
the FACT that tells a claim's holder its file was edited anyway — is listed in
`derived`, each with a `marker` (text that shows only in it) and its own `owed`.

In the full day docs-site lives on a second store (`relay`: its own machine, bridged
through a relay): its seats read as `docs-site@docs-box#…` on the first store.

A persona is one line of work in one project (`api.db`); `resume` gives it a new
session id (a new seat), as Claude Code does for a session started again. The labels
name personas: a telling to any seat of the persona counts for it.

    python -m bench.attention.day [--quick] [--seed N] [--out PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import uuid
from pathlib import Path

ROOM = "team"
SEED = 39
FULL_PROJECTS = ("web-app", "api-service", "billing", "docs-site")
# persona → (agent, focus sentence, topic words an errand for it speaks of)
PERSONAS = {
    "web.ui": ("web-app", "the checkout page layout", "checkout page"),
    "web.cart": ("web-app", "cart totals in src/cart.py", "cart totals"),
    "api.auth": ("api-service", "token refresh in the auth middleware", "token refresh"),
    "api.db": ("api-service", "database migrations for orders", "orders migration"),
    "billing.main": ("billing", "the invoice export", "invoice export"),
    "docs.main": ("docs-site", "the API reference pages", "API reference"),
    "docs.review": ("docs-site", "reviewing the release notes", "release notes"),
}
CLAIMED_FILE = "src/cart.py"
# Lookups the receiving project's policy serves, with what its script prints.
SERVED = {
    "status:db": "db status: up, 12 connections",
    "status:cache": "cache status: up, 97% hits",
    "port:staging": "port for staging: 8443",
}
# The mixed fleet's clients, by project (a project not named is Claude Code's).
MIXED_CLIENTS = {"api-service": "codex", "billing": "gemini"}
DENIED_KEY, GATED_KEYS = "secrets:prod", ("deploy:staging", "restart:cache")

PHRASES = (
    "before the release train leaves",
    "so that the staging run goes green",
    "as the customer report asked",
    "while the branch is still small",
    "for the demo on Friday",
)


class Day:
    """The day being written: steps, plus the state the labels are computed from."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.steps: list[dict] = []
        self.sessions: dict[str, list[str]] = {}  # persona → session ids, in order
        self.live: set[str] = set()
        self.quiet: set[str] = set()
        self.count = 0
        self.relay: dict = {}

    # -------------------------------------------------------------- sessions

    def session_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def seat(self, persona: str) -> str:
        return f"{PERSONAS[persona][0]}#{self.sessions[persona][-1][:8]}"

    def start(self, persona: str, *, resume: bool = False) -> None:
        self.sessions.setdefault(persona, []).append(self.session_id())
        self.live.add(persona)
        self.steps.append(
            {
                "op": "resume" if resume else "start",
                "persona": persona,
                "agent": PERSONAS[persona][0],
                "session": self.sessions[persona][-1],
            }
        )

    def end(self, persona: str) -> None:
        self.live.discard(persona)
        self.steps.append({"op": "end", "persona": persona})

    def focus(self, persona: str) -> None:
        self.steps.append({"op": "focus", "persona": persona, "text": PERSONAS[persona][1]})

    def go_quiet(self, persona: str) -> None:
        self.quiet.add(persona)
        self.steps.append({"op": "quiet", "persona": persona, "for": "8h"})

    # --------------------------------------------------------------- entries

    def next_tag(self) -> str:
        self.count += 1
        return f"d{self.count:02d}"

    def text(self, tag: str, words: str, *, long: bool = False) -> str:
        body = f"[{tag}] {words} {self.rng.choice(PHRASES)}."
        if long:
            paragraphs = [
                f"Paragraph {n}: "
                + " ".join(
                    self.rng.choice(
                        (
                            "build",
                            "deploy",
                            "cache",
                            "index",
                            "queue",
                            "retry",
                            "schema",
                            "bundle",
                            "metric",
                            "token",
                        )
                    )
                    for _ in range(40)
                )
                for n in range(1, 9)
            ]
            body += "\n\n" + "\n\n".join(paragraphs)
        return body

    def send(
        self,
        sender: str,
        type_: str,
        words: str,
        *,
        to_agent: str | None = None,
        to_seat: str | None = None,
        re: str | None = None,
        owed: list[str],
        long: bool = False,
    ) -> str:
        tag = self.next_tag()
        step = {
            "op": "send",
            "tag": tag,
            "from": sender,
            "type": type_,
            "text": self.text(tag, words, long=long),
            "to": [],
            "owed": sorted(owed),
        }
        if to_agent:
            step["to"] = [{"agent": to_agent}]
        if to_seat:
            step["to"] = [{"persona": to_seat, "seat": self.seat(to_seat)}]
        if re:
            step["re"] = re
        self.steps.append(step)
        return tag

    def ask(
        self,
        sender: str,
        agent: str,
        key: str,
        words: str,
        *,
        owed: list[str],
        derived: dict | None = None,
    ) -> str:
        tag = self.next_tag()
        step = {
            "op": "ask",
            "tag": tag,
            "from": sender,
            "agent": agent,
            "key": key,
            "text": self.text(tag, words),
            "owed": sorted(owed),
        }
        if derived:
            step["derived"] = derived
        self.steps.append(step)
        return tag

    def able(self, persona: str) -> bool:
        return persona in self.live and persona not in self.quiet

    def of_agent(self, agent: str) -> list[str]:
        return sorted(p for p in self.live if PERSONAS[p][0] == agent and p not in self.quiet)

    def errand_for(self, sender: str, agent: str, type_: str = "QUESTION") -> tuple[str, str]:
        """A QUESTION/REQUEST to `agent` about what one of its live sessions is on (picked
        by the seed): that session alone needs the turn."""
        target = self.rng.choice(self.of_agent(agent))
        words = (
            f"{'Question' if type_ == 'QUESTION' else 'Please'} about the {PERSONAS[target][2]}:"
        )
        tag = self.send(sender, type_, f"{words} what should I know", to_agent=agent, owed=[target])
        return tag, target

    def answer(self, sender: str, asked: str, asker: str) -> str:
        owed = [asker] if self.able(asker) else []
        return self.send(sender, "ANSWER", "Answer: it is handled", re=asked, owed=owed)

    def document(self, quick: bool) -> dict:
        projects = sorted({PERSONAS[p][0] for p in self.sessions})
        return {
            "schema": "salon.attention-day/1",
            "seed": self.seed,
            "quick": quick,
            "room": ROOM,
            "projects": projects,
            "personas": {
                p: {"agent": PERSONAS[p][0], "focus": PERSONAS[p][1], "sessions": ids}
                for p, ids in sorted(self.sessions.items())
            },
            "served": {k: v for k, v in SERVED.items()},
            "policy": {"deny": DENIED_KEY, "gate": list(GATED_KEYS)},
            "claimed_file": CLAIMED_FILE,
            # The relay leg: these projects live on a second store (another machine),
            # bridged to the first through a relay.
            "relay": self.relay,
            "steps": self.steps,
        }


def quick_day(seed: int = SEED) -> dict:
    """One project pair, two sessions, ten entries: what CI runs."""
    day = Day(seed)
    for persona in ("web.ui", "api.db"):
        day.start(persona)
    for persona in ("web.ui", "api.db"):
        day.focus(persona)
    asked, target = day.errand_for("web.ui", "api-service")
    day.answer(target, asked, "web.ui")
    day.send("api.db", "FACT", "Deployed the orders service to staging", owed=[])
    day.send("ci", "FACT", "Nightly build report", owed=[], long=True)
    day.ask(
        "web.ui",
        "api-service",
        "status:db",
        "Lookup for the dashboard",
        owed=[],
        derived={"marker": SERVED["status:db"], "owed": []},
    )
    day.ask(
        "web.ui",
        "api-service",
        DENIED_KEY,
        "Need the production secret",
        owed=[],
        derived={"marker": DENIED_KEY, "owed": []},
    )
    day.send(
        "api.db",
        "REQUEST",
        "Please review the checkout page copy",
        to_seat="web.ui",
        owed=["web.ui"],
    )
    day.send(
        "web.ui",
        "QUESTION",
        "Question for whoever owns the orders migration: is it reversible",
        owed=["api.db"],
    )
    day.send(
        "api.db",
        "FACT",
        "Heads-up on the checkout page: new error codes",
        to_seat="web.ui",
        owed=["web.ui"],
    )
    day.send("web.ui", "FACT", "Checkout page shipped", owed=[])
    return day.document(quick=True)


def mixed_quick_day(seed: int = SEED) -> dict:
    """The short day with a mixed fleet: web-app's session is Claude Code, api-service's
    Codex, billing's Gemini (`clients`); three sessions, twelve entries, among them
    errands and seat-addressed entries to each of the three."""
    day = Day(seed)
    fleet = ("web.ui", "api.db", "billing.main")
    for persona in fleet:
        day.start(persona)
    for persona in fleet:
        day.focus(persona)
    asked, target = day.errand_for("web.ui", "api-service")
    day.answer(target, asked, "web.ui")
    asked, target = day.errand_for("api.db", "billing", "REQUEST")
    day.answer(target, asked, "api.db")
    day.send("api.db", "FACT", "Deployed the orders service to staging", owed=[])
    day.send("ci", "FACT", "Nightly build report", owed=[], long=True)
    day.ask(
        "billing.main",
        "api-service",
        "status:db",
        "Lookup for the invoice run",
        owed=[],
        derived={"marker": SERVED["status:db"], "owed": []},
    )
    day.send(
        "billing.main",
        "REQUEST",
        "Please review the checkout page copy",
        to_seat="web.ui",
        owed=["web.ui"],
    )
    day.send(
        "web.ui",
        "QUESTION",
        "Question for whoever owns the orders migration: is it reversible",
        owed=["api.db"],
    )
    day.send(
        "web.ui",
        "FACT",
        "Heads-up on the invoice export: the checkout sends a new currency field",
        to_seat="billing.main",
        owed=["billing.main"],
    )
    day.send(
        "billing.main",
        "REQUEST",
        "Please keep the invoice id column in the orders migration",
        to_seat="api.db",
        owed=["api.db"],
    )
    day.send("web.ui", "FACT", "Checkout page shipped", owed=[])
    document = day.document(quick=True)
    document["clients"] = dict(MIXED_CLIENTS)
    return document


def mixed_full_day(seed: int = SEED) -> dict:
    """The full day with a mixed fleet: api-service's sessions are Codex, billing's
    Gemini, web-app's and docs-site's Claude Code (`clients`)."""
    document = full_day(seed)
    document["clients"] = dict(MIXED_CLIENTS)
    return document


def full_day(seed: int = SEED) -> dict:
    """Four projects, seven sessions, the whole vocabulary."""
    day = Day(seed)
    day.relay = {"devices": {"a": "main-box", "b": "docs-box"}, "b": ["docs-site"]}
    opening = ("web.ui", "web.cart", "api.auth", "api.db", "docs.main", "billing.main")
    for persona in opening:
        day.start(persona)
    for persona in opening:
        day.focus(persona)
    # Errands to an agent, to a seat and to the room, and their answers.
    asked, target = day.errand_for("web.ui", "api-service")
    day.answer(target, asked, "web.ui")
    day.send("api.auth", "FACT", "Token refresh now retries twice", owed=[])
    day.send("ci", "FACT", "Nightly build report", owed=[], long=True)
    asked = day.send(
        "web.cart",
        "REQUEST",
        "Please add an index for the orders migration",
        to_seat="api.db",
        owed=["api.db"],
    )
    day.answer("api.db", asked, "web.cart")
    asked = day.send(
        "docs.main",
        "QUESTION",
        "Question for whoever owns the cart totals: are they rounded per line",
        owed=["web.cart"],
    )
    day.answer("web.cart", asked, "docs.main")
    # Lookups the policy serves.
    for asker, key in (("web.ui", "status:db"), ("docs.main", "port:staging")):
        day.ask(
            asker,
            "api-service",
            key,
            "Lookup",
            owed=[],
            derived={"marker": SERVED[key], "owed": []},
        )
    # A REQUEST to an agent with no live session: its next session needs the turn.
    day.end("billing.main")
    waiting = day.send(
        "api.auth",
        "REQUEST",
        "Please about the invoice export: add the VAT column",
        to_agent="billing",
        owed=["billing.main"],
    )
    day.end("api.db")
    asked, target = day.errand_for("web.ui", "api-service")
    day.answer(target, asked, "web.ui")
    day.start("billing.main", resume=True)
    day.focus("billing.main")
    day.answer("billing.main", waiting, "api.auth")
    day.start("api.db", resume=True)
    day.focus("api.db")
    # A deny and two gates (the judge lets one through to the session it is for).
    day.ask(
        "web.cart",
        "api-service",
        DENIED_KEY,
        "Need the production secret",
        owed=[],
        derived={"marker": DENIED_KEY, "owed": []},
    )
    day.ask(
        "docs.main",
        "api-service",
        GATED_KEYS[0],
        "Please about the orders migration: can staging be deployed",
        owed=["api.db"],
    )
    day.ask(
        "billing.main",
        "api-service",
        GATED_KEYS[1],
        "A routine cache restart",
        owed=[],
        derived={"marker": GATED_KEYS[1], "owed": []},
    )
    day.go_quiet("docs.main")
    day.send(
        "api.auth",
        "QUESTION",
        "Question about the API reference: is the token page current",
        owed=[],
    )
    day.start("docs.review")
    day.focus("docs.review")
    asked = day.send(
        "web.ui",
        "REQUEST",
        "Please about the release notes: mention the new checkout",
        to_agent="docs-site",
        owed=["docs.review"],
    )
    day.answer("docs.review", asked, "web.ui")
    day.send(
        "docs.review",
        "FACT",
        "Release notes now cover the checkout page",
        to_seat="web.ui",
        owed=["web.ui"],
    )
    day.send("billing.main", "FACT", "Invoice export format, for reference", owed=[], long=True)
    # Two sessions edit one file while a claim holds it.
    day.steps.append({"op": "claim", "persona": "web.cart", "path": CLAIMED_FILE})
    day.steps.append({"op": "edit", "persona": "web.cart", "path": CLAIMED_FILE})
    day.steps.append(
        {
            "op": "edit",
            "persona": "web.ui",
            "path": CLAIMED_FILE,
            "derived": {"marker": f"is editing {CLAIMED_FILE} anyway", "owed": ["web.cart"]},
        }
    )
    asked = day.send(
        "web.cart", "QUESTION", "Why did the cart totals change", to_seat="web.ui", owed=["web.ui"]
    )
    day.answer("web.ui", asked, "web.cart")
    day.ask(
        "billing.main",
        "api-service",
        "status:cache",
        "Lookup",
        owed=[],
        derived={"marker": SERVED["status:cache"], "owed": []},
    )
    day.send("api.db", "FACT", "Orders migration merged", owed=[])
    asked, target = day.errand_for("api.db", "web-app")
    day.answer(target, asked, "api.db")
    asked = day.send(
        "billing.main",
        "REQUEST",
        "Please about the orders migration: keep the invoice id column",
        owed=["api.db"],
    )
    day.answer("api.db", asked, "billing.main")
    day.send("ci", "FACT", "Weekly dependency report", owed=[], long=True)
    day.end("web.ui")
    day.errand_for("api.auth", "docs-site")
    for persona in sorted(day.live):
        day.end(persona)
    return day.document(quick=False)


def canonical(document: dict) -> bytes:
    return (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()


def digest(document: dict) -> str:
    return hashlib.sha256(canonical(document)).hexdigest()


def write(document: dict, path: Path) -> str:
    """Write the day as canonical JSON; its SHA-256 (the figure RESULTS.md names)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canonical(document))
    return digest(document)


def entries(document: dict) -> list[dict]:
    """Every labelled entry of the day, derived ones included:
    {tag, marker, owed, step}, in the order they are written."""
    out = []
    for step in document["steps"]:
        if "tag" in step:
            out.append(
                {
                    "tag": step["tag"],
                    "marker": f"[{step['tag']}]",
                    "owed": step["owed"],
                    "step": step,
                }
            )
        if "derived" in step:
            derived = step["derived"]
            tag = f"{step.get('tag', step['op'])}+"
            if step["op"] == "edit":
                tag = f"edit-{step['persona']}+"
            out.append(
                {"tag": tag, "marker": derived["marker"], "owed": derived["owed"], "step": step}
            )
    return out


def client_of(document: dict, agent: str) -> str:
    """The client a project's sessions run in: `clients`, else Claude Code."""
    return (document.get("clients") or {}).get(agent, "claude")


def problems(document: dict) -> list[str]:
    """What is inconsistent in a day's labels (empty when it is sound): every owed persona
    exists, is of the addressed agent, is live (or, for an entry to an agent with no live
    session, starts later), is never the writer; every `re` names an earlier entry."""
    found = []
    personas = document["personas"]
    live: set[str] = set()
    quiet: set[str] = set()
    been: set[str] = set()
    seen: dict[str, dict] = {}
    steps = document["steps"]
    for index, step in enumerate(steps):
        _follow_presence(step, live, quiet, been)
        if "tag" not in step:
            continue
        tag = step["tag"]
        if tag in seen:
            found.append(f"{tag}: the tag is used twice")
        if not step["text"].startswith(f"[{tag}] "):
            found.append(f"{tag}: the text does not start with its tag")
        later = {s["persona"] for s in steps[index + 1 :] if s["op"] in ("start", "resume")}
        for persona in step["owed"]:
            found.extend(_owed_problems(step, persona, personas, live | later, quiet))
        for target in step.get("to", []):
            agent = target.get("agent") or personas[target["persona"]]["agent"]
            if not any(personas[p]["agent"] == agent for p in been):
                found.append(f"{tag}: to {agent}, which has never been in the room")
        if step["from"] != "ci" and step["from"] not in live:
            found.append(f"{tag}: written by {step['from']}, which is not live")
        found.extend(_answer_problems(step, seen))
        seen[tag] = step
    return found


def _follow_presence(step: dict, live: set[str], quiet: set[str], been: set[str]) -> None:
    """Who is in the room after this step: starts and resumes join, ends leave."""
    op = step["op"]
    if op in ("start", "resume"):
        live.add(step["persona"])
        been.add(step["persona"])
    elif op == "end":
        live.discard(step["persona"])
    elif op == "quiet":
        quiet.add(step["persona"])


def _owed_problems(
    step: dict, persona: str, personas: dict, present: set[str], quiet: set[str]
) -> list[str]:
    """Why `persona` cannot be owed this entry: unknown, its writer, quiet, never present
    (live now or starting later), or of an agent the entry is not addressed to."""
    tag = step["tag"]
    if persona not in personas:
        return [f"{tag}: owed to unknown persona {persona}"]
    found = []
    if persona == step["from"]:
        found.append(f"{tag}: owed to its own writer")
    if persona in quiet:
        found.append(f"{tag}: owed to {persona}, which is quiet")
    if persona not in present:
        found.append(f"{tag}: owed to {persona}, which is neither live nor starts later")
    agents = [t.get("agent") or personas[t["persona"]]["agent"] for t in step.get("to", [])]
    if step["op"] == "ask":
        agents = [step["agent"]]
    if agents and personas[persona]["agent"] not in agents and step.get("re") is None:
        found.append(f"{tag}: owed to {persona}, whose agent it is not addressed to")
    return found


def _answer_problems(step: dict, seen: dict[str, dict]) -> list[str]:
    """An answer (`re`) names an earlier entry and is owed to its asker only."""
    if "re" not in step:
        return []
    tag = step["tag"]
    if step["re"] not in seen:
        return [f"{tag}: re {step['re']} names no earlier entry"]
    asker = seen[step["re"]]["from"]
    if step["owed"] and step["owed"] != [asker]:
        return [f"{tag}: an answer owed to someone other than the asker"]
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the short day CI runs")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=None, help="where to write the day")
    args = parser.parse_args()
    document = quick_day(args.seed) if args.quick else full_day(args.seed)
    wrong = problems(document)
    if wrong:
        raise SystemExit("the day's labels are inconsistent:\n" + "\n".join(wrong))
    out = args.out or Path(f"attention-day-{'quick' if args.quick else 'full'}.json")
    print(f"{out}: sha256 {write(document, out)}, {len(entries(document))} labelled entries")


if __name__ == "__main__":
    main()
