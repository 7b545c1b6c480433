"""Every rule of agent-salon, written once.

Pure functions over plain values: no Django, no database, no clock of their own
(callers pass ``now``), so the same rule serves ``send``, the push, ``wait``, the
hooks, the stats and the tests. Datetimes are expected to be timezone-aware (UTC). The
records they take and give are immutable named tuples, `collections.namedtuple`'s: every
command imports this module, and `dataclasses` would bring `inspect` with it (~10 ms of
each served command's start, bench/RESULTS.md), typing's `NamedTuple` the `typing`
module (~3 ms).

Errors are :class:`RuleError` (a ``ValueError``) whose message says what was wrong
and how to fix it, on one line, and never echoes more than ~64 characters of the
offending input (it may be hostile).
"""

from __future__ import annotations

import heapq
import json
import os
import re
from collections import namedtuple
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta

from bus import strict

TYPES = ("QUESTION", "ANSWER", "FACT", "REQUEST")
PHASES = ("explore", "plan", "apply", "verify", "blocked")
LIVE, UNKNOWN, GONE = "live", "unknown", "gone"
LIVENESS = (LIVE, UNKNOWN, GONE)

LIVE_WINDOW = timedelta(minutes=2)
UNKNOWN_WINDOW = timedelta(minutes=30)
STALE_FOCUS = timedelta(hours=4)
SIBLING_WINDOW = timedelta(minutes=60)

MAX_CONTENT_BYTES = 64 * 1024
MAX_META_KEYS = 32
# Limits: meta travels with every push and every read; it is for labels, not payloads.
MAX_META_BYTES = 16 * 1024
MAX_META_DEPTH = 8
MAX_ADDRESSEES = 32
MAX_FOCUS_FILES = 50
MAX_FOCUS_PATH_CHARS = 256
MAX_NAME_CHARS = 64
# Session ids are UUIDs or our own random ids; 128 leaves room without letting
# a hostile hook payload grow a seat name without bound.
MAX_SESSION_CHARS = 128
MIN_CLAIMED_SESSION_CHARS = 16
MAX_FOCUS_CHARS = 500

# Types that are a claim on attention even when broadcast (decide_wake).
CLAIM_TYPES = ("QUESTION", "REQUEST")
# The reasons decide_wake can give, so metrics and tests can enumerate them.
REASONS = ("sender", "not_addressed", "quiet", "addressed", "reply", "claim", "not_a_claim")

_KIND_TO_TYPE = {
    "question": "QUESTION",
    "request": "REQUEST",
    "reply": "ANSWER",
    "ack": "ANSWER",
}
_NAME_RE = re.compile(r"[A-Za-z0-9._@#-]+")
_SESSION_RE = re.compile(r"[A-Za-z0-9._-]+")
_DURATION_RE = re.compile(r"([0-9]+)([smhdw])")
_DURATION_UNITS = {
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
}
# Seat-name growth steps for a colliding session; the full id comes last.
_SEAT_ID_LENGTHS = (8, 12, 16)
# Breaks clip() may cut at, and how many of their characters the kept part keeps.
_SENTENCE_BREAKS = (". ", "! ", "? ", ".\n")
_CLIP_MIN_SHARE = 0.6
_CLIP_TAIL = "… +{n} characters — history for the whole entry"


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


# --- types, content, meta, phases -------------------------------------------------


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


# --- names ------------------------------------------------------------------------


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


# --- the ask key of a cross-project request ---------------------------------------

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


# --- who is woken -----------------------------------------------------------------


class SeatFacts(namedtuple("SeatFacts", "seat agent quiet quiet_until", defaults=(False, None))):
    """What wakes() needs to know about a reading seat: its name, its agent's (str), its
    quiet flag (bool) and when that quiet ends (datetime, or None: never)."""

    __slots__ = ()


class EntryFacts(namedtuple("EntryFacts", "sender_seat type to re_author", defaults=((), None))):
    """What wakes() needs to know about an entry: its sender's seat and type (str), its
    addressees (a tuple of names) and who wrote the ``re`` entry (str or None)."""

    __slots__ = ()


class Decision(namedtuple("Decision", "woken reason")):
    """woken: bool; reason: one of REASONS."""

    __slots__ = ()


def quiet_active(quiet: bool, quiet_until: datetime | None, now: datetime) -> bool:
    """The quiet flag is the switch; an expiry at or before ``now`` makes it absent."""
    if not quiet:
        return False
    return quiet_until is None or quiet_until > now


def address_keys(seat: SeatFacts) -> tuple[str, ...]:
    """The names a ``to`` reaches the seat by: its own, its agent's, and (remote seat) its
    agent's without ``@device``. A send looks its addressees up by them
    (bus.services.roster) instead of asking every reader of the room."""
    if "@" in seat.agent:
        return (seat.seat, seat.agent, base_agent(seat.agent))
    return (seat.seat, seat.agent)


def addressed_to(to: Sequence[str], seat: SeatFacts) -> bool:
    """``to`` names the seat by one of its address_keys."""
    return any(key in to for key in address_keys(seat))


def for_me(to: Sequence[str], seat: SeatFacts) -> bool:
    """Broadcast, or addressed to this seat."""
    return not to or addressed_to(to, seat)


def decide_wake(entry: EntryFacts, seat: SeatFacts, now: datetime) -> Decision:
    """The wake rule, step by step in order; the sender seat is never woken by its own entry."""
    if entry.sender_seat == seat.seat:
        return Decision(False, "sender")
    if entry.to and not addressed_to(entry.to, seat):
        return Decision(False, "not_addressed")
    if quiet_active(seat.quiet, seat.quiet_until, now):
        return Decision(False, "quiet")
    if entry.to:
        return Decision(True, "addressed")
    if entry.re_author is not None and entry.re_author == seat.seat:
        return Decision(True, "reply")
    if entry.type.upper() in CLAIM_TYPES:
        return Decision(True, "claim")
    return Decision(False, "not_a_claim")


def wakes(entry: EntryFacts, seat: SeatFacts, now: datetime) -> bool:
    return decide_wake(entry, seat, now).woken


def owed_on_arrival(
    entry: EntryFacts, seat: SeatFacts, now: datetime, *, by_own_agent: bool, sibling_told: bool
) -> Decision | None:
    """A seat that did not exist when `entry` was stored, and inherits it as unread, is
    still owed the wake rule for it: the decision that makes it a claim on the seat, or
    None. Not when a sibling seat of its agent was told it already (one telling per agent
    is enough), nor when the agent wrote it (a sibling's own words are the other half of
    its conversation, not a claim on it)."""
    if by_own_agent or sibling_told:
        return None
    decision = decide_wake(entry, seat, now)
    return decision if decision.woken else None


# --- who is judged (the letterbox and the safety net) -----------------------------

LETTERBOX, NET = "letterbox", "net"
# A judgement's answer: the judge said yes or no, or gave no clear answer (a timeout, a
# non-zero exit, unreadable output). "pending" while a judge runs.
JUDGEMENTS = ("yes", "no", "failed", "pending")


def letterbox_judges(to: Sequence[str], seat: str) -> bool:
    """The letterbox judges every entry the rule wakes a seat for, except one whose `to`
    names exactly this seat and nobody else: that one is surely meant for it."""
    return list(to) != [seat]


def net_judges(seat_has_focus: bool, seat_quiet: bool, woken: bool) -> bool:
    """The safety net judges a declined entry for a seat that has a focus (without one
    there is nothing to judge against); a quiet seat asked not to be woken at all."""
    return seat_has_focus and not seat_quiet and not woken


def triage_verdict(half: str, answer: str) -> bool:
    """Whether the judged entry is told: the letterbox fails towards waking (anything but
    a clear no tells), the safety net fails closed (only a clear yes tells)."""
    if half == LETTERBOX:
        return answer != "no"
    return answer == "yes"


# --- time -------------------------------------------------------------------------


def parse_duration(text: str) -> timedelta:
    """``30s``, ``90m``, ``2h``, ``1d``, ``1w``: a positive whole number and one unit."""
    match = _DURATION_RE.fullmatch(text.strip().lower()) if isinstance(text, str) else None
    hint = "use a positive whole number and a unit s, m, h, d or w, e.g. 90m, 2h, 1d"
    if match is None or int(match.group(1)) == 0:
        raise RuleError(f"duration {_show(text)} is not understood: {hint}")
    try:
        return int(match.group(1)) * _DURATION_UNITS[match.group(2)]
    except OverflowError:
        raise RuleError(f"duration {_show(text)} is too long: {hint}") from None


def liveness(
    last_seen: datetime | None,
    stream_open: bool,
    now: datetime,
    signed_off: datetime | None = None,
) -> str:
    """Liveness: ``live`` (stream open or seen in the last 2 min), ``unknown`` (< 30 min), ``gone``.

    ``signed_off``: the session said goodbye (an MCP DELETE) at that time; the seat is gone
    until a newer sign of life.
    """
    if stream_open:
        return LIVE
    if last_seen is None or (signed_off is not None and signed_off >= last_seen):
        return GONE
    age = now - last_seen
    if age <= LIVE_WINDOW:
        return LIVE
    if age < UNKNOWN_WINDOW:
        return UNKNOWN
    return GONE


def focus_is_stale(focus_ts: datetime | None, now: datetime) -> bool:
    """A focus older than 4 hours is reported stale (never dropped); no focus is not stale."""
    return focus_ts is not None and now - focus_ts > STALE_FOCUS


# --- reading ----------------------------------------------------------------------


def _last_break(text: str, limit: int) -> int:
    """Length of the longest prefix (≤ limit) ending at a paragraph or sentence break."""
    best = 0
    # A paragraph break is cut before the blank line, so it may start at `limit`.
    para = text.rfind("\n\n", 0, limit + 2)
    if para >= 0:
        best = para
    for mark in _SENTENCE_BREAKS:
        # Keep the punctuation; the whitespace after it may fall just past the limit.
        at = text.rfind(mark, 0, limit + 1)
        if at >= 0:
            best = max(best, at + 1)
    return best


class Clip(namedtuple("Clip", "text full held_back", defaults=(None, 0))):
    """What inbox hands out of an entry: ``text``, and when it was cut, the full length
    (int, else None) and how many characters were held back."""

    __slots__ = ()


def clip(text: str, limit: int) -> Clip:
    """Inbox clipping: the text whole when it fits, else cut at a break, with a tail."""
    if limit <= 0 or len(text) <= limit:
        return Clip(text)
    cut = _last_break(text, limit)
    if cut <= _CLIP_MIN_SHARE * limit:
        # The only break is too early: a hard cut shows more of the entry.
        cut = limit
    held_back = len(text) - cut
    return Clip(f"{text[:cut]} {_CLIP_TAIL.format(n=held_back)}", len(text), held_back)


def oldest_first(per_room: Iterable[Iterable]) -> Iterator:
    """The entries of several rooms (each room's in seq order) as one run, oldest
    first, and entries of one millisecond in the order they were written: by ``ts``, then
    by ``id`` (a UUIDv7, counting up within a process's millisecond). Each room's own
    entries keep the order given (a merge never reorders one of its inputs), so a prefix
    of the run is a prefix of every room's: a cursor moved over it skips nothing."""
    return heapq.merge(*per_room, key=lambda entry: (entry.ts, entry.id))


def bounded(count: int, capped: bool) -> str:
    """A count as shown: `1000+` when counting stopped at a cap (it is a lower bound)."""
    return f"{count}+" if capped else str(count)


def first_cursor(
    sibling_cursors: Sequence[int], recent_sibling_seqs: Sequence[int]
) -> tuple[int, int | None]:
    """A new seat's first cursor in a room, and where the entries it holds unread start.

    It inherits the furthest cursor of the agent's other seats: what a sibling read is
    read. Only the entries its sibling seats wrote in the last SIBLING_WINDOW stay unread:
    those at or below that cursor are held, from just before the oldest of them (the
    entries by sibling seats in (held_from, cursor] are unread; Membership.held_from).
    With no earlier seat of the agent, nothing is read: (0, None).
    """
    if not sibling_cursors:
        return 0, None
    furthest = max(sibling_cursors)
    read_recent = [seq for seq in recent_sibling_seqs if seq <= furthest]
    return furthest, (min(read_recent) - 1 if read_recent else None)


# --- what send answers ------------------------------------------------------------


class AddresseeStatus(
    namedtuple(
        "AddresseeStatus",
        "name live_seats quiet_until quiet_forever unknown_seats",
        defaults=(None, False, 0),
    )
):
    """One ``to`` name as send saw it: the name, how many of its seats are live (int),
    and how many are `unknown` (seen lately: still woken, and listed in `wakes`).

    ``quiet_until`` (datetime or None) / ``quiet_forever`` (bool) describe an addressee
    whose seats are all quiet (an expired quiet must already be left out by the caller).
    """

    __slots__ = ()


def send_notices(
    *,
    to_status: Sequence[AddresseeStatus],
    woken: Sequence[str],
    other_live_seats: int,
    type: str,
    to: Sequence[str],
    content_length: int,
    long_chars: int,
    inbox_chars: int = 0,
) -> list[str]:
    """A send's notices: reported to the writer, never enforced. Each is a whole sentence.
    They never contradict the report: a seat of unknown liveness is in `wakes`, and the
    inbox clips a long entry for every seat it does not wake (clip)."""
    notices: list[str] = []
    for status in to_status:
        who = _show(status.name)
        if status.live_seats <= 0 and status.unknown_seats > 0:
            notices.append(
                f"{who} has a session seen in the last {_minutes(UNKNOWN_WINDOW)} minutes but "
                "not known to be live: it is woken if it is still there; otherwise the entry "
                "waits in the room and will be read when a session of it comes back."
            )
        elif status.live_seats <= 0:
            notices.append(
                f"{who} has no live session: the entry waits in the room and will be read "
                "when a session of it comes back."
            )
        if status.quiet_forever:
            notices.append(
                f"{who} is quiet until it turns quiet off: the entry is delivered "
                "but does not wake it."
            )
        elif status.quiet_until is not None:
            until = status.quiet_until.isoformat(timespec="minutes")
            notices.append(
                f"{who} is quiet until {until}: the entry is delivered but does not wake it."
            )
    if not woken and other_live_seats > 0:
        seats = "seat is" if other_live_seats == 1 else "seats are"
        head = f"This entry wakes nobody, though {other_live_seats} other live {seats} in the room"
        if to:
            why = "its addressees are quiet or have no live session"
        elif type.upper() in CLAIM_TYPES:
            why = "every other live seat is quiet"
        else:
            why = (
                "it will be read at their next inbox; an errand needs `to` (who should act) "
                "or the type QUESTION or REQUEST"
            )
        notices.append(f"{head}: {why}.")
    if long_chars > 0 and content_length > long_chars:
        if not 0 < inbox_chars < content_length:
            reach = "every seat in the room reads all of it"
        elif woken:
            reach = (
                "the seats it wakes read all of it, every other seat's inbox only about its "
                f"first {inbox_chars} characters (history shows it whole)"
            )
        else:
            reach = (
                f"it wakes nobody, so every inbox shows only about its first {inbox_chars} "
                "characters (history shows it whole)"
            )
        notices.append(
            f"This entry is {content_length} characters long (over {long_chars}): {reach}; "
            "consider shortening it, or putting the detail in a file and sending its path."
        )
    return notices


def _minutes(window: timedelta) -> int:
    return int(window.total_seconds() // 60)
