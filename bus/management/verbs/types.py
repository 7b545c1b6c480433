"""Argument types of the bus commands: every name is checked by bus.rules before it is
sent anywhere, so a refused argument is a usage error that writes nothing."""

from __future__ import annotations

import argparse

from bus import rules
from bus.rules import RuleError


def _not_a_flag(value: str, what: str) -> None:
    if value.startswith("-"):
        raise argparse.ArgumentTypeError(
            f"{value!r} looks like a flag, not a {what} name: give the {what} first"
        )


def _name(value: str, what: str) -> str:
    try:
        return rules.validate_name(value, what)
    except RuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def room_arg(value: str) -> str:
    _not_a_flag(value, "room")
    return _name(value, "room")


def name_arg(value: str) -> str:
    _not_a_flag(value, "label")
    return _name(value, "label")


def agent_arg(value: str) -> str:
    _not_a_flag(value, "agent")
    return _name(value, "agent")


def sender_arg(value: str) -> str:
    return _name(value, "sender")


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
    """The CLI's TYPE is required (the usage line says ROOM TYPE "text"), so its refusal
    shows the whole command rather than the MCP tools' "leave it out"."""
    try:
        return rules.normalize_type(value)
    except RuleError:
        raise argparse.ArgumentTypeError(
            f"{value[:64]!r} is not a type: use QUESTION, ANSWER, FACT or REQUEST, as in "
            'salon send ROOM FACT "text"'
        ) from None


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


def ask_arg(value: str) -> str:
    """An ask key (`status:db`), refused before anything is sent unless well-formed."""
    try:
        return rules.validate_ask(value)
    except RuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds_arg(value: str) -> float:
    """Seconds to wait: a number from 0 to 600."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 600:
        raise argparse.ArgumentTypeError(f"{value[:64]!r} is not a number of seconds from 0 to 600")
    return seconds
