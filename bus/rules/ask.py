"""The ask key of a cross-project request, and where a project's root is."""

from __future__ import annotations

import os
import re

from bus.rules.errors import RuleError, _show

MAX_ASK_SEGMENTS = 4


MAX_ASK_SEGMENT_CHARS = 64


MAX_ASK_CHARS = MAX_ASK_SEGMENTS * (MAX_ASK_SEGMENT_CHARS + 1) - 1


_ASK_SEGMENT_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


_SHELL_CHARS = frozenset("|&;<>()$`\"'*?[]#~=%!{}")


_ASK_RULE = (
    f'a key is 1 to {MAX_ASK_SEGMENTS} segments joined by ":", each a lower-case letter or '
    f"digit followed by up to {MAX_ASK_SEGMENT_CHARS - 1} of a-z 0-9 . _ - "
    '(no ".."), e.g. status:db'
)


def ask_segment_problem(segment: str) -> str | None:
    """What makes one segment of an ask key not well-formed, or None when it is.

    A segment is `[a-z0-9][a-z0-9._-]{0,63}` and, stricter than that pattern, holds no
    `..` anywhere: a policy fills a segment into a command's arguments, where `a..b` is
    never needed and `..` is how a path climbs out."""
    if not segment:
        return "it has an empty segment"
    if _ASK_SEGMENT_RE.fullmatch(segment) and ".." not in segment:
        return None
    if ".." in segment:
        return 'it holds ".."'
    for char in segment:
        if char == "\0":
            return "it holds a NUL character"
        if not char.isprintable() or char.isspace():
            return "it holds a space or a control character"
        if char in "/\\":
            return f'it holds "{char}", a path separator'
        if char.isupper():
            return f'it holds the upper-case "{char}" (keys are lower case)'
        if char in _SHELL_CHARS:
            return f"it holds {char!r}, a shell metacharacter"
        if char not in "abcdefghijklmnopqrstuvwxyz0123456789._-":
            return f'it holds "{char}", which a key may not hold'
    if len(segment) > MAX_ASK_SEGMENT_CHARS:
        return f"a segment has {len(segment)} characters, over the limit of {MAX_ASK_SEGMENT_CHARS}"
    return f'a segment starts with "{segment[0]}" (it must start with a letter or a digit)'


def ask_key_problem(key: object) -> str | None:
    """What makes `key` not a well-formed ask key, or None when it is one."""
    if not isinstance(key, str):
        return f"it is {type(key).__name__}, not text"
    if not key:
        return "it is empty"
    segments = key.split(":")
    if len(segments) > MAX_ASK_SEGMENTS:
        return f"it has {len(segments)} segments, over the limit of {MAX_ASK_SEGMENTS}"
    for segment in segments:
        problem = ask_segment_problem(segment)
        if problem is not None:
            return problem
    return None


def shown_ask(key: object) -> str:
    """An ask key quoted in a message or a reason: whole when well-formed, else clipped
    and with control characters replaced (it may be hostile)."""
    return _show(key, MAX_ASK_CHARS)


def validate_ask(key: object) -> str:
    """A request's `ask`: refused at the writer, naming what is wrong and the rule."""
    problem = ask_key_problem(key)
    if problem is not None:
        raise RuleError(f"ask key {shown_ask(key)} is not well-formed: {problem}; {_ASK_RULE}")
    return key


MAX_ROOT_CHARS = 4096


def project_root(path: object) -> str | None:
    """A project directory as the store records it (its policy for requests is there): an
    absolute path of at most MAX_ROOT_CHARS printable characters, normalised; None for
    anything else (a hook input's odd `cwd` records nothing)."""
    if not isinstance(path, str) or not path.startswith("/") or len(path) > MAX_ROOT_CHARS:
        return None
    if not path.isprintable():
        return None
    return os.path.normpath(path)
