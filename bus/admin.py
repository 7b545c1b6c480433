"""Staff views (SPEC §11): a read-only history browser over entries, and read-only pages
for rooms, seats and MCP sessions.

The entry list is filtered by bus.filters.EntryFilter (plain GET parameters, kept by
the pagination links), newest first, and never counts a huge table: the paginator
counts at most COUNT_CAP rows (a LIMITed subquery) and the full count is switched off.
Nothing here writes: no add, change or delete permission on any bus model.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from datetime import timedelta

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import Paginator
from django.db import OperationalError, connections, transaction
from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode

from bus import rules, services, signing
from bus.filters import EntryFilter
from bus.models import Entry, Room, Seat

admin.site.site_header = "agent-salon"
admin.site.site_title = "agent-salon staff"
admin.site.index_title = "History, rooms and seats"
# The history table needs the width more than a second menu does.
admin.site.enable_nav_sidebar = False

# The list stops counting here: "10,000+ entries" is all a person needs to know.
COUNT_CAP = 10_000
# ... and stops counting after this long: a filter no index serves (text in the content,
# a name in `to`) would otherwise scan the whole table to count its rare matches.
COUNT_BUDGET_SECONDS = 0.1


class BudgetExceeded(Exception):
    pass


@contextmanager
def time_budget(seconds: float, using: str = "default"):
    """Abort the queries run inside after `seconds` (SQLite: a progress handler;
    PostgreSQL: a local statement_timeout), raising BudgetExceeded. Reads only."""
    connection = connections[using]
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        raw = connection.connection
        deadline = time.monotonic() + seconds
        raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
        try:
            yield
        except OperationalError as exc:
            if "interrupted" in str(exc):
                raise BudgetExceeded from None
            raise
        finally:
            raw.set_progress_handler(None, 0)
    elif connection.vendor == "postgresql":
        try:
            with transaction.atomic(using=using):
                with connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL statement_timeout = {max(1, int(seconds * 1000))}")
                yield
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL statement_timeout TO DEFAULT")
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) == "57014":  # query_canceled
                raise BudgetExceeded from None
            raise
    else:
        yield


class CappedPaginator(Paginator):
    """Counts at most COUNT_CAP + 1 rows, for at most COUNT_BUDGET_SECONDS, so a table of
    millions costs a bounded query whatever the filter.

    `capped` tells the template to say "more than COUNT_CAP"; `counted` is False when the
    budget ran out (the page then says so, and offers COUNT_CAP worth of pages). Pages
    past the cap are not reachable by number; narrowing the filters reaches any entry.
    """

    counted = True

    @cached_property
    def count(self) -> int:
        query = self.object_list
        if not hasattr(query, "values"):
            return len(query)
        # ORDER BY is useless inside a count, and LIMIT keeps it bounded.
        bounded = query.order_by().values("pk")[: COUNT_CAP + 1]
        try:
            with time_budget(COUNT_BUDGET_SECONDS, using=query.db):
                return bounded.count()
        except BudgetExceeded:
            self.counted = False
            return COUNT_CAP + 1

    @property
    def capped(self) -> bool:
        return self.count > COUNT_CAP

    @property
    def cap_display(self) -> str:
        return f"{COUNT_CAP:,}"


class ReadOnlyAdmin(admin.ModelAdmin):
    """View permission only: the bus is written by bus.services, never by a form."""

    actions = None

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def time_tag(ts) -> str:
    """A <time> the page's script shows in the browser's local time (UTC on hover)."""
    if ts is None:
        return "—"
    utc = signing.iso_ms(ts)
    return format_html(
        '<time datetime="{}" title="{} UTC">{} UTC</time>',
        utc,
        utc[:-1].replace("T", " "),
        utc[:-1].replace("T", " "),
    )


def _names(values) -> str:
    values = list(values or [])
    if not values:
        return format_html('<span class="salon-quiet">{}</span>', "—")
    return format_html_join(", ", '<code class="salon-name">{}</code>', ((v,) for v in values))


def _pre_json(value) -> str:
    return format_html(
        '<pre class="salon-json">{}</pre>', json.dumps(value, indent=2, ensure_ascii=False)
    )


# ---------------------------------------------------------------- entries


class EntryChangeList(ChangeList):
    """The admin changelist with EntryFilter applied to the GET parameters.

    The FilterSet's parameters are taken out of what the admin parses as field lookups
    (it would refuse them), and the admin's own ones (`p`, `o`) stay as they are, so
    every pagination and sorting link carries the filters along.
    """

    def get_filters_params(self, params=None):
        lookup = super().get_filters_params(params)
        for name in EntryFilter.base_filters:
            lookup.pop(name, None)
        return lookup

    def get_queryset(self, request, exclude_parameters=None):
        queryset = super().get_queryset(request, exclude_parameters)
        self.entry_filter = EntryFilter(request.GET, queryset=queryset)
        self.has_filters = True  # the page has a filter panel (ours)
        self.has_active_filters = bool(self.entry_filter.active)
        if not self.entry_filter.is_valid():
            return queryset.none()
        return self.entry_filter.qs


@admin.register(Entry)
class EntryAdmin(ReadOnlyAdmin):
    list_display = ("when", "room_link", "sender_link", "type_badge", "to_names", "preview")
    list_display_links = ("when",)
    list_select_related = ("room",)
    list_per_page = 50
    list_max_show_all = 200
    show_full_result_count = False
    paginator = CappedPaginator
    ordering = ("-ts", "-id")
    # Whole-table sorting by other columns would defeat the newest-first index.
    sortable_by = ()
    # The search box is the `q` filter of EntryFilter (in the side panel).
    search_fields = ()
    preserve_filters = True
    change_list_template = "admin/bus/entry/change_list.html"
    change_form_template = "admin/bus/entry/change_form.html"

    fieldsets = (
        (
            None,
            {
                "fields": (
                    "signature_status",
                    "when",
                    "room_link",
                    "seq",
                    "sender_link",
                    "sender_agent",
                    "type_badge",
                    "to_names",
                    "re_link",
                    "via",
                )
            },
        ),
        ("Content", {"fields": ("content_block",)}),
        ("Meta", {"fields": ("meta_json",)}),
        (
            "Delivery",
            {
                "fields": (
                    "delivered_to_names",
                    "delivery_errors_names",
                    "addr",
                    "session",
                )
            },
        ),
        ("Identity", {"fields": ("id", "signature"), "classes": ("collapse",)}),
    )
    # The detail page is a view: every field shown is read-only.
    readonly_fields = tuple(name for _, options in fieldsets for name in options["fields"])

    def get_changelist(self, request, **kwargs):
        return EntryChangeList

    def changelist_view(self, request, extra_context=None):
        extra_context = {
            "title": "Entries",
            "quick_ranges": self._quick_ranges(request),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context)

    def _quick_ranges(self, request) -> list[tuple[str, str]]:
        """Links that keep the other filters and set `since` to a recent moment (UTC)."""
        at = timezone.now().replace(microsecond=0)
        ranges = []
        for label, delta in (
            ("last hour", timedelta(hours=1)),
            ("last 24 hours", timedelta(days=1)),
            ("last 7 days", timedelta(days=7)),
            ("last 30 days", timedelta(days=30)),
        ):
            params = request.GET.copy()
            for name in ("p", "until", "since"):
                params.pop(name, None)
            params["since"] = signing.iso_ms(at - delta).replace(".000Z", "Z")
            ranges.append((label, "?" + params.urlencode()))
        return ranges

    def change_view(self, request, object_id, form_url="", extra_context=None):
        entry = self.get_object(request, object_id)
        extra_context = dict(extra_context or {})
        if entry is not None:
            extra_context["tampered"] = not services.verify_entry(entry)
            extra_context["subtitle"] = extra_context["entry_label"] = (
                f"{entry.type} from {entry.sender} in {entry.room.name}, #{entry.seq}"
            )
        return super().change_view(request, object_id, form_url, extra_context)

    # --- columns and fields ---------------------------------------------------------

    def _list_url(self, **params) -> str:
        return reverse("admin:bus_entry_changelist") + "?" + urlencode(params)

    @admin.display(description="When (local time)", ordering="ts")
    def when(self, entry: Entry) -> str:
        return time_tag(entry.ts)

    @admin.display(description="Room")
    def room_link(self, entry: Entry) -> str:
        return format_html(
            '<a href="{}" title="only this room">{}</a>',
            self._list_url(room=entry.room.name),
            entry.room.name,
        )

    @admin.display(description="From")
    def sender_link(self, entry: Entry) -> str:
        return format_html(
            '<a class="salon-name" href="{}" title="only entries from {}">{}</a>',
            self._list_url(source=entry.sender),
            entry.sender,
            entry.sender,
        )

    @admin.display(description="Type")
    def type_badge(self, entry: Entry) -> str:
        return format_html(
            '<span class="salon-type salon-type-{}">{}</span>', entry.type.lower(), entry.type
        )

    @admin.display(description="To")
    def to_names(self, entry: Entry) -> str:
        if not entry.to:
            return format_html('<span class="salon-quiet">{}</span>', "everyone in the room")
        return _names(entry.to)

    @admin.display(description="Content")
    def preview(self, entry: Entry) -> str:
        text = " ".join(entry.content.split())
        short = text if len(text) <= 140 else text[:139] + "…"
        badge = ""
        if not services.verify_entry(entry):
            badge = format_html('<span class="salon-tampered-badge">{}</span> ', "TAMPERED")
        return format_html('{}<span class="salon-preview">{}</span>', badge, short)

    @admin.display(description="In reply to")
    def re_link(self, entry: Entry) -> str:
        if not entry.re:
            return "—"
        url = reverse("admin:bus_entry_change", args=[entry.re])
        return format_html('<a class="salon-name" href="{}">{}</a>', url, entry.re)

    @admin.display(description="Signature")
    def signature_status(self, entry: Entry) -> str:
        if services.verify_entry(entry):
            return format_html(
                '<span class="salon-signature-ok">{}</span>',
                "✓ valid: the row is as the bus stored it",
            )
        return format_html(
            '<strong class="salon-tampered">{}</strong>',
            "✗ TAMPERED: this row was changed outside the bus; its signature does not match",
        )

    @admin.display(description="Content")
    def content_block(self, entry: Entry) -> str:
        return format_html(
            '<div class="salon-content">{}</div><p class="salon-quiet">{} characters</p>',
            entry.content,
            len(entry.content),
        )

    @admin.display(description="Meta (JSON)")
    def meta_json(self, entry: Entry) -> str:
        if not entry.meta:
            return format_html('<span class="salon-quiet">{}</span>', "none")
        return _pre_json(entry.meta)

    @admin.display(description="Sender address (webhook peer)")
    def addr(self, entry: Entry) -> str:
        return entry.sender_addr or "—"

    @admin.display(description="Sender MCP session")
    def session(self, entry: Entry) -> str:
        return format_html("<code>{}</code>", entry.sender_session) if entry.sender_session else "—"

    @admin.display(description="Delivered to (live streams)")
    def delivered_to_names(self, entry: Entry) -> str:
        return _names(entry.delivered_to)

    @admin.display(description="Delivery errors")
    def delivery_errors_names(self, entry: Entry) -> str:
        if not entry.delivery_errors:
            return _names([])
        return format_html('<span class="salon-tampered">{}</span>', _names(entry.delivery_errors))


# ---------------------------------------------------------------- rooms


class TitledAdmin(ReadOnlyAdmin):
    """A list page titled with the plural name, not "Select … to view"."""

    def changelist_view(self, request, extra_context=None):
        title = str(self.model._meta.verbose_name_plural).capitalize()
        return super().changelist_view(request, {"title": title, **(extra_context or {})})


@admin.register(Room)
class RoomAdmin(TitledAdmin):
    list_display = ("name", "entries", "seats", "created", "archived", "history")
    search_fields = ("name",)
    fields = ("name", "last_seq", "created_at", "archived_at")
    readonly_fields = fields

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(seat_count=Count("memberships", filter=Q(memberships__left_at__isnull=True)))
        )

    @admin.display(description="Entries", ordering="last_seq")
    def entries(self, room: Room) -> int:
        return room.last_seq

    @admin.display(description="Seats in it", ordering="seat_count")
    def seats(self, room: Room) -> int:
        return room.seat_count

    @admin.display(description="Created", ordering="created_at")
    def created(self, room: Room) -> str:
        return time_tag(room.created_at)

    @admin.display(description="Archived", ordering="archived_at")
    def archived(self, room: Room) -> str:
        return time_tag(room.archived_at) if room.archived_at else "—"

    @admin.display(description="History")
    def history(self, room: Room) -> str:
        url = reverse("admin:bus_entry_changelist") + "?" + urlencode({"room": room.name})
        return format_html('<a href="{}">entries →</a>', url)


# ---------------------------------------------------------------- seats


@admin.register(Seat)
class SeatAdmin(TitledAdmin):
    list_display = (
        "name",
        "agent",
        "liveness",
        "seen",
        "wrote",
        "quiet_state",
        "focus",
        "rooms",
    )
    list_select_related = ("agent",)
    search_fields = ("name", "agent__name", "focus_text")
    fields = (
        "name",
        "agent",
        "session_id",
        "host",
        "remote",
        "liveness",
        "last_seen",
        "live_until",
        "last_wrote",
        "quiet_state",
        "focus",
        "focus_files",
        "rooms",
        "created_at",
    )
    readonly_fields = fields

    @admin.display(description="Liveness")
    def liveness(self, seat: Seat) -> str:
        word = services.seat_liveness(seat)
        return format_html('<span class="salon-live salon-live-{}">{}</span>', word, word)

    @admin.display(description="Last seen", ordering="last_seen")
    def seen(self, seat: Seat) -> str:
        return time_tag(seat.last_seen)

    @admin.display(description="Last wrote", ordering="last_wrote")
    def wrote(self, seat: Seat) -> str:
        return time_tag(seat.last_wrote)

    @admin.display(description="Quiet")
    def quiet_state(self, seat: Seat) -> str:
        if not rules.quiet_active(seat.quiet, seat.quiet_until, timezone.now()):
            return "—"
        if seat.quiet_until is None:
            return format_html('<strong class="salon-tampered">{}</strong>', "quiet, no expiry")
        return format_html("quiet until {}", time_tag(seat.quiet_until))

    @admin.display(description="Focus")
    def focus(self, seat: Seat) -> str:
        if not seat.focus_text:
            return "—"
        phase = f" [{seat.focus_phase}]" if seat.focus_phase else ""
        stale = rules.focus_is_stale(seat.focus_ts, timezone.now())
        return format_html(
            '<span class="{}">{}{}</span>{}',
            "salon-quiet" if stale else "",
            seat.focus_text,
            phase,
            " (stale)" if stale else "",
        )

    @admin.display(description="Rooms")
    def rooms(self, seat: Seat) -> str:
        return ", ".join(services.seat_rooms(seat)) or "—"


# ---------------------------------------------------------------- MCP sessions


def _register_mcp_sessions() -> None:
    """McpSession lives in mcpgate; register a read-only page only if the model exists."""
    try:
        from mcpgate.models import McpSession
    except ImportError:
        return
    if admin.site.is_registered(McpSession):
        return
    names = [f.name for f in McpSession._meta.concrete_fields]
    preferred = [
        n
        for n in ("id", "label", "seat", "protocol_version", "last_active_at", "ended_at")
        if n in names
    ]

    class McpSessionAdmin(TitledAdmin):
        list_display = preferred if len(preferred) >= 3 else names[:8]
        list_select_related = True
        readonly_fields = names
        search_fields = [
            f.name
            for f in McpSession._meta.concrete_fields
            if f.get_internal_type() in ("CharField", "TextField")
        ][:4]

    admin.site.register(McpSession, McpSessionAdmin)


_register_mcp_sessions()


# ---------------------------------------------------------------- stats (/admin/stats/)

STATS_WINDOWS = (("6h", "6 hours"), ("24h", "24 hours"), ("7d", "7 days"), ("30d", "30 days"))
STATS_SEAT_ROWS = 100
STATS_LONGEST = timedelta(days=400)


def stats_view(request):
    """The numbers of `salon stats` for a chosen window, with inline-SVG charts drawn on
    the server (no script, no CDN: the page works offline). Staff only (admin_view)."""
    from django.template.response import TemplateResponse

    from bus import stats

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
            entries_chart=stats.stacked_bars(line["entries"], buckets, step),
            wakes_chart=stats.stacked_bars(line["wakeUps"], buckets, step),
            no_session_chart=stats.stacked_bars(
                {"reached no session": line["reachedNoSession"]},
                buckets,
                step,
                color=stats.ALARM_COLOR,
            ),
            kinds_chart=stats.hbars(
                (kind, n, stats.PALETTE[i % len(stats.PALETTE)])
                for i, (kind, n) in enumerate(numbers["decisions"]["byKind"].items())
            ),
            reasons_chart=stats.hbars(
                (
                    reason.replace("_", " "),
                    n,
                    stats.KIND_COLORS.get(stats.KIND_OF_REASON.get(reason, "rule")),
                )
                for reason, n in numbers["decisions"]["byReason"].items()
            ),
            outcome_chart=stats.hbars(
                [
                    ("decided", wake["decided"], stats.PALETTE[0]),
                    ("pushed", wake["pushed"], stats.PALETTE[3]),
                    ("announced", wake["announced"], stats.PALETTE[3]),
                    ("turns held", wake["turnsHeld"], stats.PALETTE[3]),
                    ("told (any way)", wake["told"], stats.PALETTE[3]),
                    ("not told", wake["notTold"], stats.OTHER_COLOR),
                    ("reached no session", wake["reachedNoSession"], stats.ALARM_COLOR),
                ]
            ),
        )
    return TemplateResponse(request, "admin/stats.html", context)


def _with_stats_url(get_urls):
    def urls():
        from django.urls import path

        return [path("stats/", admin.site.admin_view(stats_view), name="salon_stats"), *get_urls()]

    urls.salon_stats = True
    return urls


if not getattr(admin.site.get_urls, "salon_stats", False):
    admin.site.get_urls = _with_stats_url(admin.site.get_urls)
# The admin index links to the stats page (a box above the app list).
admin.site.index_template = "admin/stats_index.html"
