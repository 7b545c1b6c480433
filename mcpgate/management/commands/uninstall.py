"""`salon uninstall [--dry-run] [--plugin]`: the arguments; what uninstall removes, and
how, is mcpgate.claude.uninstall."""

from __future__ import annotations

from bus.management.base import BusCommand
from mcpgate.claude import uninstall
from mcpgate.management.commands.install import CLIENTS, client_wiring


class Command(BusCommand):
    help = (
        "Remove from this project what `salon install` added: our hooks from "
        ".claude/settings.json and .claude/settings.local.json, the agent-salon server "
        "from .mcp.json and Claude Code's local MCP scope, and the salon skill. Everything "
        "else is kept; each changed file is backed up in the data directory."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="change nothing; say what would be removed"
        )
        parser.add_argument(
            "--client",
            choices=CLIENTS,
            default="claude",
            help="the agent CLI whose wiring to remove: claude (the default), codex, gemini or "
            "opencode",
        )
        parser.add_argument(
            "--plugin",
            action="store_true",
            help="remove what `salon install --plugin` set up instead: the plugin, its local "
            "marketplace, and their files in the data directory",
        )

    def handle(self, *, dry_run, plugin=False, client="claude", **options):
        if client != "claude":
            if plugin:
                raise self.usage(
                    f"--plugin is for Claude Code: leave it out with --client {client}"
                )
            self.say(client_wiring(client).uninstall(dry_run=dry_run))
        elif plugin:
            self.say(uninstall.plugin(dry_run=dry_run))
        else:
            self.say(uninstall.project(dry_run=dry_run))
