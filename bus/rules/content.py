"""Types, content, meta, focus and phases: what an entry and a focus may hold."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from bus import strict
from bus.rules.errors import RuleError, _show
from bus.rules.limits import (
    MAX_CONTENT_BYTES,
    MAX_FOCUS_CHARS,
    MAX_FOCUS_FILES,
    MAX_FOCUS_PATH_CHARS,
    MAX_META_BYTES,
    MAX_META_DEPTH,
    MAX_META_KEYS,
    PHASES,
    TYPES,
)

_KIND_TO_TYPE = {
    "question": "QUESTION",
    "request": "REQUEST",
    "reply": "ANSWER",
    "ack": "ANSWER",
}


def normalize_type(value: str) -> str:
    """Return the stored (upper-case) type; input is case-insensitive."""
    if isinstance(value, str) and value.strip().upper() in TYPES:
        return value.strip().upper()
    raise RuleError(
        f"unknown entry type {_show(value)}: use one of {', '.join(TYPES)} "
        "(any case), or leave it out to send a FACT"
    )


def type_from_meta(meta: Mapping[str, object] | None) -> str:
    """The type of a call that gave none: ``meta["kind"]`` decides, else FACT."""
    kind = meta.get("kind") if isinstance(meta, Mapping) else None
    if isinstance(kind, str):
        return _KIND_TO_TYPE.get(kind.strip().lower(), "FACT")
    return "FACT"


def validate_content(text: object) -> str:
    """Entry text: a non-blank string of at most 64 KiB of UTF-8. Returned unchanged."""
    if not isinstance(text, str):
        raise RuleError(
            f"content must be text, not {type(text).__name__}: send the message as a string"
        )
    if not text.strip():
        raise RuleError("content is empty: write the message text (it cannot be blank)")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        # A lone surrogate (e.g. a JSON "\ud800") cannot be stored or signed.
        raise RuleError(
            "content is not valid UTF-8 text (it holds a lone surrogate): "
            "remove the broken character and send again"
        ) from None
    if size > MAX_CONTENT_BYTES:
        raise RuleError(
            f"content is {size} bytes, over the limit of {MAX_CONTENT_BYTES} bytes (64 KiB): "
            "shorten it, or put the detail in a file and send its path"
        )
    return text


def validate_meta(meta: object) -> dict[str, object]:
    """Meta: absent, or a JSON object of at most 32 string keys, nested at most 8 levels
    deep (the object itself is one) and at most 16 KiB as JSON. Returns a copy.

    Every writer passes here (bus.services.entries.send_entry), so no entry of the bus's
    own making holds a meta a reader cannot take."""
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise RuleError(
            f"meta must be a JSON object, not {type(meta).__name__}: "
            'send it as {"key": "value", ...} or leave it out'
        )
    bad = [k for k in meta if not isinstance(k, str)]
    if bad:
        raise RuleError(
            f"meta key {_show(bad[0])} is not a string: use text keys only, "
            'e.g. {"kind": "question"}'
        )
    if len(meta) > MAX_META_KEYS:
        raise RuleError(
            f"meta has {len(meta)} keys, over the limit of {MAX_META_KEYS}: "
            "keep fewer keys, or nest the detail under one key"
        )
    # Measured without recursion, before anything below recurses into it.
    levels = strict.depth(dict(meta))
    if levels > MAX_META_DEPTH:
        raise RuleError(
            f"meta is nested {levels} levels deep, over the limit of {MAX_META_DEPTH} "
            "(the object itself is one): flatten it, or put the detail in the content"
        )
    try:
        text = json.dumps(meta, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        raise RuleError(
            "meta is not JSON-serializable: use only strings, numbers, booleans, null, "
            "lists and objects (no NaN or Infinity)"
        ) from None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_META_BYTES:
        raise RuleError(
            f"meta is {size} bytes as JSON, over the limit of {MAX_META_BYTES} bytes "
            "(16 KiB): keep meta to short labels, and put the detail in the content or in a "
            "file whose path you send"
        )
    return dict(meta)


def validate_focus_text(text: str) -> str:
    """A focus is one sentence: stripped, at most MAX_FOCUS_CHARS characters."""
    if len(text) > MAX_FOCUS_CHARS:
        raise RuleError(
            f"a focus is one sentence (at most {MAX_FOCUS_CHARS} characters); shorten it"
        )
    return text.strip()


def split_files(files: str | Sequence[str] | None) -> list[str] | None:
    """`--files a,b` as typed, or a list: a list of paths (None when not given), at most
    MAX_FOCUS_FILES of at most MAX_FOCUS_PATH_CHARS characters each."""
    if files is None:
        return None
    if isinstance(files, str):
        paths = [part.strip() for part in files.split(",") if part.strip()]
    else:
        paths = list(files)
    if len(paths) > MAX_FOCUS_FILES:
        raise RuleError(
            f"a focus names {len(paths)} files, over the limit of {MAX_FOCUS_FILES}: name the "
            "few that matter most (or their directory)"
        )
    for path in paths:
        if not isinstance(path, str):
            raise RuleError(f"a focus file must be a path (text), not {type(path).__name__}")
        if len(path) > MAX_FOCUS_PATH_CHARS:
            raise RuleError(
                f"the focus file {_show(path)} has {len(path)} characters, over the limit "
                f"of {MAX_FOCUS_PATH_CHARS}: give a shorter (relative) path"
            )
    return paths


def validate_phase(phase: str) -> str:
    """A focus phase, lower-cased; anything else is refused listing the five."""
    if isinstance(phase, str) and phase.strip().lower() in PHASES:
        return phase.strip().lower()
    raise RuleError(f"unknown phase {_show(phase)}: use one of {', '.join(PHASES)}")
