"""Who an entry is a claim on: the send's decision, taken over the room's readers inside
the sending (or landing) transaction, before anything is written.

Why was this seat woken? The answer is the steps below, in this order:

1. **Addressing** (`_asked`): a non-empty `to` is looked up in the roster; a reader it
   does not name is `not_addressed` and asked nothing more.
2. **The wake rule** (`rules.decide_wake`): the sender never; quiet holds a seat back
   (still delivered); `to` naming it wakes it; `re` at its own entry wakes it; a
   broadcast QUESTION or REQUEST wakes it; nothing else does (bus/rules/waking.py).
3. **Remote seats** (`_row_for`): a seat of another machine (`agent@device#…`) gets its
   ledger row, but its own machine decides and tells it; `send` lists it as "decided
   there", never as woken.
4. **The policy's verdict** (`hold`, called by the send once the decision is taken): a
   request the receiving project serves, gates or denies wakes nobody there (bus/policy.py,
   bus/services/requests.py).
5. **The letterbox and the safety net** come later, on the telling path, never here: a
   woken row may still be held back by a judge when it is told (bus/services/triage.py).

What `send` answers of the decision (`wakes`, the notices) is built here too, from the
same readers (`_notices`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from bus import rules
from bus.models import Entry, Room, Seat, WakeDecision
from bus.services import requests
from bus.services import roster as rosters


@dataclass
class Decided:
    """The wake rule for every reader of the room, before anything is written: the
    ledger rows (of the seats the entry is a claim on, woken or quieted), the count of
    every other reason, what `send` answers (`wakes`, `notices`) and the woken seats to
    ring. `there`: the seats of other machines the entry is a claim on, woken or quiet as
    their own machine decides (it knows their quiet and liveness; this one does not), so
    `send` never says of them that they are woken or quiet."""

    rows: list[WakeDecision]
    unwoken: Counter[str]
    reasons: Counter[str]
    wakes: list[str]
    notices: list[str]
    woken_ids: list[int]
    at: datetime
    there: list[str]


def decide(
    entry: Entry,
    room: Room,
    sender: Seat,
    re_entry: Entry | None,
    at: datetime,
    roster: rosters.Roster,
) -> Decided:
    """The decision for every reader of `roster` (steps 1 to 3 of this module's list)."""
    facts = rules.EntryFacts(
        sender_seat=sender.name,
        type=entry.type,
        to=tuple(entry.to),
        re_author=re_entry.sender if re_entry else None,
    )
    members = [m for m in roster.current if m.pk != sender.pk]
    asked = _asked(roster, facts, sender, members)
    decided = Decided([], Counter(), Counter(), [], [], [], at, [])
    if len(asked) < len(members):
        not_addressed = len(members) - len(asked)
        decided.reasons["not_addressed"] = decided.unwoken["not_addressed"] = not_addressed
    readers = rosters.readers(asked)
    for reader in readers:
        _row_for(decided, entry, room, reader, rules.decide_wake(facts, reader.member.facts, at))
    decided.wakes.sort()
    decided.there.sort()
    other_live = 0
    if not decided.wakes and not decided.there:
        # Counted only for the notice of an entry that wakes nobody: the only one that
        # names them.
        other_live = _other_live(readers if asked is members else rosters.readers(members), at)
    decided.notices = _notices(entry, decided, readers, other_live)
    return decided


def _asked(roster: rosters.Roster, facts: rules.EntryFacts, sender: Seat, members: list) -> list:
    """Step 1, addressing: the readers the rule is asked about. With a `to`, only those it
    names (decide_wake's second step, by lookup); without, every member but the sender."""
    if not facts.to:
        return members
    return [m for m in roster.named_by(facts.to) if m.pk != sender.pk]


def _row_for(decided: Decided, entry: Entry, room: Room, reader: rosters.Reader, decision) -> None:
    """Steps 2 and 3: count the rule's reason; a claim (woken, or held back by quiet)
    gets its ledger row; a woken local seat is rung, and named in `wakes` unless gone; a
    seat of another machine is listed as decided there."""
    decided.reasons[decision.reason] += 1
    if not (decision.woken or decision.reason == "quiet"):
        decided.unwoken[decision.reason] += 1
        return
    at = decided.at
    liveness = reader.liveness(at)
    decided.rows.append(
        WakeDecision(
            entry_id=entry.id,
            seat_id=reader.pk,
            seat_name=reader.name,
            room_id=room.pk,
            seq=entry.seq,
            woken=decision.woken,
            reason=decision.reason,
            decided_at=at,
            listener=reader.listener(at, liveness),
            gone=liveness == rules.GONE,
        )
    )
    if rules.decided_there(reader.name):
        decided.there.append(reader.name)
    elif decision.woken:
        decided.woken_ids.append(reader.pk)
        if liveness != rules.GONE:
            decided.wakes.append(reader.name)


def _other_live(readers: list, at: datetime) -> int:
    """The live local seats among `readers`."""
    return sum(
        1 for r in readers if r.liveness(at) == rules.LIVE and not rules.decided_there(r.name)
    )


def _notices(entry: Entry, decided: Decided, readers: list, other_live: int) -> list[str]:
    """What `send` says beside `wakes` (rules.send_notices): each addressee's state, and,
    for an entry that wakes nobody, how many other live seats it left alone."""
    return rules.send_notices(
        to_status=_addressee_statuses(entry, readers, decided.at),
        woken=decided.wakes,
        other_live_seats=other_live,
        type=entry.type,
        to=entry.to,
        content_length=len(entry.content),
        long_chars=settings.LONG_CHARS,
        inbox_chars=settings.INBOX_CHARS,
    )


def _addressee_statuses(entry: Entry, readers: list, at: datetime) -> list:
    """Each `to` name as this machine sees it. A name that only seats of other machines
    answer to is left to their machine (`readers` are exactly the readers `to` names)."""
    local = [r for r in readers if not rules.decided_there(r.name)]
    statuses = []
    for name in entry.to:
        matching = [r for r in local if rules.addressed_to([name], r.member.facts)]
        if matching or not any(rules.addressed_to([name], r.member.facts) for r in readers):
            statuses.append(_status_of(name, matching, at))
    return statuses


def _status_of(name: str, matching: list, at: datetime) -> rules.AddresseeStatus:
    """One addressee: its live and unknown seats, and whether all of them are quiet and
    until when."""
    quiet = [r for r in matching if r.is_quiet(at)]
    all_quiet = bool(matching) and len(quiet) == len(matching)
    until = [r.quiet_until for r in quiet if r.quiet_until]
    return rules.AddresseeStatus(
        name=name,
        live_seats=sum(1 for r in matching if r.liveness(at) == rules.LIVE),
        unknown_seats=sum(1 for r in matching if r.liveness(at) == rules.UNKNOWN),
        quiet_until=max(until, default=None) if all_quiet else None,
        quiet_forever=all_quiet and any(r.quiet_until is None for r in quiet),
    )


def hold(decided: Decided, asked: requests.Asked) -> None:
    """Step 4, the policy's verdict: a request the policy serves, gates or denies wakes
    nobody in the receiving project: its woken rows are held (requests.hold), and nobody
    is named, pushed or rung."""
    if not asked.holds:
        return
    held = set(requests.hold(decided.rows))
    decided.wakes = []
    decided.woken_ids = [pk for pk in decided.woken_ids if pk not in held]
