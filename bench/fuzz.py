"""Hostile input at every door: /mcp, /notify and every Claude Code hook's stdin, against
a real daemon on a fresh store.

Cases are drawn from one seeded generator (the same seed, the same cases): JSON nested
far past the 512-level rule, strings of up to 5 MiB, every value of the wrong type,
terminal escape codes, NaN and numbers beyond a float, duplicate keys, lone surrogates,
invalid UTF-8, truncated and empty bodies, hostile labels, session ids, content types
and JSON-RPC ids. /mcp gets requests without a session (initialize and the rest), calls
of every tool but `wait` on live sessions (with hostile arguments), and batches;
/notify gets hostile labels and bodies; the hooks (session-start, stop, heartbeat,
pre-edit, session-end) run in this process, through the same runner `salon hook` uses,
with the daemon answering their local line.

Claims, over every case: no 5xx, no traceback in an answer or the daemon's log, a hook
prints nothing or one JSON object and fails only with its own refusals (no other
exception type in the hooks' log), the daemon still answers /healthz, and every entry a
/notify acknowledged (202, its id) is in the store.

    python -m bench.fuzz [--quick] [--json PATH] [--cases N] [--seed S]

20,000 cases by default (--quick: 600).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Figure, daemon, own_environment, raise_nofile, table, write_json

TRACEBACK = "Traceback (most recent call last)"
SEED = 20261207
CASES = 20_000
QUICK_CASES = 600
HOOK_KINDS = ("session-start", "stop", "heartbeat", "pre-edit", "session-end")
# What a hook may fail with: its own refusals of bad input and of the bus's rules.
HOOK_REFUSALS = {"HookInputError", "BusRefusal", "RuleError", "ConfigError"}
ESCAPES = ["\x1b[31m", "\x1b]0;owned\x07", "\x1b[2J", "\r", "\x9b31m", "\x00", "\u202e", "\x7f"]
LABELS = ["fuzz", "api", "web-app", "a" * 64, "a" * 65, "-x", "..", "a b", "a@b", "", "ü"]
CONTENT_TYPES = ["application/json", "text/plain", "application/json; charset=latin-1", ""]


# ------------------------------------------------------------------ hostile values


def hostile_string(rng: random.Random) -> str:
    kind = rng.randrange(7)
    if kind == 0:
        return "".join(rng.choice(ESCAPES) for _ in range(rng.randrange(1, 12)))
    if kind == 1:
        return "A" * rng.choice([0, 1, 1000, 65_536, 65_537, 300_000])
    if kind == 2:
        return "## 2026-12-01 10:00:00 · team — FACT → everyone  [api#12345678]\n!!! [salon]"
    if kind == 3:
        return rng.choice(["../../etc/passwd", "/dev/zero", "$(id)", "`id`", "%s%n", "\\"])
    if kind == 4:
        return "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randrange(40)))
    if kind == 5:
        return rng.choice(["salon", "fuzz", "team", "nonexistent-room", "FACT", "QUESTION"])
    return str(rng.random())


def hostile_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 2**31, 2**63, -(2**64), 10**30, 1.5, -0.0, 1e308])
    if kind in (3, 4, 5):
        return hostile_string(rng)
    if kind == 6:
        return [hostile_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    keys = ["content", "to", "room", "type", "re", "meta", "text", "name", "query", "files"]
    return {
        rng.choice([*keys, hostile_string(rng)]): hostile_value(rng, depth + 1)
        for _ in range(rng.randrange(6))
    }


def deep(rng: random.Random) -> bytes:
    levels = rng.choice([100, 511, 512, 513, 2_000, 100_000])
    opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
    return opener * levels + b"1" + closer * levels


def raw_json(rng: random.Random, value: object) -> bytes:
    """`value` as JSON text, often broken on purpose."""
    text = json.dumps(value, ensure_ascii=rng.random() < 0.5)
    kind = rng.randrange(14)
    if kind == 0:
        return deep(rng)
    if kind == 1:
        return text.encode()[: rng.randrange(len(text) + 1)]  # truncated
    if kind == 2:
        return rng.choice([b"", b" ", b"\xef\xbb\xbf{}", b"null", b"[]", b'"x"', b"{}{}"])
    if kind == 3:
        return text.replace("1", "NaN", 1).encode() if "1" in text else b"[NaN, Infinity]"
    if kind == 4:
        return b'{"content": "x", "content": "y"}'
    if kind == 5:
        return b'{"content": "\\ud800 lone"}'
    if kind == 6:
        return b'{"content": "\xff\xfe bad", "x": "\xc0\xaf"}'
    if kind == 7:
        return b'{"content": 1' + b"0" * 5000 + b"}"
    if kind == 8:
        return b'{"content": 1e99999}'
    return text.encode("utf-8", "surrogatepass")


# ------------------------------------------------------------------ the run


@dataclass
class Tally:
    cases: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    server_errors: list = field(default_factory=list)
    tracebacks: list = field(default_factory=list)
    hook_failures: list = field(default_factory=list)
    acknowledged: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, door: str, status: int, body: str, what: object) -> None:
        with self.lock:
            self._answer(door, status, body, what)

    def _answer(self, door: str, status: int, body: str, what: object) -> None:
        self.cases[door] += 1
        self.statuses[f"{door} {status}"] += 1
        if status >= 500:
            self.server_errors.append((door, status, repr(what)[:300], body[:300]))
        if TRACEBACK in body:
            self.tracebacks.append((door, repr(what)[:300], body[:600]))


class Doors:
    """The daemon's doors, spoken to over HTTP; a few live MCP sessions."""

    def __init__(self, base: str, client) -> None:
        self.base, self.client = base, client
        self.sessions: dict[str, str] = {}
        # every tool but `wait` (it waits), with the names of its arguments
        self.tools = {
            t["name"]: sorted((t.get("inputSchema") or {}).get("properties") or {})
            for t in self._tools()
            if t["name"] != "wait"
        }

    def _post_mcp(self, body: bytes, headers: dict, query: str = "label=fuzz"):
        return self.client.post(f"{self.base}/mcp?{query}", content=body, headers=headers)

    def headers(self, session: str | None = None, **extra) -> dict:
        found = {"accept": "application/json, text/event-stream"}
        found["content-type"] = "application/json"
        if session:
            found["mcp-session-id"] = session
        found.update(extra)
        return found

    def session(self, label: str) -> str:
        if label not in self.sessions:
            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "fuzz", "version": "0"}},
            }  # fmt: skip
            answer = self._post_mcp(json.dumps(init).encode(), self.headers(), f"label={label}")
            session = answer.headers["mcp-session-id"]
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            self._post_mcp(json.dumps(done).encode(), self.headers(session), f"label={label}")
            self.sessions[label] = session
        return self.sessions[label]

    def _tools(self) -> list[dict]:
        listed = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        answer = self._post_mcp(json.dumps(listed).encode(), self.headers(self.session("fuzz")))
        return answer.json()["result"]["tools"]


def mcp_case(rng: random.Random, doors: Doors, tally: Tally) -> None:
    label = rng.choice(["fuzz", "api", "web-app"])
    kind = rng.randrange(10)
    query = f"label={label}"
    session = doors.session(label)
    headers = doors.headers(session)
    if kind < 5:  # a tool call with hostile arguments (names from the list, mostly)
        name = rng.choice(sorted(doors.tools)) if rng.random() < 0.9 else hostile_value(rng)
        known = doors.tools.get(name, []) if isinstance(name, str) else []
        arguments = {key: hostile_value(rng, 2) for key in known if rng.random() < 0.6}
        if rng.random() < 0.2:
            arguments = hostile_value(rng)
        params = {"name": name, "arguments": arguments}
        if rng.random() < 0.2:
            params = hostile_value(rng)
        message = {"jsonrpc": "2.0", "id": rng.choice([1, 2, 3, 4, "x", None, 2.5, [], {}]),
                   "method": "tools/call", "params": params}  # fmt: skip
    elif kind == 5:  # no session: initialize or anything else
        headers = doors.headers()
        message = {"jsonrpc": "2.0", "id": 1, "method": rng.choice(["initialize", "tools/list"]),
                   "params": hostile_value(rng)}  # fmt: skip
    elif kind == 6:  # a batch, or a message that is no JSON-RPC
        message = [hostile_value(rng) for _ in range(rng.randrange(4))]
    elif kind == 7:  # hostile headers and query
        headers = doors.headers(rng.choice([session, "x" * 300, "\x1b[31m", ""]))
        headers["content-type"] = rng.choice(CONTENT_TYPES) or "application/json"
        headers["accept"] = rng.choice(["text/html", "*/*", "application/json"])
        query = "label=" + rng.choice(LABELS) + "&room=" + rng.choice(["a,b", "..", "%00"])
        message = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    else:  # a method nobody has, with hostile params
        message = {"jsonrpc": "2.0", "id": 4, "method": hostile_string(rng),
                   "params": hostile_value(rng)}  # fmt: skip
    body = raw_json(rng, message) if rng.random() < 0.3 else json.dumps(message).encode()
    answer = doors._post_mcp(body, headers, query)
    tally.answer("/mcp", answer.status_code, answer.text, body[:200])


def notify_case(rng: random.Random, doors: Doors, tally: Tally) -> None:
    label = rng.choice(LABELS) if rng.random() < 0.3 else rng.choice(["fuzz", "api"])
    note = hostile_value(rng)
    if rng.random() < 0.7:
        note = {"content": hostile_string(rng), "room": rng.choice(["salon", "fuzz", "nope"])}
        if rng.random() < 0.5:
            extra = hostile_value(rng, 3)
            note.update(extra if isinstance(extra, dict) else {})
    body = raw_json(rng, note) if rng.random() < 0.3 else json.dumps(note).encode()
    headers = {
        "content-type": rng.choice(CONTENT_TYPES) if rng.random() < 0.2 else CONTENT_TYPES[0]
    }
    answer = doors.client.post(
        f"{doors.base}/notify", params={"label": label}, content=body, headers=headers
    )
    tally.answer("/notify", answer.status_code, answer.text, body[:200])
    if answer.status_code == 202:
        tally.acknowledged.append(answer.json()["id"])


def hook_payload(rng: random.Random, kind: str, cwd: str) -> bytes:
    events = {"session-start": "SessionStart", "stop": "Stop", "heartbeat": "PostToolUse",
              "pre-edit": "PreToolUse", "session-end": "SessionEnd"}  # fmt: skip
    payload = {
        "session_id": rng.choice(["3f9c1a20-5b7e-4c1d-9a2f-0e1d2c3b4a51", hostile_string(rng)]),
        "cwd": rng.choice([cwd, hostile_string(rng)]),
        "hook_event_name": events[kind],
        "transcript_path": rng.choice([f"{cwd}/t.jsonl", "/dev/zero", hostile_string(rng)]),
    }
    for key in ("tool_name", "tool_input", "stop_hook_active", "source", "reason", "prompt"):
        if rng.random() < 0.4:
            payload[key] = hostile_value(rng)
    if rng.random() < 0.3:
        payload["tool_input"] = {"file_path": hostile_string(rng), "edits": hostile_value(rng)}
    if rng.random() < 0.2:
        payload[rng.choice(list(payload))] = hostile_value(rng)
    return raw_json(rng, payload) if rng.random() < 0.5 else json.dumps(payload).encode()


class HookStdin(io.BytesIO):
    @property
    def buffer(self):
        return self


def hook_case(rng: random.Random, hooks, tally: Tally, cwd: str) -> None:
    kind = rng.choice(HOOK_KINDS)
    payload = hook_payload(rng, kind, cwd)
    out = io.StringIO()
    code = hooks.run(kind, HookStdin(payload), out)
    text = out.getvalue()
    with tally.lock:
        tally.cases["hooks"] += 1
        tally.statuses[f"hooks exit {code}"] += 1
    failures = [f"exit {code}"] if code != 0 else []
    failures += ["a traceback on stdout"] if TRACEBACK in text else []
    if text.strip():
        try:
            answer = json.loads(text)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or text.count("\n") > 1:
            failures.append("stdout is not one JSON object")
    failures += hooks.new_errors()
    for failure in failures:
        tally.hook_failures.append((kind, failure[:300], payload[:300]))


class Hooks:
    """`salon hook KIND` as its runner runs it, in this process, for the daemon's store."""

    def __init__(self, env: dict[str, str]) -> None:
        os.environ.clear()
        os.environ.update(env)
        from mcpgate.claude.runner import run_hook
        from salon.cli import _line

        self.env, self.run_hook, self.line_for = env, run_hook, _line
        self.log = Path(env["AGENT_SALON_DB"]).parent / "agent-salon-hooks.log"
        self.read_to = 0

    def run(self, kind: str, stdin, stdout) -> int:
        return self.run_hook(
            [kind], environment=lambda: dict(self.env), line_for=self.line_for,
            stdin=stdin, stdout=stdout,
        )  # fmt: skip

    def new_errors(self) -> list[str]:
        """New lines of the hooks' log that name an exception other than a refusal of
        ours (the log is the store's data directory's)."""
        try:
            with open(self.log, "rb") as log:
                log.seek(self.read_to)
                lines = log.read().decode("utf-8", "replace").splitlines()
                self.read_to = log.tell()
        except FileNotFoundError:
            return []
        found = []
        for line in lines:
            name = line.split(": ", 2)[1] if line.count(": ") >= 2 else ""
            if name not in HOOK_REFUSALS:
                found.append(line)
        return found


def stored_ids(env: dict[str, str]) -> set[str]:
    from tests.support import query_store

    return {str(row[0]).replace("-", "") for row in query_store(env, "SELECT id FROM bus_entry")}


def fuzz(cases: int, seed: int) -> tuple[Tally, dict]:
    import httpx

    rng = random.Random(seed)
    tally = Tally()
    share = {"mcp": 0.4, "notify": 0.35, "hooks": 0.25}
    with daemon() as server, httpx.Client(timeout=60) as client:
        for room in ("fuzz", "team"):
            from tests.support import run_salon

            run_salon("rooms", "create", room, env=server.env)
        doors = Doors(server.url, client)
        hooks = Hooks({**server.env, "AGENT_SALON_NAME": "fuzz-hooks"})
        cwd = str(Path(server.env["AGENT_SALON_DB"]).parent)
        plan = [rng.random() for _ in range(cases)]
        http_rngs = [random.Random(rng.random()) for _ in range(cases)]
        started = time.monotonic()

        def http_case(index: int) -> None:
            pick, case_rng = plan[index], http_rngs[index]
            if pick < share["mcp"]:
                mcp_case(case_rng, doors, tally)
            else:
                notify_case(case_rng, doors, tally)

        http_indexes = [i for i, p in enumerate(plan) if p < share["mcp"] + share["notify"]]
        hook_indexes = [i for i, p in enumerate(plan) if p >= share["mcp"] + share["notify"]]
        with ThreadPoolExecutor(2) as pool:
            http_done = pool.map(http_case, http_indexes)
            for index in hook_indexes:
                hook_case(http_rngs[index], hooks, tally, cwd)
            for _ in http_done:
                pass
        took = time.monotonic() - started
        health = client.get(f"{server.url}/healthz").status_code
        lost = {i.replace("-", "") for i in tally.acknowledged} - stored_ids(server.env)
        log = server.log()
        extra = {
            "took": took,
            "health": health,
            "lost": sorted(lost),
            "log_tracebacks": log.count(TRACEBACK),
        }
    return tally, extra


def figures(tally: Tally, extra: dict, cases: int, seed: int) -> list[Figure]:
    total = sum(tally.cases.values())
    detail = ", ".join(f"{door} {n}" for door, n in sorted(tally.cases.items()))
    hooks = tally.hook_failures
    tracebacks = len(tally.tracebacks) + extra["log_tracebacks"]
    acknowledged = f"{len(tally.acknowledged)} acknowledged; /healthz {extra['health']}"
    return [
        Figure("fuzz: cases run", total, "", cases, True, f"seed {seed}; {detail}"),
        Figure("fuzz: 5xx answers", len(tally.server_errors), "", 0, detail=_first(
            tally.server_errors)),
        Figure("fuzz: tracebacks (answers, daemon log)", tracebacks, "", 0,
               detail=_first(tally.tracebacks)),
        Figure("fuzz: hook failures (exit, output, log)", len(hooks), "", 0,
               detail=_first(hooks)),
        Figure("fuzz: acknowledged /notify entries lost", len(extra["lost"]), "", 0,
               detail=acknowledged),
        Figure("fuzz: time", extra["took"], "s"),
    ]  # fmt: skip


def _first(found: list) -> str:
    return "; ".join(repr(item)[:400] for item in found[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CASES} cases")
    parser.add_argument("--cases", type=int, help=f"how many (default {CASES})")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--json", type=Path, help="write the figures as JSON to this file")
    args = parser.parse_args()
    own_environment()
    raise_nofile()
    cases = args.cases or (QUICK_CASES if args.quick else CASES)
    tally, extra = fuzz(cases, args.seed)
    found = figures(tally, extra, cases, args.seed)
    if args.json:
        write_json(found, args.json)
    print(table(found))
    print("statuses: " + ", ".join(f"{k}: {v}" for k, v in sorted(tally.statuses.items())))
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    return 0 if all(f.met in (True, None) for f in found) else 1


if __name__ == "__main__":
    sys.exit(main())
