"""The refusals: a RuleError's message says what was wrong and how to fix it."""

from __future__ import annotations

from bus.rules.limits import MAX_NAME_CHARS


class RuleError(ValueError):
    """A refused input; the message says what was wrong and how to fix it."""


class UnknownRoom(RuleError):
    """The room does not exist (or is archived); `rooms` lists those that do."""

    def __init__(self, message: str, rooms: list[str]):
        super().__init__(message)
        self.rooms = rooms


class UnknownAddressee(RuleError):
    """A `to` name nobody in the room was ever called; `names` lists the room's names."""

    def __init__(self, message: str, names: list[str]):
        super().__init__(message)
        self.names = names


class NotAMember(RuleError):
    """The seat is not in the room it reads or leaves."""


def _show(value: object, limit: int = MAX_NAME_CHARS) -> str:
    """Quote untrusted input for a message: clipped, control characters replaced."""
    text = value if isinstance(value, str) else repr(value)
    shown = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return f'"{shown}…"' if len(text) > limit else f'"{shown}"'
