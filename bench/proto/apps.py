"""Applies the prototypes of bench/proto/__init__.py when Django is ready."""

from __future__ import annotations

import asyncio
import functools
import os
import time

from django.apps import AppConfig

from bench.proto import enabled


class ProtoConfig(AppConfig):
    name = "bench.proto"
    label = "bench_proto"

    def ready(self) -> None:
        if enabled("claim"):
            patch_claim()
        if enabled("keepalive"):
            patch_keepalive()
        if enabled("notify"):
            patch_notify()
        if enabled("fanout"):
            patch_fanout()
        if enabled("layer"):
            patch_layer()
        if enabled("watchredis"):
            patch_watch_redis()
        if enabled("poll20"):
            from mcpgate import watcher

            watcher.POLL_SECONDS = 0.02


def patch_claim() -> None:
    from bus import services
    from mcpgate import consumers

    original = services.claim_pushes

    def claim_pushes(*, seat, limit: int = 100):
        pending = services._unread_wakes(seat).filter(
            push_seq__isnull=True, announced_at__isnull=True
        )
        if not pending.exists():  # a read: no write lock, no commit, no fsync
            return [], 0
        claimed, more = original(seat=seat, limit=limit)
        for _, entry in claimed:  # built here, in the same hop as the claim
            entry._channel_message = consumers.channel_message(entry)
        return claimed, more

    services.claim_pushes = claim_pushes
    original_push_one = consumers.McpConsumer.push_one

    async def push_one(self, push_seq, entry):
        message = getattr(entry, "_channel_message", None)
        if message is None:
            return await original_push_one(self, push_seq, entry)
        from mcpgate import delivery, protocol
        from salon import metrics

        try:
            await self.send_chunk(protocol.sse_event(message, str(push_seq)))
        except Exception:
            metrics.inc("salon_push_failures_total")
            delivery.record(str(entry.id), self.seat.name, ok=False)
            raise
        metrics.inc("salon_pushes_total")
        delivery.record(str(entry.id), self.seat.name, ok=True)

    consumers.McpConsumer.push_one = push_one


def patch_keepalive() -> None:
    from channels.db import database_sync_to_async
    from django.db import transaction

    from bus import services
    from mcpgate import consumers, sessions

    async def refresh_liveness(self):
        seat, session = self.seat, self.session

        def both():
            with transaction.atomic():
                until = services.keep_live(seat=seat) if seat is not None else None
                if session is not None:
                    sessions.mark_active(session)
            return until

        until = await database_sync_to_async(both)()
        if seat is not None:
            self.live_until = until

    consumers.McpConsumer.refresh_liveness = refresh_liveness


def patch_notify() -> None:
    from asgiref.sync import SyncToAsync

    from relay import views

    sync_view = views.notify

    async def notify(request):
        # The one thread every consumer's database_sync_to_async uses (outside a
        # request's ThreadSensitiveContext): one connection, writes never contend.
        loop = asyncio.get_running_loop()
        body = request.body  # read the body here (the view reads it on the DB thread)
        del body
        return await loop.run_in_executor(
            SyncToAsync.single_thread_executor, functools.partial(sync_view, request)
        )

    notify.csrf_exempt = True
    views.notify = notify


class AsyncRequestTiming:
    """salon.metrics.RequestTimingMiddleware, async-capable (no thread hop per request)."""

    sync_capable = False
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response

    async def __call__(self, request):
        from salon import metrics

        started = time.perf_counter()
        response = await self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = ("/" + match.route) if match is not None and match.route else "unmatched"
        metrics.observe("salon_request_duration_seconds", time.perf_counter() - started, path=route)
        return response


def patch_fanout() -> None:
    """Rings that arrive in one loop turn are claimed together: one database hop, one
    transaction, set-based reads, for every seat with a stream in this process."""
    from channels.db import database_sync_to_async
    from django.db import connection, transaction

    from bus import services
    from bus.models import Membership, Seat, WakeDecision
    from mcpgate import consumers, delivery, protocol
    from salon import metrics

    batch: dict[int, object] = {}
    state: dict = {"scheduled": False}

    def claim_many(seat_ids: list[int]) -> dict[int, list[tuple[int, object, dict]]]:
        at = services.now()
        cursors = {
            (seat_id, room_id): cursor
            for seat_id, room_id, cursor in Membership.objects.filter(
                seat_id__in=seat_ids, left_at__isnull=True
            ).values_list("seat_id", "room_id", "cursor")
        }
        rows = [
            row
            for row in WakeDecision.objects.filter(
                seat_id__in=seat_ids, woken=True, push_seq__isnull=True, announced_at__isnull=True
            )
            .select_related("entry__room")
            .order_by("decided_at", "seq")
            if (row.seat_id, row.room_id) in cursors
            and row.seq > cursors[(row.seat_id, row.room_id)]
        ]
        if not rows:
            return {}
        claimed: dict[int, list] = {}
        messages: dict = {}
        with transaction.atomic():
            counters = dict(Seat.objects.filter(pk__in=seat_ids).values_list("pk", "push_counter"))
            updates, seat_updates = [], {}
            for row in rows:
                counters[row.seat_id] += 1
                updates.append((counters[row.seat_id], at, row.pk))
                seat_updates[row.seat_id] = counters[row.seat_id]
                if row.entry_id not in messages:
                    messages[row.entry_id] = consumers.channel_message(row.entry)
                claimed.setdefault(row.seat_id, []).append(
                    (counters[row.seat_id], row.entry, messages[row.entry_id])
                )
            with connection.cursor() as cursor:
                table = WakeDecision._meta.db_table
                cursor.executemany(
                    f"UPDATE {table} SET push_seq = %s, pushed_at = %s "
                    "WHERE id = %s AND push_seq IS NULL",
                    updates,
                )
                cursor.executemany(
                    f"UPDATE {Seat._meta.db_table} SET push_counter = %s WHERE id = %s",
                    [(value, pk) for pk, value in seat_updates.items()],
                )
        return claimed

    async def flush() -> None:
        # One flusher at a time: rings that arrive while a claim runs are taken by the
        # next turn of this loop, all together (natural batching, no added delay).
        while batch:
            streams = dict(batch)
            batch.clear()
            started = time.perf_counter()
            claimed = await database_sync_to_async(claim_many)(list(streams))
            took = time.perf_counter() - started
            for seat_id, pushes in claimed.items():
                consumer = streams[seat_id]
                for push_seq, entry, message in pushes:
                    try:
                        await consumer.send_chunk(protocol.sse_event(message, str(push_seq)))
                    except Exception:
                        metrics.inc("salon_push_failures_total")
                        delivery.record(str(entry.id), consumer.seat.name, ok=False)
                        continue
                    metrics.inc("salon_pushes_total")
                    delivery.record(str(entry.id), consumer.seat.name, ok=True)
            if os.environ.get("BENCH_PROTO_TRACE"):
                with open(os.environ["BENCH_PROTO_TRACE"], "a") as trace:
                    trace.write(
                        f"flush: {len(streams)} seats rung, claim {took * 1000:.0f} ms, "
                        f"pushes {(time.perf_counter() - started - took) * 1000:.0f} ms\n"
                    )
        state["scheduled"] = False

    async def bus_entry(self, message) -> None:
        if self.waiter is not None:
            self.waiter.set()
        if self.streaming and self.seat is not None:
            batch[self.seat.pk] = self
            if not state["scheduled"]:
                state["scheduled"] = True
                state["task"] = asyncio.ensure_future(flush())

    consumers.McpConsumer.bus_entry = bus_entry


def patch_layer() -> None:
    """InMemoryChannelLayer walks every channel and group membership on every send,
    group_send and receive (_clean_expired): O(streams) per message, O(streams²) per
    broadcast. Here it cleans at most once a second."""
    from channels.layers import InMemoryChannelLayer

    clean = InMemoryChannelLayer._clean_expired
    last = {"at": 0.0}

    def _clean_expired(self):
        now = time.monotonic()
        if now - last["at"] >= 1.0:
            last["at"] = now
            clean(self)

    InMemoryChannelLayer._clean_expired = _clean_expired


def patch_watch_redis() -> None:
    """With Redis and SQLite: the daemon's watcher runs anyway, and a process that is not
    the daemon (a cron `salon send`, a hook) does not ring through channels_redis, whose
    import (redis.asyncio) costs it 200-300 ms after its commit."""
    from django.conf import settings

    from bus import doorbell
    from mcpgate import watcher

    def ensure_started() -> None:
        if watcher._task is not None:
            return
        watcher._task = asyncio.ensure_future(
            watcher.listen_postgres() if settings.DATABASE_URL else watcher.run()
        )

    watcher.ensure_started = ensure_started
    ring = doorbell.ring

    def ring_in_daemon_only(*, entry_id, seat_ids) -> None:
        if doorbell.IN_DAEMON or not settings.REDIS_URL:
            ring(entry_id=entry_id, seat_ids=seat_ids)

    doorbell.ring = ring_in_daemon_only
