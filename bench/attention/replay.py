"""Playing a day against a real store with real Claude Code sessions.

Every session of the day is an interactive Claude Code (the pinned CLI) under tmux, in
its project's directory, with agent-salon installed as the plugin (`salon install
--plugin`: the stdio server, the hooks, the `salon wait` monitor). Each session talks to a
stand-in model of its own (tests/claude_cli/standin.py) that records every request; its
model notes what it is told ("Noted.") and, when a person asks for an edit, reads the
file and edits it (again, when a claim held the first edit back).

What the people of the day do is typed or run for them: a session's first prompt, an
edit prompt, and `salon send` / `salon ask` / `salon focus` / `salon quiet` / `salon
claim` run as that session (its agent, its session id, its directory). After each step
the replay waits until no model request has come for a moment, so tellings are not
batched by the replay's own speed.

Configurations:

* `push`: push-everything, emulated with no product switch: every entry is written
  `--to` every agent that has been in the room (so the wake rule wakes every live seat
  but the writer), a lookup is a plain addressed REQUEST, and nobody declares focus or
  goes quiet (the seed had neither). No judge, no policy.
* `rule`: the wake rule alone: the day as written, no judge, no policy file.
* `full`: the rule with the letterbox, the safety net (the stub judge answering from the
  labels) and api-service's policy file.
* `full-wrong`: the same with a judge wrong for 10 % of its answers (a confident "no"
  for an entry that was owed holds it back: the letterbox fails open only on a failure);
* `full-failing`: the same with a judge that gives no clear answer 10 % of the time.
* `mixed`: `full` with a mixed fleet (the day's `clients`): api-service's sessions are
  the real Codex CLI, billing's the real Gemini CLI, the others Claude Code
  (bench/attention/headless.py). Codex and Gemini are headless and turn-based: nothing
  starts a turn in an idle session; a claim is told at its next turn. The rule the replay
  plays them by: a headless session gets a turn (its session resumed with a prompt) at
  each step where the day's person types to it — its first prompt when it starts or
  resumes; an edit prompt too, but the day gives them none (`edit` is Claude Code's only)
  — and one last "carry on" turn when the day ends it, or at the close of the day if it
  is still on, so that what is owed to it has a next turn to be told at.

The relay leg: when the day says so (`relay`), its projects live on a second store, as
on another machine, with a HOME of their own; a relay and a `salon relay bridge` on each
store carry the room, joined by the real handshake (`bridge`). Seats of the other store
are addressed as they read there (agent@device#session).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.attention import score
from bench.attention.day import client_of
from bench.attention.headless import HEADLESS, Headless, binaries
from tests.claude_cli.harness import ClaudeHome, Tmux
from tests.claude_cli.standin import Request, StandIn, Text, ToolUse
from tests.support import Daemon, migrate, query_store, run_salon, salon_cmd, salon_env

CONFIGS = ("push", "rule", "full", "full-wrong", "full-failing", "mixed")
JUDGE_FLAGS = {
    "full": "",
    "full-wrong": " --wrong 0.1",
    "full-failing": " --fail 0.1",
    "mixed": "",
}
# Every terminal a replay opened, so that an interrupted run closes them all (stop_all).
TERMINALS: list[Tmux] = []
STOPPING = threading.Event()
RELAY_SECRET = "attention-relay-secret-0123456789abcdef"
JUDGE = Path(__file__).resolve().parent / "judge.py"
SETTLE = float(os.environ.get("ATTENTION_SETTLE", "2.0"))
FIRST_PROMPT = f"{score.PROMPT_MARK} A new session: carry on with the work."
CARRY_ON = f"{score.PROMPT_MARK} Carry on."


def judged(config: str) -> bool:
    """The configurations with the letterbox, the safety net's judge and the policy."""
    return config.startswith("full") or config == "mixed"


def remote_name(seat: str, device: str) -> str:
    """A seat as another machine names it: web-app#3f9c1a20 → web-app@laptop#3f9c1a20."""
    agent, _, session = seat.partition("#")
    return f"{agent}@{device}#{session}"


def edit_prompt(path: str) -> str:
    return f"{score.PROMPT_MARK} Edit {path}: raise the total by one."


# ------------------------------------------------------------------- the model


@dataclass
class Model:
    """One session's model: "Noted." to every telling; an edit when a person asks for one
    (Read, then Edit, and the same Edit again if a claim held it back)."""

    project: Path
    editing: str | None = None
    edits: int = 0

    def __call__(self, request: Request):
        text = "\n".join(score._text(b) for b in score.new_part(request.body))
        if self.editing and edit_prompt(self.editing) in text:
            return ToolUse("Read", {"file_path": str(self.project / self.editing)})
        called = score.tool_names_called(request.body)
        results = [b for b in score.new_part(request.body) if b.get("type") == "tool_result"]
        if self.editing and results:
            last = called.get(results[-1].get("tool_use_id", ""), "")
            if last == "Read" or (last == "Edit" and results[-1].get("is_error")):
                return self.edit()
            if last == "Edit":
                self.editing = None
                return Text("Edited.")
        return Text("Noted.")

    def edit(self) -> ToolUse:
        path = self.project / str(self.editing)
        old = next(line for line in path.read_text().splitlines() if line.startswith("TOTAL"))
        new = f"TOTAL = {int(old.split('=')[1]) + 1}"
        self.edits += 1
        return ToolUse("Edit", {"file_path": str(path), "old_string": old, "new_string": new})


@dataclass
class Session:
    persona: str
    agent: str
    session: str
    project: Path
    model: Model | None
    stand_in: StandIn
    terminal: Tmux | None = None
    headless: Headless | None = None  # a Codex or Gemini session (bench/attention/headless)


# ------------------------------------------------------------------- the run


@dataclass
class Replay:
    day: dict
    day_path: Path
    config: str
    workdir: Path
    claude: Path
    log: list[str] = field(default_factory=list)
    sessions: list[Session] = field(default_factory=list)
    live: dict[str, Session] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)  # tag → entry id
    served: dict[str, str] = field(default_factory=dict)  # ask tag → outcome
    members: list[str] = field(default_factory=list)  # agents that have been in the room
    launching: list[Session] = field(default_factory=list)
    seat_names: dict[str, str] = field(default_factory=dict)  # headless persona → its seat

    def __post_init__(self) -> None:
        if self.config not in CONFIGS:
            raise ValueError(f"unknown configuration {self.config!r}; one of {CONFIGS}")
        self.seats_path = self.workdir / "seats.json"
        self.clis = binaries()
        for agent in self.day["projects"]:
            client = client_of(self.day, agent)
            if client in HEADLESS and self.clis[client] is None:
                raise RuntimeError(
                    f"{client} CLI not found: run tests/{client}_cli/install_{client}.sh"
                )
        relay = self.day.get("relay") or {}
        self.devices = relay.get("devices", {"a": "main-box"})
        self.store_of = {
            agent: "b" if agent in relay.get("b", []) else "a" for agent in self.day["projects"]
        }
        self.scratch: list[Path] = []  # each machine's temporary directory, removed at the end
        # One store per machine, each with its own HOME (the plugin names its store).
        self.envs = {name: self.store_env(name) for name in self.devices}
        self.homes = {
            name: ClaudeHome(self.workdir / f"home-{name}", "http://127.0.0.1:9", self.claude)
            for name in self.devices
        }
        self.projects = {agent: self.make_project(agent) for agent in self.day["projects"]}
        for name in self.devices:
            # The plugin is Claude Code's: installed from a project of its own.
            first = next(
                self.projects[a]
                for a in sorted(
                    self.day["projects"], key=lambda a: client_of(self.day, a) != "claude"
                )
                if self.store_of[a] == name
            )
            environment = self.homes[name].env(self.envs[name])
            environment["PATH"] = f"{self.claude.parent}:{environment.get('PATH', '')}"
            done = run_salon(
                "install", "--plugin", self.day["room"], env=environment, cwd=first, timeout=180
            )
            if done.returncode != 0:
                raise SystemExit(f"salon install --plugin failed: {done.stderr}")
        self.relay_daemon: Daemon | None = None
        self.bridge_error = ""
        self.bridged = False
        self.bridges: list[subprocess.Popen] = []

    @property
    def env(self) -> dict[str, str]:
        return self.envs["a"]

    def store_env(self, name: str) -> dict[str, str]:
        directory = self.workdir / f"store-{name}"
        directory.mkdir(parents=True, exist_ok=True)
        # A machine's own temporary directory: its local lines are its own.
        scratch = Path(tempfile.mkdtemp(prefix=f"att-{name}-", dir="/tmp"))
        self.scratch.append(scratch)
        env = salon_env(directory, TMPDIR=str(scratch))
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)
        if judged(self.config):
            flags = JUDGE_FLAGS[self.config]
            # A headless seat is named after its CLI's session id: the judge reads which
            # persona it is from the seats file the replay keeps (seats.json).
            flags += f" --seats {self.seats_path}" if self.day.get("clients") else ""
            env["AGENT_SALON_TRIAGE_CMD"] = f"{sys.executable} {JUDGE} {self.day_path}{flags}"
        else:
            env["AGENT_SALON_TRIAGE"] = "off"
            env["AGENT_SALON_SAFETY_NET"] = "off"
        migrate(env)
        return env

    # ------------------------------------------------------------ the relay leg

    def bridge(self) -> None:
        """A relay, the room bridged from the first machine to the second by the real
        handshake (`salon relay use`, `salon invite`, `salon join`), a `salon relay
        bridge` on each."""
        if len(self.devices) < 2:
            return
        directory = self.workdir / "relay"
        directory.mkdir()
        env = salon_env(
            directory, AGENT_SALON_RELAY_SECRET=RELAY_SECRET, AGENT_SALON_RELAY_RATE="1000000"
        )
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)
        migrate(env)
        self.relay_daemon = Daemon(env=env, cwd=directory, command=("relay", "serve"))
        self.relay_daemon.start(timeout=120)
        a, b = self.envs["a"], self.envs["b"]
        for args, at in (
            (
                (
                    "relay",
                    "use",
                    self.relay_daemon.url,
                    "--secret",
                    RELAY_SECRET,
                    "--device",
                    self.devices["a"],
                ),
                a,
            ),
        ):
            done = run_salon(*args, env=at, cwd=self.workdir)
            if done.returncode != 0:
                raise RuntimeError(f"salon relay use: {done.stderr}")
        invited = run_salon(
            "invite", self.day["room"], "--for", self.devices["b"], env=a, cwd=self.workdir
        )
        joined = run_salon("join", invited.stdout.strip(), env=b, cwd=self.workdir)
        if invited.returncode or joined.returncode:
            raise RuntimeError(f"the relay handshake failed: {invited.stderr}{joined.stderr}")
        for name, env in self.envs.items():
            log = (self.workdir / f"bridge-{name}.log").open("ab")
            self.bridges.append(
                subprocess.Popen(
                    salon_cmd("relay", "bridge"),
                    env=env,
                    cwd=self.workdir,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        synced = "SELECT last_sync_at FROM relay_bridgedroom"
        for env in self.envs.values():
            self.wait_for(
                lambda env=env: any(r[0] for r in query_store(env, synced)),
                "the bridges to sync",
                120,
            )

    def bridge_or_note(self) -> None:
        try:
            self.bridge()
        except Exception as exc:  # raised in the replay's own thread
            self.bridge_error = f"the relay leg could not be set up: {exc}"

    def unbridge(self) -> None:
        for process in self.bridges:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        if self.relay_daemon is not None:
            self.relay_daemon.stop()

    def landed(self, entry_id: str, store: str) -> bool:
        rows = query_store(
            self.envs[store],
            "SELECT id FROM bus_entry WHERE id = ? OR id = ?",
            (entry_id, uuid.UUID(entry_id).hex),
        )
        return bool(rows)

    def note(self, line: str) -> None:
        line = f"{time.monotonic():.1f} {line}"
        self.log.append(line)
        with (self.workdir / "progress.log").open("a") as progress:  # to follow a long run
            progress.write(line + "\n")

    def make_project(self, agent: str) -> Path:
        root = self.workdir / f"projects-{self.store_of[agent]}" / agent
        root.mkdir(parents=True)
        self.homes[self.store_of[agent]].trust(root, servers=())
        headless = client_of(self.day, agent) in HEADLESS
        if agent == "web-app" or headless:  # Codex and Gemini want a repository too
            if agent == "web-app":
                cart = root / self.day["claimed_file"]
                cart.parent.mkdir(parents=True)
                cart.write_text("TOTAL = 1\n")
            else:
                (root / "README.md").write_text(f"{agent}\n")
            git = [
                "git",
                "-c",
                "user.name=b",
                "-c",
                "user.email=b@example.invalid",
                "-C",
                str(root),
            ]
            subprocess.run(["git", "init", "-q", str(root)], check=True)
            subprocess.run([*git, "add", "."], check=True)
            subprocess.run([*git, "commit", "-qm", "start"], check=True)
        if agent == "api-service" and judged(self.config):
            self.write_policy(root)
        return root

    def write_policy(self, root: Path) -> None:
        since = (datetime.now(UTC) - timedelta(days=1)).date()
        # A writer of another machine is reached only by a grant that names its device.
        askers = json.dumps(
            [
                a if self.store_of[a] == "a" else f"{a}@{self.devices[self.store_of[a]]}"
                for a in self.day["projects"]
                if a != "api-service"
            ]
        )
        grants = [
            ("status:*", 'serve = ["scripts/status.sh", "{2}"]'),
            ("port:*", 'serve = ["scripts/port.sh", "{2}"]'),
            ("secrets:*", 'verdict = "deny"'),
            ("deploy:*", 'verdict = "gate"'),
            ("restart:*", 'verdict = "gate"'),
        ]
        text = "".join(
            f'[[grant]]\nask = "{key}"\nto = {askers}\nsince = {since}\n{how}\n\n'
            for key, how in grants
        )
        (root / ".agent-salon").mkdir()
        (root / ".agent-salon" / "policy.toml").write_text(text)
        scripts = root / "scripts"
        scripts.mkdir()
        for name, line in (
            ("status.sh", 'echo "$1 status: ' + "$(cat scripts/$1)" + '"'),
            ("port.sh", 'echo "port for $1: 8443"'),
        ):
            (scripts / name).write_text(f"#!/bin/sh\n{line}\n")
            (scripts / name).chmod(0o755)
        (scripts / "db").write_text("up, 12 connections")
        (scripts / "cache").write_text("up, 97% hits")

    # --------------------------------------------------------------- settling

    def request_count(self) -> int:
        return sum(len(s.stand_in.requests) for s in self.sessions)

    def settle(self, minimum: float = SETTLE) -> None:
        """Until no request came for SETTLE seconds (and at least `minimum` passed)."""
        began = time.monotonic()
        seen, since = self.request_count(), time.monotonic()
        while time.monotonic() - began < 120:
            time.sleep(0.2)
            now = self.request_count()
            if now != seen:
                seen, since = now, time.monotonic()
            elif time.monotonic() - since >= SETTLE and time.monotonic() - began >= minimum:
                return

    def wait_for(self, condition, what: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.config}: timed out waiting for {what}")

    # ------------------------------------------------------------- identities

    def identity(self, persona: str) -> tuple[dict[str, str], Path]:
        if persona == "ci":
            return {**self.env, "AGENT_SALON_NAME": "ci"}, self.workdir
        session = self.live[persona]
        return (
            {
                **self.envs[self.store_of[session.agent]],
                "AGENT_SALON_NAME": session.agent,
                "CLAUDE_CODE_SESSION_ID": (
                    session.headless.session_id if session.headless else session.session
                ),
            },
            session.project,
        )

    def salon(self, persona: str, *args: str) -> subprocess.CompletedProcess:
        env, cwd = self.identity(persona)
        done = run_salon(*args, env=env, cwd=cwd, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"salon {' '.join(args[:3])} as {persona}: {done.stderr[-800:]}")
        return done

    # ------------------------------------------------------------------ steps

    def start(self, step: dict) -> None:
        self.ready(self.launch(step))

    def launch(self, step: dict) -> Session:
        """Start the session's Claude Code (it comes up while others start too)."""
        persona, agent = step["persona"], step["agent"]
        project = self.projects[agent]
        client = client_of(self.day, agent)
        if client in HEADLESS:
            store = self.store_of[agent]
            headless = Headless(
                client,
                persona,
                agent,
                project,
                self.workdir / f"home-{persona}-{step['session'][:8]}",
                self.envs[store],
                self.day["room"],
                self.clis[client],
            )
            session = Session(
                persona, agent, step["session"], project, None, headless.stand_in, None, headless
            )
            self.sessions.append(session)
            return session
        model = Model(project)
        stand_in = StandIn(model).__enter__()
        session = Session(persona, agent, step["session"], project, model, stand_in)
        self.sessions.append(session)
        store = self.store_of[agent]
        env = self.homes[store].env(self.envs[store], ANTHROPIC_BASE_URL=stand_in.url)
        session.terminal = self.homes[store].interactive(
            cwd=project,
            env=env,
            name=f"s{len(self.sessions)}",
            extra=("--session-id", step["session"], "--allowedTools", "Read,Edit"),
        )
        TERMINALS.append(session.terminal)
        return session

    def ready(self, session: Session) -> None:
        """Once the seat is on the bus and its monitor runs: the person's first prompt."""
        if session.headless is not None:
            return self.first_turn(session)
        seat = f"{session.agent}#{session.session[:8]}"
        self.wait_for(
            lambda: bool(
                query_store(
                    self.envs[self.store_of[session.agent]],
                    "SELECT 1 FROM bus_seat WHERE name = ?",
                    (seat,),
                )
            ),
            f"{seat} on the bus",
        )
        self.wait_for(lambda: "monitor" in session.terminal.screen(), f"{seat}'s monitor")
        self.live[session.persona] = session
        if session.agent not in self.members:
            self.members.append(session.agent)
        before = len(session.stand_in.main_requests)
        session.terminal.type_line(FIRST_PROMPT)
        self.wait_for(lambda: len(session.stand_in.main_requests) > before, f"{seat}'s first turn")

    def first_turn(self, session: Session) -> None:
        """A headless session's first prompt: one run of its CLI, which names its seat
        (while it runs, the judge takes an unknown seat of its agent for its persona)."""
        self.name_seat(f"{session.agent}#?", session.persona)
        session.headless.turn(FIRST_PROMPT)
        rows = query_store(
            self.envs[self.store_of[session.agent]],
            "SELECT name FROM bus_seat WHERE session_id = ?",
            (session.headless.session_id,),
        )
        if not rows:
            raise RuntimeError(f"{session.persona}: no seat for {session.headless.session_id}")
        self.seat_names[session.persona] = rows[0][0]
        self.name_seat(rows[0][0], session.persona)
        self.name_seat(f"{session.agent}#?", None)
        self.note(f"{session.persona}: {session.headless.client} seat {rows[0][0]}")
        self.live[session.persona] = session
        if session.agent not in self.members:
            self.members.append(session.agent)

    def name_seat(self, name: str, persona: str | None) -> None:
        """Tell the judge (seats.json) which persona a seat is; None: forget the name."""
        known = json.loads(self.seats_path.read_text()) if self.seats_path.exists() else {}
        if persona is None:
            known.pop(name, None)
        else:
            known[name] = persona
        partial = self.seats_path.with_suffix(".partial")
        partial.write_text(json.dumps(known))
        partial.replace(self.seats_path)  # the judge never reads half a file

    def carry_on(self, session: Session) -> None:
        """A headless session's last turn: the person comes back once and says carry on,
        so that what is owed to it is told at that turn."""
        self.settle()
        session.headless.turn(CARRY_ON)
        self.note(f"{session.persona}: carry-on turn")

    def end(self, step: dict) -> None:
        session = self.live.pop(step["persona"])
        if session.headless is not None:
            return self.carry_on(session)
        self.settle()
        session.terminal.type_line("/exit")
        with contextlib.suppress(RuntimeError):
            self.wait_for(lambda: not session.terminal.alive(), "the session to exit", 20)
        close(session.terminal)

    def send(self, step: dict) -> None:
        args = ["send", self.day["room"], step["type"], step["text"], "--json"]
        store = self.store_of.get(self.agent_of(step["from"]), "a")
        to = [self.address(t, store) for t in step.get("to", [])]
        if self.config == "push":
            to = list(self.members)
        if to:
            args += ["--to", ",".join(to)]
        if step.get("re"):
            answered = self.ids[step["re"]]
            self.wait_for(lambda: self.landed(answered, store), f"{step['re']} on store {store}")
            args += ["--re", answered]
        report = json.loads(self.salon(step["from"], *args).stdout)
        self.ids[step["tag"]] = report["id"]
        later = report.get("toldAtNextTurn")
        self.note(f"{step['tag']} wakes {report.get('wakes')}, told at next turn {later}")

    def agent_of(self, persona: str) -> str:
        return self.day["personas"][persona]["agent"] if persona != "ci" else "ci"

    def address(self, target: dict, store: str) -> str:
        """An addressee as the writer's machine names it (a seat of another machine
        reads agent@device#session)."""
        if "seat" not in target:
            return target["agent"]
        if target["persona"] in self.seat_names:  # a headless seat: its CLI named it
            return self.seat_names[target["persona"]]
        agent = self.agent_of(target["persona"])
        if self.store_of[agent] == store:
            return target["seat"]
        return remote_name(target["seat"], self.devices[self.store_of[agent]])

    def ask(self, step: dict) -> None:
        if self.config == "push":
            return self.send({**step, "type": "REQUEST", "to": [{"agent": step["agent"]}]})
        args = ["ask", step["agent"], step["key"], step["text"], "--wait", "10", "--json"]
        report = json.loads(self.salon(step["from"], *args).stdout)
        self.ids[step["tag"]] = report.get("id", "")
        self.served[step["tag"]] = report.get("outcome") or report.get("verdict", "")
        self.note(f"{step['tag']} ask: {json.dumps(report)[:300]}")

    def claim(self, step: dict) -> None:
        self.salon(step["persona"], "claim", step["path"], "--note", "rewriting the totals")

    def edit(self, step: dict) -> None:
        session = self.live[step["persona"]]
        if session.model is None:
            raise RuntimeError(f"{step['persona']}: the replay edits in Claude Code sessions only")
        session.model.editing = step["path"]
        session.terminal.type_line(edit_prompt(step["path"]))
        self.wait_for(lambda: session.model.editing is None, f"{step['persona']}'s edit", 120)

    def run(self) -> dict:
        began = time.monotonic()
        bridging = threading.Thread(target=self.bridge_or_note, daemon=True)
        try:
            bridging.start()
            steps = self.day["steps"]
            for index, step in enumerate(steps):
                if STOPPING.is_set():
                    raise RuntimeError("the run was interrupted")
                if step["op"] not in ("start", "resume"):
                    self.wait_for_the_bridge(bridging)
                following = steps[index + 1]["op"] if index + 1 < len(steps) else None
                if self.take(step, following):
                    self.note(f"{step['op']} {step.get('tag') or step.get('persona')}")
                    self.settle()
            for session in [s for s in self.live.values() if s.headless is not None]:
                self.carry_on(session)  # the close of the day: a last turn each
        finally:
            self.tear_down(bridging)
        return self.result(time.monotonic() - began)

    def wait_for_the_bridge(self, bridging: threading.Thread) -> None:
        """Nothing crosses before the room is bridged."""
        if bridging.ident and not self.bridged:
            bridging.join()
            self.bridged = True
            if self.bridge_error:
                raise RuntimeError(self.bridge_error)

    def take(self, step: dict, following: str | None) -> bool:
        """Play one step of the day; False when it asks nothing of this configuration
        (or, for a start, waits for the starts that follow it)."""
        op = step["op"]
        if op == "start" and following == "start":
            # Sessions that start together come up together.
            self.launching.append(self.launch(step))
            return False
        if op in ("start", "resume"):
            self.launching.append(self.launch(step))
            for session in self.launching:
                self.ready(session)
            self.launching.clear()
        elif op == "end":
            self.end(step)
        elif op == "focus" and self.config != "push":
            self.salon(step["persona"], "focus", step["text"])
        elif op == "quiet" and self.config != "push":
            self.salon(step["persona"], "quiet", "--for", step["for"])
        elif op in ("send", "ask", "claim", "edit"):
            getattr(self, op)(step)
        else:
            return False
        return True

    def tear_down(self, bridging: threading.Thread) -> None:
        for session in self.sessions:
            if session.terminal is not None:
                close(session.terminal)
            if session.headless is not None:
                session.headless.close()
            else:
                session.stand_in.__exit__(None, None, None)
        if bridging.is_alive():
            bridging.join(300)
        self.unbridge()
        for scratch in self.scratch:
            shutil.rmtree(scratch, ignore_errors=True)

    def outcomes(self) -> dict[str, str]:
        return outcomes(self.day, {a: self.envs[self.store_of[a]] for a in self.store_of})

    def result(self, seconds: float) -> dict:
        attributed, side, most = [], 0, {}
        for session in self.sessions:
            if session.headless is not None:
                bodies = session.headless.bodies()
                side += len(session.headless.requests) - len(bodies)
            else:
                bodies = [r.body for r in session.stand_in.main_requests]
                side += len(session.stand_in.requests) - len(bodies)
            # Kept for a look at what each model was shown (the work directory is
            # removed unless --keep).
            dump = self.workdir / f"requests-{session.persona}-{session.session[:8]}.json"
            dump.write_text(json.dumps(bodies))
            found, shown = attribute_any(self.day, session.persona, session.session, bodies)
            attributed += found
            for marker, n in shown.items():
                key = (marker, session.persona)
                most[key] = max(most.get(key, 0), n)
        scored = score.score(self.day, attributed, side, self.outcomes(), most)
        return {
            "config": self.config,
            "seconds": round(seconds, 1),
            "score": scored,
            "attributed": attributed,
            "log": self.log,
        }


def outcomes(day: dict, env_of: dict[str, dict[str, str]]) -> dict[str, str]:
    """Each lookup's outcome as the receiving project's store recorded it (served,
    denied, declined, woken): the asker's report does not know it when the request was
    decided on another machine. `env_of`: agent → the environment of its store."""
    out = {}
    for step in day["steps"]:
        if step["op"] != "ask":
            continue
        rows = query_store(
            env_of[step["agent"]],
            "SELECT r.outcome FROM bus_request r JOIN bus_entry e ON e.id = r.entry_id "
            "WHERE e.content LIKE ?",
            (f"[{step['tag']}] %",),
        )
        out[step["tag"]] = rows[0][0] if rows else ""
    return out


def rescore(day: dict, directory: Path, config: str) -> dict:
    """Score a finished replay again from what it kept (--keep): each session's recorded
    requests and the stores."""
    sessions = {s[:8]: (p, s) for p, info in day["personas"].items() for s in info["sessions"]}
    attributed, most = [], {}
    for dump in sorted(directory.glob("requests-*.json")):
        persona, session = sessions[dump.stem.rsplit("-", 1)[1]]
        found, shown = attribute_any(day, persona, session, json.loads(dump.read_text()))
        attributed += found
        for marker, n in shown.items():
            most[(marker, persona)] = max(most.get((marker, persona), 0), n)
    relay = day.get("relay") or {}
    env_of = {}
    for agent in day["projects"]:
        store = "b" if agent in relay.get("b", []) else "a"
        env_of[agent] = {"AGENT_SALON_DB": str(directory / f"store-{store}" / "salon.db")}
    found = outcomes(day, env_of) if config != "push" else {}
    return {
        "config": config,
        "seconds": None,
        "score": score.score(day, attributed, 0, found, most),
        "attributed": attributed,
        "log": [],
    }


def attribute_any(
    day: dict, persona: str, session: str, bodies: list[dict]
) -> tuple[list[score.Attributed], dict[str, int]]:
    """A session's requests attributed as its client's requests read (score.attribute for
    Claude Code, score.attribute_headless for Codex and Gemini)."""
    markers = [e["marker"] for e in score_entries(day)]
    client = client_of(day, day["personas"][persona]["agent"])
    if client in HEADLESS:
        return score.attribute_headless(client, persona, session, bodies, markers)
    return score.attribute(persona, session, bodies, markers), {}


def score_entries(day: dict) -> list[dict]:
    from bench.attention.day import entries

    return entries(day)


def close(terminal: Tmux, wait: float = 15) -> None:
    """Close a session's terminal and wait for its Claude Code to exit (it writes its
    session files on the way out, into a HOME about to be removed)."""
    listed = terminal.tmux("list-panes", "-t", terminal.name, "-F", "#{pane_pid}").stdout
    pids = [int(p) for p in listed.split() if p.isdigit()]
    terminal.stop()
    deadline = time.monotonic() + wait
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if os.path.exists(f"/proc/{p}")]
        time.sleep(0.1)


def stop_all() -> None:
    """Close every terminal still open (Claude Code, its server and monitor end with it)."""
    STOPPING.set()
    for terminal in TERMINALS:
        with contextlib.suppress(Exception):
            terminal.stop()
