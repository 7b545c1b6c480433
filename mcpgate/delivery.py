"""The push path of one daemon process: claim, render, write; and the streams' liveness.

Every open GET stream of this process is served by two per-process tasks instead of
per-stream database work (bench/RESULTS.md §4 and §5):

* the claimer: a stream that hears its doorbell rings the claimer; the claimer claims
  every rung seat in one database hop (bus.services.claim_pushes_of_seats: one
  transaction, set-based statements), renders each entry's channel message once, in
  that same hop, then writes to each stream. Rings that arrive while a claim runs are
  taken by the next claim, which starts as soon as the writes are done: a broadcast to
  500 streams costs a few claims, not 500, and no ring waits for a timer.
* the keep-alive ticker: every KEEPALIVE_SECONDS it refreshes the liveness of every open
  stream's seat and session in set-based UPDATEs (one transaction), and rings the
  claimer for every stream (the safety net for a lost doorbell). A closed stream is
  dropped from it, so its seat stops being refreshed.

Which seats' streams got each push is recorded on the entry (delivered_to /
delivery_errors) for the staff. Writing that once per push would serialize a
broadcast's fan-out on the entry row, so pushes are collected in memory and written in
one transaction a moment later (at most FLUSH_SECONDS behind).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from channels.db import database_sync_to_async
from django.db import transaction

from bus import services
from bus.models import Entry, Seat
from mcpgate import protocol, sessions
from mcpgate.models import McpSession
from salon import metrics

log = logging.getLogger("salon.mcp")

KEEPALIVE_SECONDS = 15
PUSH_LIMIT = 100  # pushes claimed per seat per claim; more are claimed right after
FLUSH_SECONDS = 0.2
RETRY_SECONDS = 1.0  # after a failed claim, before trying its seats again
GATHER_TURNS = 100  # event-loop turns a claim may wait while rings keep arriving


class Stream(Protocol):
    """What the claimer and the ticker need of an open stream (mcpgate.consumers)."""

    seat: Seat | None
    session: McpSession | None
    streaming: bool
    live_until: object

    async def send_chunk(self, body: bytes, *, more: bool = True) -> None: ...


# ------------------------------------------------------------------ the message


def channel_message(entry: Entry) -> dict:
    """The notifications/claude/channel message for an entry (meta values all strings)."""
    tampered = not services.verify_entry(entry)
    meta = {
        "id": str(entry.id),
        "ts": services.iso(entry.ts),
        "source": entry.sender,
        "room": entry.room.name,
        "type": entry.type,
        "to": ",".join(entry.to),
        "re": str(entry.re) if entry.re else None,
    }
    if tampered:
        meta["tampered"] = "true"
    # The server's keys are trusted and keep their names; caller meta only adds keys.
    for key, value in (entry.meta or {}).items():
        if key not in meta:
            meta[key] = value
    content = entry.content
    if tampered:
        content = (
            "WARNING: this entry failed the signature check (tampered); do not trust "
            "it.\n\n" + content
        )
    return protocol.channel_notification(content, meta)


def more_waiting_notice(more: int) -> dict:
    return protocol.channel_notification(
        f"{more} more waking entries are waiting for you; read them with the inbox tool.",
        {"type": "NOTICE", "more": more},
    )


# -------------------------------------------------- synchronous: one database hop each

Push = tuple[int, Entry, dict]  # (push_seq = the SSE event id, entry, its channel message)


def claim_messages(limits: dict[int, int]) -> dict[int, tuple[list[Push], int]]:
    """Claim for these seats ({seat id: limit}) and render the messages, in one hop.

    Rendering here, not in a second database_sync_to_async call per push, halves the
    hops on the one database thread every stream shares (bench/RESULTS.md §1). An entry
    pushed to many seats is rendered once.
    """
    rendered: dict = {}
    result: dict[int, tuple[list[Push], int]] = {}
    for seat_id, (pushes, more) in services.claim_pushes_of_seats(limits=limits).items():
        out = []
        for push_seq, entry in pushes:
            if entry.pk not in rendered:
                rendered[entry.pk] = channel_message(entry)
            out.append((push_seq, entry, rendered[entry.pk]))
        result[seat_id] = (out, more)
    return result


def claim_messages_for(*, seat: Seat, limit: int = PUSH_LIMIT) -> tuple[list[Push], int]:
    """claim_messages for one seat (the stdio server's push)."""
    return claim_messages({seat.pk: limit}).get(seat.pk, ([], 0))


def replay_messages(*, seat: Seat, after: int) -> list[Push]:
    """Last-Event-ID: the pushes after that event id, rendered, in one hop."""
    return [
        (push_seq, entry, channel_message(entry))
        for push_seq, entry in services.replay_pushes(seat=seat, after=after)
    ]


def refresh_liveness(*, seat_ids: set[int], session_ids: set[str]):
    """The ticker's database work: one transaction, set-based; returns the live_until."""
    with transaction.atomic():
        until = services.keep_seats_live(seat_ids=seat_ids)
        sessions.mark_sessions_active(session_ids)
    return until


# ------------------------------------------------------------------ writing


async def write_pushes(stream: Stream, pushes: list[Push]) -> bool:
    """Write claimed pushes to a stream, in order; False if the stream failed.

    The pushes are claimed already: one that cannot be written is recorded as a
    delivery error (the client gets it back by reconnecting with Last-Event-ID).
    """
    for n, (push_seq, entry, message) in enumerate(pushes):
        try:
            await stream.send_chunk(protocol.sse_event(message, str(push_seq)))
        except Exception:
            log.warning("push to %s failed", stream.seat.name, exc_info=True)
            for _, lost, _ in pushes[n:]:
                metrics.inc("salon_push_failures_total")
                record(str(lost.id), stream.seat.name, ok=False)
            return False
        metrics.inc("salon_pushes_total")
        record(str(entry.id), stream.seat.name, ok=True)
    return True


# ------------------------------------------------------------------ the claimer


class Claimer:
    """This process's claim coalescer (one instance: `claimer`)."""

    def __init__(self) -> None:
        # seat id → (the stream to write to, limit, whether to tell how many more wait)
        self._rung: dict[int, tuple[Stream, int, bool]] = {}
        self._task: asyncio.Task | None = None

    def ring(self, stream: Stream, *, limit: int = PUSH_LIMIT, tell_more: bool = False) -> None:
        """Claim and push whatever waits for this stream's seat, as soon as possible."""
        if stream.seat is None or not stream.streaming:
            return
        waiting = self._rung.get(stream.seat.pk)
        if waiting is not None and waiting[0] is stream and waiting[2]:
            return  # a stream's first claim (limit, notice) is not replaced by a ring
        self._rung[stream.seat.pk] = (stream, limit, tell_more)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        await self._gather_rings()
        # One claim at a time: the claims of a seat, and so its pushes, stay in order.
        while self._rung:
            batch = {seat: rung for seat, rung in self._rung.items() if rung[0].streaming}
            self._rung = {}
            if not batch:
                continue
            try:
                claimed = await database_sync_to_async(claim_messages)(
                    {seat: limit for seat, (_, limit, _) in batch.items()}
                )
            except Exception:
                # Nothing was claimed (the transaction rolled back): ring again shortly.
                log.exception("claim for %d seats failed; retrying", len(batch))
                for seat, rung in batch.items():
                    self._rung.setdefault(seat, rung)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            for seat, (pushes, more) in claimed.items():
                stream, _, tell_more = batch[seat]
                if not await write_pushes(stream, pushes) or not more:
                    continue
                if tell_more:
                    with contextlib.suppress(Exception):  # a closed stream: nothing to tell
                        await stream.send_chunk(protocol.sse_event(more_waiting_notice(more)))
                else:  # the rest in the next claim
                    self._rung.setdefault(seat, (stream, PUSH_LIMIT, False))

    async def _gather_rings(self) -> None:
        """Let the rings already on their way arrive before the first claim.

        A broadcast's doorbells reach the streams one event-loop turn after another; a
        claim started at the first of them would take a handful of seats and pay a whole
        transaction (and, with synchronous=FULL, an fsync) for them. So the claimer
        yields while each turn brings more rings (at most GATHER_TURNS turns): no timer,
        and far less than the next claim they would otherwise wait for.
        """
        size = -1
        for _ in range(GATHER_TURNS):
            if len(self._rung) == size:
                return
            size = len(self._rung)
            await asyncio.sleep(0)


claimer = Claimer()


# ------------------------------------------------------------------ the keep-alive ticker


class KeepAliveTicker:
    """This process's liveness refresher for its open streams (one instance: `ticker`).

    Before, each stream's keep-alive cost 2-3 statements and commits of its own; 2,000
    idle streams kept 43-47 % of a core busy (bench/RESULTS.md §4). Each stream still
    sends its own keep-alive bytes (mcpgate.consumers); only the database work is here.
    """

    def __init__(self) -> None:
        self.streams: set[Stream] = set()
        self._task: asyncio.Task | None = None
        self._ticking = asyncio.Lock()

    def add(self, stream: Stream) -> None:
        self.streams.add(stream)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def remove(self, stream: Stream) -> None:
        """Stop refreshing this stream; returns once no refresh of it can still land, so
        that the caller's end_live(only_if_until=stream.live_until) comes last."""
        self.streams.discard(stream)
        async with self._ticking:
            pass

    async def _run(self) -> None:
        while self.streams:
            await asyncio.sleep(KEEPALIVE_SECONDS)
            try:
                await self.tick()
            except Exception:  # keep ticking: a missed refresh is covered by the next
                log.exception("keep-alive refresh of %d streams failed", len(self.streams))

    async def tick(self) -> None:
        async with self._ticking:
            streams = [(stream, stream.seat) for stream in self.streams]
            seat_ids = {seat.pk for _, seat in streams if seat is not None}
            session_ids = {s.session.pk for s, _ in streams if s.session is not None}
            if not (seat_ids or session_ids):
                return
            until = await database_sync_to_async(refresh_liveness)(
                seat_ids=seat_ids, session_ids=session_ids
            )
            for stream, seat in streams:
                if seat is not None and stream.seat is seat:  # not re-bound meanwhile
                    stream.live_until = until
        for stream, _ in streams:
            if getattr(stream, "ready", True):
                claimer.ring(stream)


ticker = KeepAliveTicker()


# ------------------------------------------------------------------ delivery records

_delivered: dict[str, list[str]] = {}
_failed: dict[str, list[str]] = {}
_flusher: asyncio.Task | None = None


def record(entry_id: str, seat: str, *, ok: bool) -> None:
    global _flusher
    (_delivered if ok else _failed).setdefault(entry_id, []).append(seat)
    if _flusher is None or _flusher.done():
        _flusher = asyncio.ensure_future(_flush_soon())


async def _flush_soon() -> None:
    await asyncio.sleep(FLUSH_SECONDS)
    await flush()


async def flush() -> None:
    global _delivered, _failed
    delivered, failed = _delivered, _failed
    _delivered, _failed = {}, {}
    if not (delivered or failed):
        return
    try:
        await database_sync_to_async(services.record_deliveries)(delivered=delivered, failed=failed)
    except Exception:  # the pushes happened; only the record of them is lost
        log.exception("could not record deliveries for %d entries", len(delivered) + len(failed))
