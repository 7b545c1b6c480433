"""`salon mcp`: the MCP tools over stdio (Claude Code's stdio server form)."""

from __future__ import annotations

from django.core.management.base import CommandError

from bus.management.base import BusCommand, caller_from_settings
from bus.rules import RuleError, validate_name


class Command(BusCommand):
    help = (
        "Serve the agent-salon MCP tools over stdio, one JSON-RPC message per line. "
        "The agent is AGENT_SALON_NAME or the working directory's name; the seat comes from "
        "CLAUDE_CODE_SESSION_ID. Waking entries are pushed as notifications/claude/channel."
    )

    def handle(self, *args, **options):
        from mcpgate import stdio

        caller = caller_from_settings()
        try:
            validate_name(caller["agent"], "agent")
        except RuleError as exc:
            raise CommandError(
                f"{exc} (the agent name comes from {caller['agentFrom']}; "
                "set AGENT_SALON_NAME=<name>)"
            ) from None
        # `salon mcp` answers initialize before Django loads (salon.cli.run_stdio).
        stdio.serve(caller["agent"], caller["session"], getattr(self, "greeted", (None, b"")))
