"""Names: rooms, labels, seats, session ids, addressees and aliases."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from bus.rules.errors import RuleError, _show
from bus.rules.limits import (
    MAX_ADDRESSEES,
    MAX_NAME_CHARS,
    MAX_SESSION_CHARS,
    MIN_CLAIMED_SESSION_CHARS,
)

_NAME_RE = re.compile(r"[A-Za-z0-9._@#-]+")


_SESSION_RE = re.compile(r"[A-Za-z0-9._-]+")


# Seat-name growth steps for a colliding session; the full id comes last.
_SEAT_ID_LENGTHS = (8, 12, 16)


def validate_name(value: str, what: str = "room") -> str:
    """1 to 64 chars of ``[A-Za-z0-9._@#-]``, no ``..``.

    An agent (or label) name may not hold ``#``: it separates the agent from the
    session in a seat name, so ``a#b`` would read back as agent ``a``.
    """
    rule = f'use 1 to {MAX_NAME_CHARS} characters of letters, digits and . _ @ # - (no "..")'
    if not isinstance(value, str):
        raise RuleError(f"{what} name must be text, not {type(value).__name__}: {rule}")
    if not value:
        raise RuleError(f"{what} name is empty: {rule}")
    if len(value) > MAX_NAME_CHARS:
        raise RuleError(f"{what} name {_show(value)} has {len(value)} characters: {rule}")
    if not _NAME_RE.fullmatch(value):
        raise RuleError(f"{what} name {_show(value)} holds a character that is not allowed: {rule}")
    if ".." in value:
        raise RuleError(f'{what} name {_show(value)} contains "..": {rule}')
    if what in ("agent", "label") and "#" in value:
        raise RuleError(
            f'{what} name {_show(value)} contains "#", which separates the agent from its '
            'session in a seat name: drop the "#" (e.g. "web-app")'
        )
    if what == "label" and "@" in value:
        # A label is who a caller of /mcp or /notify says it is; `acme@laptop` would be a
        # seat of `acme` that `acme`'s token does not cover.
        raise RuleError(
            f'{what} name {_show(value)} contains "@", which marks a seat on another machine '
            '(only the relay writes those): use the plain agent name, the part before "@"'
        )
    return value


def fold_label(label: str) -> str:
    """A label as compared for tokens: labels are ASCII (validate_name), folded to lower
    case the way SQLite's lower() and PostgreSQL's do, so the index on it is used."""
    return label.lower() if label.isascii() else label


def case_variant_problem(label: str, tokened: list[str]) -> str | None:
    """`Acme` while `acme` has a token: each spelling would be an agent of its own that
    `acme`'s token does not cover, so a variant of a tokened label is refused (labels
    keep their case otherwise). `tokened`: the tokened labels that fold to this one."""
    if not tokened or label in tokened:
        return None
    owner = sorted(tokened)[0]
    return (
        f"label {_show(label)} differs only in case from {_show(owner)}, which has a token: "
        f"use label {_show(owner)} with its bearer token"
    )


def validate_claimed_session(session_id: object) -> str:
    """checkin's `session_id`: a Claude Code session id is a UUID (36 characters); one
    shorter than MIN_CLAIMED_SESSION_CHARS could name another session's seat by the few
    characters its seat name shows (`web-app#8714f782`)."""
    text = session_id.strip() if isinstance(session_id, str) else ""
    if len(text) < MIN_CLAIMED_SESSION_CHARS:
        raise RuleError(
            f"session id {_show(text)} is shorter than {MIN_CLAIMED_SESSION_CHARS} characters: "
            "check in with the whole Claude Code session id (${session_id} in an mcp_tool "
            "hook, CLAUDE_CODE_SESSION_ID in a command's environment)"
        )
    return _validate_session_id(text)


def _validate_session_id(session_id: str) -> str:
    if (
        len(session_id) > MAX_SESSION_CHARS
        or not _SESSION_RE.fullmatch(session_id)
        or ".." in session_id
    ):
        raise RuleError(
            f"session id {_show(session_id)} is not usable in a seat name: it must be "
            f'1 to {MAX_SESSION_CHARS} characters of letters, digits and . _ - (no "..")'
        )
    return session_id


def parse_aliases(text: str | None) -> dict[str, str]:
    """``AGENT_SALON_ALIASES``: ``alias:real,alias2:real2``; blank pieces are ignored."""
    aliases: dict[str, str] = {}
    for piece in (text or "").split(","):
        pair = piece.strip()
        if not pair:
            continue
        alias, sep, real = (part.strip() for part in pair.partition(":"))
        if not sep or not alias or not real or ":" in real:
            raise RuleError(
                f"alias pair {_show(pair)} is malformed: write it as alias:real, "
                "pairs separated by commas (e.g. api:api-service,web:web-app)"
            )
        for name in (alias, real):
            try:
                validate_name(name, "alias")
            except RuleError as exc:
                raise RuleError(f"alias pair {_show(pair)}: {exc}") from None
        if aliases.get(alias, real) != real:
            raise RuleError(
                f"alias {_show(alias)} is given twice with different targets: keep one pair"
            )
        aliases[alias] = real
    return aliases


def validate_addressees(to: Sequence[str]) -> list[str]:
    """At most MAX_ADDRESSEES distinct names (counted after duplicates and aliases
    are resolved)."""
    names = list(dict.fromkeys(to))
    if len(names) > MAX_ADDRESSEES:
        raise RuleError(
            f"`to` names {len(names)} addressees, over the limit of {MAX_ADDRESSEES}: name "
            "agents rather than seats (an agent's name covers all its seats), or leave `to` "
            "out to address the whole room"
        )
    return names


def resolve_aliases(to: Sequence[str], aliases: Mapping[str, str]) -> list[str]:
    """Replace aliased names by their real name (one step, no chains); keep order, drop dups."""
    resolved: list[str] = []
    for name in to:
        real = aliases.get(name, name)
        if real not in resolved:
            resolved.append(real)
    return resolved


def names_in(value: object) -> list[str]:
    """A stored list of names (`to`, delivered_to, …) as a list of strings, whatever the
    row holds: the bus writes lists of names, and a row changed outside it must still be
    readable (it reads as tampered)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [item for item in value if isinstance(item, str)]
    return []


def agent_of_seat(seat: str) -> str:
    """``web-app@macmini#7b02`` → ``web-app@macmini``; a bare agent name is its own agent."""
    return seat.partition("#")[0]


def decided_there(name: str) -> bool:
    """A seat or agent of another machine (``web-app@desktop#b2b2b2b2``: ``@`` marks it, and
    only the relay writes such names). Its own machine knows its quiet and liveness, so it
    decides whether an entry wakes it and tells it; this one shows it as "decided there",
    never as woken, quiet or waited for."""
    return "@" in agent_of_seat(name)


def base_agent(agent: str) -> str:
    """The agent without its ``@device`` part: ``web-app@macmini`` → ``web-app``."""
    return agent.partition("@")[0]


# What any reader is shown of a session id (as much as a seat name shows): the whole id is
# what a checkin presents, so no answer, page or context hands it out.
SHOWN_SESSION_CHARS = 8


def shown_session(session_id: str | None) -> str | None:
    return session_id[:SHOWN_SESSION_CHARS] if session_id else None


def seat_name(agent: str, session_id: str | None, holders: Mapping[str, str]) -> str:
    """A seat's name: ``agent#<first 8 of the session id>``, grown if another session holds it.

    ``holders`` maps existing seat names to the session id holding them. With no
    session id (cron, a bare shell) the seat is the bare agent name.
    """
    if not session_id:
        return agent
    _validate_session_id(session_id)
    for length in _SEAT_ID_LENGTHS:
        if length >= len(session_id):
            break
        name = f"{agent}#{session_id[:length]}"
        if holders.get(name, session_id) == session_id:
            return name
    # The full id is unique to its session, so it never collides.
    return f"{agent}#{session_id}"


def closest_names(name: str, known: Iterable[str], n: int | None = None) -> list[str]:
    """Every known name, closest to ``name`` first (difflib ratio, ties alphabetical).

    ``n`` caps the list; by default all names are returned (a send's answer lists every name).
    """
    import difflib  # here: only a refusal ranks names, and every hook imports this module

    target = name.lower()

    def distance(candidate: str) -> tuple[float, str]:
        ratio = difflib.SequenceMatcher(None, target, candidate.lower()).ratio()
        return (-ratio, candidate)

    ranked = sorted(set(known), key=distance)
    return ranked if n is None else ranked[:n]


def unknown_addressee_error(name: str, known: Iterable[str], room: str) -> str:
    """The refusal for an addressee nobody in the room has ever been called."""
    names = closest_names(name, known)
    if names:
        listing = f"names in this room, closest first: {', '.join(names)}"
    else:
        listing = "nobody has been in this room yet"
    return (
        f"nobody named {_show(name)} has been in room {_show(room)} ({listing}): "
        "check the spelling, or have that agent join the room first"
    )
