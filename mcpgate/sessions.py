"""MCP sessions over HTTP: creation, lookup, the idle sweep, and the seat binding.

All functions here are synchronous database work; the consumer runs them through
database_sync_to_async. A session binds its seat lazily (first GET or tool call), so
the orphaned sessions Claude Code sometimes opens cost nothing.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from bus import rules, services
from bus.compiled import CompiledLookup, update_by_ids
from bus.models import Seat
from mcpgate import tools
from mcpgate.models import McpSession

# A request refreshes last_active_at at most this often (one write per minute, not per call).
ACTIVITY_GRANULARITY = timedelta(seconds=60)


def validate_rooms(names: list[str]) -> list[str]:
    """?room=a,b at initialize: every room must exist (a typo must not go unheard)."""
    rooms = [rules.validate_name(n, "room") for n in names]
    for name in rooms:
        services.rooms.get_room(name)
    return rooms


# Claude Code's headersHelper (`salon hook mcp-headers`) names its session in this header,
# so a new MCP session acts as that session's seat from its first request on: after a
# daemon restart or a dropped connection Claude Code initializes again, and the next
# prompt's checkin is minutes away.
CLAUDE_SESSION_HEADER = "x-salon-claude-session"


def create_session(
    *, label: str, rooms: list[str], version: str, client_info: dict, claude_session: str = ""
) -> McpSession:
    """A new MCP session; with `claude_session` (the header above, checked as a checkin's
    id is), already bound to that Claude Code session."""
    sweep_idle()
    session = McpSession(
        id=secrets.token_hex(16),
        label=label,
        rooms=rooms,
        protocol_version=version,
        client_info=_client_info(client_info),
        last_active_at=timezone.now(),
    )
    if claude_session and label:
        session.claude_session_id = rules.validate_claimed_session(claude_session)
        refuse_foreign_claim(session, session.claude_session_id)
    session.save(force_insert=True)
    return session


# What is kept of initialize's clientInfo: a name and a version, for the staff pages. The
# rest is the client's business, and a session row is no place for megabytes of it.
CLIENT_INFO_KEYS = ("name", "version")
CLIENT_INFO_CHARS = 100


def _client_info(info: object) -> dict[str, str]:
    if not isinstance(info, dict):
        return {}
    # NUL: PostgreSQL's jsonb refuses it.
    return {
        key: info[key].replace("\x00", "")[:CLIENT_INFO_CHARS]
        for key in CLIENT_INFO_KEYS
        if isinstance(info.get(key), str)
    }


def load_session(session_id: str) -> McpSession | None:
    """The open session of this id, with its seat and the seat's agent (every MCP
    request reads it)."""
    if not session_id or len(session_id) > 64:
        return None
    found = _OPEN_SESSIONS.fetch([session_id])
    if not found:
        return None
    session = found[0]
    at = timezone.now()
    if at - session.last_active_at > ACTIVITY_GRANULARITY:
        McpSession.objects.filter(pk=session.pk).update(last_active_at=at)
        session.last_active_at = at
    return session


# Every MCP request reads its session this way: compiled once (bus.compiled).
_OPEN_SESSIONS = CompiledLookup(McpSession, "id", "seat__agent", ended_at__isnull=True)


def mark_sessions_active(session_ids: set[str]) -> None:
    """Open streams are activity: the keep-alive ticker refreshes all of a process's
    sessions at once (so an open stream's session is never swept as idle)."""
    update_by_ids(McpSession, session_ids, last_active_at=timezone.now())


def sweep_idle() -> int:
    """Forget sessions with no stream and no request for AGENT_SALON_SESSION_IDLE.

    The keep-alive ticker refreshes last_active_at of every open stream's session every
    15 s (mcpgate.delivery), so a session with an open stream is never swept.
    """
    cutoff = timezone.now() - settings.SESSION_IDLE
    return McpSession.objects.filter(ended_at__isnull=True, last_active_at__lt=cutoff).update(
        ended_at=timezone.now()
    )


def end_session(session: McpSession) -> None:
    """DELETE: the session ends, and its seat is gone unless another session's stream
    holds it."""
    McpSession.objects.filter(pk=session.pk).update(ended_at=timezone.now(), stream_token="")
    if session.seat_id is None:
        return
    held = (
        McpSession.objects.filter(seat_id=session.seat_id, ended_at__isnull=True)
        .exclude(pk=session.pk)
        .exclude(stream_token="")
        .exists()
    )
    if not held:
        services.seats.sign_off(seat=session.seat)


def claim_stream(session: McpSession) -> str:
    token = secrets.token_hex(8)
    McpSession.objects.filter(pk=session.pk).update(
        stream_token=token, last_active_at=timezone.now()
    )
    return token


def release_stream(session: McpSession, token: str) -> bool:
    return bool(
        McpSession.objects.filter(pk=session.pk, stream_token=token).update(stream_token="")
    )


class HttpBinding:
    """The tools' view of an HTTP session: label → agent, seat = label#<session>."""

    takes_checkin = True

    def __init__(self, session: McpSession, base_url: str):
        self.session = session
        self.label = session.label
        self.session_id = session.id
        self.base_url = base_url

    def seat(self, *, joining: str | None = None) -> Seat:
        if self.session.seat_id is None:
            self.session = bind_seat(self.session, joining=joining)
        return self.session.seat

    def checkin(self, session_id: str, cwd: str | None) -> Seat:
        self.session = rebind(self.session, claude_session_id=session_id)
        return self.session.seat

    def status(self) -> dict:
        return tools.salon_status(
            seat=self.seat() if self.label else None,
            label=self.label,
            protocol_version=self.session.protocol_version,
            base_url=self.base_url,
        )


def seat_session_id(session: McpSession) -> str:
    """What the seat of a session that has not checked in is keyed by: the first 8
    characters of the MCP session id (its seat is `label#<those 8>`, docs/MCP.md), then a
    digest of the whole id. Never the id itself: it is the session's credential, and a
    seat's session id shows in `agents` and on the staff pages."""
    return session.id[:8] + hashlib.sha256(session.id.encode()).hexdigest()[:24]


def existing_seat(session: McpSession) -> Seat | None:
    """The session's seat if it has one, or if a hook or an earlier session of the same
    Claude Code session made it (then bound to this session); makes none."""
    if session.seat_id is not None:
        return session.seat
    if not session.claude_session_id:
        return None
    seat = services.seats.find_seat(agent=session.label, session_id=session.claude_session_id)
    if seat is not None:
        McpSession.objects.filter(pk=session.pk).update(seat=seat)
        session.seat = seat
    return seat


def bind_seat(session: McpSession, *, joining: str | None = None) -> McpSession:
    """Give a labeled session its seat: label#<first 8 of the Claude session id, else of
    the MCP session id> (seat_session_id)."""
    seat = services.seats.check_in(
        agent=session.label,
        session_id=session.claude_session_id or seat_session_id(session),
        default_rooms=session.rooms,
        join_defaults=True,
        joining=joining,
    )
    McpSession.objects.filter(pk=session.pk).update(seat=seat)
    session.seat = seat
    return session


def refuse_foreign_claim(session: McpSession, claude_session_id: str) -> None:
    """checkin may not take a seat another session holds: an id that is an MCP
    session's own id (the credential of that session, never a Claude Code session id), or
    one a live session of another label checked in with. The same label may: that is
    Claude Code coming back on a new MCP session."""
    if McpSession.objects.filter(pk=claude_session_id).exclude(pk=session.pk).exists():
        raise rules.RuleError(
            "that is the id of an MCP session, not a Claude Code session id: check in with "
            "your Claude Code session id (${session_id} in an mcp_tool hook)"
        )
    at = timezone.now()
    holders = (
        McpSession.objects.filter(claude_session_id=claude_session_id, ended_at__isnull=True)
        .exclude(pk=session.pk)
        .exclude(label=session.label)
        .select_related("seat__agent")
    )
    for other in holders:
        if other.stream_token or (other.seat and other.seat.liveness(at) == rules.LIVE):
            raise rules.RuleError(
                f"that Claude Code session id is checked in by a live session of another label "
                f"({other.label or 'unlabeled'}): check in with your own session id"
            )


def rebind(session: McpSession, *, claude_session_id: str) -> McpSession:
    """checkin: move the session onto the seat of its Claude Code session id.

    The seat it leaves was named after the MCP session id; if it never wrote, it is
    dropped (nobody can address a seat nobody knows). The stream, if any, is told to
    follow (session.rebind on the session's group).
    """
    claude_session_id = claude_session_id.strip()
    old = session.seat
    with transaction.atomic():
        refuse_foreign_claim(session, claude_session_id)
        seat = services.seats.check_in(
            agent=session.label,
            session_id=claude_session_id,
            default_rooms=session.rooms,
            join_defaults=True,
        )
        McpSession.objects.filter(pk=session.pk).update(
            seat=seat, claude_session_id=claude_session_id
        )
        shared = McpSession.objects.filter(seat=old).exclude(pk=session.pk)
        if old is not None and old.pk != seat.pk and not shared.exists():
            services.seats.merge_silent_seat(old=old, into=seat)
    session.seat, session.claude_session_id = seat, claude_session_id
    return session
