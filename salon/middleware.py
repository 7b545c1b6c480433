"""The Host/Origin check in front of every Django path: /notify, the admin, /healthz,
/metrics and the static files.

A page on another site must not reach the daemon through the browser of the person
running it: by DNS rebinding (its name resolves to 127.0.0.1, so the request carries its
foreign Host) or by a cross-site request (a foreign Origin). The rule is bus.strict's,
the one /mcp applies in its consumer, against AGENT_SALON_ALLOWED_HOSTS.

One path is reached by name from other machines: the relay's API (/relay/v1/, relay
mode). Every call there carries a device token or an invite in its body — nothing a
browser adds by itself, so nothing a page could borrow — and the relay's public name is
not a local one; the allow-list does not apply there, only the check that the Host is one
Django can read.

This middleware comes first, so nothing below it ever sees a refused request; that is
also why ALLOWED_HOSTS may stay permissive: Django's own check would answer a bad Host by
raising DisallowedHost, which logs a traceback for every such request. Here a refusal is
one clean answer — JSON `{"error": …}` (a plain page on the admin's paths) — and a Host
Django could not parse (`bad_host!`) never gets past it.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.http.request import split_domain_port

from bus import strict

# Paths reached by name from other machines, with a credential in every request.
BY_NAME = ("/relay/v1/",)


def refusal(request) -> HttpResponse | None:
    """The answer to a request whose Host or Origin is not allowed, else None."""
    host = request.META.get("HTTP_HOST")
    problem = None
    if not request.path.startswith(BY_NAME):
        problem = strict.host_origin_problem(
            host, request.META.get("HTTP_ORIGIN"), settings.MCP_ALLOWED_HOSTS
        )
    status = 403
    if problem is None and host is not None and not split_domain_port(host)[0]:
        # Allowed by the list (or empty), yet no host name Django can read: it would raise.
        problem = f"Host {strict.shown(host, 100)} is not a valid host name"
        status = 400
    if problem is None:
        return None
    if request.path.startswith("/admin/"):
        return HttpResponse(
            f"{status} {'Forbidden' if status == 403 else 'Bad Request'}: {problem}\n",
            status=status,
            content_type="text/plain; charset=utf-8",
        )
    return JsonResponse({"error": problem}, status=status)


class BothWaysMiddleware:
    """This project's middleware runs sync and async, like the rest of the chain: under
    daphne it takes no thread hop, and Django's test client and WSGI get the sync path.
    A subclass writes both: `handle` (sync) and `ahandle` (async)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.ahandle(request)
        return self.handle(request)

    def handle(self, request):
        raise NotImplementedError

    async def ahandle(self, request):
        raise NotImplementedError


class HostOriginMiddleware(BothWaysMiddleware):
    def handle(self, request):
        return refusal(request) or self.get_response(request)

    async def ahandle(self, request):
        return refusal(request) or await self.get_response(request)
