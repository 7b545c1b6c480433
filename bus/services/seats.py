"""Seats: who is on the bus, the evidence that they are alive, and what they say of
themselves (focus, quiet). Also the `salon.agents/1` projection and `prune`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from bus import rules, wire
from bus.compiled import update_by_ids
from bus.models import Agent, DecisionCount, Membership, ReadCount, Room, Seat, WakeDecision
from bus.rules import RuleError
from bus.services import rooms
from bus.services.claimed import claims_by_seat
from patches.django import CompiledLookup


def check_in(
    *,
    agent: str,
    session_id: str | None = None,
    host: str = "",
    default_rooms: Sequence[str] | None = None,
    join_defaults: bool = False,
    joining: str | None = None,
    touch: bool = True,
    client: str = "",
) -> Seat:
    """Find or create the seat of (agent, session id) and record a sign of life.

    `client`: who sits in it (bus.rules.CLIENTS: the hooks and `salon mcp` of an agent
    CLI name theirs), recorded when it differs from what the seat says.

    With join_defaults, a seat new to the bus joins its default rooms once:
    `default_rooms` if given (the caller's own AGENT_SALON_ROOM or ?room=), else the rooms
    its agent's other seats are in, else the default room. A seat that later parts is
    never re-joined. A new seat whose first act is to join a room (`joining`) gets that
    room only, over every transport.
    """
    agent = rules.validate_name(agent, "agent")
    if "@" in agent:
        # `@` marks a seat of another machine, and only the relay lands those.
        raise RuleError(
            f'agent name {agent!r} holds "@", which marks a seat of another machine (only '
            'the relay writes such names): drop the "@…" part (e.g. "web-app")'
        )
    at = timezone.now()
    # The bare agent name's seat (every /notify, every cron `salon send`), when it exists:
    # one compiled lookup instead of two get_or_create.
    found = [] if session_id else _SEATS_BY_NAME.fetch([agent])
    seat = found[0] if found else _find_or_make_seat(agent, session_id, host, at)
    if touch:
        Seat.objects.filter(pk=seat.pk).update(last_seen=at)
        seat.last_seen = at
    if client and client in rules.CLIENTS and seat.client != client:
        Seat.objects.filter(pk=seat.pk).update(client=client)
        seat.client = client
    if join_defaults and not seat.defaults_applied:
        _join_default_rooms(seat, [joining] if joining else default_rooms)
    return seat


_SEATS_BY_NAME = CompiledLookup(Seat, "name", "agent")


def _find_or_make_seat(agent: str, session_id: str | None, host: str, at) -> Seat:
    agent_row, _ = Agent.objects.get_or_create(name=agent, defaults={"host": host})
    if session_id:
        holders = dict(
            Seat.objects.filter(name__startswith=f"{agent}#").values_list("name", "session_id")
        )
        name = rules.seat_name(agent, session_id, holders)
    else:
        name = agent
    try:
        seat, _ = Seat.objects.select_related("agent").get_or_create(
            name=name,
            defaults={
                "agent": agent_row,
                "session_id": session_id or "",
                "host": host,
                "last_seen": at,
            },
        )
    except IntegrityError:  # a concurrent check-in created it first
        seat = Seat.objects.select_related("agent").get(name=name)
    return seat


def told_at_next_turn(names: Sequence[str]) -> list[str]:
    """Of these seats, those whose client nothing can wake while it is idle
    (bus.rules.TOLD_AT_NEXT_TURN), in the order given."""
    if not names:
        return []
    late = set(
        Seat.objects.filter(name__in=names, client__in=rules.TOLD_AT_NEXT_TURN).values_list(
            "name", flat=True
        )
    )
    return [name for name in names if name in late]


def record_root(*, agent: str, root: str) -> None:
    """Record where the agent's project is (`salon install` there, or a session start
    with that working directory); the last one recorded wins. A path that is not a usable
    directory name (bus.rules.project_root) records nothing."""
    agent = rules.validate_name(agent, "agent")
    root = rules.project_root(root)
    if root is None:
        return
    row, created = Agent.objects.get_or_create(name=agent, defaults={"root": root})
    if not created and row.root != root:
        Agent.objects.filter(pk=row.pk).update(root=root)


def project_roots() -> list[str]:
    """Every project directory recorded for an agent of this store (record_root)."""
    roots = Agent.objects.exclude(root__isnull=True).exclude(root="")
    return sorted(set(roots.values_list("root", flat=True)))


def find_seat(*, agent: str, session_id: str | None) -> Seat | None:
    """The seat check_in gives (agent, session id), if it exists already; makes nothing.
    For the transports that must not make a seat of their own: a stream opened, a stdio
    server started (a health check does both)."""
    seats = Seat.objects.select_related("agent")
    if session_id:
        return seats.filter(agent__name=agent, session_id=session_id).first()
    return seats.filter(name=agent).first()


def _join_default_rooms(seat: Seat, wanted: Sequence[str] | None) -> None:
    names = list(wanted or [])
    if not names:
        names = list(
            Membership.objects.current()
            .in_visible_rooms()
            .filter(seat__agent=seat.agent)
            .exclude(seat=seat)
            .values_list("room__name", flat=True)
            .distinct()
        ) or [settings.DEFAULT_ROOM]
    for name in names:
        room = Room.objects.visible().filter(name=name).first()
        if room is not None:
            rooms.ensure_membership(seat, room)
    Seat.objects.filter(pk=seat.pk).update(defaults_applied=True)
    seat.defaults_applied = True


def _remote_seat(name: str) -> Seat:
    """The seat row of a session on another machine, created when first heard of."""
    name = rules.validate_name(name, "sender")
    agent = rules.agent_of_seat(name)
    base, at_sign, device = agent.partition("@")
    if not at_sign or not base or not device or "@" in device:
        raise RuleError(
            f"a seat of another machine is named agent@device#session; {name[:64]!r} is not"
        )
    rules.validate_name(agent, "agent")
    agent_row, _ = Agent.objects.get_or_create(name=agent, defaults={"host": device})
    seat, _ = Seat.objects.select_related("agent").get_or_create(
        name=name,
        defaults={
            "agent": agent_row,
            "session_id": name.partition("#")[2],
            "host": device,
            "remote": True,
            "defaults_applied": True,  # a remote seat is only in the rooms it is seen in
        },
    )
    return seat


def remote_seat(*, name: str, room: Room, wrote_at: datetime) -> Seat:
    """The seat of a session on another machine (`web-app@macmini#7b02e5d1`) as an entry
    of it lands here through the relay: a member of the room it wrote in (so it can be
    answered and addressed like any seat), its last sign of life and last write the time
    it wrote. A writer with no session (`nightly@laptop`: a webhook, a cron job) is a
    writer here, as it is on its own machine, not a member."""
    # Every entry of a busy room lands through here: the seat of the last one is usually
    # known and in the room already, which costs two reads and one write.
    seat = Seat.objects.select_related("agent").filter(name=name, remote=True).first()
    if seat is None:
        seat = _remote_seat(name)
    session = "#" in name
    if session and not Membership.objects.current().filter(seat=seat, room=room).exists():
        rooms.ensure_membership(seat, room)
    at = Value(wrote_at)
    Seat.objects.filter(pk=seat.pk).update(
        last_seen=Greatest(Coalesce("last_seen", at), at),
        last_wrote=Greatest(Coalesce("last_wrote", at), at),
    )
    return seat


def remote_roster(
    *,
    room: Room,
    device: str,
    seats: Sequence[tuple[str, str]],
    live_for: timedelta,
    focus: Mapping[str, dict | None] | None = None,
) -> list[str]:
    """Who is in `room` on machine `device`, as its bridge last said: [(seat, liveness)].

    Each named seat is a member here (so it can be addressed before it writes), with
    the liveness it has there: `live` holds for `live_for` (its bridge says so again
    before then while it stays live), `unknown` and `gone` read as such at once. A seat
    of that machine the roster no longer names has left the room. `focus`: the focus of
    the seats whose line carried one ({"text", "files", "phase", "ts"}, None: none),
    checked as a local focus is. Returns the seats."""
    at = timezone.now()
    named = []
    for name, liveness in seats:
        seat = _remote_seat(name)
        if rules.agent_of_seat(seat.name).partition("@")[2] != device:
            raise RuleError(f"a roster of {device!r} names {name[:64]!r}, a seat of elsewhere")
        rooms.ensure_membership(seat, room)
        if liveness == rules.LIVE:
            changes = {"last_seen": at, "live_until": at + live_for}
        elif liveness == rules.UNKNOWN:
            changes = {"last_seen": at - rules.LIVE_WINDOW, "live_until": None}
        else:
            changes = {"last_seen": at - rules.UNKNOWN_WINDOW, "live_until": None}
        if focus and name in focus:
            changes.update(_remote_focus(focus[name]))
        Seat.objects.filter(pk=seat.pk).update(**changes)
        named.append(seat.name)
    Membership.objects.current().filter(
        room=room, seat__remote=True, seat__agent__name__endswith=f"@{device}"
    ).exclude(seat__name__in=named).update(left_at=at)
    return named


def _remote_focus(focus: dict | None) -> dict:
    """A remote seat's focus as its roster said it, as Seat fields."""
    if not focus:
        return {"focus_text": "", "focus_files": [], "focus_phase": "", "focus_ts": None}
    phase = focus.get("phase") or ""
    try:
        ts = datetime.fromisoformat(str(focus.get("ts")).replace("Z", "+00:00"))
    except ValueError:
        ts = None
    return {
        "focus_text": rules.validate_focus_text(focus.get("text") or ""),
        "focus_files": rules.split_files(list(focus.get("files") or [])) or [],
        "focus_phase": rules.validate_phase(phase) if phase else "",
        "focus_ts": ts if ts is not None and ts.tzinfo else None,
    }


# ---------------------------------------------------------------- liveness evidence


def keep_live(*, seat: Seat, seconds: int = 45) -> datetime:
    """An open stream or a running server: live for the next `seconds`.

    Returns the live_until written, for end_live(only_if_until=…).
    """
    return keep_seats_live(seat_ids={seat.pk}, seconds=seconds)


def keep_seats_live(*, seat_ids: Iterable[int], seconds: int = 45) -> datetime:
    """keep_live for many seats in set-based UPDATEs (a process's keep-alive ticker
    refreshes every open stream's seat at once). Returns the live_until written."""
    at = timezone.now()
    until = at + timedelta(seconds=seconds)
    update_by_ids(Seat, seat_ids, last_seen=at, live_until=until)
    return until


def end_live(*, seat: Seat, only_if_until: datetime | None = None) -> None:
    """The stream closed. With only_if_until, only if no newer stream took the seat over
    since (it would have written a later live_until)."""
    query = Seat.objects.filter(pk=seat.pk)
    if only_if_until is not None:
        query = query.filter(live_until=only_if_until)
    query.update(live_until=timezone.now())


def sign_off(*, seat: Seat) -> None:
    """The session ended (MCP DELETE): the seat is gone until it shows life again."""
    at = timezone.now()
    Seat.objects.filter(pk=seat.pk).update(signed_off_at=at, live_until=None, last_seen=at)


def touch(*, seat: Seat, min_interval: timedelta | None = None) -> bool:
    """A sign of life; with min_interval, written at most that often. True if written."""
    at = timezone.now()
    query = Seat.objects.filter(pk=seat.pk)
    if min_interval:
        query = query.filter(Q(last_seen__isnull=True) | Q(last_seen__lt=at - min_interval))
    return bool(query.update(last_seen=at))


def merge_silent_seat(*, old: Seat, into: Seat) -> bool:
    """Drop a seat that never wrote, after `into` joins the rooms it was in (checkin)."""
    if old.pk == into.pk or Seat.objects.filter(pk=old.pk, last_wrote__isnull=False).exists():
        return False
    with transaction.atomic():
        for room in Room.objects.of_seat(old):
            rooms.ensure_membership(into, room)
        Seat.objects.filter(pk=old.pk).delete()
    return True


# ---------------------------------------------------------------- who else is here


def live_others(*, seat: Seat) -> dict[str, list[str]]:
    """{room: [the other live seats in it]} for each room of this seat that has any."""
    at = timezone.now()
    mine = Membership.objects.current().filter(seat=seat).values("room_id")
    result: dict[str, list[str]] = {}
    for membership in (
        Membership.objects.current()
        .in_visible_rooms()
        .filter(room_id__in=mine)
        .exclude(seat=seat)
        .select_related("seat__agent", "room")
        .order_by("room__name", "seat__name")
    ):
        if membership.seat.liveness(at) == rules.LIVE:
            result.setdefault(membership.room.name, []).append(membership.seat.name)
    return result


def live_siblings(*, seat: Seat) -> list[str]:
    """The other live seats of this seat's agent, in any room or none."""
    at = timezone.now()
    siblings = Seat.objects.filter(agent_id=seat.agent_id).exclude(pk=seat.pk).order_by("name")
    return [s.name for s in siblings.select_related("agent") if s.liveness(at) == rules.LIVE]


def claim_focus_request(*, seat: Seat) -> dict[str, list[str]]:
    """Once ever per seat, when it has no focus and someone else is live in one of its
    rooms: claim the request (focus_asked_at) and return {room: [live others]}; otherwise
    {} and nothing marked. The request rides in what a hook says anyway (the SessionStart
    context, a Stop block for an entry), never in a block of its own."""
    seat.refresh_from_db(fields=["focus_text", "focus_asked_at"])
    if seat.focus_text or seat.focus_asked_at:
        return {}
    others = live_others(seat=seat)
    if not others:
        return {}
    claimed = Seat.objects.filter(pk=seat.pk, focus_asked_at__isnull=True).update(
        focus_asked_at=timezone.now()
    )
    return others if claimed else {}


# ---------------------------------------------------------------- focus, quiet


def declare_focus(
    *,
    seat: Seat,
    text: str | None = None,
    files: str | Sequence[str] | None = None,
    phase: str | None = None,
) -> dict:
    """focus: a new sentence (drops the old phase unless one is given), `phase` or `files`
    alone re-declare the standing sentence, "" clears it, nothing at all reads it back."""
    at = timezone.now()
    files = rules.split_files(files)
    seat.refresh_from_db(fields=["focus_text", "focus_files", "focus_phase", "focus_ts"])
    if text is None and files is None and phase is None:
        return {"seat": seat.name, "focus": wire.focus(seat, at)}
    phase = rules.validate_phase(phase) if phase else None
    if text is not None and not text.strip():
        seat.focus_text, seat.focus_files, seat.focus_phase, seat.focus_ts = "", [], "", None
    elif text is not None:
        seat.focus_text, seat.focus_files = rules.validate_focus_text(text), list(files or [])
        seat.focus_phase, seat.focus_ts = phase or "", at
    else:
        if not seat.focus_text:
            raise RuleError(
                'there is no focus to re-declare; give the sentence: focus "what I am on"'
            )
        if phase:
            seat.focus_phase = phase
        if files is not None:
            seat.focus_files = files
        seat.focus_ts = at
    seat.save(update_fields=["focus_text", "focus_files", "focus_phase", "focus_ts"])
    return {"seat": seat.name, "focus": wire.focus(seat, at)}


def set_quiet(*, seat: Seat, duration: str | timedelta | None = None, off: bool = False) -> dict:
    at = timezone.now()
    if off:
        seat.quiet, seat.quiet_until = False, None
    else:
        if isinstance(duration, str):
            duration = rules.parse_duration(duration)
        seat.quiet, seat.quiet_until = True, (at + duration if duration else None)
    seat.save(update_fields=["quiet", "quiet_until"])
    return {"seat": seat.name, "quiet": seat.is_quiet(at), "quietUntil": wire.iso(seat.quiet_until)}


# ---------------------------------------------------------------- agents, prune


def agents_projection(*, at: datetime | None = None) -> dict:
    """The `salon.agents/1` contract (bus.wire pins its keys)."""
    at = at or timezone.now()
    seats_by_agent: dict[int, list[Seat]] = {}
    for seat in Seat.objects.select_related("agent").order_by("agent__name", "name"):
        seats_by_agent.setdefault(seat.agent_id, []).append(seat)
    rooms_by_seat = rooms.rooms_of_seats(None)
    claims = claims_by_seat(
        seat_ids=[s.pk for seats in seats_by_agent.values() for s in seats], at=at
    )
    lines = []
    for agent in Agent.objects.filter(pk__in=seats_by_agent).order_by("name"):
        seats = seats_by_agent[agent.pk]
        agent_rooms = sorted({r for s in seats for r in rooms_by_seat.get(s.pk, [])})
        lines.append(wire.agent_line(agent.name, agent.host, seats, agent_rooms, at, claims))
    return wire.agents(lines, at)


def prune(*, days: int = 7, dry_run: bool = False) -> dict:
    """Forget seats that are gone and silent for `days`, and delete the stats ledger's rows
    older than AGENT_SALON_STATS_DAYS (prune_ledger); never touches an entry."""
    if days < 0:
        raise RuleError("--days must be 0 or more")
    at = timezone.now()
    cutoff = at - timedelta(days=days)
    candidates = (
        Seat.objects.filter(
            Q(last_seen__isnull=True) | Q(last_seen__lt=cutoff),
            Q(last_wrote__isnull=True) | Q(last_wrote__lt=cutoff),
        )
        .filter(Q(live_until__isnull=True) | Q(live_until__lt=at))
        .select_related("agent")
    )
    names = sorted(s.name for s in candidates if s.liveness(at) == rules.GONE)
    if not dry_run and names:
        with transaction.atomic():
            Seat.objects.filter(name__in=names).delete()
            Agent.objects.filter(seats__isnull=True).delete()
    ledger = prune_ledger(dry_run=dry_run, at=at)
    return {"seats": names, "dryRun": dry_run, "days": days, "ledger": ledger}


PRUNE_BATCH = 5000


def prune_ledger(*, dry_run: bool = False, at: datetime | None = None) -> dict:
    """Delete the ledger rows (wake decisions, decision counts, read counts) older than
    AGENT_SALON_STATS_DAYS, in batches of PRUNE_BATCH (short write locks: hooks and sends
    go on meanwhile). Entries are never touched.

    A waking entry whose ledger row is gone no longer counts as waking for that seat: it
    is not pushed or told any more, and inbox shows it like any other entry (by then the
    seat has left it unread for the whole retention).
    """
    days = settings.STATS_DAYS
    cutoff = (at or timezone.now()) - timedelta(days=days)
    tables = (
        ("decisions", WakeDecision.objects.filter(decided_at__lt=cutoff)),
        ("decisionCounts", DecisionCount.objects.filter(decided_at__lt=cutoff)),
        # an hour's counter is older than the cutoff only when all of its hour is
        ("readCounts", ReadCount.objects.filter(hour__lt=cutoff - timedelta(hours=1))),
    )
    result: dict = {"retentionDays": days, "olderThan": wire.iso(cutoff)}
    for key, query in tables:
        if dry_run:
            result[key] = query.count()
            continue
        deleted = 0
        while True:
            with transaction.atomic():
                batch = list(query.values_list("pk", flat=True)[:PRUNE_BATCH])
                if batch:
                    query.model.objects.filter(pk__in=batch).delete()
            deleted += len(batch)
            if len(batch) < PRUNE_BATCH:
                break
        result[key] = deleted
    return result
