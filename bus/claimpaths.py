"""What a file claim covers, and which tools edit a file: pure, standard library only.

A claim names a path relative to its repository's top (`src/cart.py`), a directory
(`src/api`, everything under it) or a glob (`src/api/**`, `*.md`): `*` and `?` match
within one segment, `**` any number of segments.

Written here rather than in bus.rules (which exports these as its own) because the
PreToolUse hook matches with them before every edit, without Django: importing the
bus.rules package costs that hook more than its whole fast path (bench/RESULTS.md).
"""

from __future__ import annotations

import re
from datetime import timedelta

# A soft claim is renewed by an edit only when less than this much of it is left, so an
# edit in a burst of edits of one file writes nothing.
SOFT_RENEW_BELOW = timedelta(minutes=25)
# A seat is gone this long after its last sign of life (bus.rules.UNKNOWN_WINDOW; a test
# holds the two equal): its claims end then.
GONE_AFTER = timedelta(minutes=30)
# The tools whose edits are checked and claimed, with the input key naming the file.
EDIT_TOOLS = {
    "Edit": "file_path",
    "Write": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}

# bus.rules.MAX_FOCUS_PATH_CHARS (a test holds the two equal).
MAX_PATH_CHARS = 256

_GLOB = re.compile(r"[*?\[]")


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


def stored_as_is(path: str) -> bool:
    """Is `path` (a file's path below its repository's top) a claimed path as stored,
    already: one bus.rules.normalize_claim_path keeps unchanged? Almost every edited
    file's is; False only sends the edit to where the path is normalized (or refused)."""
    return (
        0 < len(path) <= MAX_PATH_CHARS
        and path == path.strip()
        and "\\" not in path
        and all(ord(c) >= 32 and c != "\x7f" for c in path)
        and all(part not in ("", ".", "..") for part in path.split("/"))
    )
