"""The MCP sessions, read-only, on the staff's pages."""

from __future__ import annotations

from django.contrib import admin

from bus.admin.base import TitledAdmin, masked, time_tag
from mcpgate.models import McpSession


@admin.register(McpSession)
class McpSessionAdmin(TitledAdmin):
    """Session ids are masked everywhere here: for a label without a token, the whole MCP
    session id is all it takes to act as that session (and a Claude Code session id, to
    check in as its seat). So there is only the list — every other page of a session is
    keyed by its id in the URL — with everything worth knowing in its columns, and the
    search matches labels and seats only (a search by id would reveal it character by
    character)."""

    list_display = (
        "session",
        "label",
        "seat",
        "claude_session",
        "rooms",
        "client",
        "protocol_version",
        "created",
        "active",
        "stream",
        "ended",
    )
    list_display_links = None
    list_select_related = ("seat",)
    search_fields = ("label", "seat__name")

    def get_urls(self):
        return [url for url in super().get_urls() if url.name == self._changelist_name()]

    def _changelist_name(self) -> str:
        return f"{self.opts.app_label}_{self.opts.model_name}_changelist"

    @admin.display(description="Session")
    def session(self, session: McpSession) -> str:
        return masked(session.id)

    @admin.display(description="Claude Code session")
    def claude_session(self, session: McpSession) -> str:
        return masked(session.claude_session_id) if session.claude_session_id else "—"

    @admin.display(description="Client")
    def client(self, session: McpSession) -> str:
        info = session.client_info if isinstance(session.client_info, dict) else {}
        return " ".join(str(info.get(key, ""))[:40] for key in ("name", "version")).strip() or "—"

    @admin.display(description="Stream")
    def stream(self, session: McpSession) -> str:
        return "open" if session.stream_token else "—"

    @admin.display(description="Last active", ordering="last_active_at")
    def active(self, session: McpSession) -> str:
        return time_tag(session.last_active_at)

    @admin.display(description="Created", ordering="created_at")
    def created(self, session: McpSession) -> str:
        return time_tag(session.created_at)

    @admin.display(description="Ended", ordering="ended_at")
    def ended(self, session: McpSession) -> str:
        return time_tag(session.ended_at) if session.ended_at else "—"
