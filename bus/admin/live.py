"""/admin/live/: the operator's live view (staff only).

Three panes: the rooms, the seats of the room opened (liveness with `?` for unknown,
focus, quiet, and whether each seat is reading), and the flow of entries. The data is
bus.live's; this module draws it. The rooms and seats panes are drawn here, on the
server, both for the page and for the daemon's event stream (/admin/live/stream,
salon.live), which sends them again whenever they change (`pane_html`); the page's own
small script swaps them in and draws the flow. No external resources: it works offline.

With no room asked for, the page opens on the busiest one (bus.live.busiest).

Read-only by construction: this view and the stream only read (tests/test_live.py walks
them against a real store and compares every row before and after).
"""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode

from bus import live, rules
from bus.admin.base import VIEW_PERMISSION

# Stands in the entry page's URL for the id the script puts there.
SOME_ID = "00000000-0000-0000-0000-000000000000"
PANES = {"rooms": "admin/live_rooms.html", "seats": "admin/live_seats.html"}


def live_view(request):
    if not request.user.has_perm(VIEW_PERMISSION):
        raise PermissionDenied("the live view needs the permission to view entries")
    asked = request.GET.get("room", "")
    panes = live.panes(asked or None)
    problem = (
        f"There is no room {asked[:64]!r}; showing {panes.room!r}."
        if asked and panes.room and panes.room != asked
        else None
    )
    # The stream sends this room's seats again whenever they change.
    stream_url = reverse("admin:index") + "live/stream"
    if panes.room:
        stream_url += "?" + urlencode({"room": panes.room})
    context = {
        **admin.site.each_context(request),
        "title": "Live",
        "subtitle": "Who is here, and what is said as it is stored",
        "problem": problem,
        "panes": pane_html(panes),
        "selected": panes.room,
        "stream_url": stream_url,
        "entry_url": reverse("admin:bus_entry_change", args=[SOME_ID]),
        "some_id": SOME_ID,
        "types": rules.TYPES,
    }
    return TemplateResponse(request, "admin/live.html", context)


def pane_html(panes: live.Panes) -> dict[str, str]:
    """The rooms pane and the seats pane, drawn: what the page shows first and the stream
    sends again when it differs."""
    context = {
        "rooms": panes.rooms,
        "selected": panes.room,
        "seats": panes.seats,
        "seats_left_out": panes.seats_left_out,
    }
    return {name: render_to_string(template, context) for name, template in PANES.items()}
