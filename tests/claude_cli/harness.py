"""Run the real Claude Code CLI offline, against a stand-in model and a temporary HOME.

The CLI is found through SALON_CLAUDE_BIN, else in the throw-away directory that
install_claude.sh fills (SALON_CLAUDE_DIR, default /tmp/salon-claude-cli). Tests call
`claude_or_skip()` so that a machine without it skips them with a reason.

A `ClaudeHome` is a HOME of its own: `.claude.json` says onboarding is done, the dummy
API key is approved, and each project it `trust`s has its workspace trust accepted and
its `.mcp.json` servers enabled. `env()` points Claude Code at the stand-in and turns
off everything that would reach for the network (updates, telemetry, error reports).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import stretched

# The version CI installs (install_claude.sh reads the same file).
CLAUDE_VERSION = (Path(__file__).parent / "claude-version.txt").read_text().strip()
DEFAULT_DIR = Path("/tmp/salon-claude-cli")
DUMMY_KEY = "sk-ant-api03-standin-0000000000000000000000000000"


def claude_binary() -> Path | None:
    """The Claude Code executable to test with, or None when there is none."""
    named = os.environ.get("SALON_CLAUDE_BIN")
    if named:
        path = Path(named)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    directory = Path(os.environ.get("SALON_CLAUDE_DIR") or DEFAULT_DIR)
    path = directory / "node_modules" / ".bin" / "claude"
    return path if path.exists() and os.access(path, os.X_OK) else None


def claude_or_skip() -> Path:
    path = claude_binary()
    if path is None:
        where = os.environ.get("SALON_CLAUDE_BIN") or (
            Path(os.environ.get("SALON_CLAUDE_DIR") or DEFAULT_DIR) / "node_modules/.bin/claude"
        )
        pytest.skip(
            f"Claude Code CLI not found at {where}; run tests/claude_cli/install_claude.sh "
            "or set SALON_CLAUDE_BIN"
        )
    return path


@dataclass
class ClaudeHome:
    """A temporary HOME for Claude Code, pointed at a stand-in model at `api_url`."""

    root: Path
    api_url: str
    binary: Path
    api_key: str = DUMMY_KEY
    projects: dict[str, dict] = field(default_factory=dict)
    # More top-level keys for .claude.json.
    extra_config: dict = field(default_factory=dict)
    # Open Claude Code's channel gate offline (see `channels_flag`).
    channels: bool = False

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / ".claude").mkdir(exist_ok=True)
        self.write_config()

    @property
    def config_path(self) -> Path:
        return self.root / ".claude.json"

    def trust(self, project: Path, servers: tuple[str, ...] = ("agent-salon",)) -> None:
        """Accept the workspace trust dialog for `project` and enable its .mcp.json
        servers, as a person would have done once."""
        self.projects[str(project.resolve())] = {
            "hasTrustDialogAccepted": True,
            "hasCompletedProjectOnboarding": True,
            "enabledMcpjsonServers": list(servers),
            "disabledMcpjsonServers": [],
            "allowedTools": [],
        }
        self.write_config()

    def write_config(self) -> None:
        config = {
            "hasCompletedOnboarding": True,
            "lastOnboardingVersion": CLAUDE_VERSION,
            "numStartups": 1,
            "theme": "dark",
            "autoUpdates": False,
            # Claude Code remembers an approved key by its last 20 characters.
            "customApiKeyResponses": {"approved": [self.api_key[-20:]], "rejected": []},
            "projects": self.projects,
            **self.extra_config,
        }
        if self.channels:
            # Channels sit behind a remote feature flag; Claude Code keeps the flags it
            # fetched in .claude.json and reads that cache when told to (env below).
            config["cachedGrowthBookFeatures"] = {"tengu_harbor": True}
        # What others wrote there (`salon install`'s local MCP scope, Claude Code's own
        # keys) is kept: ours is laid over it, project by project.
        if self.config_path.exists():
            existing = json.loads(self.config_path.read_text())
            projects = existing.get("projects", {})
            for key, settings in config["projects"].items():
                projects[key] = {**projects.get(key, {}), **settings}
            config = {**existing, **config, "projects": projects}
        self.config_path.write_text(json.dumps(config, indent=2))

    def env(self, base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
        """The environment for a Claude Code process: `base` (e.g. a salon_env, so that
        the hooks and the stdio server it spawns find the test's store) plus HOME, the
        stand-in, and the switches that keep it off the network."""
        environment = {
            k: v
            for k, v in (base if base is not None else os.environ).items()
            if not k.startswith(("ANTHROPIC_", "CLAUDE_", "CLAUDECODE"))
        }
        environment.update(
            HOME=str(self.root),
            ANTHROPIC_BASE_URL=self.api_url,
            ANTHROPIC_API_KEY=self.api_key,
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
            # An interactive session otherwise tries to clone the official marketplace.
            CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL="1",
            CLAUDE_CODE_DISABLE_TERMINAL_TITLE="1",
            NO_PROXY="127.0.0.1,localhost",
            # CI has no terminal (TERM may be unset or "dumb"); tmux gives a real one.
            TERM="xterm-256color",
            # How long Claude Code waits for an MCP server to answer at start (and, capped
            # at 10 s, `claude mcp list`'s check): a loaded machine starts `salon mcp`
            # slowly, and a server that answered late is no finding of these tests.
            MCP_TIMEOUT="60000",
        )
        if self.channels:
            # Telemetry is off here, which otherwise makes it ignore the cached flags.
            environment["CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF"] = "1"
        environment.update(extra)
        return environment

    def run(
        self,
        *args: str,
        cwd: Path,
        env: dict[str, str],
        timeout: float = 120,
        stdin: str = "",
    ) -> subprocess.CompletedProcess:
        """`claude ARGS…` in `cwd`, output captured."""
        return subprocess.run(
            [str(self.binary), *args],
            cwd=cwd,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=stretched(timeout),
        )

    def print_mode(
        self,
        prompt: str,
        *,
        cwd: Path,
        env: dict[str, str],
        debug_file: Path | None = None,
        allowed_tools: tuple[str, ...] = (),
        extra: tuple[str, ...] = (),
        timeout: float = 180,
    ) -> PrintRun:
        """One headless turn: `claude -p PROMPT --output-format json`. The JSON result
        carries the session id (the seat's suffix) and the final text.

        In -p mode nobody can answer a permission prompt, so an MCP tool the script calls
        must be allowed up front (`allowed_tools=("mcp__agent-salon",)` allows them all).
        """
        args = ["-p", prompt, "--output-format", "json", "--permission-mode", "default"]
        if allowed_tools:
            args += ["--allowedTools", ",".join(allowed_tools)]
        if debug_file is not None:
            args += ["--debug-file", str(debug_file)]
        started = time.monotonic()
        done = self.run(*args, *extra, cwd=cwd, env=env, timeout=timeout)
        elapsed = time.monotonic() - started
        result: dict = {}
        for line in reversed(done.stdout.strip().splitlines()):
            try:
                result = json.loads(line)
                break
            except ValueError:
                continue
        return PrintRun(done, result, elapsed, debug_file)

    def install_plugin(self, marketplace: Path, plugin: str, *, cwd: Path) -> None:
        """Install `plugin` from a local marketplace directory the way a person does,
        with no network: `claude plugin marketplace add DIR`, `claude plugin install`."""
        env = self.env()
        for args in (
            ("plugin", "marketplace", "add", str(marketplace)),
            ("plugin", "install", f"{plugin}@{marketplace_name(marketplace)}"),
        ):
            done = self.run(*args, cwd=cwd, env=env, timeout=60)
            assert done.returncode == 0, f"claude {' '.join(args)}: {done.stdout}{done.stderr}"

    def interactive(
        self,
        *,
        cwd: Path,
        env: dict[str, str],
        name: str = "claude",
        debug_file: Path | None = None,
        extra: tuple[str, ...] = (),
    ) -> Tmux:
        """An interactive session under tmux, ready for input (its footer is drawn).
        Stop it with `.stop()`. Skips the test where tmux is missing."""
        if not Tmux.available():
            pytest.skip("tmux is not installed (apt-get install tmux)")
        args = [str(self.binary), "--permission-mode", "default"]
        if debug_file is not None:
            args += ["--debug-file", str(debug_file)]
        # A short socket path: a UNIX socket's path is limited to ~108 bytes.
        scratch = Path(tempfile.mkdtemp(prefix="cc-tmux-"))
        session = Tmux(name, scratch / "socket", scratch).start([*args, *extra], cwd, env)
        screen = session.wait_for_any((READY_MARK, DEV_CHANNELS_WARNING), timeout=30)
        if DEV_CHANNELS_WARNING in screen:
            # "1. I am using this for local development" is the selected answer.
            session.send("Enter")
            session.wait_for(READY_MARK, timeout=30)
        return session


# The footer of the interactive screen once it takes input (--permission-mode default).
READY_MARK = "manual mode on"
# The question --dangerously-load-development-channels asks at every start.
DEV_CHANNELS_WARNING = "Loading development channels"


def write_local_plugin(
    marketplace: Path,
    plugin: str,
    *,
    mcp_servers: dict | None = None,
    hooks: dict | None = None,
    monitors: list[dict] | None = None,
) -> Path:
    """A one-plugin local marketplace at `marketplace`, in the layout Claude Code reads:
    .claude-plugin/marketplace.json beside the plugin's directory, which holds
    .claude-plugin/plugin.json, .mcp.json, hooks/hooks.json and monitors/monitors.json."""
    root = marketplace / plugin
    files: dict[str, object] = {
        ".claude-plugin/plugin.json": {"name": plugin, "version": "0.0.1", "description": plugin},
    }
    if mcp_servers is not None:
        files[".mcp.json"] = {"mcpServers": mcp_servers}
    if hooks is not None:
        files["hooks/hooks.json"] = {"description": plugin, "hooks": hooks}
    if monitors is not None:
        files["monitors/monitors.json"] = monitors
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content, indent=2))
    catalog = {
        "name": f"{plugin}-local",
        "owner": {"name": plugin},
        "plugins": [{"name": plugin, "source": f"./{plugin}", "description": plugin}],
    }
    (marketplace / ".claude-plugin").mkdir(parents=True, exist_ok=True)
    (marketplace / ".claude-plugin" / "marketplace.json").write_text(json.dumps(catalog))
    return root


def marketplace_name(marketplace: Path) -> str:
    catalog = marketplace / ".claude-plugin" / "marketplace.json"
    return json.loads(catalog.read_text())["name"]


def channels_flag(server: str = "agent-salon") -> tuple[str, ...]:
    """The start-up flag naming the MCP server whose channel pushes the model may see
    (with `ClaudeHome(channels=True)`)."""
    return ("--dangerously-load-development-channels", f"server:{server}")


@dataclass
class PrintRun:
    process: subprocess.CompletedProcess
    result: dict
    seconds: float
    debug_file: Path | None = None

    @property
    def session_id(self) -> str:
        return self.result.get("session_id", "")

    @property
    def text(self) -> str:
        return self.result.get("result", "")

    def debug_log(self) -> str:
        if self.debug_file is None or not self.debug_file.exists():
            return ""
        return self.debug_file.read_text(errors="replace")

    def explain(self) -> str:
        """Everything worth seeing when an assertion fails."""
        return (
            f"exit {self.process.returncode}\nstdout: {self.process.stdout[-3000:]}\n"
            f"stderr: {self.process.stderr[-3000:]}\ndebug log tail:\n{self.debug_log()[-5000:]}"
        )


@dataclass
class Tmux:
    """An interactive Claude Code under tmux: type with `send`, read with `screen`."""

    name: str
    socket: Path
    scratch: Path | None = None  # a directory of our own for the socket, removed on stop

    @classmethod
    def available(cls) -> bool:
        return shutil.which("tmux") is not None

    def tmux(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, timeout=10
        )

    def start(self, command: list[str], cwd: Path, env: dict[str, str]) -> Tmux:
        # tmux's server takes its environment from the first client: pass ours whole.
        line = " ".join(
            ["env", "-i", *(f"{k}={shlex.quote(v)}" for k, v in env.items())]
            + [shlex.quote(part) for part in command]
        )
        done = subprocess.run(
            [
                "tmux", "-S", str(self.socket), "new-session", "-d", "-s", self.name,
                "-x", "200", "-y", "50", "-c", str(cwd), line,
            ],
            capture_output=True,
            text=True,
            timeout=10,
            env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return self

    def send(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def type_line(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.name, "-l", text)
        time.sleep(0.2)  # the TUI reads a paste and an Enter sent together as one paste
        self.tmux("send-keys", "-t", self.name, "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name, "-S", "-200").stdout

    def wait_for(self, text: str, timeout: float = 60) -> str:
        return self.wait_for_any((text,), timeout)

    def wait_for_any(self, texts: tuple[str, ...], timeout: float = 60) -> str:
        """The screen, once it shows one of `texts`."""
        timeout = stretched(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if any(text in screen for text in texts):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"none of {texts!r} on screen after {timeout}s:\n{self.screen()}")

    def alive(self) -> bool:
        return self.tmux("has-session", "-t", self.name).returncode == 0

    def stop(self) -> None:
        """End the session: tmux hangs up on Claude Code, which stops its servers and
        monitors."""
        self.tmux("kill-server")
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
