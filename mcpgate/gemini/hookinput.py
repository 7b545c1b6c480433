"""Gemini CLI's hook input and output where they differ from Claude Code's, before
Django is up (standard library only: the hooks run on every prompt and every edit).

* BeforeTool on write_file / replace names the file as `tool_input.file_path`: the edit
  of that one file, in the shape bus.claimpaths reads (Claude Code's Write).
* The session is left for the MCP server, which Gemini tells none (record_session).
* A held-back edit is Gemini's `{"decision": "deny", "reason": …}`; the reason goes back
  to the model as the tool's error.
"""

from __future__ import annotations

EDIT_TOOL = "Write"


def edit_payloads(payload: dict) -> list[dict]:
    """A write_file / replace call as the edit of its one file (`file_path`)."""
    tool_input = payload.get("tool_input")
    path = tool_input.get("file_path") if isinstance(tool_input, dict) else None
    if not isinstance(path, str) or not path:
        return [payload]
    return [{**payload, "tool_name": EDIT_TOOL, "tool_input": {"file_path": path}}]


def record_session(kind: str, session: str) -> None:
    """Leave the session for the MCP server, which Gemini tells none (mcpgate.gemini.
    sessions): at session start, and at each prompt (a resumed session's first hook)."""
    if kind in ("session-start", "prompt-submit"):
        from mcpgate.gemini import sessions

        sessions.record(session)


def answer(output: dict | None) -> dict | None:
    """A pre-edit's Claude Code answer as Gemini's: a deny with its reason."""
    if not isinstance(output, dict):
        return output
    said = output.get("hookSpecificOutput")
    if isinstance(said, dict) and said.get("permissionDecision") == "deny":
        return {"decision": "deny", "reason": said.get("permissionDecisionReason", "")}
    return output
