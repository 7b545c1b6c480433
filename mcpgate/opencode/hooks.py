"""What the OpenCode plugin's hooks say, once Django is up: Codex's words
(mcpgate.codex.hooks: everything points to the salon MCP server's tools, which answer as
the session's seat), in Claude Code's output shape, which the plugin reads
(mcpgate.opencode.plugin)."""

from __future__ import annotations

from mcpgate.claude.hookinput import HookContext
from mcpgate.codex import hooks as codexhooks

SHELL_NOTE = " (they answer as this session's seat; a `salon` command in the shell would not)"


def session_start(seat, ctx: HookContext) -> str:
    return codexhooks.session_start(seat, ctx, shell_note=SHELL_NOTE)


def told(seat, ctx: HookContext) -> dict | None:
    if ctx.kind == "stop" and ctx.payload.get("stop_hook_active") is True:
        return None
    return codexhooks.told(seat, ctx)
