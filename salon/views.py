"""Operational endpoints: /healthz, /metrics, and the static files of the admin."""

from __future__ import annotations

from django.conf import settings
from django.contrib.staticfiles.views import serve
from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from salon import metrics, store
from salon.health import database_problem


@require_safe
def healthz(request):
    """Django's /healthz, for the test client and WSGI; under daphne the daemon answers it
    on its ASGI path without Django (salon.health), the same way."""
    problem = database_problem()
    if problem is not None:
        return JsonResponse({"ok": False, "db": problem}, status=503)
    response = JsonResponse({"ok": True, "db": "ok"})
    response[store.STORE_HEADER] = settings.STORE_FINGERPRINT  # `salon install --http` checks it
    return response


@require_safe
def metrics_view(request):
    return HttpResponse(metrics.render(), content_type=metrics.CONTENT_TYPE)


def static(request, path):
    """The admin's CSS and JS, straight from the app directories (daphne serves no static
    files, and `salon serve` needs no collectstatic). Read-only, finders only."""
    if ".." in path.replace("\\", "/").split("/"):
        raise Http404("no such static file")
    response = serve(request, path, insecure=True)
    response["Cache-Control"] = "public, max-age=3600"
    return response
