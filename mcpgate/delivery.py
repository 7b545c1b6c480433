"""The push path of one process that hosts streams: claim, render, write; and the streams'
liveness. A process has one of each (mcpgate.streamhost.StreamHost owns them); an HTTP stream
and a stdio server are both Streams to them.

Every open stream of the process is served by two tasks instead of per-stream database
work (bench/RESULTS.md §4 and §5):

* the claimer: a stream that hears its doorbell rings the claimer; the claimer claims
  every rung seat in one database hop (bus.services.telling.claim_pushes_of_seats: one
  transaction, set-based statements) and renders each entry's channel message once, in
  that same hop. Rings that arrive while a claim runs are taken by the next claim, which
  starts as soon as the hop is done: a broadcast to 500 streams costs a few claims, not
  500, and no ring waits for a timer. A send made in this process claims the pushes of
  the seats whose stream is here itself, in its own transaction (bus.bell.Pusher): those
  need no claimer at all.
* the outbox: every claim, the claimer's or a send's, puts its pushes in the outbox on
  the database thread right after its commit, and one task writes them to the streams in
  that order, so a stream's event ids only ever grow.
* the keep-alive ticker: every KEEPALIVE_SECONDS it has every open stream send its
  keep-alive (and, hourly, renew its channel-layer groups), refreshes the liveness of
  every open stream's seat and session in set-based UPDATEs (one transaction), and rings
  the claimer for every stream (the safety net for a lost doorbell). A closed stream is
  dropped from it, so its seat stops being refreshed.

Which seats' streams got each push is recorded on the entry (delivered_to /
delivery_errors) for the staff, by the claim itself, in its transaction: a claimed push
is handed to its stream right after the commit. A write that fails then moves the seat
to delivery_errors (DeliveryRecords, at most FLUSH_SECONDS behind, or in the next
claim's transaction).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from typing import Protocol

from channels.db import database_sync_to_async
from django.db import transaction

from bus import rules, services, signing, wire
from bus.models import Entry, Seat
from mcpgate import metrics, protocol, sessions, triage
from mcpgate.models import McpSession
from salond.host import LoopCalls
from salond.streaming import KEEPALIVE_SECONDS

log = logging.getLogger("salon.mcp")

# Channel-layer groups expire after a day (channels' default, in memory and on Redis);
# a stream renews its own this often.
GROUP_RENEW_SECONDS = 3600
KEEPALIVE_BATCH = 200  # streams written to per event-loop turn, so pushes are not held up
PUSH_LIMIT = 100  # pushes claimed per seat per claim; more are claimed right after
FLUSH_SECONDS = 0.2
RETRY_SECONDS = 1.0  # after a failed claim, before trying its seats again
GATHER_TURNS = 100  # event-loop turns a claim may wait while rings keep arriving
# Streams written to per event-loop turn after a claim: a broadcast's pushes leave the
# process while the rest are written, instead of all after the last one (Twisted sends a
# stream's bytes when the loop turns).
WRITE_BATCH = 50


class Stream(Protocol):
    """What the claimer and the ticker need of an open stream (an HTTP GET stream of
    mcpgate.consumers, or the stdio server of mcpgate.stdio)."""

    seat: Seat | None
    session: McpSession | None
    streaming: bool
    ready: bool
    live_until: object

    async def send_event(self, message: dict, event_id: str | None = None) -> None: ...

    async def keep_open(self, *, renew_groups: bool) -> None:
        """Whatever keeps the client's connection open (an SSE comment); with
        renew_groups, re-join the channel-layer groups before they expire."""


# ------------------------------------------------------------------ the message


def channel_message(entry: Entry) -> dict:
    """The notifications/claude/channel message for an entry (meta values all strings)."""
    tampered = not signing.verify_entry(entry)
    meta = {
        "id": str(entry.id),
        "ts": wire.iso(entry.ts),
        "source": entry.sender,
        "room": entry.room.name,
        "type": entry.type,
        "to": ",".join(rules.names_in(entry.to)),
        "re": str(entry.re) if entry.re else None,
    }
    if tampered:
        meta["tampered"] = "true"
    # The server's keys are trusted and keep their names; caller meta only adds keys (a
    # row changed outside the bus may hold no object there: then it adds none).
    caller_meta = entry.meta if isinstance(entry.meta, dict) else {}
    for key, value in caller_meta.items():
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


def claim_messages(
    limits: dict[int, int], records: tuple[dict, dict] | None = None
) -> dict[int, tuple[list[Push], int]]:
    """Claim for these seats ({seat id: limit}) and render the messages, in one hop.

    Rendering here, not in a second database_sync_to_async call per push, halves the
    hops on the one database thread every stream shares (bench/RESULTS.md §1). An entry
    pushed to many seats is rendered once. `records` (delivered, failed), the delivery
    records waiting to be written, are written in the claim's own transaction: one commit
    for both (all or nothing: on failure neither is written).
    """
    if records is not None and (records[0] or records[1]):
        with transaction.atomic():
            services.telling.record_deliveries(delivered=records[0], failed=records[1])
            return claim_messages(limits)
    rendered: dict = {}
    result: dict[int, tuple[list[Push], int]] = {}
    for seat_id, (pushes, more) in services.telling.claim_pushes_of_seats(limits=limits).items():
        out = []
        for push_seq, entry in pushes:
            if entry.pk not in rendered:
                rendered[entry.pk] = protocol.SharedMessage(channel_message(entry))
            out.append((push_seq, entry, rendered[entry.pk]))
        result[seat_id] = (out, more)
    return result


def replay_messages(*, seat: Seat, after: int) -> list[Push]:
    """Last-Event-ID: the pushes after that event id, rendered, in one hop."""
    return [
        (push_seq, entry, channel_message(entry))
        for push_seq, entry in services.telling.replay_pushes(seat=seat, after=after)
    ]


def refresh_liveness(*, seat_ids: set[int], session_ids: set[str]):
    """The ticker's database work: one transaction, set-based; returns the live_until."""
    with transaction.atomic():
        until = services.seats.keep_seats_live(seat_ids=seat_ids)
        sessions.mark_sessions_active(session_ids)
    return until


# ------------------------------------------------------------------ writing


async def write_pushes(
    stream: Stream, pushes: list[Push], records: DeliveryRecords, *, recorded: bool = True
) -> bool:
    """Write claimed pushes to a stream, in order; False if the stream failed.

    The pushes are claimed already, and recorded as delivered by their claim unless
    `recorded` is False (a Last-Event-ID replay). One that cannot be written is recorded
    as a delivery error (the client gets it back by reconnecting with Last-Event-ID)."""
    for n, (push_seq, entry, message) in enumerate(pushes):
        try:
            if not stream.streaming:
                raise ConnectionError("the stream closed")
            await stream.send_event(message, str(push_seq))
        except Exception as exc:
            if not isinstance(exc, ConnectionError):
                log.warning("push to %s failed", stream.seat.name, exc_info=True)
            for _, lost, _ in pushes[n:]:
                metrics.PUSH_FAILURES.inc()
                records.add(str(lost.id), stream.seat.name, ok=False)
            return False
        metrics.PUSHES.inc()
        if not recorded:
            records.add(str(entry.id), stream.seat.name, ok=True)
    return True


# ------------------------------------------------------------------ the outbox


Outgoing = tuple[Stream, list[Push], dict | None]  # a stream, its pushes, a notice after


class Outbox:
    """The pushes claimed for this process's streams, written in the order of their claims.

    Each claim commits on the database thread (one thread: asgiref's, which every
    database call of the process takes) and puts its pushes here right after, on that
    thread; so the order here is the order of the commits, and per seat the order of the
    event ids. One task on the event loop writes them in that order, WRITE_BATCH streams
    per loop turn, so the first streams' bytes leave while the rest are written."""

    def __init__(self, records: DeliveryRecords, calls: LoopCalls | None = None) -> None:
        self.records = records
        self.calls = calls or LoopCalls()
        self._items: deque[Outgoing] = deque()
        self._task: asyncio.Task | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self.calls.loop

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.calls.loop = loop

    def put(self, items: list[Outgoing]) -> None:
        """From any thread: write these after everything put before them."""
        if not items:
            return
        self._items.extend(items)
        self.calls.soon(self._start)

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._write_all())

    async def _write_all(self) -> None:
        written = 0
        while self._items:
            stream, pushes, notice = self._items.popleft()
            if await write_pushes(stream, pushes, self.records) and notice is not None:
                with contextlib.suppress(Exception):  # a closed stream: nothing to tell
                    await stream.send_event(notice)
            written += 1
            if written % WRITE_BATCH == 0:
                await asyncio.sleep(0)  # the written streams' bytes leave meanwhile

    async def written(self) -> None:
        """Returns once everything put so far is written (for a test, and at shutdown)."""
        while self._items or (self._task is not None and not self._task.done()):
            await asyncio.sleep(0)


# ------------------------------------------------------------------ the claimer


class Claimer:
    """A process's claim coalescer."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox
        self.records = outbox.records
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
        if self.outbox.loop is None:
            self.outbox.bind(asyncio.get_running_loop())
        await self._gather_rings()
        # One claim at a time: the claims of a seat, and so its pushes, stay in order.
        while self._rung:
            batch = {seat: rung for seat, rung in self._rung.items() if rung[0].streaming}
            self._rung = {}
            if not batch:
                continue
            # The delivery records waiting to be written ride in the claim's transaction.
            records = self.records.take()
            try:
                await triage.judge_first(sorted(batch))
                more = await database_sync_to_async(self._claim_and_put)(batch, records)
            except Exception:
                # Nothing was claimed (the transaction rolled back): ring again shortly.
                self.records.put_back(*records)
                log.exception("claim for %d seats failed; retrying", len(batch))
                for seat, rung in batch.items():
                    self._rung.setdefault(seat, rung)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            for seat, stream in more.items():  # the rest in the next claim
                self._rung.setdefault(seat, (stream, PUSH_LIMIT, False))

    def _claim_and_put(self, batch: dict, records) -> dict[int, Stream]:
        """On the database thread: claim, then (committed) put the pushes in the outbox.
        Returns the streams whose seats have more waiting than this claim took."""
        claimed = claim_messages({seat: limit for seat, (_, limit, _) in batch.items()}, records)
        items: list[Outgoing] = []
        more_to_claim: dict[int, Stream] = {}
        for seat, (pushes, more) in claimed.items():
            stream, _, tell_more = batch[seat]
            notice = more_waiting_notice(more) if more and tell_more else None
            items.append((stream, pushes, notice))
            if more and not tell_more:
                more_to_claim[seat] = stream
        self.outbox.put(items)
        return more_to_claim

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


# ------------------------------------------------------------------ the keep-alive ticker


class KeepAliveTicker:
    """A process's keep-alive round for its open streams: their bytes, then their liveness.

    Before, each stream's keep-alive cost 2-3 statements and commits of its own; 2,000
    idle streams kept 43-47 % of a core busy (bench/RESULTS.md §4). Then each stream
    still had a task of its own waking every 15 s to write its bytes and re-join its
    groups: with 10,000 streams, ~670 timer wake-ups and ~1,300 group joins a second.
    Now one round every KEEPALIVE_SECONDS (on a fixed beat, so no stream waits longer)
    writes every stream's keep-alive, KEEPALIVE_BATCH per event-loop turn. `tick()` is
    the whole of one round, for a test to call.
    """

    def __init__(self, claimer: Claimer) -> None:
        self.claimer = claimer
        self.streams: set[Stream] = set()
        self._task: asyncio.Task | None = None
        self._ticking = asyncio.Lock()
        self._groups_renewed_at = time.monotonic()

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
        loop = asyncio.get_running_loop()
        beat = loop.time()
        while self.streams:
            # The next beat 15 s after the last one, not after the round's work.
            beat = max(beat + KEEPALIVE_SECONDS, loop.time())
            await asyncio.sleep(beat - loop.time())
            try:
                await self.tick()
            except Exception:  # keep ticking: a missed refresh is covered by the next
                log.exception("keep-alive refresh of %d streams failed", len(self.streams))

    async def keep_streams_open(self) -> None:
        now = time.monotonic()
        renew = now - self._groups_renewed_at >= GROUP_RENEW_SECONDS
        if renew:
            self._groups_renewed_at = now
        for n, stream in enumerate(list(self.streams), 1):
            if stream not in self.streams:
                continue  # closed while an earlier batch was written
            try:
                await stream.keep_open(renew_groups=renew)
            except Exception:  # one broken stream does not keep the others' bytes back
                log.exception("keep-alive of a stream failed")
            if n % KEEPALIVE_BATCH == 0:
                await asyncio.sleep(0)

    async def tick(self) -> None:
        await self.keep_streams_open()
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
            if stream.ready:
                self.claimer.ring(stream)


# ------------------------------------------------------------------ delivery records


class DeliveryRecords:
    """Which seats' streams got each push (Entry.delivered_to / delivery_errors), written
    in one transaction at most FLUSH_SECONDS behind the pushes."""

    def __init__(self) -> None:
        self._delivered: dict[str, list[str]] = {}
        self._failed: dict[str, list[str]] = {}
        self._flusher: asyncio.Task | None = None

    def add(self, entry_id: str, seat: str, *, ok: bool) -> None:
        (self._delivered if ok else self._failed).setdefault(entry_id, []).append(seat)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush_soon())

    def take(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """The records not written yet (delivered, failed), now the caller's to write."""
        taken = self._delivered, self._failed
        self._delivered, self._failed = {}, {}
        return taken

    def put_back(self, delivered: dict[str, list[str]], failed: dict[str, list[str]]) -> None:
        """Records taken but not written (the transaction rolled back): written later."""
        for entry_id, seats in delivered.items():
            for seat in seats:
                self.add(entry_id, seat, ok=True)
        for entry_id, seats in failed.items():
            for seat in seats:
                self.add(entry_id, seat, ok=False)

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_SECONDS)
        await self.flush()

    async def flush(self) -> None:
        delivered, failed = self.take()
        if not (delivered or failed):
            return
        try:
            await database_sync_to_async(services.telling.record_deliveries)(
                delivered=delivered, failed=failed
            )
        except Exception:  # the pushes happened; only the record of them is lost
            log.exception(
                "could not record deliveries for %d entries", len(delivered) + len(failed)
            )
