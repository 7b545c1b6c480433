"""Cross-project requests, the store's side: where an agent's policy is, what it says of
one request, and what `salon policy check` finds in a policy file.

* An agent's project directory is recorded on its row (Agent.root) by `salon install`
  there and at each session start from the hook's working directory
  (services.seats.record_root); the last one recorded wins. Its policy is
  `<root>/.agent-salon/policy.toml`, read afresh at each evaluation (a policy edited in
  review takes effect at once, with no server to restart).
* No root recorded, or no file there: no policy, and a request wakes as before. A file
  that is there but cannot be read (permissions, not a regular file, too large, not
  UTF-8) is an invalid policy: it serves nothing and wakes (bus.policy).
* A serve program is resolved where it runs (program_path): a bare name on the serving
  PATH, or a path inside the project with its links followed; one that resolves outside
  the project, is missing or is not executable is refused before anything starts.

The verdicts themselves are bus.policy's (pure); running a command is an adapter's
(relay.runner), never done here and never inside a transaction.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections import namedtuple
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from bus import policy, rules, signals
from bus.models import Agent, Entry, Request, WakeDecision
from bus.rules import RuleError

# The reason of a ledger row the policy holds back: the rule woke the seat, the request
# waits for its serve, gate or denial (bus.services.serving flips it on a fall to wake).
HELD = "held"
# What a held row becomes when its request falls to wake (a request always has a `to`).
HELD_WAKES_AS = "addressed"


def read_policy(root: str) -> policy.Policy | None:
    """The policy in the project at `root`, parsed; None when it has no policy file."""
    return read_policy_file(os.path.join(root, policy.POLICY_FILE))


def read_policy_file(path: str) -> policy.Policy | None:
    """The policy file at `path`, parsed; None when there is no file."""
    try:
        # Not blocking: a FIFO at that path must not hold the caller.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return policy.unreadable(exc.strerror or type(exc).__name__)
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return policy.unreadable("it is not a regular file")
        try:
            data = file.read(policy.MAX_POLICY_BYTES + 1)
        except OSError as exc:
            return policy.unreadable(exc.strerror or type(exc).__name__)
    return policy.too_large() if len(data) > policy.MAX_POLICY_BYTES else policy.parse(data)


def root_of(agent: str) -> str | None:
    """The project directory recorded for the agent, if any. RuleError: no such agent."""
    found = Agent.objects.filter(name=agent).values_list("root", flat=True)[:1]
    if not found:
        raise RuleError(
            f"there is no agent {agent!r} on this store (`salon agents` lists those with "
            "seats); its project is recorded by `salon install` there or a session start"
        )
    return found[0] or None


def policy_for(agent: str) -> policy.Policy | None:
    """The agent's policy, read now from its recorded project directory; None when no
    directory is recorded or it holds no policy file."""
    root = root_of(agent)
    return read_policy(root) if root else None


def evaluate(*, agent: str, key: str | None, writer: str, now: datetime | None = None):
    """bus.policy.evaluate for a request to `agent` (the receiving agent, on this store)
    from the seat `writer`: a bus.policy.Verdict."""
    return policy.evaluate(key, writer, policy_for(agent), now or timezone.now())


def program_path(root: str, program: str, search_path: str) -> str:
    """The file a serve program names: a bare name looked up on `search_path` (the PATH
    the command runs with), else a path inside the project at `root`, its links followed.
    RuleError, naming the program, for one outside the project, missing, or not
    executable."""
    shown = rules.shown_ask(program)
    outside = policy.program_outside(program)
    if outside:
        raise RuleError(f"the serve program {shown} {outside}")
    if "/" not in program:
        # Only absolute PATH entries: a "." would look in whatever directory this is.
        absolute = [entry for entry in search_path.split(os.pathsep) if os.path.isabs(entry)]
        found = shutil.which(program, path=os.pathsep.join(absolute))
        if found is None:
            raise RuleError(f"the serve program {shown} is not on PATH ({search_path})")
        return found
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(real_root, program))
    if os.path.commonpath([real_root, real]) != real_root:
        raise RuleError(
            f"the serve program {shown} leads outside the project (to {real}): keep the "
            "program inside the project's directory"
        )
    if not os.path.isfile(real):
        raise RuleError(f"the serve program {shown} does not exist in the project ({real})")
    if not os.access(real, os.X_OK):
        raise RuleError(f"the serve program {shown} is not executable: chmod +x {program}")
    return real


# --- the commands: `salon policy explain` and `salon policy check` ----------------


def explain(*, agent: str, key: str, writer: str) -> dict:
    """What the agent's policy decides for a request of `writer` with `key`, and why;
    nothing is run."""
    agent = rules.validate_name(agent, "agent")
    writer = rules.validate_name(writer, "writer")
    root = root_of(agent)
    found = read_policy(root) if root else None
    verdict = policy.evaluate(key, writer, found, timezone.now())
    return {
        "agent": agent,
        "key": key,
        "writer": writer,
        "root": root,
        "policyFile": os.path.join(root, policy.POLICY_FILE) if root else None,
        "policyFound": found is not None,
        "verdict": verdict.verdict,
        "reason": verdict.reason,
        "argv": list(verdict.argv) if verdict.argv is not None else None,
        "line": verdict.line,
    }


def check(*, path: str) -> dict:
    """Lint a policy file: `path` is a project directory (its .agent-salon/policy.toml) or
    the file itself. Every problem, each with its line: what makes the policy invalid
    (bus.policy.parse), what bus.policy.lint finds, and each serve program that
    program_path refuses."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        root, file = path, os.path.join(path, policy.POLICY_FILE)
    else:
        file, parent = path, os.path.dirname(path)
        nested = os.path.basename(parent) == os.path.dirname(policy.POLICY_FILE)
        root = os.path.dirname(parent) if nested else parent
    found = read_policy_file(file)
    if found is None:
        if os.path.lexists(path):
            text = (
                "no policy file here: this project has not opted in, and requests to it wake "
                f"a person as before (write {policy.POLICY_FILE} in the project's root)"
            )
        else:
            text = "there is no such directory or file: name a project's root, or its policy file"
        return {
            "file": file,
            "root": root,
            "grants": 0,
            "problems": _shaped([policy.Problem(None, text)]),
        }
    problems = [*found.problems, *policy.lint(found, timezone.now().date())]
    # The PATH a serve command would run with: that of this process, which serves it.
    search_path = policy.serve_environment(os.environ, key="", asker="")["PATH"]
    for grant in found.grants:
        if grant.serve is None:
            continue
        try:
            program_path(root, grant.serve[0], search_path)
        except RuleError as exc:
            problems.append(policy.Problem(grant.lines.get("serve", grant.line), str(exc)))
    problems.sort(key=lambda problem: problem.line or 0)
    return {"file": file, "root": root, "grants": len(found.grants), "problems": _shaped(problems)}


def _shaped(problems: list[policy.Problem]) -> list[dict]:
    return [{"line": problem.line, "text": problem.text} for problem in problems]


# --- a request being sent or landed -------------------------------------------------


class Asked(namedtuple("Asked", "key agent verdict root")):
    """A request with an ask key, as the sending or landing store decided it: the key (as
    written, for a landed one possibly not well-formed), the receiving agent, the
    bus.policy.Verdict (None: the agent is on another machine, where it is decided) and
    the project root it is served in."""

    __slots__ = ()

    @property
    def holds(self) -> bool:
        """The request wakes nobody in the receiving project, for now (serve, gate) or
        for good (deny)."""
        return self.verdict is not None and self.verdict.verdict != policy.WAKE


def ask_of_send(meta: dict, entry_type: str | None, names: list[str], writer: str) -> Asked:
    """The ask of an entry a local writer sends with meta `ask`: the key refused unless
    well-formed, the entry a REQUEST to exactly one agent (or seat). Evaluated now."""
    key = rules.validate_ask(meta.get("ask"))
    if entry_type is not None and entry_type != "REQUEST":
        raise RuleError(
            f"an entry with an ask key is a REQUEST, not a {entry_type}: leave the type "
            "out or write REQUEST"
        )
    if len(names) != 1:
        raise RuleError(
            f"an ask goes to exactly one agent (it names {len(names)}): give one `to`, "
            "e.g. salon ask web-app status:db"
        )
    return _asked(key, rules.agent_of_seat(names[0]), writer)


def ask_of_landing(meta: dict, entry_type: str, names: list[str], writer: str) -> Asked | None:
    """The ask of an entry landed from another machine, evaluated here; None when it is no
    request with an ask to one agent of this machine. A key that is not well-formed is
    kept as it came: the policy covers nothing of it, and it falls to wake."""
    if "ask" not in meta or entry_type != "REQUEST" or len(names) != 1:
        return None
    agent = rules.agent_of_seat(names[0])
    if rules.decided_there(agent):
        return None  # for a third machine
    key = meta["ask"] if isinstance(meta["ask"], str) else rules.shown_ask(meta["ask"])
    return _asked(key, agent, writer)


def _asked(key: str, agent: str, writer: str) -> Asked:
    if "@" in agent:
        return Asked(key, agent, None, "")
    found = Agent.objects.filter(name=agent).values_list("root", flat=True)[:1]
    root = found[0] if found else None
    verdict = policy.evaluate(key, writer, read_policy(root) if root else None, timezone.now())
    return Asked(key, agent, verdict, root or "")


def hold(rows: list[WakeDecision]) -> list[int]:
    """Hold back the rows the rule woke (before they are written): they wake nobody until
    the request falls to wake. Returns the held seats' ids."""
    held = []
    for row in rows:
        if row.woken:
            row.woken, row.reason = False, HELD
            held.append(row.seat_id)
    return held


def record(*, entry, asked: Asked, writer: str, at: datetime) -> None:
    """The request's row, inside the transaction that stores its entry; once committed,
    bus.signals.request_decided (bus.services.serving serves, denies or asks the judge)."""
    verdict = asked.verdict
    Request.objects.create(
        entry_id=entry.id,
        room_id=entry.room_id,
        ask=rules.shown_ask(asked.key)[:300] if rules.ask_key_problem(asked.key) else asked.key,
        agent=asked.agent,
        writer=writer,
        verdict=verdict.verdict,
        reason=verdict.reason,
        argv=list(verdict.argv) if verdict.argv is not None else None,
        root=asked.root,
        decided_at=at,
        outcome="" if asked.holds else Request.WOKEN,
        done_at=None if asked.holds else at,
    )
    if asked.holds:
        entry_id = entry.id
        transaction.on_commit(
            lambda: signals.request_decided.send(sender=Request, entry_id=entry_id), robust=True
        )


def report_of(asked: Asked) -> dict:
    """What `send` adds to its report for a request with an ask key."""
    if asked.verdict is None:
        device = asked.agent.partition("@")[2]
        return {
            "ask": asked.key,
            "verdict": None,
            "reason": f"decided on {device}, where the request lands, by its policy",
        }
    return {"ask": asked.key, "verdict": asked.verdict.verdict, "reason": asked.verdict.reason}


def outcome_of(entry_id) -> dict:
    """Where a request stands: {"outcome": "" (being served or judged) | served | denied
    | declined | woken, "answer": the ANSWER written for it ({id, from, text, ms}) or
    None, and for woken "woke": why}; {} for an entry with no request row here (one
    decided on another machine)."""
    row = Request.objects.filter(pk=entry_id).values("outcome", "answer", "reason").first()
    if row is None:
        return {}
    shown = {"outcome": row["outcome"], "answer": None}
    if row["outcome"] == Request.WOKEN:
        shown["woke"] = row["reason"]  # why a person is woken
    if row["answer"] is not None:
        shown["answer"] = answer_shape(row["answer"], entry_id)
    return shown


def answer_shape(answer_id, request_id) -> dict | None:
    found = Entry.objects.filter(pk=answer_id).values("id", "sender", "content", "ts", "meta")
    found = found.first()
    if found is None:
        return None
    request_ts = Entry.objects.filter(pk=request_id).values_list("ts", flat=True).first()
    ms = None
    if request_ts is not None:
        ms = max(0, int((found["ts"] - request_ts).total_seconds() * 1000))
    meta = found["meta"] if isinstance(found["meta"], dict) else {}
    return {
        "id": str(found["id"]),
        "from": found["sender"],
        "text": found["content"],
        "servedBy": meta.get("served_by"),
        "ms": ms,
    }
