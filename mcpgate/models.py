"""MCP sessions, stored so they survive a daemon restart and work on every worker."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class McpSession(models.Model):
    id = models.CharField(max_length=64, primary_key=True)
    label = models.CharField(max_length=64, blank=True, default="")  # "" = unlabeled
    # Rooms asked for with ?room= at initialize (joined once, when the seat is first bound).
    rooms = models.JSONField(default=list, blank=True)
    protocol_version = models.CharField(max_length=16)
    client_info = models.JSONField(default=dict, blank=True)
    # The seat is bound lazily (first GET or tool call): an orphaned session costs nothing.
    seat = models.ForeignKey(
        "bus.Seat", null=True, blank=True, on_delete=models.SET_NULL, related_name="mcp_sessions"
    )
    claude_session_id = models.CharField(max_length=128, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    last_active_at = models.DateTimeField()
    # Which consumer holds the GET stream now; a newer GET replaces it.
    stream_token = models.CharField(max_length=64, blank=True, default="")
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "MCP session"
        indexes = [
            # the idle sweep: sessions with no activity since a cutoff
            models.Index(
                fields=["last_active_at"],
                name="mcpsession_idle_sweep",
                condition=Q(ended_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.label or '(unlabeled)'} {self.id[:8]}"
