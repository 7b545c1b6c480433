"""What `salon install --client codex` writes, as pure functions over plain data.

* `.codex/hooks.json` (the project's; the same shape as Claude Code's settings `hooks`):
  SessionStart → `salon hook session-start --client codex`, UserPromptSubmit →
  `… prompt-submit`, PreToolUse on `apply_patch` → `… pre-edit`, Stop → `… stop`,
  SessionEnd → `… session-end`. Every other hook is kept; ours are recognised and merged
  by mcpgate.claude.config's rules (their command names `salon hook <kind>`).
* `.codex/config.toml` (the project's): the MCP server `salon` — `salon mcp` over stdio,
  required (a session without it does not start), a 30 s start-up wait (the first
  `salon mcp` of a machine takes more than Codex's default 10 s when it migrates the
  store), `env` with the agent, its rooms and the client, `env_vars` for the variables
  Codex must pass through from its own environment (it gives an MCP server only a few of
  its own: HOME, PATH and the like).
* The user's `config.toml` (`$CODEX_HOME`, else `~/.codex`): the project trusted
  (`[projects."<root>"] trust_level = "trusted"`: Codex reads a project's `.codex/` only
  then), and each of our hooks trusted (`[hooks.state."<hooks.json>:<event>:<group>:
  <handler>"] trusted_hash = "sha256:…"`: Codex runs no hook it was not told to trust).

The hash is Codex's own (codex-rs hooks discovery): the SHA-256 of the JSON, keys
sorted, no spaces, of {"event_name": <event in snake_case>, "matcher": <matcher, when
the event has one>, "hooks": [<the handler: type, command, timeout (600 when unset),
async, statusMessage when set>]}, written "sha256:<hex>".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from mcpgate.claude import config as claudeconfig

CONFIG = ".codex/config.toml"
HOOKS = ".codex/hooks.json"
SERVER_NAME = "salon"
CLIENT = "codex"
HOOK_TIMEOUT = 10  # seconds; Codex's default is 600
# Codex cuts a SessionEnd hook's timeout to 3 s, and hashes the cut value: a longer one
# written would never count as trusted.
SESSION_END_TIMEOUT = 3
DEFAULT_TIMEOUT = 600
STARTUP_TIMEOUT_SEC = 30
# Codex cuts each MCP tool call at 60 s unless told: `wait` may wait 300 s.
TOOL_TIMEOUT_SEC = 600
# (Codex event, `salon hook` kind, matcher)
HOOK_EVENTS = (
    ("SessionStart", "session-start", None),
    ("UserPromptSubmit", "prompt-submit", None),
    ("PreToolUse", "pre-edit", "^apply_patch$"),
    ("Stop", "stop", None),
    ("SessionEnd", "session-end", None),
)
KINDS = tuple(kind for _, kind, _ in HOOK_EVENTS)
# Events whose matcher Codex ignores (it hashes them without one).
NO_MATCHER = ("UserPromptSubmit", "Stop")
# What Codex passes through to the MCP server from its own environment, when set there
# and not written into `env`: where the store is and the secret that signs its entries.
PASSED_THROUGH = (
    "AGENT_SALON_CONFIG",
    "AGENT_SALON_DB",
    "AGENT_SALON_SECRET",
    "DATABASE_URL",
    "REDIS_URL",
)


def codex_home(environ: dict[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    home = environ.get("CODEX_HOME", "").strip()
    if home:
        return Path(home).expanduser()
    return Path(environ.get("HOME") or Path.home()) / ".codex"


def project_root(directory: Path) -> Path:
    """The project Codex sees from `directory`: the nearest directory holding `.git` (a
    worktree's own top), else the directory itself; symbolic links resolved."""
    here = directory.resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    return here


# ---------------------------------------------------------------- hooks.json


def wanted_hooks(commands: dict[str, str]) -> list[tuple[str, str | None, dict]]:
    """(event, matcher, hook) for each hook to install; `commands` maps kind → command."""
    return [
        (event, matcher, {"type": "command", "command": commands[kind], "timeout": timeout(event)})
        for event, kind, matcher in HOOK_EVENTS
    ]


def timeout(event: str) -> int:
    return SESSION_END_TIMEOUT if event == "SessionEnd" else HOOK_TIMEOUT


def merge_hooks(data: dict, commands: dict[str, str], *, replace: bool) -> claudeconfig.Merge:
    return claudeconfig.merge_hooks(_checked(data), wanted_hooks(commands), replace=replace)


def without_our_hooks(data: dict) -> claudeconfig.Merge:
    return claudeconfig.without_our_hooks(_checked(data), HOOKS)


def _checked(data: object) -> dict:
    if not isinstance(data, dict):
        raise claudeconfig.ShapeError(f"{HOOKS} is not a JSON object")
    extra = sorted(set(data) - {"hooks", "description"})
    if extra:
        # Codex refuses such a file whole (its hooks would all be ignored).
        raise claudeconfig.ShapeError(
            f"{HOOKS} holds keys Codex does not read ({', '.join(extra)}): Codex ignores "
            "a hooks file with unknown keys"
        )
    return claudeconfig.check_settings(data, HOOKS)


def event_label(event: str) -> str:
    """`PreToolUse` → `pre_tool_use`: the event as Codex names it in a trust key."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", event).lower()


def hook_hash(event: str, matcher: str | None, handler: dict) -> str:
    normal = {
        "type": "command",
        "command": handler.get("command", ""),
        "timeout": max(int(handler.get("timeout") or DEFAULT_TIMEOUT), 1),
        "async": bool(handler.get("async", False)),
    }
    if handler.get("statusMessage") is not None:
        normal["statusMessage"] = handler["statusMessage"]
    identity: dict = {"event_name": event_label(event), "hooks": [normal]}
    if matcher is not None and event not in NO_MATCHER:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def trust_entries(hooks_path: Path, data: dict) -> dict[str, str]:
    """hooks.state key → trusted_hash, for each hook of ours in the hooks file `data`."""
    entries = {}
    for event, groups in (data.get("hooks") or {}).items():
        for group_index, group in enumerate(groups):
            for handler_index, handler in enumerate(group.get("hooks") or []):
                if claudeconfig.our_kind(handler) and handler.get("type") == "command":
                    key = f"{hooks_path}:{event_label(event)}:{group_index}:{handler_index}"
                    entries[key] = hook_hash(event, group.get("matcher"), handler)
    return entries


# ---------------------------------------------------------------- config.toml


def server_table(argv: list[str], env: dict[str, str]) -> dict:
    """The `[mcp_servers.salon]` table."""
    from mcpgate.claude.commandline import ordered

    return {
        "command": argv[0],
        "args": list(argv[1:]),
        "env": dict(ordered(env)),
        "env_vars": [name for name in PASSED_THROUGH if name not in env],
        "required": True,
        "startup_timeout_sec": STARTUP_TIMEOUT_SEC,
        "tool_timeout_sec": TOOL_TIMEOUT_SEC,
    }


def is_our_server(entry: object) -> bool:
    """A `[mcp_servers.salon]` that runs `salon mcp` (or `python -m salon.cli mcp`)."""
    if not isinstance(entry, dict):
        return False
    words = [str(entry.get("command", "")), *map(str, entry.get("args") or [])]
    return words[-1:] == ["mcp"] and any(
        os.path.basename(w) == "salon" or w == "salon.cli" for w in words
    )
