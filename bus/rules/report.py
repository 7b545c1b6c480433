"""What send answers: the notices beside its report."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from datetime import timedelta

from bus.rules.errors import _show
from bus.rules.limits import CLAIM_TYPES, UNKNOWN_WINDOW


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


def next_turn_notice(seats: Sequence[str]) -> str:
    """The notice for the woken seats whose client nothing can wake while idle
    (TOLD_AT_NEXT_TURN): told at their next turn, not now."""
    names = ", ".join(_show(name) for name in seats)
    verb = "is a session" if len(seats) == 1 else "are sessions"
    return (
        f"{names} {verb} of a client that cannot be woken while idle (Codex CLI, Gemini "
        "CLI, OpenCode): the entry is told at its next turn (its next prompt, or when a "
        "turn it is in ends)."
    )
