"""What `salon install --client codex|gemini|opencode` share: the commands their hooks
and server run, and the install's last steps once each client's files are planned
(mcpgate/codex, mcpgate/gemini, mcpgate/opencode plan the files; mcpgate/claude writes
them, with the same promises as for Claude Code)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mcpgate.claude import install
from mcpgate.claude.commandline import shell_command
from mcpgate.claude.plans import exclude_plan, refuse_unwritable


@dataclass
class Wiring:
    """The commands a client's files name. `why`: why they name this machine's paths
    ("" when plain `salon …` does)."""

    why: str
    commands: dict[str, str]  # hook kind → its shell command
    server_argv: list[str]
    server_env: dict[str, str]


def wiring(client: str, kinds, agent: str, rooms: list[str]) -> Wiring:
    why = install.not_portable_because()
    env, argv = install.command_form(not why)
    hook_env = {**env, "AGENT_SALON_NAME": agent, "AGENT_SALON_ROOM": ",".join(rooms)}
    commands = {
        kind: shell_command(hook_env, argv("hook", kind, "--client", client)) for kind in kinds
    }
    return Wiring(why, commands, argv("mcp"), {**hook_env, "AGENT_SALON_CLIENT": client})


def finish(agent, here: Path, rooms, plans: list, excluded: list[str], *, exclude: bool,
           dry_run: bool):  # fmt: skip
    """The install's last steps: `.git/info/exclude` (with `excluded` when `exclude`),
    every folder checked writable, then — unless a dry run — the files written, the
    store migrated, the rooms made and the project's directory recorded. Returns the
    store's (pending migrations, room states) for the report."""
    planned = exclude_plan(here, excluded, add=exclude)
    if planned is not None:
        plans.append(planned)
    refuse_unwritable(plans, here)
    pending, room_states = install.store_state(rooms)
    if not dry_run:
        install.write(plans, here, rooms, room_states, pending)
        from bus import services

        services.seats.record_root(agent=agent, root=str(here))
    return pending, room_states
