"""POST /notify?label=<sender>: the webhook for scripts and CI (SPEC §10).

A thin adapter: relay.webhook checks the envelope, bus.services stores the entry. The
202 is returned only after the entry's transaction has committed; the push to live
streams follows on the commit's doorbell. Every refusal is JSON `{"error": …}` with the
lists a caller needs to fix it (`rooms`, `names`, `field`); no traceback ever reaches
the caller.

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

import logging

from asgiref.sync import AsyncToSync, SyncToAsync, sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from bus import rules, services
from relay.webhook import (
    MAX_BODY_BYTES,
    NotifyError,
    bearer_token,
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
    return await on_database_thread(_answer, request)


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
        return _notify(request)
    except NotifyError as exc:
        return _error(exc.status, exc.message, **exc.extra)
    except Exception:  # never a traceback to the caller; the log has it
        log.exception("/notify failed")
        return _error(500, "internal error while storing the entry; the daemon log has the detail")


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
    problem = services.token_problem(
        label=label, token=bearer_token(request.META.get("HTTP_AUTHORIZATION"))
    )
    if problem:
        raise NotifyError(401, problem)
    check_content_type(request.META.get("CONTENT_TYPE"))
    # One byte over the limit tells a body without Content-Length (chunked) that is too big.
    body = request.read(MAX_BODY_BYTES + 1)
    note = parse_notify(decode(body))

    room = note.room or _default_room(label)
    try:
        # One transaction: a refused send leaves no seat behind for the label either.
        with transaction.atomic():
            seat = services.check_in(agent=label)
            report = services.send_entry(
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
    except services.UnknownRoom as exc:
        raise NotifyError(404, str(exc), rooms=exc.rooms) from None
    except services.UnknownAddressee as exc:
        raise NotifyError(422, str(exc), field="to", names=exc.names) from None
    except rules.RuleError as exc:
        raise NotifyError(422, str(exc)) from None
    # The atomic block has committed: the entry is durable before the 202 leaves.
    return JsonResponse(report, status=202)


def _default_room(label: str) -> str:
    """The label's only room, else the default room; several rooms must be named."""
    rooms = services.agent_rooms(agent=label)
    if len(rooms) == 1:
        return rooms[0]
    if not rooms:
        return settings.DEFAULT_ROOM
    raise NotifyError(
        422,
        f'{label} is in several rooms ({", ".join(rooms)}): name one with "room" in the body',
        field="room",
        rooms=rooms,
    )
