"""POST /notify?label=<sender>: the webhook for scripts and CI (README, "The webhook").

A thin adapter: relay.webhook checks the envelope, bus.services stores the entry. The
202 is returned only after the entry's transaction has committed; the push to live
streams follows on the commit's doorbell. Every refusal is JSON `{"error": …}` with the
lists a caller needs to fix it (`rooms`, `names`, `field`); no traceback ever reaches
the caller. `answer(Posted)` is the whole of it, for either transport: the daemon's own
ASGI path (salon.lean) and Django's view below (its test client, WSGI).

Concurrent requests are stored in one transaction (GroupCommit below: group commit),
each acknowledged only once that transaction has committed.

All of its work (the token check, the body, the send) runs on the one thread every
Channels consumer uses for the database (patches.asgiref). Django's ASGI handler
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
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from bus import groupcommit, rules, services, strict
from bus.models import Seat
from patches.asgiref import on_database_thread, sync_caller_waiting
from relay.webhook import (
    MAX_BODY_BYTES,
    NotifyError,
    check_content_type,
    check_size,
    decode,
    parse_notify,
)
from salond.peers import TOKENS_REQUIRED

log = logging.getLogger("salon.relay")

NOT_POST = "/notify takes POST, not {method}: POST a JSON body to /notify?label=<sender>"


@dataclass
class Posted:
    """A POST to /notify as the webhook reads it, whichever transport brought it: Django's
    request (the test client, WSGI) or the daemon's own ASGI path (salon.lean)."""

    label: str
    content_length: str | None
    authorization: str | None
    content_type: str | None
    body: bytes  # at most MAX_BODY_BYTES + 1: one byte over tells a body too large
    remote_addr: str = ""
    # The daemon could not tell which local user is calling (salon.gate): a token then,
    # whatever the label.
    tokens_required: bool = False

    @classmethod
    def from_request(cls, request) -> Posted:
        return cls(
            label=request.GET.get("label", ""),
            content_length=request.META.get("CONTENT_LENGTH"),
            authorization=request.META.get("HTTP_AUTHORIZATION"),
            content_type=request.META.get("CONTENT_TYPE"),
            body=request.read(MAX_BODY_BYTES + 1),
            remote_addr=request.META.get("REMOTE_ADDR") or "",
            tokens_required=bool(getattr(request, "scope", {}).get(TOKENS_REQUIRED)),
        )


Answer = tuple[int, dict]  # HTTP status, JSON body


def json_response(answer: Answer) -> JsonResponse:
    status, body = answer
    response = JsonResponse(body, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="agent-salon"'
    return response


@csrf_exempt
async def notify(request):
    """/notify through Django (its test client, WSGI); the daemon serves it in salon.lean."""
    if request.method != "POST":
        response = json_response((405, {"error": NOT_POST.format(method=request.method[:16])}))
        response["Allow"] = "POST"
        return response
    return json_response(await answer(Posted.from_request(request)))


async def answer(posted: Posted) -> Answer:
    """Store the posted entry, or refuse it; the answer comes once it is committed."""
    if sync_caller_waiting():
        # Sync code waits above us (Django's test client, WSGI): its thread, its transaction.
        return await sync_to_async(_answer)(posted)
    if connection.vendor != "sqlite":
        # PostgreSQL: no batching. Its workers write at once, and a batch would hold the
        # row locks of every room it wrote to until its commit, taken in arrival order
        # (two workers' batches could deadlock); SQLite has one writer at a time anyway.
        return await on_database_thread(_answer, posted)
    return await group_commit.submit(posted)


class GroupCommit(groupcommit.GroupCommit):
    """The /notify requests waiting on the database thread, stored in one transaction
    (SQLite, the embedded default; see answer() for PostgreSQL): bus.groupcommit's queue.

    Each request runs in a savepoint of the batch's transaction, so a refused one (an
    unknown room, a bad type) rolls back alone and gets its own error; the batch commits
    once, and only then does any of its requests get its 202. If the commit fails, every
    request of the batch gets a 500 and none of them was stored: nothing acknowledged is
    ever lost.
    """

    def run_batch(self, items: list[Posted]) -> list[Answer]:
        return _answer_batch(items)

    def failed(self, exc: Exception) -> Answer:
        return _commit_failed()


group_commit = GroupCommit()


def _commit_failed() -> Answer:
    return 500, {"error": "internal error while storing the entry; the daemon log has the detail"}


def _answer_batch(batch: list[Posted]) -> list[Answer]:
    """Every request in a savepoint of one transaction; their answers once it committed."""
    committed: list[bool] = []
    answers: list[Answer] = []
    try:
        with transaction.atomic():
            # First of the after-commit callbacks: it runs once the commit has succeeded,
            # before the requests' own (the doorbells), whatever those do.
            transaction.on_commit(lambda: committed.append(True))
            senders: dict[str, Seat] = {}
            answers = [_answer(posted, senders) for posted in batch]
    except Exception:
        if committed:  # stored; a callback after the commit failed: the answers stand
            log.exception("/notify: an after-commit callback of a batch failed")
            return answers
        log.exception("/notify: the commit of a batch of %d failed", len(batch))
        return [_commit_failed() for _ in batch]  # none of them was stored
    return answers


def _answer(posted: Posted, senders: dict[str, Seat] | None = None) -> Answer:
    """`senders`: the seats of the labels its batch stored an entry of (GroupCommit)."""
    senders = {} if senders is None else senders
    try:
        # Its own savepoint inside a batch (its own transaction otherwise): whatever fails
        # takes back this request's writes only.
        with transaction.atomic():
            answer, seat = _notify(posted, senders)
        # Kept for the batch only once this request's writes stand: a seat made by a
        # request that failed is rolled back with it.
        senders.setdefault(seat.agent.name, seat)
        return answer
    except NotifyError as exc:
        return exc.status, exc.body()
    except Exception:  # never a traceback to the caller; the log has it
        log.exception("/notify failed")
        return _commit_failed()


def _notify(posted: Posted, senders: dict[str, Seat]) -> tuple[Answer, Seat]:
    label = posted.label
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
    check_size(posted.content_length)
    problem = services.tokens.token_problem(
        label=label,
        token=strict.bearer_token(posted.authorization),
        required=posted.tokens_required,
    )
    if problem:
        raise NotifyError(401, problem)
    check_content_type(posted.content_type)
    note = parse_notify(decode(posted.body))

    # In the caller's transaction (_answer's): a refused send leaves no seat behind for
    # the label either.
    try:
        # No last_seen of its own: the send sets it, in this same transaction. Within
        # one batch (one transaction holding the store's write lock), the seat its
        # label's first stored request found.
        seat = senders.get(label) or services.seats.check_in(agent=label, touch=False)
        # No room named: the label's primary room, never an error.
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
            sender_addr=posted.remote_addr[:64],
        )
    except rules.UnknownRoom as exc:
        raise NotifyError(404, str(exc), rooms=exc.rooms) from None
    except rules.UnknownAddressee as exc:
        raise NotifyError(422, str(exc), field="to", names=exc.names) from None
    except rules.RuleError as exc:
        raise NotifyError(422, str(exc)) from None
    # The 202 leaves only once the transaction around this has committed (the request's
    # own, or its batch's: GroupCommit), so the entry is durable before it does.
    return (202, report), seat
