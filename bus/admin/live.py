"""/admin/live/: the operator's live view (staff only).

Drawn on the server: the rooms, and the selected room's seats — liveness (`?` for
unknown), focus, quiet, and whether each seat is reading (a live seat is caught up or
behind its room; a gone seat is gone, never "behind"). The flow of new entries comes from
the daemon as server-sent events (/admin/live/stream, salon.live) and is drawn by the
page's own small script (no external resources: it works offline).

Read-only by construction: this view and the stream only read (tests/test_live.py walks
them against a real store and compares every row before and after).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from bus import rules, wire
from bus.admin.base import VIEW_PERMISSION
from bus.models import Entry, Membership, Room, Seat, WakeDecision

SEAT_ROWS = 200
# A seat's unread entries are counted up to here ("1,000+"): a seat that has been away
# from a busy room would otherwise cost a count over its whole backlog.
UNREAD_CAP = 1000
LIVENESS_ORDER = {rules.LIVE: 0, rules.UNKNOWN: 1, rules.GONE: 2}
TOLD_BY = {
    WakeDecision.LISTENER_LIVE: "stream or wait",
    WakeDecision.LISTENER_HOOK: "hook",
    WakeDecision.LISTENER_NONE: "nothing",
}
# Stands in the entry page's URL for the id the script puts there.
SOME_ID = "00000000-0000-0000-0000-000000000000"


@dataclass
class RoomRow:
    name: str
    entries: int
    seats: int = 0
    live: int = 0
    unknown: int = 0


@dataclass
class SeatRow:
    seat: Seat
    liveness: str
    told_by: str
    last_seen: str | None  # ISO 8601 UTC, shown in the browser's zone
    quiet: bool
    quiet_until: str | None  # None while quiet: no expiry
    focus: dict | None
    reading: str  # caught-up · behind · unknown · gone
    reading_text: str


def live_view(request):
    if not request.user.has_perm(VIEW_PERMISSION):
        raise PermissionDenied("the live view needs the permission to view entries")
    at = timezone.now()
    rooms = list(Room.objects.visible().order_by("name"))
    memberships = list(
        Membership.objects.current()
        .filter(room__in=rooms)
        .select_related("seat__agent", "room")
        .order_by("seat__name")
    )
    liveness = {m.seat_id: m.seat.liveness(at) for m in memberships}
    room_rows = {room.pk: RoomRow(room.name, room.last_seq) for room in rooms}
    for membership in memberships:
        row = room_rows[membership.room_id]
        row.seats += 1
        row.live += liveness[membership.seat_id] == rules.LIVE
        row.unknown += liveness[membership.seat_id] == rules.UNKNOWN

    asked = request.GET.get("room", "")
    selected = next((r for r in rooms if r.name == asked), None) or _busiest(rooms)
    problem = (
        f"There is no room {asked[:64]!r}; showing {selected.name!r}."
        if asked and selected and selected.name != asked
        else None
    )
    seats = []
    if selected is not None:
        seats = [
            _seat_row(m, liveness[m.seat_id], selected, at)
            for m in memberships
            if m.room_id == selected.pk
        ]
        seats.sort(key=lambda s: (LIVENESS_ORDER[s.liveness], s.seat.name))
    context = {
        **admin.site.each_context(request),
        "title": "Live",
        "subtitle": "Who is here, and what is said as it is stored",
        "problem": problem,
        "rooms": list(room_rows.values()),
        "selected": selected,
        "seats": seats[:SEAT_ROWS],
        "seats_left_out": max(len(seats) - SEAT_ROWS, 0),
        "stream_url": reverse("admin:index") + "live/stream",
        "entry_url": reverse("admin:bus_entry_change", args=[SOME_ID]),
        "some_id": SOME_ID,
        "types": rules.TYPES,
    }
    return TemplateResponse(request, "admin/live.html", context)


def _busiest(rooms: list[Room]) -> Room | None:
    """The room of the newest entry (the one an operator most likely wants), else the first."""
    by_id = {r.pk: r for r in rooms}
    newest = Entry.objects.filter(room__in=rooms).order_by("-ts").values_list("room_id", flat=True)
    return by_id.get(newest.first()) or (rooms[0] if rooms else None)


def _seat_row(membership: Membership, liveness: str, room: Room, at) -> SeatRow:
    seat = membership.seat
    quiet = seat.is_quiet(at)
    unread, waking = None, 0
    if liveness != rules.GONE:
        unread = (
            Entry.objects.filter(room=room, seq__gt=membership.cursor)
            .exclude(sender=seat.name)[: UNREAD_CAP + 1]
            .count()
        )
        waking = WakeDecision.objects.filter(
            seat=seat, room=room, woken=True, seq__gt=membership.cursor
        ).count()
    backlog = ""
    if unread:
        shown = f"{UNREAD_CAP:,}+" if unread > UNREAD_CAP else str(unread)
        backlog = f"{shown} unread" + (f", {waking} waking" if waking else "")
    if liveness == rules.GONE:
        reading, text = "gone", "gone"  # not "behind": nobody is there to read
    elif liveness == rules.UNKNOWN:
        reading, text = "unknown", f"? {backlog}".strip()
    elif unread:
        reading, text = "behind", f"behind: {backlog}"
    else:
        reading, text = "caught-up", "reading, caught up"
    return SeatRow(
        seat=seat,
        liveness=liveness,
        told_by=TOLD_BY[seat.listener(at, liveness)],
        last_seen=wire.iso(seat.last_seen),
        quiet=quiet,
        quiet_until=wire.iso(seat.quiet_until) if quiet else None,
        focus=wire.focus(seat, at),
        reading=reading,
        reading_text=text,
    )
