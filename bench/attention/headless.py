"""The headless seats of the mixed fleet: Codex (`codex exec`) and Gemini (`gemini -p`).

Neither runs between turns: a turn is one run of the CLI, and a session goes on with
`codex exec resume --json ID PROMPT` / `gemini -p PROMPT -o json --resume ID`. Each
session has a HOME of its own (a CodexHome / GeminiHome of tests/codex_cli,
tests/gemini_cli) pointed at a stand-in model of its own that records every request and
notes what it is told ("Noted."); its project is wired with `salon install --client
codex|gemini ROOM` from that HOME. Its seat is named after the id the CLI gave the
session (a thread id, a session id), known once its first turn has run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tests.codex_cli import standin as codex_standin
from tests.codex_cli.harness import CodexHome, codex_binary
from tests.gemini_cli import standin as gemini_standin
from tests.gemini_cli.harness import GeminiHome, gemini_binary
from tests.support import run_salon

HEADLESS = ("codex", "gemini")


def binaries() -> dict[str, Path | None]:
    return {"codex": codex_binary(), "gemini": gemini_binary()}


@dataclass
class Headless:
    """One Codex or Gemini session: its stand-in, HOME and the id its CLI gave it."""

    client: str
    persona: str
    agent: str
    project: Path
    root: Path  # its HOME
    store_env: dict[str, str]
    room: str
    binary: Path
    session_id: str = ""  # the CLI's id: unknown until the first turn
    turns: list[str] = field(default_factory=list)  # the prompts it was given

    def __post_init__(self) -> None:
        module = codex_standin if self.client == "codex" else gemini_standin
        self.stand_in = module.StandIn(lambda request: module.Text("Noted.")).__enter__()
        if self.client == "codex":
            self.home = CodexHome(self.root, self.stand_in.url, self.binary)
        else:
            self.home = GeminiHome(self.root, self.stand_in.url, self.binary)
        done = run_salon(
            "install",
            "--client",
            self.client,
            self.room,
            env=self.home.env(self.store_env),
            cwd=self.project,
            timeout=180,
        )
        if done.returncode != 0:
            raise RuntimeError(f"salon install --client {self.client}: {done.stderr[-800:]}")

    @property
    def requests(self) -> list:
        """Every request the stand-in received (model requests and others)."""
        return list(self.stand_in.requests)

    @property
    def model_requests(self) -> list:
        return self.stand_in.model_requests

    def turn(self, prompt: str) -> None:
        """One turn: the first (a new session) or the session resumed, to its end."""
        env = self.home.env(self.store_env)
        resume = self.session_id or None
        if self.client == "codex":
            run = self.home.exec(prompt, cwd=self.project, env=env, resume=resume)
            started = [e["thread_id"] for e in run.events if e.get("type") == "thread.started"]
            got = (started or [resume or ""])[0] if run.returncode == 0 else ""
        else:
            run = self.home.prompt(prompt, cwd=self.project, env=env, resume=resume)
            got = (run.answer.get("session_id") or resume or "") if run.returncode == 0 else ""
        if not got:
            raise RuntimeError(
                f"{self.client} turn of {self.persona} failed (exit {run.returncode}): "
                f"{run.stderr[-800:]}"
            )
        if self.session_id and got != self.session_id:
            raise RuntimeError(f"{self.persona}: resumed as {got}, not {self.session_id}")
        self.session_id = got
        self.turns.append(prompt)

    def bodies(self) -> list[dict]:
        return [r.body for r in self.model_requests]

    def close(self) -> None:
        self.stand_in.__exit__(None, None, None)
