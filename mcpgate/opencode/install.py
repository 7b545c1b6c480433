"""`salon install --client opencode ROOM[,ROOM…]` and `salon uninstall --client opencode`.

Run in a project; wires OpenCode's sessions there to the bus for this agent
(AGENT_SALON_NAME, else the name of the project's top directory — the git root). What is
written (mcpgate.opencode.config and .plugin have the shapes):

* the project's `opencode.json`: the MCP server `salon` and the plugin's file URL merged
  in, every other key of the file kept;
* the plugin, in the data directory (`opencode/<project>-<hash of its path>/
  agent-salon.js`): in the project, OpenCode would install its plugin package into
  `.opencode/` at the next start;
* the rooms and the store's migrations, and the project's directory for the agent, as
  for Claude Code (mcpgate.claude.install).

`opencode.json` then names this machine's paths (the plugin's, and the commands' where
plain `salon …` would not do), so it is listed in the repository's own
`.git/info/exclude`. The same promises as the other installs:
everything read and checked first (a file that is not JSON, or not in the shape OpenCode
reads, is refused and nothing is changed), a re-run changes nothing, each changed file
backed up first, no write through a symbolic link; uninstall gives each file its own
bytes back and removes what install created: `git status` is as it was before.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from mcpgate import clients
from mcpgate.claude import config as claudeconfig
from mcpgate.claude import files, install
from mcpgate.claude.files import Planned
from mcpgate.claude.plans import (
    exclude_plan,
    file_lines,
    json_plan,
    uninstall_client,
)
from mcpgate.codex.config import project_root
from mcpgate.opencode import config as opencodeconfig
from mcpgate.opencode import plugin as opencodeplugin
from mcpgate.opencode.config import CONFIG

EXCLUDE_NOTE = "# agent-salon: salon install --client opencode (names this machine's paths)"
EXCLUDED = [EXCLUDE_NOTE, f"/{CONFIG}"]
KINDS = ("session-start", "prompt-submit", "stop", "pre-edit", "session-end")


def agent_for(here: Path, named: str) -> str:
    return named or project_root(here).name


def plugin_path(here: Path) -> Path:
    """This project's plugin, in the data directory (one per project: its commands)."""
    digest = hashlib.sha256(str(here).encode()).hexdigest()[:8]
    folder = settings.USER_DATA_DIR / "opencode" / f"{here.name}-{digest}"
    return folder / opencodeconfig.PLUGIN_FILE


# ---------------------------------------------------------------- install


def project(agent: str, rooms: list[str], *, dry_run: bool, replace: bool) -> str:
    here = project_root(Path.cwd())
    wired = clients.wiring(opencodeconfig.CLIENT, KINDS, agent, rooms)
    server = opencodeconfig.server_entry(wired.server_argv, wired.server_env)
    plugin = plugin_plan(here, opencodeplugin.source(wired.commands))
    plans = [config_plan(here, server, plugin.path.as_uri()), plugin]
    # opencode.json names the plugin's path in the data directory whatever `why` says.
    pending, room_states = clients.finish(agent, here, rooms, plans, EXCLUDED, exclude=True,
                                          dry_run=dry_run)  # fmt: skip
    return report(agent, here, rooms, plans, room_states, pending, dry_run)


def config_plan(here: Path, server: dict, plugin_url: str) -> Planned:
    files.refuse_links(here, here / CONFIG, CONFIG)
    old, data = files.read_json(here / CONFIG, CONFIG)
    try:
        merged = opencodeconfig.merge_config(data, server, plugin_url)
    except claudeconfig.ShapeError as exc:
        raise CommandError(f"{exc}; it was left untouched and nothing was changed") from None
    return json_plan(here / CONFIG, CONFIG, old, merged)


def plugin_plan(here: Path, new: bytes | None) -> Planned:
    path = plugin_path(here)
    label = f"{opencodeconfig.PLUGIN_FILE} (OpenCode plugin, in the data directory)"
    files.refuse_links(settings.USER_DATA_DIR, path, label)
    old = files.read_bytes(path, label)
    plan = Planned(path, label, old, new, backed_up=False)
    plan.private = True
    return plan


def report(agent, here, rooms, plans, room_states, pending, dry_run) -> str:
    lines = [
        f"salon install --client opencode{' (dry run: nothing written)' if dry_run else ''}: "
        f"agent {agent} in {here}, rooms {', '.join(rooms)}",
        *file_lines(plans, here, dry_run),
        *install.store_lines(rooms, room_states, pending, dry_run),
        f"  MCP server {opencodeconfig.SERVER_NAME}: local (salon mcp), in {CONFIG}",
        f"  note: {CONFIG} names this machine's paths (the plugin's, in the data "
        "directory), so it is listed in .git/info/exclude: keep it out of version control",
        "Next:",
        f"  start OpenCode in {here} with: opencode   (or `opencode run …`)",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- uninstall


def uninstall(*, dry_run: bool) -> str:
    here = project_root(Path.cwd())
    plans = uninstall_plans(here)
    folder = plugin_path(here).parent
    return uninstall_client("opencode", "OpenCode", here, plans, folder, dry_run=dry_run)


def uninstall_plans(here: Path) -> list[Planned]:
    from mcpgate.claude import uninstall

    files.refuse_links(here, here / CONFIG, CONFIG)
    old, data = files.read_json(here / CONFIG, CONFIG)
    try:
        merged = opencodeconfig.without_ours(data)
    except claudeconfig.ShapeError as exc:
        raise CommandError(f"{exc}; it was left untouched and nothing was changed") from None
    plan = json_plan(here / CONFIG, CONFIG, old, merged)
    # A file that had `mcp` or `plugin` empty before install gets its own bytes back too.
    backup = files.backup_path(here / CONFIG, here)
    if plan.changed and backup.is_file():
        with contextlib.suppress(CommandError):
            _, earlier = files.read_json(backup, CONFIG)
            if opencodeconfig.bare(earlier) == opencodeconfig.bare(merged.data):
                plan.new = backup.read_bytes()
    plans = [uninstall.undone(plan, here)]
    plugin = plugin_plan(here, None)
    if plugin.old is not None:
        plans.append(plugin)
    exclude = exclude_plan(here, EXCLUDED, add=False)
    if exclude is not None:
        plans.append(exclude)
    return plans
