"""`salon install ROOM[,ROOM…] [--dry-run] [--replace] [--http URL] [--triage] [--plugin]`:
the arguments; what install does, and why, is mcpgate.claude.install."""

from __future__ import annotations

import argparse

from django.core.management.base import CommandError

from bus import rules
from bus.management.base import BusCommand, caller_from_settings
from bus.rules import RuleError
from mcpgate.claude import install

CLIENTS = ("claude", "codex", "gemini", "opencode")


def client_wiring(client: str):
    """The module that installs and uninstalls `client` (other than Claude Code)."""
    import importlib

    return importlib.import_module(f"mcpgate.{client}.install")


def rooms_arg(value: str) -> list[str]:
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one room, e.g. team or team,ops")
    for name in names:
        if name.startswith("-"):
            raise argparse.ArgumentTypeError(f"{name!r} looks like a flag, not a room name")
        try:
            rules.validate_name(name, "room")
        except RuleError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return names


class Command(BusCommand):
    help = (
        "Wire this project's Claude Code sessions to the bus: hooks in "
        ".claude/settings.json, the agent-salon MCP server in .mcp.json (stdio, or --http "
        "URL) — or, when the commands must name this machine's paths, in "
        ".claude/settings.local.json and Claude Code's local MCP scope —, the salon skill, "
        "and the rooms. Re-running updates instead of duplicating; "
        "--replace removes our old entries first; --dry-run writes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "rooms",
            nargs="+",
            type=rooms_arg,
            metavar="ROOM[,ROOM…]",
            help="the rooms this agent's sessions join",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="write nothing; say what would be done"
        )
        parser.add_argument(
            "--replace",
            action="store_true",
            help="remove every hook and server entry of ours first (and name them)",
        )
        parser.add_argument(
            "--http",
            metavar="URL",
            help="use the daemon's HTTP endpoint (e.g. http://127.0.0.1:9315) instead of stdio",
        )
        parser.add_argument(
            "--triage",
            action="store_true",
            help="judge with a small model (the letterbox and the safety net): the hooks and "
            "the MCP server get AGENT_SALON_TRIAGE_CMD, a headless toolless `claude -p`",
        )
        parser.add_argument(
            "--client",
            choices=CLIENTS,
            default="claude",
            help="the agent CLI to wire: claude (Claude Code, the default), codex (Codex "
            "CLI: .codex/config.toml and .codex/hooks.json, and the project and its hooks "
            "trusted in your Codex config), gemini (Gemini CLI: .gemini/settings.json, and "
            "the folder trusted in ~/.gemini/trustedFolders.json) or opencode (OpenCode: "
            "opencode.json, and its plugin in the data directory)",
        )
        parser.add_argument(
            "--plugin",
            action="store_true",
            help="the recommended set-up: a Claude Code plugin for every project of this "
            "user (stdio server, hooks, skill, and a monitor running `salon wait` for the "
            "whole session), installed with `claude plugin install`; the project is not "
            "touched",
        )

    def handle(
        self, *, rooms, dry_run, replace, http, plugin, triage=False, client="claude", **options
    ):
        rooms = list(dict.fromkeys(name for names in rooms for name in names))
        if client != "claude":
            self.say(self.other_client(client, rooms, dry_run=dry_run, replace=replace,
                                       http=http, plugin=plugin, triage=triage))  # fmt: skip
            return
        if plugin:
            if http:
                raise self.usage("--plugin runs the MCP server over stdio: leave out --http")
            self.say(install.plugin(rooms, dry_run=dry_run))
            return
        caller = caller_from_settings()
        try:
            agent = rules.validate_name(caller["agent"], "agent")
        except RuleError as exc:
            raise CommandError(
                f"{exc} (the agent name comes from {caller['agentFrom']}; "
                "set AGENT_SALON_NAME=<name>)"
            ) from None
        self.say(
            install.project(
                agent, rooms, dry_run=dry_run, replace=replace, http=http, triage=triage
            )
        )

    def other_client(self, client, rooms, *, dry_run, replace, http, plugin, triage) -> str:
        """Codex CLI's, Gemini CLI's or OpenCode's install: the same arguments and checks."""
        from pathlib import Path

        from django.conf import settings

        wiring = client_wiring(client)
        for flag, given in (("--http", http), ("--plugin", plugin), ("--triage", triage)):
            if given:
                raise self.usage(f"{flag} is for Claude Code: leave it out with --client {client}")
        name = wiring.agent_for(Path.cwd(), settings.AGENT_NAME)
        try:
            agent = rules.validate_name(name, "agent")
        except RuleError as exc:
            raise CommandError(
                f"{exc} (the agent name is the project's directory name; set "
                "AGENT_SALON_NAME=<name>)"
            ) from None
        return wiring.project(agent, rooms, dry_run=dry_run, replace=replace)
