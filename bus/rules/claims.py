"""File claims: what a claimed path may be, what it covers, how long it lasts.

A claim names a path relative to its repository's top (`src/cart.py`), a directory
(`src/api`, everything under it) or a glob (`src/api/**`, `*.md`): `*` and `?` match
within one segment, `**` any number of segments. Pure and standard library only: the
PreToolUse hook matches with these on every edit, without Django.
"""

from __future__ import annotations

import re
from datetime import timedelta

from bus.rules.errors import RuleError, _show
from bus.rules.limits import MAX_FOCUS_PATH_CHARS

FILE_CLAIM_DEFAULT = timedelta(hours=2)
FILE_CLAIM_MAX = timedelta(hours=24)
# A session's own edit claims its file softly for this long (PostToolUse).
SOFT_CLAIM = timedelta(minutes=30)
# A soft claim is renewed by an edit only when less than this much of it is left, so an
# edit in a burst of edits of one file writes nothing.
SOFT_RENEW_BELOW = timedelta(minutes=25)
# After a denied edit, the same seat's edit of the same file goes ahead for this long.
REPEAT_WINDOW = timedelta(minutes=10)
MAX_CLAIM_PATHS = 50
MAX_CLAIM_NOTE_CHARS = 300
CLAIM_KINDS = ("hand", "focus", "soft")
# The tools whose edits are checked and claimed, with the input key naming the file.
EDIT_TOOLS = {
    "Edit": "file_path",
    "Write": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}

_GLOB = re.compile(r"[*?\[]")


def normalize_claim_path(path: object) -> str:
    """A claimed path as stored: `/`-separated, no `.` segments or repeated slashes, no
    trailing slash; refused when empty, absolute, reaching above the top (`..`), or too
    long."""
    if not isinstance(path, str):
        raise RuleError(f"a claimed path must be text, not {type(path).__name__}")
    text = path.strip().replace("\\", "/")
    if not text:
        raise RuleError("a claimed path is empty: name a file, a directory or a glob")
    if text.startswith("/"):
        raise RuleError(
            f"the claimed path {_show(text)} is absolute: give it relative to the "
            "repository's top (e.g. src/cart.py)"
        )
    if any(ord(c) < 32 or c == "\x7f" for c in text):
        raise RuleError(f"the claimed path {_show(text)} holds a control character")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise RuleError(
            f"the claimed path {_show(text)} holds `..`: give it relative to the "
            "repository's top, inside it"
        )
    if not parts:
        raise RuleError(
            f"the claimed path {_show(text)} names the whole repository: name a file, a "
            "directory or a glob (src/**)"
        )
    clean = "/".join(parts)
    if len(clean) > MAX_FOCUS_PATH_CHARS:
        raise RuleError(
            f"the claimed path {_show(clean)} has {len(clean)} characters, over the limit "
            f"of {MAX_FOCUS_PATH_CHARS}: claim its directory instead"
        )
    return clean


def claim_paths(paths: object) -> list[str]:
    """The paths of one claim, normalized, each once, at most MAX_CLAIM_PATHS."""
    if isinstance(paths, str):
        paths = [p for p in paths.split(",") if p.strip()]
    if not isinstance(paths, list | tuple) or not paths:
        raise RuleError("name at least one path to claim (relative to the repository's top)")
    if len(paths) > MAX_CLAIM_PATHS:
        raise RuleError(
            f"a claim names {len(paths)} paths, over the limit of {MAX_CLAIM_PATHS}: claim "
            "their directory or a glob instead"
        )
    return list(dict.fromkeys(normalize_claim_path(p) for p in paths))


def claim_duration(duration: timedelta | None) -> timedelta:
    """How long a claim lasts: the default when none is given, at most FILE_CLAIM_MAX."""
    if duration is None:
        return FILE_CLAIM_DEFAULT
    if duration > FILE_CLAIM_MAX:
        raise RuleError("a claim lasts at most 24h: claim again when it runs out")
    return duration


def claim_note(note: object) -> str:
    if note is None:
        return ""
    if not isinstance(note, str):
        raise RuleError(f"a claim's note must be text, not {type(note).__name__}")
    flat = " ".join(note.split())
    if len(flat) > MAX_CLAIM_NOTE_CHARS:
        raise RuleError(
            f"a claim's note has {len(flat)} characters, over the limit of "
            f"{MAX_CLAIM_NOTE_CHARS}: say it in a sentence"
        )
    return flat


_PATTERNS: dict[str, re.Pattern] = {}


def _pattern(claimed: str) -> re.Pattern:
    compiled = _PATTERNS.get(claimed)
    if compiled is None:
        out, i = [], 0
        while i < len(claimed):
            c = claimed[i]
            if claimed.startswith("**/", i):
                out.append("(?:[^/]*/)*")
                i += 3
                continue
            if claimed.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
            i += 1
        # A claim covers what it names and everything under it (a directory).
        compiled = re.compile("".join(out) + "(?:/.*)?", re.DOTALL)
        if len(_PATTERNS) < 4096:
            _PATTERNS[claimed] = compiled
    return compiled


def claim_covers(claimed: str, path: str) -> bool:
    """Does a claim on `claimed` (a stored path or glob) cover `path` (a file's path
    relative to the same top)?"""
    if not _GLOB.search(claimed):
        return path == claimed or path.startswith(claimed + "/")
    return _pattern(claimed).fullmatch(path) is not None


def claims_overlap(a: str, b: str) -> bool:
    """Could two claimed paths name one file? Exact for plain paths; for globs, either
    covering the other's text, or their fixed leading parts being one inside the other."""
    if claim_covers(a, b) or claim_covers(b, a):
        return True
    fixed_a, fixed_b = _fixed_prefix(a), _fixed_prefix(b)
    if not (_GLOB.search(a) and _GLOB.search(b)):
        return False
    return fixed_a.startswith(fixed_b) or fixed_b.startswith(fixed_a)


def _fixed_prefix(claimed: str) -> str:
    match = _GLOB.search(claimed)
    head = claimed if match is None else claimed[: match.start()]
    return head.rsplit("/", 1)[0] + "/" if "/" in head else ""
