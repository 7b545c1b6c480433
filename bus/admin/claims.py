"""File claims, read-only: who claims which paths of which repository, and whether each
claim still holds (open; released; run out; its seat gone)."""

from __future__ import annotations

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html

from bus import rules
from bus.admin.base import TitledAdmin, shown, time_tag
from bus.models import FileClaim


@admin.register(FileClaim)
class FileClaimAdmin(TitledAdmin):
    list_display = ("path", "seat", "state", "kind", "note_shown", "since", "until", "repo")
    list_select_related = ("seat__agent",)
    list_filter = ("kind",)
    search_fields = ("path", "seat__name", "repo", "note")
    ordering = ("-created_at",)
    fields = ("path", "seat", "repo", "kind", "note_shown", "state", "since", "until")
    readonly_fields = fields

    @admin.display(description="Holds?")
    def state(self, claim: FileClaim) -> str:
        at = timezone.now()
        if claim.released_at is not None:
            word = "released"
        elif claim.expires_at <= at:
            word = "ran out"
        elif claim.seat.liveness(at) == rules.GONE:
            word = "seat gone"
        else:
            return format_html('<span class="salon-live salon-live-live">{}</span>', "open")
        return format_html('<span class="salon-quiet">{}</span>', word)

    @admin.display(description="Note")
    def note_shown(self, claim: FileClaim) -> str:
        return shown(claim.note) if claim.note else "—"

    @admin.display(description="Since", ordering="created_at")
    def since(self, claim: FileClaim) -> str:
        return time_tag(claim.created_at)

    @admin.display(description="Until", ordering="expires_at")
    def until(self, claim: FileClaim) -> str:
        return time_tag(claim.released_at or claim.expires_at)
