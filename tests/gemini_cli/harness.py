"""Run the real Gemini CLI offline, against a stand-in model and a temporary HOME.

The CLI is found through SALON_GEMINI_BIN, else in the throw-away directory that
install_gemini.sh fills (SALON_GEMINI_DIR, default /tmp/salon-gemini-cli). Tests call
`gemini_or_skip()` so that a machine without it skips them with a reason.

A `GeminiHome` is a HOME whose `~/.gemini/settings.json` picks API-key authentication
(the key is GEMINI_API_KEY, the address GOOGLE_GEMINI_BASE_URL: the stand-in's) and
turns off update checks and usage statistics. `salon install --client gemini` adds the
project to its `trustedFolders.json`.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.agent_cli_kit import installed_cli, run_cli, skip_without

GEMINI_VERSION = (Path(__file__).parent / "gemini-version.txt").read_text().strip()
DEFAULT_DIR = Path("/tmp/salon-gemini-cli")


def gemini_binary() -> Path | None:
    path, there = installed_cli("SALON_GEMINI_BIN", "SALON_GEMINI_DIR", DEFAULT_DIR, "gemini")
    return path if there else None


def gemini_or_skip() -> Path:
    path, there = installed_cli("SALON_GEMINI_BIN", "SALON_GEMINI_DIR", DEFAULT_DIR, "gemini")
    if not there:
        skip_without(path, "tests/gemini_cli/install_gemini.sh", "SALON_GEMINI_BIN")
    return path


@dataclass
class Run:
    """One `gemini -p PROMPT -o json` run: its exit code, its JSON answer and stderr."""

    returncode: int
    answer: dict
    stderr: str

    @property
    def session_id(self) -> str:
        return self.answer["session_id"]

    @property
    def response(self) -> str:
        return self.answer.get("response") or ""


@dataclass
class GeminiHome:
    """A temporary HOME for Gemini CLI, pointed at a stand-in model at `api_url`."""

    root: Path
    api_url: str
    binary: Path

    def __post_init__(self) -> None:
        self.gemini_dir.mkdir(parents=True, exist_ok=True)
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
        }
        (self.gemini_dir / "settings.json").write_text(json.dumps(settings, indent=2))

    @property
    def gemini_dir(self) -> Path:
        return self.root / ".gemini"

    @property
    def trusted_folders(self) -> Path:
        return self.gemini_dir / "trustedFolders.json"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """`base` (the store's variables) with this HOME: for Gemini, and for the `salon
        install` that writes into its trusted folders."""
        env = dict(base)
        env.update(HOME=str(self.root), GOOGLE_GEMINI_BASE_URL=self.api_url, GEMINI_API_KEY="x")
        for name in ("CLAUDE_CODE_SESSION_ID", "AGENT_SALON_NAME", "AGENT_SALON_ROOM",
                     "GITHUB_SHA", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT"):  # fmt: skip
            env.pop(name, None)
        return env

    def run(
        self, *args: str, cwd: Path, env: dict[str, str], timeout: float = 120
    ) -> subprocess.CompletedProcess:
        return run_cli(self.binary, args, cwd=cwd, env=env, timeout=timeout)

    def prompt(
        self, text: str, *, cwd: Path, env: dict[str, str], resume: str | None = None,
        edits: bool = False,
    ) -> Run:  # fmt: skip
        """`gemini -p TEXT -o json` (with `--resume ID`: the session goes on; `edits`: with
        `--approval-mode auto_edit`, without which a headless run offers no edit tool)."""
        args = ["-p", text, "-o", "json"] + (["--resume", resume] if resume else [])
        args += ["--approval-mode", "auto_edit"] if edits else []
        done = self.run(*args, cwd=cwd, env=env)
        try:
            answer = json.loads(done.stdout[done.stdout.index("{") :])
        except ValueError:
            answer = {}
        return Run(done.returncode, answer if isinstance(answer, dict) else {}, done.stderr)
