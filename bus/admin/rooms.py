"""The rooms and the seats, read-only."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode

from bus import rules, services
from bus.admin.base import TitledAdmin, masked, time_tag
from bus.models import Room, Seat, current_membership


@admin.register(Room)
class RoomAdmin(TitledAdmin):
    list_display = ("name", "entries", "seats", "created", "archived", "history")
    search_fields = ("name",)
    fields = ("name", "last_seq", "created", "archived")
    readonly_fields = fields

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(seat_count=Count("memberships", filter=current_membership("memberships__")))
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
        "session",
        "host",
        "remote",
        "liveness",
        "seen",
        "live_until_shown",
        "wrote",
        "quiet_state",
        "focus",
        "focus_files",
        "rooms",
        "created",
    )
    readonly_fields = fields

    @admin.display(description="Session")
    def session(self, seat: Seat) -> str:
        # Masked like every session id on these pages (mcpgate.admin says why).
        return masked(seat.session_id) if seat.session_id else "—"

    @admin.display(description="Liveness")
    def liveness(self, seat: Seat) -> str:
        word = seat.liveness(timezone.now())
        return format_html('<span class="salon-live salon-live-{}">{}</span>', word, word)

    @admin.display(description="Last seen", ordering="last_seen")
    def seen(self, seat: Seat) -> str:
        return time_tag(seat.last_seen)

    @admin.display(description="Last wrote", ordering="last_wrote")
    def wrote(self, seat: Seat) -> str:
        return time_tag(seat.last_wrote)

    @admin.display(description="Live until (an open stream or server)")
    def live_until_shown(self, seat: Seat) -> str:
        return time_tag(seat.live_until)

    @admin.display(description="Created")
    def created(self, seat: Seat) -> str:
        return time_tag(seat.created_at)

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
        return ", ".join(services.rooms.seat_rooms(seat)) or "—"
