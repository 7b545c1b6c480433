"""`salon mcp`: the MCP tools over stdio (Claude Code's stdio server form)."""

from __future__ import annotations

from django.core.management.base import CommandError

from bus.management.cli import BusCommand, identity
from bus.rules import RuleError


class Command(BusCommand):
    help = (
        "Serve the agent-salon MCP tools over stdio, one JSON-RPC message per line. "
        "The agent is AGENT_SALON_NAME or the working directory's name; the seat comes from "
        "CLAUDE_CODE_SESSION_ID. Waking entries are pushed as notifications/claude/channel."
    )

    def handle(self, *args, **options):
        from mcpgate import stdio

        try:
            agent, session = identity()
        except RuleError as exc:
            raise CommandError(str(exc)) from None
        stdio.serve(agent, session)
