"""What `salon install --client opencode` writes into the project's `opencode.json`, as
pure functions over plain data (every key of the user's is kept):

* `mcp.salon`: `salon mcp` as a local server (`command` an array, `environment` with
  the agent, its rooms and the client), `enabled`, and a `timeout` (ms) above the
  longest `wait` (OpenCode restarts it at each progress notification, too);
* `plugin`: the file URL of this project's plugin (mcpgate.opencode.plugin), kept in the
  data directory so that OpenCode installs nothing into the project.
"""

from __future__ import annotations

import copy
import os

from mcpgate.claude.config import Merge, ShapeError

CONFIG = "opencode.json"
SERVER_NAME = "salon"
CLIENT = "opencode"
SERVER_TIMEOUT_MS = 600_000
PLUGIN_FILE = "agent-salon.js"


def server_entry(argv: list[str], env: dict[str, str]) -> dict:
    from mcpgate.claude.commandline import ordered

    return {
        "type": "local",
        "command": list(argv),
        "environment": dict(ordered(env)),
        "enabled": True,
        "timeout": SERVER_TIMEOUT_MS,
    }


def is_our_server(entry: object) -> bool:
    """An `mcp.salon` that runs `salon mcp` (or `python -m salon.cli mcp`)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), list):
        return False
    words = [str(word) for word in entry["command"]]
    return words[-1:] == ["mcp"] and any(
        os.path.basename(w) == "salon" or w == "salon.cli" for w in words
    )


def is_our_plugin(entry: object) -> bool:
    return (
        isinstance(entry, str) and entry.startswith("file://") and entry.endswith("/" + PLUGIN_FILE)
    )


def _checked(data: object) -> tuple[dict, list]:
    if not isinstance(data, dict):
        raise ShapeError(f"{CONFIG} is not a JSON object")
    servers = data.get("mcp", {})
    if not isinstance(servers, dict):
        raise ShapeError(f'{CONFIG}: "mcp" is not an object')
    plugins = data.get("plugin", [])
    if not isinstance(plugins, list):
        raise ShapeError(f'{CONFIG}: "plugin" is not a list')
    return servers, plugins


def merge_config(data: dict, server: dict, plugin_url: str) -> Merge:
    """Our server and plugin into the project's configuration (a copy; the rest kept)."""
    servers, plugins = _checked(data)
    current = servers.get(SERVER_NAME)
    if current is not None and not is_our_server(current):
        raise ShapeError(
            f'{CONFIG}: "mcp.{SERVER_NAME}" is a server of your own (it does not run `salon mcp`)'
        )
    wanted = [entry for entry in plugins if not is_our_plugin(entry)] + [plugin_url]
    if current == server and plugins == wanted:
        return Merge(data=data, changed=False, removed=[])
    new = copy.deepcopy(data)
    new.setdefault("mcp", {})[SERVER_NAME] = server
    new["plugin"] = wanted
    return Merge(data=new, changed=True, removed=[])


def bare(data: dict) -> dict:
    """`data` without an empty `mcp` or `plugin`: the same configuration to OpenCode."""
    return {key: value for key, value in data.items() if key not in ("mcp", "plugin") or value}


def without_ours(data: dict) -> Merge:
    """The project's configuration without our server and plugin (and `mcp` or `plugin`
    when nothing else is left in it)."""
    servers, plugins = _checked(data)
    new = copy.deepcopy(data)
    removed = []
    if is_our_server(servers.get(SERVER_NAME)):
        del new["mcp"][SERVER_NAME]
        if not new["mcp"]:
            del new["mcp"]
        removed.append(f"mcp.{SERVER_NAME}")
    kept = [entry for entry in plugins if not is_our_plugin(entry)]
    if kept != plugins:
        if kept:
            new["plugin"] = kept
        else:
            del new["plugin"]
        removed.append("plugin")
    return Merge(data=new, changed=bool(removed), removed=removed)
