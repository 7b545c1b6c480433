"""MCP sessions over HTTP: creation, lookup, the idle sweep, and the seat binding.

All functions here are synchronous database work; the consumer runs them through
database_sync_to_async. A session binds its seat lazily (first GET or tool call), so
the orphaned sessions Claude Code sometimes opens cost nothing.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import deque
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from bus import rules, services
from bus.compiled import update_by_ids
from bus.models import Seat
from mcpgate import tools
from mcpgate.models import McpSession
from patches.django import CompiledLookup

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


# A session nobody has used — no seat, no Claude Code session, no open stream — is a
# health check, one of the pair Claude Code opens when it recovers, or a flood: it is
# forgotten (deleted: nothing refers to it) after these minutes without a request, and one
# client address may hold at most so many of them (sessions of this process).
UNUSED_SESSION_IDLE = timedelta(minutes=10)
MAX_UNUSED_SESSIONS_PER_ADDRESS = 100
UNUSED = Q(seat__isnull=True, claude_session_id="", stream_token="", ended_at__isnull=True)


class TooManySessions(Exception):
    """This client address holds too many unused sessions; str() says what to do."""


class NewSessions:
    """The sessions this process opened, per client address, while they may be unused.

    Only the database thread touches it (database_sync_to_async runs one at a time)."""

    def __init__(self) -> None:
        self.by_address: dict[str, deque[tuple[float, str]]] = {}

    def check(self, address: str) -> None:
        """Raises TooManySessions when `address` holds the most unused sessions it may."""
        recent = self._recent(address)
        if len(recent) < MAX_UNUSED_SESSIONS_PER_ADDRESS:
            return
        unused = set(
            McpSession.objects.filter(UNUSED, id__in=[i for _, i in recent]).values_list(
                "id", flat=True
            )
        )
        recent = deque(item for item in recent if item[1] in unused)
        self.by_address[address] = recent
        if len(recent) >= MAX_UNUSED_SESSIONS_PER_ADDRESS:
            raise TooManySessions(
                f"{len(recent)} MCP sessions opened from your address are still unused: use "
                "one of them (its Mcp-Session-Id) or wait a few minutes before opening another"
            )

    def add(self, address: str, session_id: str) -> None:
        self._recent(address).append((time.monotonic(), session_id))
        if len(self.by_address) > 1024:  # forget the addresses that went quiet
            for other in list(self.by_address):
                if not self._recent(other):
                    del self.by_address[other]

    def _recent(self, address: str) -> deque[tuple[float, str]]:
        recent = self.by_address.setdefault(address, deque())
        cutoff = time.monotonic() - UNUSED_SESSION_IDLE.total_seconds()
        while recent and recent[0][0] < cutoff:
            recent.popleft()
        return recent


new_sessions = NewSessions()


def create_session(
    *,
    label: str,
    rooms: list[str],
    version: str,
    client_info: dict,
    claude_session: str = "",
    address: str | None = None,
) -> McpSession:
    """A new MCP session; with `claude_session` (the header above, checked as a checkin's
    id is), already bound to that Claude Code session. `address`: the client's, for the
    cap on unused sessions (TooManySessions)."""
    sweep_idle()
    if address:
        new_sessions.check(address)
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
    if address:
        new_sessions.add(address, session.id)
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


# Every MCP request reads its session this way: compiled once (patches.django).
_OPEN_SESSIONS = CompiledLookup(McpSession, "id", "seat__agent", ended_at__isnull=True)


def mark_sessions_active(session_ids: set[str]) -> None:
    """Open streams are activity: the keep-alive ticker refreshes all of a process's
    sessions at once (so an open stream's session is never swept as idle)."""
    update_by_ids(McpSession, session_ids, last_active_at=timezone.now())


def sweep_idle() -> int:
    """Forget sessions with no stream and no request for AGENT_SALON_SESSION_IDLE, and
    delete unused ones (UNUSED) after UNUSED_SESSION_IDLE.

    The keep-alive ticker refreshes last_active_at of every open stream's session every
    15 s (mcpgate.delivery), so a session with an open stream is never swept.
    """
    at = timezone.now()
    McpSession.objects.filter(UNUSED, last_active_at__lt=at - UNUSED_SESSION_IDLE).delete()
    cutoff = at - settings.SESSION_IDLE
    return McpSession.objects.filter(ended_at__isnull=True, last_active_at__lt=cutoff).update(
        ended_at=at
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


# A stream's keep-alive refreshes its session's last_active_at every 15 s
# (mcpgate.delivery): a stream token older than this was left by a daemon that stopped.
HELD_STREAM_FRESH = timedelta(seconds=45)


def refuse_foreign_claim(session: McpSession, claude_session_id: str) -> None:
    """checkin may not take a seat another session holds. Knowing a Claude Code session id
    is not enough (the id was once shown in `agents`): the first binding wins while it is
    live. Refused: an id that is an MCP session's own id (that session's credential,
    never a Claude Code session id); one another MCP session of this label bound and
    holds an open stream on; one a live session of another label checked in with. Claude
    Code coming back on a new MCP session finds its old stream closed (a dropped
    connection ends it; a restarted daemon forgets every stream, forget_streams)."""
    if McpSession.objects.filter(pk=claude_session_id).exclude(pk=session.pk).exists():
        raise rules.RuleError(
            "that is the id of an MCP session, not a Claude Code session id: check in with "
            "your Claude Code session id (${session_id} in an mcp_tool hook)"
        )
    at = timezone.now()
    holders = (
        McpSession.objects.filter(claude_session_id=claude_session_id, ended_at__isnull=True)
        .exclude(pk=session.pk)
        .select_related("seat__agent")
    )
    for other in holders:
        streaming = bool(other.stream_token) and at - other.last_active_at < HELD_STREAM_FRESH
        if other.label == session.label and streaming:
            raise rules.RuleError(
                "that Claude Code session id is checked in by another MCP session whose "
                "stream is open: check in with your own session id (${session_id} in an "
                "mcp_tool hook)"
            )
        if other.label != session.label and (
            other.stream_token or (other.seat and other.seat.liveness(at) == rules.LIVE)
        ):
            raise rules.RuleError(
                f"that Claude Code session id is checked in by a live session of another label "
                f"({other.label or 'unlabeled'}): check in with your own session id"
            )


def forget_streams() -> int:
    """A daemon starting holds no stream yet: tokens left by the one before it (killed, so
    its streams never released them) would otherwise refuse a reconnecting Claude Code's
    checkin until they went stale."""
    return McpSession.objects.exclude(stream_token="").update(stream_token="")


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
