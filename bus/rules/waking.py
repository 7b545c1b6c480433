"""Who is woken by an entry, and who is judged by the letterbox and the safety net."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from datetime import datetime

from bus.rules.limits import CLAIM_TYPES
from bus.rules.names import base_agent


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


def second_look(answer: str, net_on: bool, seat_has_focus: bool) -> bool:
    """A letterbox "no" for a seat with a focus goes to the safety net for a second look
    before it holds the entry back: a letterbox that wrongly says no would otherwise leave
    an entry owed to the seat untold for good, while a wrong "yes" costs one turn. The net
    fails closed, so only its clear yes tells the entry; the letterbox judges nothing
    twice."""
    return answer == "no" and net_on and seat_has_focus


def triage_verdict(half: str, answer: str) -> bool:
    """Whether the judged entry is told: the letterbox fails towards waking (anything but
    a clear no tells), the safety net fails closed (only a clear yes tells)."""
    if half == LETTERBOX:
        return answer != "no"
    return answer == "yes"
