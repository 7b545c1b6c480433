"""OpenCode's edits as the plugin passes them to `salon hook pre-edit --client opencode`
(standard library only: the hook runs on every edit).

`write` and `edit` name their file as `filePath`; `apply_patch` carries a patch in Codex's
format as `patchText` (its files on its `*** … File:` lines). Each becomes the edit of one
file, in the shape bus.claimpaths reads (Claude Code's Write).
"""

from __future__ import annotations

from mcpgate.codex.hookinput import patch_paths

EDIT_TOOL = "Write"


def edit_payloads(payload: dict) -> list[dict]:
    """One payload per file the call edits; the payload itself when it is no edit."""
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    tool_input = tool_input if isinstance(tool_input, dict) else {}
    if tool in ("write", "edit"):
        path = tool_input.get("filePath")
        paths = [path] if isinstance(path, str) and path else []
    elif tool == "apply_patch":
        text = tool_input.get("patchText")
        paths = patch_paths(text) if isinstance(text, str) else []
    else:
        return [payload]
    return [{**payload, "tool_name": EDIT_TOOL, "tool_input": {"file_path": p}} for p in paths]
