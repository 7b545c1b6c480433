"""Run the real Codex CLI offline, against a stand-in model and a temporary HOME.

The CLI is found through SALON_CODEX_BIN, else in the throw-away directory that
install_codex.sh fills (SALON_CODEX_DIR, default /tmp/salon-codex-cli). Tests call
`codex_or_skip()` so that a machine without it skips them with a reason.

A `CodexHome` is a HOME with a CODEX_HOME of its own whose `config.toml` names one model
provider, `standin`, at the stand-in's address (the Responses API, its key read from
STANDIN_KEY), with plugins and analytics off. The model is `gpt-5.5`, a model Codex
knows: it then offers `apply_patch`, and keeps MCP tools behind `tool_search` (the
stand-in's Search). `salon install --client codex` adds the project's trust and its
hooks' to this file.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.agent_cli_kit import installed_cli, run_cli, skip_without

CODEX_VERSION = (Path(__file__).parent / "codex-version.txt").read_text().strip()
DEFAULT_DIR = Path("/tmp/salon-codex-cli")
MODEL = "gpt-5.5"


def codex_binary() -> Path | None:
    path, there = installed_cli("SALON_CODEX_BIN", "SALON_CODEX_DIR", DEFAULT_DIR, "codex")
    return path if there else None


def codex_or_skip() -> Path:
    path, there = installed_cli("SALON_CODEX_BIN", "SALON_CODEX_DIR", DEFAULT_DIR, "codex")
    if not there:
        skip_without(path, "tests/codex_cli/install_codex.sh", "SALON_CODEX_BIN")
    return path


@dataclass
class Run:
    """One `codex exec --json` run: its exit code, events and stderr."""

    returncode: int
    events: list[dict]
    stderr: str

    @property
    def thread_id(self) -> str:
        return next(e["thread_id"] for e in self.events if e.get("type") == "thread.started")

    def items(self, kind: str) -> list[dict]:
        return [
            e["item"]
            for e in self.events
            if e.get("type") == "item.completed" and e.get("item", {}).get("type") == kind
        ]


@dataclass
class CodexHome:
    """A temporary HOME for Codex, pointed at a stand-in model at `api_url`."""

    root: Path
    api_url: str
    binary: Path

    def __post_init__(self) -> None:
        self.codex_home.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            f'model = "{MODEL}"\n'
            'model_provider = "standin"\n'
            "\n"
            "[model_providers.standin]\n"
            'name = "standin"\n'
            f'base_url = "{self.api_url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "STANDIN_KEY"\n'
            "\n"
            "[features]\n"
            "plugins = false\n"
            "\n"
            "[analytics]\n"
            "enabled = false\n"
        )

    @property
    def codex_home(self) -> Path:
        return self.root / ".codex"

    @property
    def config_path(self) -> Path:
        return self.codex_home / "config.toml"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """`base` (the store's variables) with this HOME: for Codex, and for the `salon
        install` that writes into its config."""
        env = dict(base)
        env.update(HOME=str(self.root), CODEX_HOME=str(self.codex_home), STANDIN_KEY="x")
        env.pop("CLAUDE_CODE_SESSION_ID", None)
        env.pop("AGENT_SALON_NAME", None)
        env.pop("AGENT_SALON_ROOM", None)
        return env

    def run(
        self, *args: str, cwd: Path, env: dict[str, str], timeout: float = 120
    ) -> subprocess.CompletedProcess:
        return run_cli(self.binary, args, cwd=cwd, env=env, timeout=timeout)

    def exec(
        self, prompt: str, *, cwd: Path, env: dict[str, str], resume: str | None = None
    ) -> Run:
        """`codex exec --json PROMPT` (or `codex exec resume ID PROMPT`)."""
        args = ["exec", "resume", "--json", resume] if resume else ["exec", "--json"]
        done = self.run(*args, prompt, cwd=cwd, env=env)
        events = []
        for line in done.stdout.splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        return Run(done.returncode, events, done.stderr)
