"""POST /notify?label=<sender>: the webhook for scripts and CI (SPEC §10).

A thin adapter: relay.webhook checks the envelope, bus.services stores the entry. The
202 is returned only after the entry's transaction has committed; the push to live
streams follows on the commit's doorbell. Every refusal is JSON `{"error": …}` with the
lists a caller needs to fix it (`rooms`, `names`, `field`); no traceback ever reaches
the caller.

Concurrent requests are stored in one transaction (GroupCommit below: group commit),
each acknowledged only once that transaction has committed.

The view is async, and all of its work (the token check, the body, the send) runs on
the one thread every Channels consumer uses for the database. Django's ASGI handler
would run a sync view in a new thread per request, and a new thread is a new database
connection: on SQLite those threads fought the consumers' thread for the write lock
(POST -> event p99 of 4-11 s under 8 concurrent posters), on PostgreSQL each /notify
opened a connection and a busy run met "too many clients" (bench/RESULTS.md "3.
Throughput"). The price of sharing the thread: /notify's ORM work no longer overlaps
the pushes' (sqlite3 lets other threads run while SQLite itself works), so under 8
concurrent posters on 2 busy cores the daemon stored 17-20 entries/s instead of 22-27,
while POST -> event p99 fell from 12-16 s to 1.4-1.8 s and pushes kept up with sends.
"""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import AsyncToSync, SyncToAsync, sync_to_async
from channels.db import database_sync_to_async
from django.db import connection, transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from bus import rules, services, strict
from relay.webhook import (
    MAX_BODY_BYTES,
    NotifyError,
    check_content_type,
    check_size,
    decode,
    parse_notify,
)

log = logging.getLogger("salon.relay")


def _error(status: int, message: str, **extra) -> JsonResponse:
    response = JsonResponse({"error": message, **extra}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="agent-salon"'
    return response


@csrf_exempt
async def notify(request):
    if request.method != "POST":
        response = _error(
            405,
            f"/notify takes POST, not {request.method[:16]}: "
            "POST a JSON body to /notify?label=<sender>",
        )
        response["Allow"] = "POST"
        return response
    if getattr(AsyncToSync.executors, "current", None) is not None:
        # Sync code waits above us (Django's test client, WSGI): its thread, its transaction.
        return await sync_to_async(_answer)(request)
    if connection.vendor != "sqlite":
        # PostgreSQL: no batching. Its workers write at once, and a batch would hold the
        # row locks of every room it wrote to until its commit, taken in arrival order
        # (two workers' batches could deadlock); SQLite has one writer at a time anyway.
        return await on_database_thread(_answer, request)
    return await group_commit.submit(request)


# Requests stored in one transaction at most: bounds how long one batch holds the write
# lock, and what a failed commit takes down with it.
BATCH_LIMIT = 200


class GroupCommit:
    """The /notify requests waiting on the database thread, stored in one transaction
    (SQLite, the embedded default; see notify() for PostgreSQL).

    A batch is every request that arrived while the previous batch ran (no timer: one
    poster alone gets a batch of one, as before). Each request runs in a savepoint of
    the batch's transaction, so a refused one (an unknown room, a bad type) rolls back
    alone and gets its own error; the batch commits once, and only then does any of its
    requests get its 202. If the commit fails, every request of the batch gets a 500 and
    none of them was stored: nothing acknowledged is ever lost.

    An SQLite commit (synchronous=FULL) is cheap here; what a batch saves is the per-
    request transaction: BEGIN IMMEDIATE, the commit and its fsync, the hop to the
    database thread and the wait behind the other requests' hops.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[object, asyncio.Future]] = []
        self._task: asyncio.Task | None = None

    async def submit(self, request):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((request, future))
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._task = loop.create_task(self._run())
        return await future

    async def _run(self) -> None:
        while self._pending:
            batch = self._pending[:BATCH_LIMIT]
            del self._pending[:BATCH_LIMIT]
            try:
                responses = await on_database_thread(_answer_batch, [r for r, _ in batch])
            except Exception:  # never raised by _answer_batch; a safety net all the same
                log.exception("/notify batch of %d failed", len(batch))
                responses = [_commit_failed() for _ in batch]
            for (_, future), response in zip(batch, responses, strict=True):
                if not future.done():
                    future.set_result(response)


group_commit = GroupCommit()


def _commit_failed() -> JsonResponse:
    return _error(500, "internal error while storing the entry; the daemon log has the detail")


def _answer_batch(requests: list) -> list[JsonResponse]:
    """Every request in a savepoint of one transaction; their answers once it committed."""
    committed: list[bool] = []
    responses: list[JsonResponse] = []
    try:
        with transaction.atomic():
            # First of the after-commit callbacks: it runs once the commit has succeeded,
            # before the requests' own (the doorbells), whatever those do.
            transaction.on_commit(lambda: committed.append(True))
            responses = [_answer(request) for request in requests]
    except Exception:
        if committed:  # stored; a callback after the commit failed: the answers stand
            log.exception("/notify: an after-commit callback of a batch failed")
            return responses
        log.exception("/notify: the commit of a batch of %d failed", len(requests))
        return [_commit_failed() for _ in requests]  # none of them was stored
    return responses


async def on_database_thread(func, *args):
    """Run func(*args) on the database thread the Channels consumers use.

    That thread is asgiref's SyncToAsync.single_thread_executor: database_sync_to_async
    picks it outside any request. Inside a request Django's ASGI handler has entered a
    ThreadSensitiveContext of its own, which would pick a fresh thread (and connection)
    per request, so the executor is named here instead. When sync code is waiting above
    us (Django's test client, WSGI), the work goes back to that thread and its open
    transaction, as sync_to_async does; the connection is then the caller's to manage.
    """
    if getattr(AsyncToSync.executors, "current", None) is not None:
        return await sync_to_async(func)(*args)
    on_thread = database_sync_to_async(
        func, thread_sensitive=False, executor=SyncToAsync.single_thread_executor
    )
    return await on_thread(*args)


def _answer(request) -> JsonResponse:
    try:
        # Its own savepoint inside a batch (its own transaction otherwise): whatever fails
        # takes back this request's writes only.
        with transaction.atomic():
            return _notify(request)
    except NotifyError as exc:
        return _error(exc.status, exc.message, **exc.extra)
    except Exception:  # never a traceback to the caller; the log has it
        log.exception("/notify failed")
        return _commit_failed()


def _notify(request) -> JsonResponse:
    label = request.GET.get("label", "")
    if not label:
        raise NotifyError(
            400,
            "the sender's label is missing: POST to /notify?label=<your-name> "
            "(a body 'source' is not used; the label is who you are on the bus)",
            field="label",
        )
    try:
        label = rules.validate_name(label, "label")
    except rules.RuleError as exc:
        raise NotifyError(400, str(exc), field="label") from None
    check_size(request.META.get("CONTENT_LENGTH"))
    problem = services.tokens.token_problem(
        label=label, token=strict.bearer_token(request.META.get("HTTP_AUTHORIZATION"))
    )
    if problem:
        raise NotifyError(401, problem)
    check_content_type(request.META.get("CONTENT_TYPE"))
    # One byte over the limit tells a body without Content-Length (chunked) that is too big.
    body = request.read(MAX_BODY_BYTES + 1)
    note = parse_notify(decode(body))

    try:
        # One transaction: a refused send leaves no seat behind for the label either.
        with transaction.atomic():
            # No last_seen of its own: the send sets it, in this same transaction.
            seat = services.seats.check_in(agent=label, touch=False)
            # No room named: the label's primary room (SPEC §10), never an error.
            room = note.room or services.rooms.agent_primary_room(label)
            report = services.entries.send_entry(
                seat=seat,
                text=note.content,
                room=room,
                type=note.type,
                to=note.to,
                re=note.re,
                meta=note.meta,
                via="notify",
                sender_addr=(request.META.get("REMOTE_ADDR") or "")[:64],
            )
    except rules.UnknownRoom as exc:
        raise NotifyError(404, str(exc), rooms=exc.rooms) from None
    except rules.UnknownAddressee as exc:
        raise NotifyError(422, str(exc), field="to", names=exc.names) from None
    except rules.RuleError as exc:
        raise NotifyError(422, str(exc)) from None
    # The 202 leaves only once the transaction around this has committed (the request's
    # own, or its batch's: GroupCommit), so the entry is durable before it does.
    return JsonResponse(report, status=202)
