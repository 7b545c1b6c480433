"""The history browser: every entry, filtered by bus.admin.filters.EntryFilter (plain GET
parameters, kept by the pagination links), newest first, never counting a huge table
(the paginator counts at most COUNT_CAP rows and the full count is switched off)."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.http import urlencode
from django.utils.safestring import mark_safe

from bus import rules, signing, strict
from bus.admin.base import (
    CappedPaginator,
    ReadOnlyAdmin,
    _names,
    _pre_json,
    masked,
    shown,
    time_tag,
)
from bus.admin.filters import EntryFilter
from bus.models import Entry
from bus.services import search


class EntryChangeList(ChangeList):
    """The admin changelist with EntryFilter applied to the GET parameters.

    The FilterSet's parameters are taken out of what the admin parses as field lookups
    (it would refuse them), and the admin's own ones (`p`, `o`) stay as they are, so
    every pagination and sorting link carries the filters along.

    Any other parameter is no filter of this page. The admin would read it as a field
    lookup and, for a name that is no field (`?ts_from=`), redirect to `?e=1`: the whole
    list, as if the filter had been applied. Instead the page names it with the known
    ones (`unknown_params`, EntryFilter.unknown_parameter_notes) and lists nothing, as for
    a filter value that is not valid.
    """

    unknown_params: list[str] = []

    def get_filters_params(self, params=None):
        lookup = super().get_filters_params(params)
        for name in EntryFilter.base_filters:
            lookup.pop(name, None)
        self.unknown_params = sorted(lookup)
        return {}

    def get_queryset(self, request, exclude_parameters=None):
        queryset = super().get_queryset(request, exclude_parameters)
        self.entry_filter = EntryFilter(request.GET, queryset=queryset)
        self.has_filters = True  # the page has a filter panel (ours)
        self.has_active_filters = bool(self.entry_filter.active or self.unknown_params)
        if self.unknown_params or not self.entry_filter.is_valid():
            return queryset.none()
        return self.entry_filter.qs

    def get_results(self, request):
        """The page's entries; with a text search, each holds its snippet
        (`search_snippet`: text, highlights) for the Content column."""
        super().get_results(request)
        answer = getattr(getattr(self, "entry_filter", None), "search_answer", None)
        if answer is None:
            return
        snippets = {r["id"]: (r["snippet"], r["highlights"]) for r in answer["results"]}
        self.result_list = list(self.result_list)
        for entry in self.result_list:
            entry.search_snippet = snippets.get(str(entry.pk))

    def unknown_parameter_notes(self) -> list[str]:
        return EntryFilter.unknown_parameter_notes(self.unknown_params)


@admin.register(Entry)
class EntryAdmin(ReadOnlyAdmin):
    list_display = (
        "when",
        "room_link",
        "sender_link",
        "type_badge",
        "to_names",
        "preview",
        "policy_verdict",
    )
    list_display_links = ("when",)
    list_select_related = ("room", "request")
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
                    "agent",
                    "type_badge",
                    "to_names",
                    "re_link",
                    "channel",
                )
            },
        ),
        ("Content", {"fields": ("content_block",)}),
        ("Policy", {"fields": ("policy_verdict", "policy_reason")}),
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
        ("Identity", {"fields": ("id", "signature_text"), "classes": ("collapse",)}),
    )
    # The detail page is a view: every field shown is read-only.
    readonly_fields = tuple(name for _, options in fieldsets for name in options["fields"])

    def get_changelist(self, request, **kwargs):
        return EntryChangeList

    def changelist_view(self, request, extra_context=None):
        extra_context = {
            "title": "Entries",
            "quick_ranges": self._quick_ranges(request),
            "ranked_matches": search.RANKED_MATCHES,
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
            extra_context["tampered"] = not signing.verify_entry(entry)
            extra_context["subtitle"] = extra_context["entry_label"] = shown(
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
        sender = shown(entry.sender)
        return format_html(
            '<a class="salon-name" href="{}" title="only entries from {}">{}</a>',
            self._list_url(source=sender),
            sender,
            sender,
        )

    @admin.display(description="Sender agent")
    def agent(self, entry: Entry) -> str:
        return shown(entry.sender_agent)

    @admin.display(description="Via")
    def channel(self, entry: Entry) -> str:
        return shown(entry.via)

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
        badge = ""
        if not signing.verify_entry(entry):
            badge = format_html('<span class="salon-tampered-badge">{}</span> ', "TAMPERED")
        found = getattr(entry, "search_snippet", None)
        if found is not None:
            # The text around the words searched for, each piece escaped (the entry's
            # text is anyone's: markup and control characters are shown, never obeyed).
            text = rules.marked(*found, "<mark>", "</mark>", escape=_escaped)
            return format_html(
                '{}<span class="salon-preview salon-snippet">{}</span>', badge, mark_safe(text)
            )
        text = shown(" ".join(entry.content.split()))
        short = text if len(text) <= 140 else text[:139] + "…"
        return format_html('{}<span class="salon-preview">{}</span>', badge, short)

    @admin.display(description="Policy")
    def policy_verdict(self, entry: Entry) -> str:
        """A request with an ask key: its key, the receiving project's verdict and what
        came of it (served, denied, declined, woken, or being answered)."""
        request = _request_of(entry)
        if request is None:
            return "—"
        outcome = request.outcome or "being answered"
        return format_html(
            '<span class="salon-verdict salon-verdict-{}">{}</span> {} <span '
            'class="salon-quiet">({})</span>',
            request.verdict,
            request.verdict,
            shown(request.ask),
            outcome,
        )

    @admin.display(description="Reason")
    def policy_reason(self, entry: Entry) -> str:
        request = _request_of(entry)
        return shown(request.reason) if request is not None else "—"

    @admin.display(description="In reply to")
    def re_link(self, entry: Entry) -> str:
        if not entry.re:
            return "—"
        url = reverse("admin:bus_entry_change", args=[entry.re])
        return format_html('<a class="salon-name" href="{}">{}</a>', url, entry.re)

    @admin.display(description="Signature")
    def signature_status(self, entry: Entry) -> str:
        verdict = signing.verdict(entry)
        if verdict == signing.VALID:
            return format_html(
                '<span class="salon-signature-ok">{}</span>',
                "✓ valid: every field shown here is as the bus stored it",
            )
        if verdict == signing.OLD:
            return format_html(
                '<span class="salon-signature-ok">{}</span>',
                "✓ valid, under the old signature (version 1): id, room, time, sender, type, "
                "to, re, content and meta are as the bus stored them; seq, sender agent, via, "
                "sender address and sender session are not covered by it",
            )
        return format_html(
            '<strong class="salon-tampered">{}</strong>',
            "✗ TAMPERED: this row was changed outside the bus; its signature does not match",
        )

    @admin.display(description="Content")
    def content_block(self, entry: Entry) -> str:
        return format_html(
            '<div class="salon-content">{}</div><p class="salon-quiet">{} characters</p>',
            shown(entry.content),
            len(entry.content),
        )

    @admin.display(description="Meta (JSON)")
    def meta_json(self, entry: Entry) -> str:
        if not entry.meta:
            return format_html('<span class="salon-quiet">{}</span>', "none")
        return _pre_json(entry.meta)

    @admin.display(description="Sender address (webhook peer)")
    def addr(self, entry: Entry) -> str:
        return shown(entry.sender_addr) or "—"

    @admin.display(description="Sender MCP session")
    def session(self, entry: Entry) -> str:
        if not entry.sender_session:
            return "—"
        # Masked: for a label without a token, an MCP session id is all it takes to act as
        # that session.
        return format_html("<code>{}</code>", masked(entry.sender_session))

    @admin.display(description="Signature")
    def signature_text(self, entry: Entry) -> str:
        return shown(entry.signature)

    @admin.display(description="Delivered to (live streams)")
    def delivered_to_names(self, entry: Entry) -> str:
        return _names(entry.delivered_to)

    @admin.display(description="Delivery errors")
    def delivery_errors_names(self, entry: Entry) -> str:
        if not entry.delivery_errors:
            return _names([])
        return format_html('<span class="salon-tampered">{}</span>', _names(entry.delivery_errors))


def _escaped(text: str) -> str:
    """A piece of an entry's text for a page: control characters written as their escape
    (`\\x1b`), then HTML-escaped."""
    return escape(shown(strict.terminal_safe(text)))


def _request_of(entry: Entry):
    try:
        return entry.request
    except Entry.request.RelatedObjectDoesNotExist:
        return None
