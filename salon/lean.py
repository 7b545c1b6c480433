"""The daemon's paths answered on its event loop without Django's request handler:
/healthz (salon.health) and /notify (here).

Through Django's ASGI handler every request ran in a thread context of its own: the
request_started and request_finished receivers (sync) on a new thread per request, an
HttpRequest, the middleware chain. For /notify that was ~5 ms of the ~8 ms of CPU one
entry cost the daemon (bench/RESULTS.md). Here the same answer is built directly:

* the Host/Origin rule is salon.middleware's (`refusal`, bus.strict's rule);
* the headers are those the full chain adds to a JSON answer (`COMMON_HEADERS`; a test
  compares them with a path Django serves);
* the request is timed into salon_request_duration_seconds{path=...}, as the chain's
  RequestTimingMiddleware does.

Django's views (salon.views.healthz, relay.views.notify) stay for the test client and any
WSGI use, and answer the same way: the work behind both is one function.
"""

from __future__ import annotations

import json
import time
from urllib.parse import parse_qs

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.http.request import split_domain_port

from bus import strict
from relay import views as relay_views
from relay.webhook import MAX_BODY_BYTES
from salond.metrics import REQUEST_SECONDS
from salond.streaming import RequestBody

# What Django's SecurityMiddleware and XFrameOptionsMiddleware add to every answer.
COMMON_HEADERS = [
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
]
JSON_TYPE = (b"content-type", b"application/json")


def refusal(headers: dict[str, str]) -> tuple[int, str] | None:
    """salon.middleware.refusal's rule, for a path that is not the relay's."""
    host = headers.get("host")
    problem = strict.host_origin_problem(host, headers.get("origin"), settings.MCP_ALLOWED_HOSTS)
    if problem is not None:
        return 403, problem
    if host is not None and not split_domain_port(host)[0]:
        return 400, f"Host {strict.shown(host, 100)} is not a valid host name"
    return None


async def send_json(send, status: int, body: dict, headers=()) -> None:
    content = json.dumps(body, cls=DjangoJSONEncoder).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                JSON_TYPE,
                (b"content-length", str(len(content)).encode()),
                *headers,
                *COMMON_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": content})


async def asgi_notify(scope, receive, send) -> None:
    """POST /notify?label=<sender>: relay.views.answer, as the Django view answers it."""
    started = time.perf_counter()
    headers = strict.asgi_headers(scope)
    refused = refusal(headers)
    if refused is not None:
        await send_json(send, refused[0], {"error": refused[1]})
        return
    method = scope.get("method", "")
    if method != "POST":
        error = relay_views.NOT_POST.format(method=method[:16])
        await send_json(send, 405, {"error": error}, [(b"allow", b"POST")])
        return
    # One byte over the limit tells a body too large, as the Django view reads it
    # (relay.webhook.decode refuses it, after the checks that come first).
    body = RequestBody(MAX_BODY_BYTES + 1)
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return  # nothing was stored: the client left before its body was complete
        if body.add(message):
            break
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    client = scope.get("client") or ("", 0)
    posted = relay_views.Posted(
        label=(query.get("label") or [""])[0],
        content_length=headers.get("content-length"),
        authorization=headers.get("authorization"),
        content_type=headers.get("content-type"),
        body=body.value(),
        remote_addr=client[0] or "",
        tokens_required=bool(scope.get(relay_views.TOKENS_REQUIRED)),
    )
    status, answer = await relay_views.answer(posted)
    extra = [(b"www-authenticate", b'Bearer realm="agent-salon"')] if status == 401 else []
    await send_json(send, status, answer, extra)
    REQUEST_SECONDS.labels(path="/notify").observe(time.perf_counter() - started)
