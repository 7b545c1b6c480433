"""Run the real OpenCode offline, against a stand-in model and a temporary HOME.

The CLI is found through SALON_OPENCODE_BIN, else in the throw-away directory that
install_opencode.sh fills (SALON_OPENCODE_DIR, default /tmp/salon-opencode-cli); tests
call `opencode_or_skip()` so that a machine without it skips them with a reason.

An `OpenCodeHome` is a HOME (with XDG directories inside it) whose user configuration
names one provider, `standin`, an OpenAI-compatible API at the stand-in's address, and
its one model; model catalogue fetches and updates are off, and the plugin package
OpenCode would install from the registry at start is linked in from install_opencode.sh's
directory. OpenCode takes its working directory from PWD, so each run sets it.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.agent_cli_kit import installed_cli, run_cli, skip_without

OPENCODE_VERSION = (Path(__file__).parent / "opencode-version.txt").read_text().strip()
DEFAULT_DIR = Path("/tmp/salon-opencode-cli")
MODEL = "standin-model"


def install_dir() -> Path:
    return Path(os.environ.get("SALON_OPENCODE_DIR") or DEFAULT_DIR)


def opencode_or_skip() -> Path:
    path, there = installed_cli("SALON_OPENCODE_BIN", "SALON_OPENCODE_DIR", DEFAULT_DIR, "opencode")
    if not (there and (install_dir() / "config/node_modules/@opencode-ai/plugin").is_dir()):
        skip_without(path, "tests/opencode_cli/install_opencode.sh", "SALON_OPENCODE_BIN")
    return path


@dataclass
class Run:
    """One `opencode run --format json` run: its exit code, events and stderr."""

    returncode: int
    events: list[dict]
    stderr: str

    @property
    def session_id(self) -> str:
        return next(e["sessionID"] for e in self.events if e.get("sessionID"))

    def texts(self) -> list[str]:
        return [e["part"]["text"] for e in self.events if e.get("type") == "text"]

    def tool_parts(self) -> list[dict]:
        return [e["part"] for e in self.events if e.get("type") == "tool_use"]


@dataclass
class OpenCodeHome:
    """A temporary HOME for OpenCode, pointed at a stand-in model at `api_url`."""

    root: Path
    api_url: str
    binary: Path

    def __post_init__(self) -> None:
        config = self.root / ".config" / "opencode"
        config.mkdir(parents=True, exist_ok=True)
        template = install_dir() / "config"
        (config / "node_modules").symlink_to(template / "node_modules")
        for name in ("package.json", "package-lock.json"):
            if (template / name).exists():
                (config / name).write_bytes((template / name).read_bytes())
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "standin",
            "options": {"baseURL": f"{self.api_url}/v1", "apiKey": "x"},
            "models": {MODEL: {"name": MODEL, "tool_call": True}},
        }
        settings = {"provider": {"standin": provider}, "model": f"standin/{MODEL}",
                    "autoupdate": False, "share": "disabled"}  # fmt: skip
        (config / "opencode.json").write_text(json.dumps(settings, indent=2))

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """`base` (the store's variables) with this HOME, for OpenCode and for the
        `salon install` run beside it."""
        env = dict(base)
        root = str(self.root)
        env.update(
            HOME=root,
            XDG_CONFIG_HOME=f"{root}/.config",
            XDG_DATA_HOME=f"{root}/.local/share",
            XDG_CACHE_HOME=f"{root}/.cache",
            XDG_STATE_HOME=f"{root}/.local/state",
            OPENCODE_DISABLE_MODELS_FETCH="1",
            OPENCODE_DISABLE_AUTOUPDATE="1",
        )
        for name in ("CLAUDE_CODE_SESSION_ID", "AGENT_SALON_NAME", "AGENT_SALON_ROOM"):
            env.pop(name, None)
        return env

    def start(self, *args: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
        return subprocess.Popen(
            [str(self.binary), *args], cwd=cwd, env={**env, "PWD": str(cwd)},
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip

    def run(
        self, *args: str, cwd: Path, env: dict[str, str], timeout: float = 120
    ) -> subprocess.CompletedProcess:
        return run_cli(self.binary, args, cwd=cwd, env={**env, "PWD": str(cwd)}, timeout=timeout)

    def prompt(
        self, text: str, *, cwd: Path, env: dict[str, str], session: str | None = None,
        attach: str | None = None,
    ) -> Run:  # fmt: skip
        """`opencode run TEXT --format json` (`session`: that session goes on; `attach`:
        run in the server at that address)."""
        args = ["run", text, "--format", "json"]
        args += ["--session", session] if session else []
        args += ["--attach", attach] if attach else []
        done = self.run(*args, cwd=cwd, env=env)
        events = []
        for line in done.stdout.splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        return Run(done.returncode, events, done.stderr)
