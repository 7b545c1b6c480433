"""File claims: what a claimed path may be, how long a claim lasts, and (from
bus.claimpaths, where the hooks' fast path imports them without this package) what a
claim covers and which tools edit files."""

from __future__ import annotations

from datetime import timedelta

from bus.claimpaths import EDIT_TOOLS, SOFT_RENEW_BELOW, claim_covers, claims_overlap
from bus.rules.errors import RuleError, _show
from bus.rules.limits import MAX_FOCUS_PATH_CHARS

__all__ = [
    "CLAIM_KINDS",
    "EDIT_TOOLS",
    "FILE_CLAIM_DEFAULT",
    "FILE_CLAIM_MAX",
    "MAX_CLAIM_NOTE_CHARS",
    "MAX_CLAIM_PATHS",
    "REPEAT_WINDOW",
    "SOFT_CLAIM",
    "SOFT_RENEW_BELOW",
    "claim_covers",
    "claim_duration",
    "claim_note",
    "claim_paths",
    "claims_overlap",
    "normalize_claim_path",
]

FILE_CLAIM_DEFAULT = timedelta(hours=2)
FILE_CLAIM_MAX = timedelta(hours=24)
# A session's own edit claims its file softly for this long (PostToolUse).
SOFT_CLAIM = timedelta(minutes=30)
# After a denied edit, the same seat's edit of the same file goes ahead for this long.
REPEAT_WINDOW = timedelta(minutes=10)
MAX_CLAIM_PATHS = 50
MAX_CLAIM_NOTE_CHARS = 300
CLAIM_KINDS = ("hand", "focus", "soft")


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
