"""/admin/stats/: the numbers of `salon stats` for a chosen window, with charts."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.http import urlencode

from bus import rules, stats
from bus.admin import charts
from bus.admin.base import VIEW_PERMISSION
from bus.models import Room

STATS_WINDOWS = (("6h", "6 hours"), ("24h", "24 hours"), ("7d", "7 days"), ("30d", "30 days"))
STATS_SEAT_ROWS = 100
STATS_LONGEST = timedelta(days=400)


def stats_view(request):
    """The numbers of `salon stats` for a chosen window, with inline-SVG charts drawn on
    the server (no script, no CDN: the page works offline). Staff only (admin_view), and
    only those who may view entries."""
    if not request.user.has_perm(VIEW_PERMISSION):
        raise PermissionDenied("viewing the stats needs the permission to view entries")
    since = request.GET.get("since") or stats.DEFAULT_SINCE
    room = request.GET.get("room") or ""
    problem = None
    try:
        if stats.parse_since(since) > STATS_LONGEST:
            raise rules.RuleError(
                f"a window of at most {STATS_LONGEST.days} days, please (the charts have a "
                "bar per day)"
            )
        if room:
            rules.validate_name(room, "room")
    except rules.RuleError as exc:
        problem, since, room = str(exc), stats.DEFAULT_SINCE, ""
    at = timezone.now()
    rooms = [room] if room else []
    try:
        document = stats.report(rooms=rooms, since=since, seats=True, at=at)
    except rules.RuleError as exc:  # a room that does not exist
        problem, room, rooms = str(exc), "", []
        document = stats.report(since=since, seats=True, at=at)
    context = {
        **admin.site.each_context(request),
        "title": "Stats",
        "subtitle": "What the bus cost, and whether anyone was there to be woken",
        "problem": problem,
        "since": since,
        "room": room,
        "windows": [
            (value, label, "?" + urlencode({"since": value, **({"room": room} if room else {})}))
            for value, label in STATS_WINDOWS
        ],
        "room_choices": list(Room.objects.order_by("name").values_list("name", flat=True)),
        "doc": document,
        "numbers": document["totals"],
        "seat_rows": sorted(
            ({"room": r["room"], **seat} for r in document["rooms"] for seat in r["seats"]),
            key=lambda s: (
                -s["wakeUps"]["reachedNoSession"],
                -s["wakeUps"]["decided"],
                s["seat"],
                s["room"],
            ),
        )[:STATS_SEAT_ROWS],
    }
    if not document["ledger"]["empty"]:
        line = stats.timeline(rooms=rooms, since=since, at=at)
        step, buckets = line["step"], line["buckets"]
        per = "hour" if step.total_seconds() <= 3600 else "day"
        numbers = document["totals"]
        wake = numbers["wakeUps"]
        context.update(
            per=per,
            entries_chart=charts.stacked_bars(line["entries"], buckets, step),
            wakes_chart=charts.stacked_bars(line["wakeUps"], buckets, step),
            no_session_chart=charts.stacked_bars(
                {"reached no session": line["reachedNoSession"]},
                buckets,
                step,
                color=charts.ALARM_COLOR,
            ),
            kinds_chart=charts.hbars(
                (kind, n, charts.PALETTE[i % len(charts.PALETTE)])
                for i, (kind, n) in enumerate(numbers["decisions"]["byKind"].items())
            ),
            reasons_chart=charts.hbars(
                (
                    reason.replace("_", " "),
                    n,
                    charts.KIND_COLORS.get(stats.KIND_OF_REASON.get(reason, "rule")),
                )
                for reason, n in numbers["decisions"]["byReason"].items()
            ),
            outcome_chart=charts.hbars(
                [
                    ("decided", wake["decided"], charts.PALETTE[0]),
                    ("told (any way)", wake["told"], charts.PALETTE[3]),
                    ("announced", wake["announced"], charts.PALETTE[3]),
                    ("turns held", wake["turnsHeld"], charts.PALETTE[3]),
                    ("at session start", wake["toldAtStart"], charts.PALETTE[3]),
                    ("by reading", wake["toldByReading"], charts.PALETTE[3]),
                    ("pushed (a hint)", wake["pushed"], charts.PALETTE[4]),
                    ("not told", wake["notTold"], charts.OTHER_COLOR),
                    ("reached no session", wake["reachedNoSession"], charts.ALARM_COLOR),
                ]
            ),
        )
    return TemplateResponse(request, "admin/stats.html", context)
