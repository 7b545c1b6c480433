"""What the Gemini CLI hooks say, once Django is up: Codex's words (mcpgate.codex.hooks:
everything points to the salon MCP server's tools), in Gemini's output format.

* session-start (SessionStart): `hookSpecificOutput.additionalContext`, which Gemini puts
  in front of the first prompt; the claims never told are told there.
* prompt-submit (BeforeAgent): the claims never told ride along with the prompt, as
  `additionalContext` (services.telling.tell_at_prompt).
* stop (AfterAgent): `{"decision": "deny", "reason": …}` makes Gemini start a new turn
  with the reason as its prompt — once per entry (services.telling.claim_nudges), and
  never for a turn that such a hold started (`stop_hook_active`).
* pre-edit (BeforeTool on write_file / replace): the Claude Code hook's answer for the
  edit of that file, as Gemini's deny (mcpgate.gemini.hookinput).
"""

from __future__ import annotations

from mcpgate.claude.hookinput import HookContext
from mcpgate.codex import hooks as codexhooks

# Gemini runs the model's shell commands unsandboxed, but a headless run offers no shell.
SHELL_NOTE = " (a headless run has no shell, and the tools answer as this session's seat)"


def session_start(seat, ctx: HookContext) -> str:
    return codexhooks.session_start(seat, ctx, shell_note=SHELL_NOTE)


def told(seat, ctx: HookContext) -> dict | None:
    if ctx.kind == "stop" and ctx.payload.get("stop_hook_active") is True:
        return None
    return codexhooks.told(seat, ctx, prompt_event="BeforeAgent", hold="deny")
