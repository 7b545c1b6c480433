"""What a Codex CLI hook's input holds, before Django: the files of an `apply_patch` call.

Codex edits files with one tool, `apply_patch`, whose input (`tool_input.command`) is the
patch text; each file it touches is named on a line of its own:

    *** Add File: PATH / *** Update File: PATH / *** Delete File: PATH / *** Move to: PATH

A patch may touch several files. The pre-edit hook checks them one by one, as the edit of
that one file (`Write` with its `file_path`, the shape bus.claimpaths reads): the first
file another session claims holds the whole patch back (mcpgate.claude.runner).

Standard library only: the hook runs before every edit.
"""

from __future__ import annotations

PATCH_TOOL = "apply_patch"
MARKERS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")
MAX_FILES = 200


def patch_paths(patch: str) -> list[str]:
    """The files a patch names, in order, each once."""
    paths: list[str] = []
    for line in patch.splitlines():
        for marker in MARKERS:
            if line.startswith(marker):
                path = line[len(marker) :].strip()
                if path and "\0" not in path and path not in paths:
                    paths.append(path)
                break
        if len(paths) >= MAX_FILES:
            break
    return paths


def patch_text(tool_input: object) -> str:
    """The patch of an apply_patch call: `command` (a string, or the argv whose last word
    is the patch), else `patch` / `input`."""
    if isinstance(tool_input, str):
        return tool_input
    if not isinstance(tool_input, dict):
        return ""
    for key in ("command", "patch", "input"):
        value = tool_input.get(key)
        if isinstance(value, list) and value and isinstance(value[-1], str):
            value = value[-1]
        if isinstance(value, str):
            return value
    return ""


def edit_payloads(payload: dict) -> list[dict]:
    """One payload per file the call edits, each shaped as the edit of that one file; the
    payload itself when the call is no patch (nothing is an edit then)."""
    if payload.get("tool_name") != PATCH_TOOL:
        return [payload]
    return [
        {**payload, "tool_name": "Write", "tool_input": {"file_path": path}}
        for path in patch_paths(patch_text(payload.get("tool_input")))
    ]
