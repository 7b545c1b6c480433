"""Shared bits of the `salon` commands: identity, argument types, output.

The commands are thin adapters over bus.services: they parse, call one service, print.
Nothing here decides who is woken, what is clipped or what a seat is called; names are
checked with bus.rules before anything reaches the database, so a refused argument
writes nothing.

Output: a human form by default; with `--json`, stdout is one JSON document and any
notice or warning goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
from datetime import datetime
from pathlib import Path

from bus import rules
from bus.management.base import SalonCommand
from bus.rules import RuleError

SESSION_VARIABLE = "CLAUDE_CODE_SESSION_ID"


class BusCommand(SalonCommand):
    """A command that speaks for a seat (or reads the bus): fast, quiet, strict.

    System checks are skipped (they import the URLconf and admin, and cost start-up time
    on every hook and cron call); `salon check` runs them.
    """

    requires_system_checks: list[str] = []
    suppressed_base_arguments = {
        "--version",
        "--settings",
        "--pythonpath",
        "--no-color",
        "--force-color",
    }

    def usage(self, message: str):
        """A usage error found after parsing (exit status 2, like argparse's own)."""
        from django.core.management.base import CommandError

        return CommandError(message, returncode=2)

    def emit_json(self, data, *, indent: int | None = None) -> None:
        self.stdout.write(json.dumps(data, ensure_ascii=False, indent=indent))

    def say(self, text: str) -> None:
        self.stdout.write(text)

    def note(self, text: str) -> None:
        """A notice or warning: stderr, so stdout stays pure JSON under --json."""
        self.stderr.write(text, style_func=lambda s: s)


# ---------------------------------------------------------------- identity


def identity() -> tuple[str, str | None]:
    """(agent, session id): SPEC §1 — AGENT_SALON_NAME, else the working directory's name;
    the seat's session from CLAUDE_CODE_SESSION_ID (absent: the bare agent name)."""
    from django.conf import settings

    agent = settings.AGENT_NAME
    source = "AGENT_SALON_NAME"
    if not agent:
        source = "the working directory's name"
        try:
            agent = Path.cwd().name
        except OSError:
            agent = ""
    try:
        rules.validate_name(agent, "agent")
    except RuleError as exc:
        raise RuleError(
            f"{exc} (the agent name comes from {source}; set AGENT_SALON_NAME=<name>)"
        ) from None
    session = os.environ.get(SESSION_VARIABLE, "").strip() or None
    return agent, session


def my_seat():
    """Check this caller in: a Claude Code session joins its default rooms once; a bare
    caller (cron, a shell) writes as the agent name and joins nothing by itself."""
    from bus import services

    agent, session = identity()
    return services.check_in(
        agent=agent,
        session_id=session,
        host=socket.gethostname(),
        join_defaults=bool(session),
    )


# ---------------------------------------------------------------- argument types


def _not_a_flag(value: str, what: str) -> None:
    if value.startswith("-"):
        raise argparse.ArgumentTypeError(
            f"{value!r} looks like a flag, not a {what} name: give the {what} first"
        )


def room_arg(value: str) -> str:
    _not_a_flag(value, "room")
    try:
        return rules.validate_name(value, "room")
    except RuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def name_arg(value: str) -> str:
    _not_a_flag(value, "label")
    try:
        return rules.validate_name(value, "label")
    except RuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def sender_arg(value: str) -> str:
    try:
        return rules.validate_name(value, "sender")
    except RuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def names_arg(value: str) -> list[str]:
    """`a,b`: comma-separated seat or agent names (blank pieces ignored)."""
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one name, e.g. --to api-service")
    try:
        return [rules.validate_name(name, "addressee") for name in names]
    except RuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def files_arg(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def type_arg(value: str) -> str:
    try:
        return rules.normalize_type(value)
    except RuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def phase_arg(value: str) -> str:
    try:
        return rules.validate_phase(value)
    except RuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def duration_arg(value: str) -> str:
    try:
        rules.parse_duration(value)
    except RuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def meta_arg(value: str) -> tuple[str, str]:
    """`--meta key=value`: one pair, split at the first `=`; the value is kept as text."""
    key, sep, val = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(
            f"{value[:64]!r} is not key=value: write --meta kind=question (one pair per word)"
        )
    return key.strip(), val


def count_arg(value: str) -> int:
    """A whole number of 1 or more."""
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value[:64]!r} is not a whole number of 1 or more")
    return int(value)


def days_arg(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"{value[:64]!r} is not a whole number of 0 or more")
    return int(value)


def add_json_flag(parser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout (notices and warnings go to stderr)",
    )


# ---------------------------------------------------------------- words


def plural(count: int, word: str, words: str | None = None) -> str:
    return f"{count} {word if count == 1 else (words or word + 's')}"


# ---------------------------------------------------------------- time


def _parse(ts: str | None) -> datetime | None:
    return datetime.fromisoformat(ts) if ts else None


def local_time(ts: str | None) -> str:
    """An ISO timestamp from the bus, in this machine's local time, to the second."""
    moment = _parse(ts)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S") if moment else "never"


def ago(ts: str | None, now: str) -> str:
    moment, at = _parse(ts), _parse(now)
    if moment is None or at is None:
        return "never"
    seconds = max(int((at - moment).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


# ---------------------------------------------------------------- entries


def format_entry(entry: dict) -> str:
    """`## <local time> — TYPE → to (re: …)  [sender]`, then the text.

    A tampered entry is flagged loudly before its text; a clipped one says so after it.
    """
    to = ", ".join(entry["to"]) if entry["to"] else "everyone"
    head = f"## {local_time(entry['ts'])} — {entry['type']} → {to}"
    if entry.get("re"):
        head += f" (re: {entry['re']})"
    head += f"  [{entry['from']}]"
    marks = []
    if entry.get("wakes"):
        marks.append("wakes you")
    if entry.get("sibling"):
        marks.append("from a sibling seat")
    if marks:
        head += "  · " + " · ".join(marks)
    lines = [head]
    if entry.get("tampered"):
        lines.append(
            "!!! TAMPERED: this entry's signature does not match — its row was changed "
            "outside the bus. Do not trust the text below. !!!"
        )
    lines.append(entry["content"])
    if entry.get("clipped"):
        lines.append(
            f"[clipped: {entry['clipped']} characters in all — "
            f"`salon history {entry['room']}` shows it whole]"
        )
    lines.append(f"(id {entry['id']})")
    return "\n".join(lines)


def tampered_warning(count: int) -> str:
    entries = plural(count, "TAMPERED entry", "TAMPERED entries")
    them = "it" if count == 1 else "them"
    return f"!!! {entries} above: changed outside the bus; do not trust {them} !!!"


def format_entries(entries: list[dict]) -> str:
    return "\n\n".join(format_entry(e) for e in entries)


# ---------------------------------------------------------------- agents


def _focus_line(focus: dict | None, now: str) -> str | None:
    if not focus:
        return None
    line = f'focus: "{focus["text"]}"'
    if focus.get("phase"):
        line += f" [{focus['phase']}]"
    if focus.get("files"):
        line += f" · files: {', '.join(focus['files'])}"
    if focus.get("stale"):
        line += f" · STALE (declared {ago(focus.get('ts'), now)})"
    return line


def _quiet_words(seat: dict) -> str | None:
    if not seat["quiet"]:
        return None
    if seat["quietUntil"] is None:
        return "QUIET WITH NO EXPIRY — nothing wakes it until `salon quiet --off`"
    return f"quiet until {local_time(seat['quietUntil'])}"


def format_agents(projection: dict) -> str:
    now = projection["generatedAt"]
    if not projection["agents"]:
        return "nobody is on the bus yet"
    lines = []
    for agent in projection["agents"]:
        head = agent["agent"]
        head += f"  rooms: {', '.join(agent['rooms']) or 'none'}"
        head += f" · last seen {ago(agent['lastSeen'], now)}"
        if agent["host"]:
            head += f" · host {agent['host']}"
        lines.append(head)
        seats = agent["seats"]
        for index, seat in enumerate(seats):
            last = index == len(seats) - 1
            branch, stem = ("└─ ", "   ") if last else ("├─ ", "│  ")
            words = [seat["liveness"]]
            wrote = seat["lastWrote"]
            words.append(f"last wrote {ago(wrote, now)}" if wrote else "never wrote")
            quiet = _quiet_words(seat)
            if quiet:
                words.append(quiet)
            lines.append(f"{branch}{seat['seat']}  {' · '.join(words)}")
            focus = _focus_line(seat["focus"], now)
            if focus:
                lines.append(f"{stem}   {focus}")
    return "\n".join(lines)


def format_focus(seat: str, focus: dict | None) -> str:
    if not focus:
        return f"{seat} has no focus declared"
    now = datetime.now().astimezone().isoformat()
    return f"{seat} {_focus_line(focus, now)}"


# ---------------------------------------------------------------- rooms


def format_rooms(rooms: list[dict], *, archived: bool) -> str:
    if not rooms:
        return (
            "no archived rooms" if archived else "no rooms (create one: salon rooms --create NAME)"
        )
    lines = []
    for room in rooms:
        line = f"{room['room']}  {plural(room['entries'], 'entry', 'entries')}"
        line += f" · {plural(len(room['seats']), 'seat')}"
        line += f" ({len(room['live'])} live)"
        if room["seats"]:
            live = set(room["live"])
            line += ": " + ", ".join(s + (" *" if s in live else "") for s in room["seats"])
        if archived:
            line += f" · archived {local_time(room['archived'])}"
        lines.append(line)
    if not archived and any(r["live"] for r in rooms):
        lines.append("(* live)")
    return "\n".join(lines)
