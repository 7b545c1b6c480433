"""The relay's HTTP API, /relay/v1/ (relay mode only: AGENT_SALON_RELAY_SECRET is set).

    GET  /relay/v1/                        who answers: {"relay": "agent-salon", "version": 1}
    POST /relay/v1/join                    {"invite"} → a device token for the invite's room
    POST /relay/v1/status                  {"pass"} (signed by the operator) → every room
    POST /relay/v1/revoke                  {"pass"} (signed by the operator, naming a device)
    GET  /relay/v1/rooms/ROOM              the room as the relay sees it (device token)
    POST /relay/v1/rooms/ROOM/entries      {"entries": [envelope, …]} (device token)
    GET  /relay/v1/rooms/ROOM/entries?after=SEQ&wait=S   long poll (wait ≤ 30 s)

Input is strict: JSON bodies only (415 otherwise), at most MAX_BODY_BYTES (413), objects
with exactly the documented keys (422 naming the key). Every refusal is JSON
`{"error": …}`, and no traceback reaches a caller. The server's own logic and its
refusals are relay.server; this module reads requests and waits.

A long poll waits on a per-room event rung by pushes this process stored, and looks at
the database at least every POLL_SECONDS, so a push stored by another worker (a relay
with several workers on PostgreSQL) is seen within that time.
"""

from __future__ import annotations

import asyncio
import logging

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from bus import bell, rules, strict
from patches.asgiref import on_database_thread
from relay import server

log = logging.getLogger("salon.relay")

VERSION = 1
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_WAIT_SECONDS = 30
POLL_SECONDS = 1.0

_bells: dict[str, asyncio.Event] = {}


def _ring(room: str) -> None:
    event = _bells.pop(room, None)
    if event is not None:
        event.set()


def _error(status: int, message: str, **extra) -> JsonResponse:
    response = JsonResponse({"error": message, **extra}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="agent-salon-relay"'
    if status == 429 and "retryAfter" in extra:
        response["Retry-After"] = str(extra["retryAfter"])
    return response


def _refused(exc: server.Refusal) -> JsonResponse:
    return _error(exc.status, exc.message, **exc.extra)


def _not_a_relay() -> JsonResponse:
    return _error(
        404,
        "this agent-salon is not a relay: start one with `salon relay serve` "
        "(AGENT_SALON_RELAY_SECRET set)",
    )


def _method(request, allowed: str) -> JsonResponse | None:
    if request.method == allowed:
        return None
    response = _error(405, f"this URL takes {allowed}, not {request.method[:16]}")
    response["Allow"] = allowed
    return response


def _json_body(request, keys: tuple[str, ...]) -> dict:
    """The request's JSON object, with exactly `keys`; a Refusal otherwise. The JSON rules
    are bus.strict's, the same as /mcp's and /notify's."""
    media, charset = strict.media_type(request.META.get("CONTENT_TYPE"))
    if media != "application/json" or not strict.utf8_charset(charset):
        raise server.Refusal(415, "send the body as UTF-8 JSON (Content-Type: application/json)")
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > MAX_BODY_BYTES:
        raise server.Refusal(413, f"the body is over {MAX_BODY_BYTES} bytes: push fewer entries")
    body = request.read(MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        raise server.Refusal(413, f"the body is over {MAX_BODY_BYTES} bytes: push fewer entries")
    try:
        data = strict.decode_json(body)
    except strict.NotJson as exc:
        raise server.Refusal(400, f"the body is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise server.Refusal(422, f"the body must be a JSON object with {', '.join(keys)}")
    unknown = sorted(set(data) - set(keys))
    if unknown:
        raise server.Refusal(
            422,
            f"unknown field {unknown[0][:64]!r}: this takes {', '.join(keys)}",
            field=unknown[0][:64],
        )
    missing = [key for key in keys if key not in data]
    if missing:
        raise server.Refusal(422, f"field {missing[0]!r} is missing", field=missing[0])
    return data


def _room_name(room: str) -> str:
    try:
        return rules.validate_name(room, "room")
    except rules.RuleError as exc:
        raise server.Refusal(400, str(exc)) from None


async def _answer(work) -> JsonResponse:
    """Run `work` on the database thread; its Refusal becomes the answer."""
    if not server.enabled():
        return _not_a_relay()
    try:
        return await on_database_thread(work)
    except server.Refusal as exc:
        return _refused(exc)
    except Exception:  # never a traceback to the caller; the log has it
        log.exception("relay request failed")
        return _error(500, "internal error in the relay; its log has the detail")


# ---------------------------------------------------------------- the views


async def hello(request):
    if not server.enabled():
        return _not_a_relay()
    return JsonResponse({"relay": "agent-salon", "version": VERSION, "limits": server.limits()})


@csrf_exempt
async def join(request):
    if (wrong := _method(request, "POST")) is not None:
        return wrong

    def work():
        data = _json_body(request, ("invite",))
        if not isinstance(data["invite"], str):
            raise server.Refusal(422, "the invite is text", field="invite")
        return JsonResponse(server.redeem(data["invite"]))

    return await _answer(work)


@csrf_exempt
async def status(request):
    if (wrong := _method(request, "POST")) is not None:
        return wrong

    def work():
        data = _json_body(request, ("pass",))
        server.check_pass(str(data["pass"]))
        return JsonResponse(server.relay_view())

    return await _answer(work)


@csrf_exempt
async def revoke(request):
    if (wrong := _method(request, "POST")) is not None:
        return wrong

    def work():
        data = _json_body(request, ("pass",))
        claim = server.check_pass(str(data["pass"]), kind="revoke")
        return JsonResponse(server.revoke(claim.device, claim.issued))

    return await _answer(work)


async def room(request, room: str):
    if (wrong := _method(request, "GET")) is not None:
        return wrong

    def work():
        device = server.authenticate(_token(request), _room_name(room))
        return JsonResponse(
            {**server.room_view(device.room), "you": device.name, "limits": server.limits()}
        )

    return await _answer(work)


@csrf_exempt
async def entries(request, room: str):
    if request.method == "POST":
        response = await _answer(lambda: _push(request, room))
        if response.status_code == 200:
            _ring(room)
        return response
    if request.method == "GET":
        return await _pull(request, room)
    response = _error(405, f"this URL takes GET or POST, not {request.method[:16]}")
    response["Allow"] = "GET, POST"
    return response


def _token(request) -> str | None:
    return strict.bearer_token(request.META.get("HTTP_AUTHORIZATION"))


def _push(request, room: str) -> JsonResponse:
    # The order is the refusals' order: who (401/403), then the body, then what it holds.
    device = server.authenticate(_token(request), _room_name(room))
    data = _json_body(request, ("entries",))
    return JsonResponse(server.push(device, data["entries"]))


def _whole(request, name: str, default: int, maximum: int) -> int:
    value = request.GET.get(name, str(default))
    if not value.isdigit() or len(value) > 18:
        raise server.Refusal(400, f"?{name}= is a whole number of 0 or more")
    return min(int(value), maximum)


async def _pull(request, room: str):
    """The long poll: answer at once when something is after the cursor, else wait for
    a push (or the deadline) and answer then."""
    if not server.enabled():
        return _not_a_relay()
    try:
        after = _whole(request, "after", 0, 1 << 62)
        wait = _whole(request, "wait", 0, MAX_WAIT_SECONDS)
        limit = _whole(request, "limit", server.MAX_PULL_ENTRIES, server.MAX_PULL_ENTRIES)
        device = await on_database_thread(server.authenticate, _token(request), _room_name(room))
        await on_database_thread(server.reading, device, after)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            event = _bells.setdefault(device.room.name, asyncio.Event())
            if await on_database_thread(server.has_after, device, after):
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            await bell.rung_within(event, min(remaining, POLL_SECONDS))
            if event.is_set():
                break  # a push into this room: answer with it at once
        return JsonResponse(await on_database_thread(server.pull, device, after, limit))
    except server.Refusal as exc:
        return _refused(exc)
    except Exception:
        log.exception("relay pull failed")
        return _error(500, "internal error in the relay; its log has the detail")
