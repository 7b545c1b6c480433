"""What `salon install --client gemini` writes, as pure functions over plain data.

* `.gemini/settings.json` (the project's; every key of the user's is kept):
  - `mcpServers.salon`: `salon mcp` over stdio, `env` with the agent, its rooms and the
    client, `trust: true` (a headless `gemini -p` shows the model no tool of an untrusted
    server) and a `timeout` (ms) well above the longest `wait`: Gemini cuts every tool
    call at the server's timeout, and progress does not extend it;
  - `hooks`: SessionStart → `salon hook session-start --client gemini`, BeforeAgent →
    `… prompt-submit`, AfterAgent → `… stop`, BeforeTool on `write_file` / `replace` →
    `… pre-edit`, SessionEnd → `… session-end` (the same shape as Claude Code's hooks;
    ours are recognised and merged by mcpgate.claude.config's rules). Timeouts in ms.
* The user's `~/.gemini/trustedFolders.json`: the project trusted (`TRUST_FOLDER`), when
  nothing trusts it yet. Gemini ignores a project's settings, its stdio servers and its
  hooks in a folder it does not trust, and a headless run there stops.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from mcpgate.claude import config as claudeconfig

SETTINGS = ".gemini/settings.json"
SERVER_NAME = "salon"
CLIENT = "gemini"
HOOK_TIMEOUT_MS = 10_000
# The longest a tool call may take: `wait` waits up to 300 s, `ask` far less.
SERVER_TIMEOUT_MS = 600_000
TRUSTED = "TRUST_FOLDER"
# Values that trust a folder (TRUST_PARENT trusts the folder the file's key names the
# parent of), and the one that marks it untrusted.
TRUSTS = ("TRUST_FOLDER", "TRUST_PARENT")
UNTRUSTED = "DO_NOT_TRUST"
EDIT_TOOLS = ("write_file", "replace")
# (Gemini event, `salon hook` kind, matcher: a regular expression over the tool's name)
HOOK_EVENTS = (
    ("SessionStart", "session-start", None),
    ("BeforeAgent", "prompt-submit", None),
    ("AfterAgent", "stop", None),
    ("BeforeTool", "pre-edit", "^(write_file|replace)$"),
    ("SessionEnd", "session-end", None),
)
KINDS = tuple(kind for _, kind, _ in HOOK_EVENTS)


def gemini_home(environ: dict[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    return Path(environ.get("HOME") or Path.home()) / ".gemini"


def trusted_folders_path(environ: dict[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    named = environ.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH", "").strip()
    return Path(named).expanduser() if named else gemini_home(environ) / "trustedFolders.json"


def wanted_hooks(commands: dict[str, str]) -> list[tuple[str, str | None, dict]]:
    return [
        (event, matcher, {"type": "command", "command": commands[kind], "timeout": HOOK_TIMEOUT_MS})
        for event, kind, matcher in HOOK_EVENTS
    ]


# The variables Gemini refuses to set for an MCP server ("dangerous"): one the server
# needs is given on its command line, through env(1), instead.
REFUSED_ENV = ("PYTHONPATH",)


def server_entry(argv: list[str], env: dict[str, str]) -> dict:
    from mcpgate.claude.commandline import ordered

    env = dict(env)
    through_env = [f"{name}={env.pop(name)}" for name in REFUSED_ENV if name in env]
    if through_env:
        argv = ["env", *through_env, *argv]
    return {
        "command": argv[0],
        "args": list(argv[1:]),
        "env": dict(ordered(env)),
        "trust": True,
        "timeout": SERVER_TIMEOUT_MS,
    }


def is_our_server(entry: object) -> bool:
    """An `mcpServers.salon` that runs `salon mcp` (or `python -m salon.cli mcp`)."""
    if not isinstance(entry, dict):
        return False
    words = [str(entry.get("command", "")), *map(str, entry.get("args") or [])]
    return words[-1:] == ["mcp"] and any(
        os.path.basename(w) == "salon" or w == "salon.cli" for w in words
    )


def _servers(data: dict) -> dict:
    servers = data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise claudeconfig.ShapeError(f'{SETTINGS}: "mcpServers" is not an object')
    return servers or {}


def merge_settings(data: dict, commands: dict[str, str], server: dict, *, replace: bool):
    """Our hooks and server into the project's settings (a copy; the rest kept)."""
    merged = claudeconfig.merge_hooks(
        claudeconfig.check_settings(data, SETTINGS), wanted_hooks(commands), replace=replace
    )
    new = merged.data
    servers = _servers(new)
    current = servers.get(SERVER_NAME)
    if current is not None and not is_our_server(current):
        raise claudeconfig.ShapeError(
            f'{SETTINGS}: "mcpServers.{SERVER_NAME}" is a server of your own (it does not run '
            "`salon mcp`)"
        )
    if current != server:
        new = copy.deepcopy(new)
        new.setdefault("mcpServers", {})[SERVER_NAME] = server
        merged = claudeconfig.Merge(data=new, changed=True, removed=merged.removed)
    return merged


def without_ours(data: dict):
    """The project's settings without our hooks and server."""
    merged = claudeconfig.without_our_hooks(data, SETTINGS)
    new = merged.data
    servers = _servers(new)
    if is_our_server(servers.get(SERVER_NAME)):
        new = copy.deepcopy(new)
        del new["mcpServers"][SERVER_NAME]
        if not new["mcpServers"]:
            del new["mcpServers"]
        merged = claudeconfig.Merge(
            data=new, changed=True, removed=[*merged.removed, f"mcpServers.{SERVER_NAME}"]
        )
    return merged


def trust_of(folders: dict, root: Path) -> str | None:
    """What trustedFolders.json says of `root`: its own entry, else the nearest folder
    above it that trusts its children (TRUST_PARENT on a child names the parent), else
    None."""
    own = folders.get(str(root))
    if own is not None:
        return own
    for key, value in folders.items():
        folder = Path(key)
        if value == "TRUST_PARENT":
            folder = folder.parent
        elif value != TRUSTED:
            continue
        if folder in root.parents:
            return TRUSTED
    return None
